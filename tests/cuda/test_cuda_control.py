"""Control flow on the cuda backend (jitc/backends/cuda/control.py, host.py): loops and
branches driven from the host between kernel launches. Through the fake driver (the real
runtime path, the simulator standing in for the GPU) the launches and device-to-host reads
are counted, which pins the design: per iteration the body's kernels, plus the condition's
kernels and a one-byte predicate read for a data-dependent loop; nothing read per iteration
for a counted loop (fori_loop, scan)."""

from __future__ import annotations

from typing import Any

import numpy as np
from cudacheck import nested
from fakedriver import FakeDriver, compile_on_fake

import jitc
from jitc import lax
from jitc.backends.cuda.control import Conditional, Program, WhileLoop
from jitc.backends.cuda.kernel import KernelSpec

rng = np.random.default_rng(3)
X = rng.standard_normal((4, 8)).astype(np.float32)
W = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)


def _control(program: Program) -> list[Any]:
    return [s for s in program.steps if not isinstance(s, KernelSpec)]


def _kernels(program: Program) -> int:
    """The launches one run of `program` makes when it has no control flow."""
    assert not _control(program)
    return len(program.steps)


def _launched(driver: FakeDriver, part: str) -> int:
    return sum(part in name for name, *_ in driver.launches)


def _call(driver: FakeDriver, compiled: jitc.Compiled, *args: Any) -> list[np.ndarray]:
    """Run once (every argument given: nothing captured); the launches and readbacks of the
    run itself stay in `driver`, those of bringing the results to the host are dropped."""
    driver.launches.clear()
    driver.readbacks.clear()
    results = compiled.executable(list(args))
    launches, readbacks = list(driver.launches), list(driver.readbacks)
    host = [np.asarray(r) for r in results]
    driver.launches[:], driver.readbacks[:] = launches, readbacks
    return host


def test_fori_loop_with_static_bounds_reads_nothing_back(driver: FakeDriver) -> None:
    def f(h, w):
        return lax.fori_loop(0, 7, lambda i, h: np.tanh(h @ w) + i.astype(np.float32), h)

    def reference(h, w):
        for i in range(7):
            h = np.tanh(h @ w) + np.float32(i)
        return h
    compiled = compile_on_fake(driver, f, X, W)
    (loop,) = _control(compiled.executable.lowering.program)
    assert isinstance(loop, WhileLoop) and loop.counted is not None
    (got,) = _call(driver, compiled, X, W)
    np.testing.assert_allclose(got, reference(X, W), rtol=1e-5, atol=1e-5)
    assert _launched(driver, "_body_") == 7 * _kernels(loop.body)
    assert _launched(driver, "_cond_") == 0 and driver.readbacks == []


def test_fori_loop_with_a_traced_bound_reads_it_once(driver: FakeDriver) -> None:
    def f(h, n):
        return lax.fori_loop(0, n, lambda i, h: h * np.float32(1.5) - np.float32(1), h)
    compiled = compile_on_fake(driver, f, X, np.int64(5))
    (loop,) = _control(compiled.executable.lowering.program)
    for n in (5, 0, 2):
        (got,) = _call(driver, compiled, X, np.int64(n))
        want = X.copy()
        for _ in range(n):
            want = want * np.float32(1.5) - np.float32(1)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert driver.readbacks == [8], "the bound, once (an int64)"
        assert _launched(driver, "_body_") == n * _kernels(loop.body)


def test_while_loop_with_a_data_dependent_stop_reads_the_predicate_each_time(
        driver: FakeDriver) -> None:
    def f(x):
        return lax.while_loop(lambda c: c[0].sum() < 1000, lambda c: (c[0] * 3, c[1] + 1),
                              (x, np.int32(0)))
    x = np.abs(X) + np.float32(0.5)
    compiled = compile_on_fake(driver, f, x)
    (loop,) = _control(compiled.executable.lowering.program)
    assert loop.counted is None
    got, steps = _call(driver, compiled, x)
    want, count = x, 0
    while want.sum() < 1000:
        want, count = want * 3, count + 1
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert steps == count and count > 1
    assert driver.readbacks == [1] * (count + 1), "one predicate byte per test"
    assert _launched(driver, "_cond_") == (count + 1) * _kernels(loop.cond)
    assert _launched(driver, "_body_") == count * _kernels(loop.body)


def test_scan_writes_each_step_in_place(driver: FakeDriver) -> None:
    xs = rng.standard_normal((6, 4, 8)).astype(np.float32)

    def f(h, xs, w):
        def step(h, x):
            h = np.tanh(x + h @ w)
            return h, h.sum(axis=1)
        return lax.scan(step, h, xs)

    def reference(h, xs, w):
        ys = []
        for x in xs:
            h = np.tanh(x + h @ w)
            ys.append(h.sum(axis=1))
        return h, np.stack(ys)
    compiled = compile_on_fake(driver, f, X, xs, W)
    (loop,) = _control(compiled.executable.lowering.program)
    assert loop.counted is not None and len(loop.writes) == 1
    got = _call(driver, compiled, X, xs, W)
    for g, want in zip(got, reference(X, xs, W)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    assert driver.readbacks == []
    assert _launched(driver, "_write") == 6, "one block write per step"
    assert _launched(driver, "_body_") == 6 * _kernels(loop.body)


def test_cond_reads_the_index_and_runs_only_the_chosen_branch(driver: FakeDriver) -> None:
    def f(x, w):
        return lax.cond(x.sum() > 0, lambda v: np.exp(v) @ w, lambda v: v * 2, x)
    compiled = compile_on_fake(driver, f, X, W)
    (branch,) = _control(compiled.executable.lowering.program)
    assert isinstance(branch, Conditional)
    for x in (np.abs(X), -np.abs(X)):
        (got,) = _call(driver, compiled, x, W)
        np.testing.assert_allclose(got, f(x, W), rtol=1e-5, atol=1e-5)
        assert driver.readbacks == [4], "the branch index (int32), once"
        chosen = int(x.sum() > 0)  # lax.cond's branches are [false, true]
        assert _launched(driver, f"_b{chosen}_") == _kernels(branch.branches[chosen])
        assert _launched(driver, f"_b{1 - chosen}_") == 0


def test_nested_control_flow_matches_the_interpreter(driver: FakeDriver) -> None:
    x = np.array([0.5, 1.25, 2.0], np.float32)
    compiled = compile_on_fake(driver, nested, x, np.int64(4))
    got = _call(driver, compiled, x, np.int64(4))
    want = jitc.jit(nested, backend="interpreter")(x, np.int64(4))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    sim = jitc.jit(nested, backend="cuda-sim")(x, np.int64(4))
    for s, w in zip(sim, want):
        np.testing.assert_allclose(s, w, rtol=1e-6)


def test_a_long_scan_compiles_its_body_once() -> None:
    def f(h, xs):
        return lax.scan(lambda h, x: (np.tanh(h * x), h.sum()), h, xs)
    h = np.ones(16, np.float32)
    counts = []
    for length in (100, 1000):  # both past the size where a zero fill is a literal
        xs = np.linspace(0.5, 1.0, length * 16, dtype=np.float32).reshape(length, 16)
        compiled = jitc.jit(f, backend="cuda-sim").lower(h, xs).compile()
        counts.append(compiled.executable.kernel_count)
        got, ys = compiled(h, xs)
        want, want_ys = h, []
        for x in xs:
            want_ys.append(want.sum())
            want = np.tanh(want * x)
        np.testing.assert_allclose(got, want, rtol=1e-5)
        np.testing.assert_allclose(ys, np.stack(want_ys), rtol=1e-5)
    assert counts[0] == counts[1], "the kernels do not grow with the trip count"
