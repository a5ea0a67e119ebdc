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
from jitc.ir.interpreter import bind_symbols
from jitc.ir.symbolic import Constraint, DimLike
from jitc.ir.types import TensorType


@dataclass(frozen=True)
class Signature:
    """What `bind_symbols` reads of a function (its name and parameter types), computed once
    rather than on every call."""

    name: str
    parameter_types: tuple[TensorType, ...]


# Argument shapes whose binding a symbolic entry remembers (then it starts again).
BOUND_SHAPES = 256


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


class SymbolicEntry:
    """The call path of one symbolic entry; `engine` keeps its machine code alive."""

    def __init__(self, address: int, engine: object, fn: Signature,
                 constraints: Sequence[Constraint], symbols: Sequence[str],
                 out_types: Sequence[tuple[tuple[DimLike, ...], np.dtype]],
                 constants: Sequence[np.ndarray], workspace_bytes: DimLike,
                 donations: dict[int, int]) -> None:
        self._engine = engine
        self._address = address
        self.fn = fn
        self.constraints = tuple(constraints)
        self.symbols = tuple(symbols)
        self.out_types = list(out_types)
        self.arg_dtypes = [np.dtype(p.dtype.numpy) for p in fn.parameter_types]
        self.constants = list(constants)
        self._constant_addresses = tuple(_address(c) for c in self.constants)
        self.workspace_bytes = workspace_bytes
        self.donations = dict(donations)
        self._donors = set(self.donations.values())
        self._donors_by_result = [self.donations.get(n) for n in range(len(self.out_types))]
        self._out_dtypes = [np.dtype(d) for _, d in self.out_types]
        self._bound: dict[tuple, tuple[tuple[int, ...], list[tuple[int, ...]], int]] = {}
        self._local = threading.local()

    def _workspace(self, size: int) -> int:
        """The address of at least `size` bytes, aligned, that this thread keeps (0, a null
        pointer, when the call needs none, as from the C dispatcher)."""
        if size == 0:
            return 0
        held = getattr(self._local, "held", None)  # (bytes, aligned address, array)
        if held is None or held[0] < size:
            buffer = np.empty(size + ALIGNMENT, np.uint8)
            address = _address(buffer)
            held = self._local.held = (size, address + (-address) % ALIGNMENT, buffer)
        return held[1]

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
        shapes = tuple(a.shape for a in arrays)
        bound = self._bound.get(shapes)
        if bound is None:
            bound = self._bind(arrays, shapes)
        return self._run(arrays, bound)

    def _run(self, arrays: Sequence[np.ndarray],
             bound: tuple[tuple[int, ...], list[tuple[int, ...]], int]) -> list[np.ndarray]:
        dims, out_shapes, workspace_bytes = bound
        results = [arrays[donor] if donor is not None else np.empty(shape, dtype)
                   for donor, shape, dtype in zip(self._donors_by_result, out_shapes,
                                                  self._out_dtypes)]
        workspace = self._workspace(workspace_bytes)
        call_entry(self._address, (*arrays, *results), (*self._constant_addresses, workspace),
                   dims)
        return results

    def dispatcher(self, result_kind: int, writes: Sequence[int] | None = None
                   ) -> SymbolicDispatch:
        """The C dispatcher's contract for this entry (jitc/dispatch.py's fast paths)."""
        return SymbolicDispatch(self, result_kind, writes)

    def _bind(self, arrays: Sequence[np.ndarray], shapes: tuple
              ) -> tuple[tuple[int, ...], list[tuple[int, ...]], int]:
        """The symbol values, result shapes and workspace bytes for arguments of `shapes`
        (remembered: they depend on the shapes alone once the dtypes are the compiled ones)."""
        env = bind_symbols(self.fn, arrays, self.constraints)  # type: ignore[arg-type]
        bound = (tuple(env[s] for s in self.symbols),
                 [tuple(symbolic.evaluate(d, env) for d in shape) for shape, _ in self.out_types],
                 symbolic.evaluate(self.workspace_bytes, env))
        if len(self._bound) >= BOUND_SHAPES:
            self._bound.clear()
        self._bound[shapes] = bound
        return bound


class SymbolicDispatch:
    """A fast path's dispatcher for a symbolic entry, with `jitc._runtime.Dispatcher`'s
    contract: `dispatch(arrays)` runs the code on arrays it can take as they are (ndarrays of
    the compiled dtypes, C-contiguous and aligned; donated ones writable and apart from the
    others) whose shapes bind the symbols and meet the constraints, and returns the results
    as `result_kind` says; anything else returns None (a miss: the general path converts,
    compiles exactly or raises). `writes`: the arguments the last len(writes) results are
    copied into."""

    def __init__(self, entry: SymbolicEntry, result_kind: int,
                 writes: Sequence[int] | None) -> None:
        from jitc._runtime import RESULT_LIST, RESULT_NONE, RESULT_SINGLE
        self.entry = entry
        self.writes = list(writes or ())
        self._single = result_kind == RESULT_SINGLE
        self._list = result_kind == RESULT_LIST
        self._none = result_kind == RESULT_NONE

    def __call__(self, *call_args: object) -> object:
        from jitc._runtime import NO_RESULT
        args = call_args[0] if len(call_args) == 1 and type(call_args[0]) is tuple \
            else call_args
        entry = self.entry
        if len(args) != len(entry.arg_dtypes):
            return None
        for a, dtype in zip(args, entry.arg_dtypes):
            if type(a) is not np.ndarray or a.dtype != dtype or not a.flags.c_contiguous or \
                    not a.flags.aligned:
                return None
        for n in entry._donors:
            if not args[n].flags.writeable or any(  # type: ignore[union-attr]
                    np.may_share_memory(args[n], a) for k, a in enumerate(args) if k != n):
                return None
        shapes = tuple(a.shape for a in args)  # type: ignore[union-attr]
        bound = entry._bound.get(shapes)
        if bound is None:
            try:
                bound = entry._bind(args, shapes)  # type: ignore[arg-type]
            except TypeError:  # ArgumentError: not this compilation's shapes
                return None
        results = entry._run(args, bound)  # type: ignore[arg-type]
        if self.writes:
            kept = len(results) - len(self.writes)
            for value, target in zip(results[kept:], self.writes):
                args[target][...] = value  # type: ignore[index]
            results = results[:kept]
        if self._none:
            return NO_RESULT
        if self._single:
            return results[0]
        return results if self._list else tuple(results)
