"""Every pass does work linear (or n log n) in the size of the module.

Tracing unrolls Python loops, so modules of thousands of instructions are common; a pass that
is quadratic in them makes compile time explode (a 300-step sampler took two minutes in
dot_merger, a 2000-row fill twenty seconds in simplify and fusion). The measure is work, not
time: the Python calls each pass makes (function and builtin calls, as cProfile counts them), a
deterministic count that a loaded machine cannot disturb. Doubling the unrolled steps doubles
the instructions; the work of each pass may grow by at most GROWTH.
"""

from __future__ import annotations

import cProfile

import numpy as np

import jitc
from jitc.ir.core import Module
from jitc.passes import KERNEL_PASSES
from jitc.passes.pipeline import FixedPoint, Pass

# Linear work doubles (2.0 measured); n log n would give about 2.2; quadratic 4.
GROWTH = 2.5


def unrolled(steps: int):
    """Per step: independent products by one matrix (merged by dot_merger), a serial product,
    a pair of products sharing their rhs (a sampler's), long elementwise chains and a row
    written into an np.empty array."""
    def program(xs, h, wx, wh, wo, wg):
        out = np.empty((steps, 16), np.float32)
        for t in range(steps):
            h = np.tanh(xs[t] @ wx + h @ wh + 0.5)
            y = np.exp(h * 0.25 - 1.0) * h + 1.0
            logits, gate = wo @ h.T, wg @ h.T
            out[t] = y[0] * 2 + t + logits[0, 0] * gate[1, 0]
        return out, h
    return program


def traced(steps: int) -> Module:
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(shape).astype(np.float32)
            for shape in ((steps, 4, 16), (4, 16), (16, 16), (16, 16), (3, 16), (3, 16))]
    return jitc.jit(unrolled(steps), disabled_passes={"reroll"}).lower(*args).module


def work(p: Pass, module: Module) -> tuple[Module, int]:
    profile = cProfile.Profile()
    profile.enable()
    try:
        result = p(module)
    finally:
        profile.disable()
    return result, sum(entry.callcount for entry in profile.getstats())


def work_per_pass(module: Module) -> dict[str, int]:
    """The calls of each pass of the CPU pipeline, the passes of a fixed point each counted
    over all its rounds."""
    counts: dict[str, int] = {}

    def run(p: Pass, module: Module, scope: str) -> Module:
        if isinstance(p, FixedPoint):
            for _ in range(p.max_iterations):
                start = module
                for inner in p.passes:
                    module = run(inner, module, f"{scope}{p.name}.")
                if module is start:
                    break
            return module
        module, calls = work(p, module)
        counts[scope + p.name] = counts.get(scope + p.name, 0) + calls
        return module

    for p in KERNEL_PASSES:
        module = run(p, module, "")
    return counts


def test_each_pass_does_linear_work_in_an_unrolled_module_of_10000_instructions() -> None:
    small, large = traced(160), traced(320)
    assert len(large.entry.body) >= 10_000
    assert len(large.entry.body) <= 2.05 * len(small.entry.body)
    small_work, large_work = work_per_pass(small), work_per_pass(large)
    assert small_work.keys() == large_work.keys()
    growth = {name: large_work[name] / max(small_work[name], 1) for name in large_work}
    assert all(g <= GROWTH for g in growth.values()), growth


def recurrence(xs, h, c, w):
    """An LSTM-like step per row of xs: every temporary dies within its step."""
    for t in range(xs.shape[0]):
        z = np.concatenate([xs[t], h], axis=1) @ w
        i, f, g = np.split(z, 3, axis=-1)
        c = np.tanh(f) * c + np.exp(-np.abs(i)) * np.tanh(g)
        h = np.tanh(c) * 0.5
    return h


def test_buffer_assignment_does_linear_work_when_temporaries_die_young() -> None:
    """Each temporary was placed by scanning every block placed before it, several times:
    quadratic in an unrolled loop's temporaries (4 s of a 2000-step LSTM's compile)."""
    from jitc.backends.cpu.plan import plan_buffers
    counts = []
    for steps in (150, 300):
        rng = np.random.default_rng(0)
        args = [rng.standard_normal(s).astype(np.float32)
                for s in ((steps, 2, 4), (2, 4), (2, 4), (8, 12))]
        module = jitc.jit(recurrence, disabled_passes={"reroll"}).lower(*args).optimize()
        plan = Pass("plan_buffers", lambda m: plan_buffers(m.entry, frozenset(), m, views=True)
                    and m)
        counts.append(work(plan, module)[1])
    assert counts[1] <= GROWTH * counts[0], counts
