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
    """An executable of a split module, called with and returning complex arrays. It has no
    C fast path (`dispatcher`): complex calls take the general path."""

    def __init__(self, inner: Executable, boundary: ComplexBoundary) -> None:
        self.inner = inner
        self.boundary = boundary

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.boundary.results(self.inner(self.boundary.arguments(args)))

    def __getattr__(self, name: str) -> object:
        # The backend's own attributes (its PTX, its lowering), except the C fast path.
        if name in ("dispatcher", "inner", "boundary") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def as_text(self, **options: object) -> str:
        return self.inner.as_text(**options)  # type: ignore[call-arg]


def wrap(executable: Executable, boundary: ComplexBoundary | None) -> Executable:
    return executable if boundary is None else PairedExecutable(executable, boundary)
