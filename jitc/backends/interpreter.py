"""The reference interpreter as a backend: numpy semantics for every op, no compilation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jitc.ir.core import Module
from jitc.ir.interpreter import run_function
from jitc.ir.printer import print_module
from jitc.options import Options
from jitc.passes import DEFAULT_PASSES
from jitc.passes.pipeline import Pass


class InterpretedExecutable:
    def __init__(self, module: Module) -> None:
        self.module = module

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        return run_function(self.module, self.module.entry, args)

    def as_text(self, **options: object) -> str:
        return print_module(self.module, elide_constants=True)


class InterpreterBackend:
    name = "interpreter"
    symbolic_extents = True  # run_function binds the symbols from each call's shapes
    complex_values = True  # numpy computes complex values; nothing is split into pairs

    def passes(self, options: Options) -> Sequence[Pass]:
        return DEFAULT_PASSES

    def compile(self, module: Module, options: Options) -> InterpretedExecutable:
        return InterpretedExecutable(module)
