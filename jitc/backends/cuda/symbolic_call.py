"""What a call of a symbolic program (docs/dynamic-shapes.md) computes on the host before any
launch, on the GPU and in the simulator alike: the symbol values bound from the arguments'
shapes with the module's constraints checked (the interpreter's `bind_symbols`, so every
backend reports the same errors), the results' shapes, the workspace size and the vector of
symbol values (`int64_t dims[]` in `sorted(symbols)` order) the kernels read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jitc.backends.cpu.plan import BufferPlan
from jitc.ir.core import Module
from jitc.ir.interpreter import bind_symbols
from jitc.ir.symbolic import Constraint, DimLike, evaluate
from jitc.ir.types import TensorType


@dataclass(frozen=True)
class _Signature:
    """What `bind_symbols` reads of a function, computed once rather than on every call."""

    name: str
    parameter_types: tuple[TensorType, ...]


@dataclass(frozen=True)
class BoundCall:
    symbols: dict[str, int]
    dims: np.ndarray                       # int64 symbol values, in `sorted(symbols)` order
    shapes: list[tuple[int, ...]]          # of the results
    workspace_bytes: int


@dataclass(frozen=True)
class SymbolicCall:
    signature: _Signature
    constraints: tuple[Constraint, ...]
    symbols: tuple[str, ...]
    result_shapes: tuple[tuple[DimLike, ...], ...]
    workspace_bytes: DimLike

    @staticmethod
    def of(module: Module, plan: BufferPlan) -> SymbolicCall | None:
        """How to bind calls of `module`, or None when it is static."""
        if plan.dims_slot is None:
            return None
        fn = module.entry
        return SymbolicCall(_Signature(fn.name, tuple(fn.parameter_types)),
                            tuple(module.constraints), plan.symbols,
                            tuple(tuple(v.type.shape) for v in fn.outputs),
                            plan.workspace_bytes)

    def bind(self, arrays: Sequence[object]) -> BoundCall:
        """ArgumentError when the shapes disagree with the signature or a constraint."""
        env = bind_symbols(self.signature, arrays, self.constraints)  # type: ignore[arg-type]
        dims = np.array([env[s] for s in self.symbols], np.int64)
        shapes = [tuple(evaluate(d, env) for d in shape) for shape in self.result_shapes]
        return BoundCall(env, dims, shapes, evaluate(self.workspace_bytes, env))
