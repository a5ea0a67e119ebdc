"""jitc.lax control flow (while_loop, fori_loop, scan, cond, switch): each primitive against a
Python reference, eagerly and compiled, with the loop body traced once."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import assert_trees_close, check_jit

import jitc
from jitc import lax
from jitc.tracing.errors import ConcretizationError, TraceError

# Every backend lowers `while` and `conditional` (cuda-sim runs the cuda backend's
# host-driven loops, jitc/backends/cuda/control.py).
LOOP_BACKENDS = ["interpreter", "cpu", "c", "cuda-sim"]

rng = np.random.default_rng(7)
H = rng.standard_normal((4, 8)).astype(np.float32)
XS = rng.standard_normal((6, 4, 3)).astype(np.float32)
WX = rng.standard_normal((3, 8)).astype(np.float32)
WH = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)


def rnn(h, xs, wx, wh):
    def step(h, x):
        h = np.tanh(x @ wx + h @ wh)
        return h, (h.sum(axis=1), h[0])
    return lax.scan(step, h, xs)


def rnn_reference(h, xs, wx, wh):
    ys, firsts = [], []
    for x in xs:
        h = np.tanh(x @ wx + h @ wh)
        ys.append(h.sum(axis=1))
        firsts.append(h[0])
    return h, (np.stack(ys), np.stack(firsts))


def rnn_reversed(h, xs, wx, wh):
    return lax.scan(lambda h, x: (np.tanh(x @ wx + h @ wh),) * 2, h, xs, reverse=True)


def rnn_reversed_reference(h, xs, wx, wh):
    ys = []
    for x in xs[::-1]:
        h = np.tanh(x @ wx + h @ wh)
        ys.append(h)
    return h, np.stack(ys[::-1])


def collatz_steps(n):
    def cond(state):
        return state[0] != 1

    def body(state):
        value, steps = state
        value = np.where(value % 2 == 0, value // 2, 3 * value + 1)
        return value, steps + 1
    return lax.while_loop(cond, body, (n, np.int64(0)))[1]


def collatz_reference(n):
    n, steps = int(n), 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return np.int64(steps)


def power_sum(x, n):
    return lax.fori_loop(0, n, lambda i, acc: acc * x + i, np.zeros_like(x))


def power_sum_reference(x, n):
    acc = np.zeros_like(x)
    for i in range(int(n)):
        acc = acc * x + i
    return acc


def absolute(x):
    return lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - np.float32(1), x)


def absolute_reference(x):
    return x * 2.0 if x.sum() > 0 else x - np.float32(1)


def pick(i, x):
    return lax.switch(i, [lambda a: a, lambda a: np.sin(a), lambda a: -a[::-1]], x)


def pick_reference(i, x):
    k = min(max(int(i), 0), 2)
    return [x, np.sin(x), -x[::-1]][k]


@pytest.mark.parametrize("backend", LOOP_BACKENDS)
def test_scan_matches_python_loop(backend: str) -> None:
    got = jitc.jit(rnn, backend=backend)(H, XS, WX, WH)
    assert_trees_close(got, rnn_reference(H, XS, WX, WH), rtol=1e-5, atol=1e-5)
    got = jitc.jit(rnn_reversed, backend=backend)(H, XS, WX, WH)
    assert_trees_close(got, rnn_reversed_reference(H, XS, WX, WH), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", LOOP_BACKENDS)
def test_scan_over_a_changing_length_compiles_once_symbolically(backend: str) -> None:
    """The sequence length of xs becomes symbolic like any changed extent; a length of 0
    returns the carry as it came in and empty ys."""
    forward = jitc.jit(rnn, backend=backend)
    backward = jitc.jit(rnn_reversed, backend=backend)
    for steps in (1, 2, 5, 3, 0, 6):
        xs = XS[:steps]
        assert_trees_close(forward(H, xs, WX, WH), rnn_reference(H, xs, WX, WH)
                           if steps else (H, (np.zeros((0, 4), np.float32),
                                              np.zeros((0, 8), np.float32))),
                           rtol=1e-5, atol=1e-5)
        if steps:
            assert_trees_close(backward(H, xs, WX, WH), rnn_reversed_reference(H, xs, WX, WH),
                               rtol=1e-5, atol=1e-5)
    stats = forward.compile_stats()
    assert sorted(s["symbolic"] for s in stats) == [False, False, True]  # 1, 0 and the rest
    assert sum(s["symbolic"] for s in backward.compile_stats()) == 1


def test_scan_runs_eagerly_outside_a_trace() -> None:
    assert_trees_close(rnn(H, XS, WX, WH), rnn_reference(H, XS, WX, WH), rtol=1e-6)


@pytest.mark.parametrize("backend", LOOP_BACKENDS)
def test_while_loop_with_data_dependent_trip_count(backend: str) -> None:
    f = jitc.jit(collatz_steps, backend=backend)
    for n in (1, 6, 27, 97):
        assert_trees_close(f(np.int64(n)), collatz_reference(n))
    assert collatz_steps(np.int64(27)) == collatz_reference(27)


@pytest.mark.parametrize("backend", LOOP_BACKENDS)
def test_fori_loop_with_traced_bound(backend: str) -> None:
    x = np.linspace(-1, 1, 5)
    f = jitc.jit(power_sum, backend=backend)
    for n in (0, 1, 7):
        assert_trees_close(f(x, np.int64(n)), power_sum_reference(x, n))


@pytest.mark.parametrize("backend", LOOP_BACKENDS)
def test_cond_runs_one_branch(backend: str) -> None:
    f = jitc.jit(absolute, backend=backend)
    for sign in (1, -1):
        x = (sign * np.arange(1, 5)).astype(np.float32)
        assert_trees_close(f(x), absolute_reference(x))


@pytest.mark.parametrize("backend", LOOP_BACKENDS)
def test_switch_clamps_the_index(backend: str) -> None:
    x = np.linspace(0, 1, 4)
    f = jitc.jit(pick, backend=backend)
    for i in (-5, 0, 1, 2, 9):
        assert_trees_close(f(np.int64(i), x), pick_reference(i, x))
        assert_trees_close(pick(i, x), pick_reference(i, x))


@pytest.mark.parametrize("backend", LOOP_BACKENDS)
def test_nested_loops_read_values_of_every_enclosing_level(backend: str) -> None:
    def nested(x, w):
        def outer(i, acc):
            return lax.fori_loop(0, 3, lambda j, a: a + w * (i + j), acc)
        return lax.fori_loop(0, 4, outer, x)

    def reference(x, w):
        for i in range(4):
            for j in range(3):
                x = x + w * (i + j)
        return x
    check_jit(nested, np.ones(3), np.arange(3.0), backend=backend)
    assert_trees_close(jitc.jit(nested, backend=backend)(np.ones(3), np.arange(3.0)),
                       reference(np.ones(3), np.arange(3.0)))


def test_body_is_traced_once_whatever_the_trip_count() -> None:
    calls = []

    def f(x):
        def body(i, v):
            calls.append(1)
            return v + 1.0
        return lax.fori_loop(0, 1000, body, x)
    compiled = jitc.jit(f, backend="interpreter")
    assert_trees_close(compiled(np.zeros(2)), np.full(2, 1000.0))
    assert len(calls) == 1
    text = compiled.lower(np.zeros(2)).as_text()
    assert text.count("while(") == 1 and text.count("add(") <= 4


def test_carry_dtype_change_is_an_error() -> None:
    def f(x):
        return lax.fori_loop(0, 3, lambda i, v: v.astype(np.float64), x)
    with pytest.raises(TraceError, match=r"(?s)carried value 1, .*keeps its shape and dtype"):
        jitc.jit(f, backend="interpreter")(np.zeros(2, np.float32))


def test_writing_an_outer_array_inside_a_body_is_an_error() -> None:
    def f(x, out):
        def body(i, v):
            out[0] = v.sum()
            return v
        return lax.fori_loop(0, 3, body, x)
    with pytest.raises(TraceError, match="Carry the array instead"):
        jitc.jit(f, backend="interpreter")(np.zeros(2), np.zeros(2))


def test_python_if_on_a_traced_value_points_to_cond() -> None:
    def f(x):
        if x.sum() > 0:
            return x
        return -x
    with pytest.raises(ConcretizationError) as info:
        jitc.jit(f, backend="interpreter")(np.ones(2))
    message = str(info.value)
    assert "test_lax_control.py" in message and "np.where" in message
    assert "jitc.lax.cond" in message


@pytest.mark.parametrize("backend", LOOP_BACKENDS)
def test_loop_regions_with_array_constants_and_narrow_dtypes(backend: str) -> None:
    # The body holds an array constant (baked into the region's code) and carries float16
    # and bool values, which live in memory as 2 and 1 bytes.
    def f(x, n):
        def body(i, state):
            v, flag = state
            v = (v * np.array([0.5, 2.0, -1.0], np.float16) + np.float16(1)).astype(np.float16)
            return v, flag ^ (v.sum() > 0)
        return lax.fori_loop(0, n, body, (x, np.bool_(False)))

    def reference(x, n):
        v, flag = x, np.bool_(False)
        for _ in range(int(n)):
            v = (v * np.array([0.5, 2.0, -1.0], np.float16) + np.float16(1)).astype(np.float16)
            flag = flag ^ (v.sum() > 0)
        return v, flag
    x = np.array([1.0, -2.0, 3.0], np.float16)
    compiled = jitc.jit(f, backend=backend)
    for n in (0, 1, 5):
        assert_trees_close(compiled(x, np.int64(n)), reference(x, n))
