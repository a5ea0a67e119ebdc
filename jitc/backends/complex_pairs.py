"""Complex arguments and results of a backend that computes with pairs of floats.

Only the interpreter computes with complex values itself (`complex_values = True`); for any
other backend the traced module is split (jitc/passes/complex_split.py) before its pipeline,
and the executable is wrapped so that callers still pass and receive complex arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jitc.backends.base import Backend, Executable
from jitc.ir.core import Module
from jitc.passes.complex_split import ComplexBoundary, has_complex, split_complex


def module_for(backend: Backend, module: Module) -> tuple[Module, ComplexBoundary | None]:
    """What `backend` compiles for `module`, and the boundary to wrap it with (None: as is)."""
    if getattr(backend, "complex_values", False) or not has_complex(module):
        return module, None
    return split_complex(module)


class PairedExecutable:
    """An executable of a split module, called with and returning complex arrays."""

    def __init__(self, inner: Executable, boundary: ComplexBoundary) -> None:
        self.inner = inner
        self.boundary = boundary

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.boundary.results(self.inner(self.boundary.arguments(args)))

    def dispatcher(self, result_kind: int, writes: Sequence[int] | None = None) -> object:
        """The backend's C fast path, taking and giving the complex arrays themselves: they
        have the bytes of the float pairs the code reads and writes. None without one."""
        make = getattr(self.inner, "dispatcher", None)
        arg_types = getattr(self.inner, "arg_types", None)
        out_types = getattr(self.inner, "out_types", None)
        if make is None or arg_types is None or out_types is None:
            return None
        return make(result_kind, writes, (_visible(arg_types, self.boundary.params),
                                          _visible(out_types, self.boundary.outputs)))

    def __getattr__(self, name: str) -> object:
        # The backend's own attributes (its PTX, its lowering).
        if name in ("inner", "boundary") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def as_text(self, **options: object) -> str:
        return self.inner.as_text(**options)  # type: ignore[call-arg]


def _visible(types: Sequence[tuple[tuple[int, ...], np.dtype]],
             complex_dtypes: dict[int, np.dtype]) -> list[tuple[tuple[int, ...], np.dtype]]:
    return [(shape[:-1], complex_dtypes[n]) if n in complex_dtypes else (shape, dtype)
            for n, (shape, dtype) in enumerate(types)]


def wrap(executable: Executable, boundary: ComplexBoundary | None) -> Executable:
    return executable if boundary is None else PairedExecutable(executable, boundary)
