"""Calling a compiled function whose dimensions are symbolic (docs/dynamic-shapes.md).

Symbolic calls go through the C dispatcher (`jitc._runtime.Dispatcher`, runtime/dispatcher.c),
as exact ones do. Its argument specs hold, per dimension, the fixed extent or a key slot
(jitc/backends/symbolic_keys.py): a symbol standing alone has one slot wherever it stands, so
the dispatcher binds it from its first occurrence and checks the others equal; any other
expression (`n-1`) has a slot of its own. The dispatcher checks dtypes, contiguity, alignment,
donations and write-backs as for an exact signature, then looks the slots' values up in a
small table of bindings. A key it has not seen calls `SymbolicEntry._binding` once: the
interpreter's `bind_symbols` binds the symbols and checks the module's constraints (so both
report the same errors) and gives the symbol values, the result shapes and the workspace size,
or None when the shapes are not this compilation's (a miss, remembered too: the general path
then compiles exactly or raises). The dispatcher allocates the results with the bound shapes
(large ones through the recycling allocator), takes its workspace (one block kept per
dispatcher, grown as needed; a fresh one while another thread holds it) and calls the entry
with `buffers` = arguments, results, constants, workspace and the pointer to the symbol values
(`int64_t dims[]` in `sorted(symbols)` order), releasing the GIL for calls that touch enough
elements, as for exact ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from jitc._runtime import RESULT_LIST, Dispatcher
from jitc.backends.cpu.plan import contiguous_argument
from jitc.backends.symbolic_keys import Binding, key_specs
from jitc.ir import symbolic
from jitc.ir.interpreter import bind_symbols
from jitc.ir.symbolic import Constraint, DimLike
from jitc.ir.types import TensorType


@dataclass(frozen=True)
class Signature:
    """What `bind_symbols` reads of a function (its name and parameter types), computed once
    rather than on every call."""

    name: str
    parameter_types: tuple[TensorType, ...]


# Argument shapes whose binding a symbolic entry remembers in Python (then it starts again);
# the C dispatcher keeps the last few of them itself.
BOUND_SHAPES = 256

class SymbolicEntry:
    """The call path of one symbolic entry; `engine` keeps its machine code alive."""

    def __init__(self, address: int, engine: object, fn: Signature,
                 constraints: Sequence[Constraint], symbols: Sequence[str],
                 out_types: Sequence[tuple[tuple[DimLike, ...], np.dtype]],
                 constants: Sequence[np.ndarray], workspace_bytes: DimLike,
                 donations: dict[int, int], release_elements: int) -> None:
        self._engine = engine
        self._address = address
        self.fn = fn
        self.constraints = tuple(constraints)
        self.symbols = tuple(symbols)
        self.out_types = list(out_types)
        self.arg_dtypes = [np.dtype(p.dtype.numpy) for p in fn.parameter_types]
        self.constants = list(constants)
        self.workspace_bytes = workspace_bytes
        self.donations = dict(donations)
        self.release_elements = release_elements
        self._arg_specs, self._keys = key_specs(fn.parameter_types)
        self._bound: dict[tuple, Binding] = {}
        self._call = self.dispatcher(RESULT_LIST)

    def __call__(self, args: Sequence[object]) -> list[np.ndarray]:
        result = self._call(tuple(args))
        if result is not None:
            return result
        if len(args) != len(self.arg_dtypes):
            raise TypeError(f"@{self.fn.name} takes {len(self.arg_dtypes)} argument(s), "
                            f"got {len(args)}")
        # Not C-contiguous, not aligned, or not an ndarray of exactly the dtype (or a donated
        # array that is read-only or shares memory with another argument): convert, then call.
        donors = set(self.donations.values())
        arrays = tuple(contiguous_argument(a, d, n in donors)
                       for n, (a, d) in enumerate(zip(args, self.arg_dtypes)))
        result = self._call(arrays)
        if result is None:
            self._bind(arrays, tuple(a.shape for a in arrays))  # raises ArgumentError
            raise TypeError(f"@{self.fn.name}: the compiled code does not take arguments of "
                            f"shapes {[a.shape for a in arrays]}")
        return result

    def dispatcher(self, result_kind: int, writes: Sequence[int] | None = None) -> Callable:
        """The C dispatcher of this entry (jitc/dispatch.py's fast paths): it returns None,
        a miss, for arguments it cannot take as they are or shapes the constraints refuse.
        `writes`: the arguments the last len(writes) results are copied into."""
        outs = [(np.dtype(d).num, (-1,) * len(shape)) for shape, d in self.out_types]
        donations = [self.donations.get(n, -1) for n in range(len(self.out_types))]
        return Dispatcher(self._address, self._arg_specs, outs, self.constants, 0, result_kind,
                          1, donations, self._engine, self.fn.name, writes,
                          (self._binding, self._keys, len(self.symbols), True,
                           self.release_elements))

    def _binding(self, arrays: tuple[np.ndarray, ...]) -> Binding | None:
        """The C dispatcher's binder: the binding of these arguments' shapes, or None when
        they are not this compilation's (a constraint or a dimension fails)."""
        shapes = tuple(a.shape for a in arrays)
        bound = self._bound.get(shapes)
        if bound is not None:
            return bound
        try:
            return self._bind(arrays, shapes)
        except TypeError:  # ArgumentError: not this compilation's shapes
            return None

    def _bind(self, arrays: Sequence[np.ndarray], shapes: tuple) -> Binding:
        """The symbol values, result shapes and workspace bytes for arguments of `shapes`
        (remembered: they depend on the shapes alone once the dtypes are the compiled ones)."""
        env = bind_symbols(self.fn, arrays, self.constraints)  # type: ignore[arg-type]
        bound = (tuple(env[s] for s in self.symbols),
                 tuple(tuple(symbolic.evaluate(d, env) for d in shape)
                       for shape, _ in self.out_types),
                 symbolic.evaluate(self.workspace_bytes, env))
        if len(self._bound) >= BOUND_SHAPES:
            self._bound.clear()
        self._bound[shapes] = bound
        return bound
