"""Passes and pipelines.

A pass is a named function from Module to Module that returns the very same object when it
changed nothing. A pipeline runs passes in order; it can verify after each one, time them, skip
any by name and write the IR after each pass to a folder (`01-after-legalize_broadcast.jir`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from jitc.ir.core import Module
from jitc.ir.printer import print_module
from jitc.ir.verifier import VerifyError, verify


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Module], Module]

    def __call__(self, module: Module) -> Module:
        return self.run(module)


def module_pass(name: str) -> Callable[[Callable[[Module], Module]], Pass]:
    """Decorator: `@module_pass("dce") def dce(module): ...` makes a Pass."""
    def wrap(fn: Callable[[Module], Module]) -> Pass:
        return Pass(name, fn)
    return wrap


@dataclass
class PassRecord:
    name: str
    seconds: float
    changed: bool


@dataclass
class Pipeline:
    name: str
    passes: Sequence[Pass]
    verify: bool = True
    dump_dir: str | None = None
    disabled: frozenset[str] = frozenset()
    records: list[PassRecord] = field(default_factory=list)

    def run(self, module: Module) -> Module:
        self.records = []
        if self.verify:
            verify(module)
        step = 0
        self._dump(step, "input", module)
        for p in self.passes:
            if p.name in self.disabled:
                continue
            start = time.perf_counter()
            result = p.run(module)
            self.records.append(PassRecord(p.name, time.perf_counter() - start,
                                           result is not module))
            step += 1
            if self.verify:
                try:
                    verify(result)
                except VerifyError as exc:
                    raise VerifyError(f"after pass {p.name} of pipeline {self.name}: {exc}") \
                        from None
            self._dump(step, f"after-{p.name}", result)
            module = result
        return module

    def _dump(self, step: int, label: str, module: Module) -> None:
        if self.dump_dir is None:
            return
        os.makedirs(self.dump_dir, exist_ok=True)
        path = os.path.join(self.dump_dir, f"{step:02d}-{label}.jir")
        with open(path, "w") as f:
            f.write(print_module(module))


def run_passes(module: Module, passes: Iterable[Pass]) -> Module:
    """Run passes in order with verification after each one (the form tests use)."""
    return Pipeline("adhoc", list(passes)).run(module)
