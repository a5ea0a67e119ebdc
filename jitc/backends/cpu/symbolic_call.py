"""Calling a compiled function whose dimensions are symbolic (docs/dynamic-shapes.md).

The C dispatcher checks exact shapes, so a symbolic entry takes this Python path: bind the
symbols from the arguments' shapes and check the module's constraints (the interpreter's
`bind_symbols`, so both report the same errors), allocate the results with the bound shapes,
size the workspace from the bound values (kept per thread between calls, grown when a call
needs more), then call the entry (`jitc._runtime.call_entry`, which releases the GIL) with
`buffers` = arguments, results, constants, workspace and the pointer to the symbol values
(`int64_t dims[]` in `sorted(symbols)` order).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jitc._runtime import call_entry
from jitc.backends.cpu.plan import ALIGNMENT, contiguous_argument
from jitc.ir import symbolic
from jitc.ir.core import Function
from jitc.ir.interpreter import bind_symbols
from jitc.ir.symbolic import Constraint, DimLike
from jitc.ir.types import TensorType


@dataclass(frozen=True)
class _Signature:
    """What `bind_symbols` reads of a function (its name and parameter types), computed once
    rather than on every call."""

    name: str
    parameter_types: tuple[TensorType, ...]


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


class SymbolicEntry:
    """The call path of one symbolic entry; `engine` keeps its machine code alive."""

    def __init__(self, address: int, engine: object, fn: Function,
                 constraints: Sequence[Constraint], symbols: Sequence[str],
                 out_types: Sequence[tuple[tuple[DimLike, ...], np.dtype]],
                 constants: Sequence[np.ndarray], workspace_bytes: DimLike,
                 donations: dict[int, int]) -> None:
        self._engine = engine
        self._address = address
        self.fn = _Signature(fn.name, tuple(fn.parameter_types))
        self.constraints = tuple(constraints)
        self.symbols = tuple(symbols)
        self.out_types = list(out_types)
        self.arg_dtypes = [np.dtype(p.dtype.numpy) for p in fn.parameter_types]
        self.constants = list(constants)
        self._constant_addresses = tuple(_address(c) for c in self.constants)
        self.workspace_bytes = workspace_bytes
        self.donations = dict(donations)
        self._donors = set(self.donations.values())
        self._local = threading.local()

    def _workspace(self, size: int) -> int:
        """The address of at least `size` bytes, aligned, that this thread keeps."""
        held = getattr(self._local, "buffer", None)
        if held is None or held.nbytes < size + ALIGNMENT:
            held = self._local.buffer = np.empty(size + ALIGNMENT, np.uint8)
        address = _address(held)
        return address + (-address) % ALIGNMENT

    def __call__(self, args: Sequence[object]) -> list[np.ndarray]:
        if len(args) != len(self.arg_dtypes):
            raise TypeError(f"@{self.fn.name} takes {len(self.arg_dtypes)} argument(s), "
                            f"got {len(args)}")
        arrays = [a if type(a) is np.ndarray and a.dtype == d and
                  a.flags.c_contiguous and a.flags.aligned else contiguous_argument(a, d, False)
                  for a, d in zip(args, self.arg_dtypes)]
        for n in self._donors:
            others = [a for k, a in enumerate(arrays) if k != n]
            # A conversion is already a copy; the caller's own array must be writable and
            # overlap no other argument.
            if arrays[n] is args[n] and (not arrays[n].flags.writeable or any(
                    np.may_share_memory(arrays[n], a) for a in others)):
                arrays[n] = contiguous_argument(args[n], self.arg_dtypes[n], True)
        env = bind_symbols(self.fn, arrays, self.constraints)  # type: ignore[arg-type]
        results = []
        for n, (shape, dtype) in enumerate(self.out_types):
            donor = self.donations.get(n)
            if donor is not None:
                results.append(arrays[donor])
            else:
                results.append(np.empty([symbolic.evaluate(d, env) for d in shape], dtype))
        workspace = self._workspace(symbolic.evaluate(self.workspace_bytes, env))
        call_entry(self._address, (*arrays, *results), (*self._constant_addresses, workspace),
                   tuple(env[s] for s in self.symbols))
        return results
