"""Passes and pipelines.

A pass is a named function from Module to Module that returns the very same object when it
changed nothing. A pipeline runs passes in order; it can verify after each one, time them, skip
any by name and write the IR after each pass to a folder (`01-after-legalize_broadcast.jir`).

A `FixedPoint` is a pass made of passes, repeated until one whole round changes nothing. Inside a
pipeline its passes are verified, timed, dumped and disabled like any other: they are named
`group.pass` (`simplification.cse`), and a dump or an error also names the round
(`simplification.2.cse`). See docs/passes.md.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from jitc import profiling, progress
from jitc.ir.core import Module, transform_module
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
    """One run of one pass. `name` is qualified for inner passes (`simplification.cse`),
    `iteration` is the round of the enclosing fixed point (0 at the top level) and `inner` holds
    the records of a fixed point's passes, in the order they ran."""

    name: str
    seconds: float
    changed: bool
    iteration: int = 0
    inner: tuple[PassRecord, ...] = ()

    def walk(self) -> Iterator[PassRecord]:
        """This record, then every record nested in it (depth first, in the order they ran)."""
        yield self
        for record in self.inner:
            yield from record.walk()


@dataclass(frozen=True)
class FixedPoint(Pass):
    """`passes` in order, again and again, until a round changes nothing (at most
    `max_iterations` rounds; running out warns, since a rule set that never settles is a bug)."""

    run: Callable[[Module], Module] = field(init=False, repr=False, compare=False)
    passes: Sequence[Pass] = ()
    max_iterations: int = 8

    def __post_init__(self) -> None:
        object.__setattr__(self, "passes", tuple(self.passes))
        object.__setattr__(self, "run", self._run_alone)

    def _run_alone(self, module: Module) -> Module:
        return self.iterate(_Run(self.name, False, None, frozenset()), module, (self.name,))[0]

    def iterate(self, run: _Run, module: Module,
                scope: tuple[str, ...]) -> tuple[Module, list[PassRecord]]:
        records: list[PassRecord] = []
        for iteration in range(1, self.max_iterations + 1):
            start = module
            for p in self.passes:
                module = run.apply(p, module, scope, iteration, records)
            if module is start:
                return module, records
        warnings.warn(f"{'.'.join(scope)} still changed the module after {self.max_iterations} "
                      "iterations", RuntimeWarning, stacklevel=2)
        return module, records


class _Run:
    """The state one pipeline run shares between its passes, nested ones included."""

    def __init__(self, pipeline: str, verify: bool, dump_dir: str | None,
                 disabled: frozenset[str]) -> None:
        self.pipeline = pipeline
        self.verify = verify
        self.dump_dir = dump_dir
        self.disabled = disabled
        self.step = 0

    def apply(self, p: Pass, module: Module, scope: tuple[str, ...], iteration: int,
              records: list[PassRecord]) -> Module:
        """Run `p` inside the fixed points named by `scope` (empty at the top level) and record
        it in `records`; returns its result, or `module` when `p` is disabled."""
        name = ".".join((*scope, p.name))
        if p.name in self.disabled or name in self.disabled:
            return module
        progress.stage(f"pass {name}")
        start = time.perf_counter()
        inner: list[PassRecord] = []
        with profiling.span(name, "pass", round=iteration) as span:
            if isinstance(p, FixedPoint):
                result, inner = p.iterate(self, module, (*scope, p.name))
            else:
                # Shape rules inside the pass may rely on exactly the module's constraints,
                # and the result keeps them (docs/dynamic-shapes.md).
                result = transform_module(module, p.run)
            changed = result is not module
            span.note(changed=changed)
        records.append(PassRecord(name, time.perf_counter() - start, changed, iteration,
                                  tuple(inner)))
        # `simplification.2.cse`: the round goes right after the fixed point it belongs to.
        label = name if not scope else f"{'.'.join(scope)}.{iteration}.{p.name}"
        if self.verify:
            try:
                verify(result)
            except VerifyError as exc:
                raise VerifyError(f"after pass {label} of pipeline {self.pipeline}: {exc}") \
                    from None
        # Every top-level pass gets a file; an inner pass only when it changed the module, since
        # a fixed point's last round would otherwise repeat the same text once per pass.
        if not scope or (changed and not isinstance(p, FixedPoint)):
            self.dump(f"after-{label}", result)
        return result

    def dump(self, label: str, module: Module) -> None:
        if self.dump_dir is None:
            return
        os.makedirs(self.dump_dir, exist_ok=True)
        path = os.path.join(self.dump_dir, f"{self.step:02d}-{label}.jir")
        self.step += 1
        with open(path, "w") as f:
            f.write(print_module(module))


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
        run = _Run(self.name, self.verify, self.dump_dir, frozenset(self.disabled))
        if self.verify:
            verify(module)
        run.dump("input", module)
        for p in self.passes:
            module = run.apply(p, module, (), 0, self.records)
        return module


def run_passes(module: Module, passes: Iterable[Pass]) -> Module:
    """Run passes in order with verification after each one (the form tests use)."""
    return Pipeline("adhoc", list(passes)).run(module)
