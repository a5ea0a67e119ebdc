"""The interface every backend implements, and the registry of backends by name.

A backend names the passes its code generator needs (its pipeline) and turns an optimized
module into an Executable: something that runs on flat lists of numpy arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from jitc.ir.core import Module
from jitc.options import Options
from jitc.passes.pipeline import Pass


class Executable(Protocol):
    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]: ...

    def as_text(self) -> str: ...


class Backend(Protocol):
    """A backend whose executables take symbolic extents at run time (docs/dynamic-shapes.md)
    says so with a class attribute `symbolic_extents = True`; without it, compiling a symbolic
    module is refused."""

    name: str

    def passes(self, options: Options) -> Sequence[Pass]:
        """The optimizer pipeline this backend's code generator expects, in order."""
        ...

    def compile(self, module: Module, options: Options) -> Executable:
        """Compile an optimized module (the output of `passes`)."""
        ...


_FACTORIES: dict[str, Callable[[], Backend]] = {}
_INSTANCES: dict[str, Backend] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    _FACTORIES[name] = factory


def get_backend(name: str) -> Backend:
    backend = _INSTANCES.get(name)
    if backend is None:
        factory = _FACTORIES.get(name)
        if factory is None:
            known = ", ".join(sorted(_FACTORIES))
            raise ValueError(f"unknown backend {name!r}; available backends: {known}")
        backend = _INSTANCES[name] = factory()
    return backend


def backend_names() -> list[str]:
    return sorted(_FACTORIES)
