"""Loop re-rolling (jitc/passes/reroll.py): Python loops that tracing unrolled come back as one
`while`, and every program computes what numpy computes, folded or not."""

from __future__ import annotations

import copy
import textwrap

import numpy as np
import pytest
from jitcheck import assert_trees_close, check_jit, random

import jitc
from jitc.ir.interpreter import interpret
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.verifier import verify
from jitc.passes.reroll import MIN_TRIPS, reroll

BACKENDS = ["interpreter", "cpu", "c", "cuda-sim"]


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def whiles(fn, *args) -> int:
    return jitc.jit(fn).lower(*args).as_text().count(" = while(")


def instructions(fn, *args) -> int:
    text = jitc.jit(fn).lower(*args).as_text()
    return sum(1 for line in text.splitlines() if line.lstrip().startswith("%"))


# -- the pass on IR text -------------------------------------------------------------------------
def _unrolled(steps: int) -> str:
    lines = ["func @f {", f"  %x = parameter() index=0 : f32[{3 * steps}]",
             "  %h = parameter() index=1 : f32[3]"]
    h = "%h"
    for t in range(steps):
        lines += [f"  %s{t} = slice(%x) start=[{3 * t}] limit=[{3 * t + 3}] : f32[3]",
                  f"  %m{t} = mul({h}, {h}) : f32[3]",
                  f"  %a{t} = add(%m{t}, %s{t}) : f32[3]"]
        h = f"%a{t}"
    return "\n".join([*lines, f"  return {h}", "}", ""])


FOLDED = ir("""
    func @f {
      %x = parameter() index=0 : f32[12]
      %h = parameter() index=1 : f32[3]
      %0 = constant() value=0 : i64[]
      %1, %2, %3 = while(%0, %h, %x) cond=@f.loop0.cond body=@f.loop0.body : i64[], f32[3], f32[12]
      return %2
    }

    func @f.loop0.cond {
      %0 = parameter() index=0 : i64[]
      %1 = parameter() index=1 : f32[3]
      %2 = parameter() index=2 : f32[12]
      %3 = constant() value=4 : i64[]
      %4 = compare(%0, %3) direction=lt : bool[]
      return %4
    }

    func @f.loop0.body {
      %0 = parameter() index=0 : i64[]
      %1 = parameter() index=1 : f32[3]
      %2 = parameter() index=2 : f32[12]
      %3 = constant() value=3 : i64[]
      %4 = mul(%0, %3) : i64[]
      %5 = dynamic_slice(%2, %4) sizes=[3] : f32[3]
      %m0 = mul(%1, %1) : f32[3]
      %a0 = add(%m0, %5) : f32[3]
      %6 = constant() value=1 : i64[]
      %7 = add(%0, %6) : i64[]
      return %7, %a0, %2
    }
    """)


def test_repeated_blocks_fold_into_one_while() -> None:
    module = parse_module(_unrolled(4))
    folded = reroll(module, min_trips=3)
    verify(folded)
    assert print_module(folded) == FOLDED
    args = [random((12,)), random((3,), seed=1)]
    np.testing.assert_array_equal(interpret(folded, args)[0], interpret(module, args)[0])


def test_too_few_blocks_stay_unrolled() -> None:
    module = parse_module(_unrolled(2))
    assert reroll(module, min_trips=3) is module


# -- programs, against numpy ---------------------------------------------------------------------
def rnn(xs, h, w, u):
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ w + h @ u)
    return h


def rnn_states(xs, h, w, u):
    states = []
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ w + h @ u)
        states.append(h)
    return np.stack(states), h


def fill_rows(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * 2 + i
    return out


def decay(x):
    h = np.zeros(x.shape[1:], x.dtype)
    for t in range(x.shape[0]):
        h = h * 0.9 + x[t] * (t * 0.1)  # a float constant of every step: a table
    return h


def every_third_differs(x):
    h = x[0]
    for t in range(1, x.shape[0]):
        h = h * 0.5 if t % 3 == 0 else np.tanh(h + x[t])
    return h


def early_break(x):
    acc = np.zeros_like(x[0])
    for t in range(x.shape[0]):
        if t == 13:
            break
        acc += x[t]
    return acc


def fibonacci_like(x):
    a, b = x[0], x[1]
    for _ in range(20):  # reads two steps back: must not fold as a one-step carry
        a, b = b, a + b * 0.5
    return a, b


def windows(x):
    out = np.zeros((x.shape[0] - 2, x.shape[1]), x.dtype)
    for t in range(x.shape[0] - 2):
        out[t] = x[t:t + 3].sum(axis=0) + x[t + 2]
    return out


def nested(x, y):
    out = np.empty((x.shape[0], y.shape[0]), x.dtype)
    for i in range(x.shape[0]):
        row = np.sin(x[i])
        for j in range(y.shape[0]):
            out[i, j] = row * y[j]
    return out


def nested_flat(x, y):
    out = np.zeros((x.shape[0], y.shape[0]), x.dtype)
    for i in range(x.shape[0]):
        for j in range(y.shape[0]):
            out[i, j] += x[i] * y[j]  # one run of blocks: folds as one loop
    return out


STEPS = [MIN_TRIPS - 1, MIN_TRIPS, 40]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("steps", STEPS)
def test_recurrences_match_numpy(steps: int, backend: str) -> None:
    xs, h = random((steps, 3, 5)), random((3, 6), seed=1)
    w, u = random((5, 6), seed=2, low=-0.5, high=0.5), random((6, 6), seed=3, low=-0.5,
                                                                     high=0.5)
    check_jit(rnn, xs, h, w, u, backend=backend, rtol=1e-5, atol=1e-5)
    check_jit(rnn_states, xs, h, w, u, backend=backend, rtol=1e-5, atol=1e-5)
    x = random((steps, 7), seed=4)
    check_jit(fill_rows, x, backend=backend)
    check_jit(decay, x, backend=backend)
    check_jit(every_third_differs, x, backend=backend)
    check_jit(early_break, x, backend=backend)
    check_jit(windows, random((steps + 2, 4), seed=5), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_loops_that_must_not_fold_as_one_step(backend: str) -> None:
    x = random((2, 6))
    check_jit(fibonacci_like, x, backend=backend)
    check_jit(nested, random((9,)), random((10,), seed=1), backend=backend)
    check_jit(nested_flat, random((9,)), random((10,), seed=1), backend=backend)


def test_long_loops_fold_and_the_program_does_not_grow_with_the_trip_count() -> None:
    def sizes(fn, make):
        return [instructions(fn, *make(n)) for n in (20, 200)]
    def rnn_args(n):
        return (random((n, 3, 5)), random((3, 6)), random((5, 6)), random((6, 6)))
    for fn, make in [(rnn, rnn_args), (rnn_states, rnn_args),
                     (fill_rows, lambda n: (random((n, 7)),)),
                     (decay, lambda n: (random((n, 7)),)),
                     (windows, lambda n: (random((n, 4)),))]:
        small, large = sizes(fn, make)
        assert small == large, f"{fn.__name__}: {small} instructions for 20 steps, {large} for 200"
        assert whiles(fn, *make(20)) == 1, fn.__name__
    # Nested loops fold from the inside out, then as a whole: one while in one while.
    text = jitc.jit(nested).lower(random((12,)), random((10,))).as_text()
    assert text.count(" = while(") == 2 and text.count("func @") == 5


def test_short_loops_stay_unrolled_and_reroll_can_be_disabled() -> None:
    assert whiles(fill_rows, random((MIN_TRIPS - 1, 3))) == 0
    x = random((50, 3))
    lowered = jitc.jit(fill_rows, disabled_passes={"reroll"}).lower(x)
    assert " = while(" not in lowered.as_text()
    np.testing.assert_array_equal(jitc.jit(fill_rows, disabled_passes={"reroll"})(x),
                                  fill_rows(x))


def test_writes_into_arguments_and_state_from_a_folded_loop() -> None:
    class Cache:
        def __init__(self) -> None:
            self.k = np.zeros((32, 4), np.float32)
            self.pos = 0

        def append_all(self, ks):
            for t in range(ks.shape[0]):
                self.k[self.pos + t] = ks[t] * 2
            return self.k[:self.pos + ks.shape[0]].sum(axis=0)

    def scale_into(out, x):
        for t in range(x.shape[0]):
            out[t] = x[t] * (t + 1)

    x, out = random((24, 4)), np.zeros((24, 4), np.float32)
    want_out = out.copy()
    scale_into(want_out, x)
    got = jitc.jit(scale_into)(out, x)
    assert got is None
    np.testing.assert_array_equal(out, want_out)

    mine, theirs = Cache(), Cache()
    ks = random((20, 4), seed=3)
    got, want = jitc.jit(mine.append_all)(ks), theirs.append_all(ks)
    assert_trees_close(got, want)
    np.testing.assert_array_equal(mine.k, theirs.k)


def test_a_loop_over_distinct_weights_is_not_folded_into_one() -> None:
    layers = [random((6, 6), seed=s, low=-0.3, high=0.3) for s in range(10)]

    def mlp(x):
        for w in layers:
            x = np.tanh(x @ w)
        return x
    x = random((2, 6))
    assert whiles(mlp, x) == 0
    check_jit(mlp, copy.deepcopy(x), backend="cpu")


def test_every_steps_value_read_other_than_by_np_stack_stays_unrolled() -> None:
    def steps(x, w):
        return [x[t] @ w for t in range(10)]  # ten results: one instruction each either way

    x, w = random((10, 3, 4)), random((4, 2), seed=1)
    assert whiles(steps, x, w) == 0
    check_jit(steps, x, w, backend="cpu")


def _collect(kind: str):
    def f(xs, h, w):
        hs = []
        for t in range(xs.shape[0]):
            h = np.tanh(xs[t] @ w + h)
            hs.append({"concat": h[None], "concat1": h[:, None]}.get(kind, h))
        if kind == "array":
            return np.array(hs)
        if kind in ("concat", "concat1"):
            return np.concatenate(hs, axis=0 if kind == "concat" else 1)
        return np.stack(hs, axis={"stack": 0, "stack1": 1, "stack2": 2}[kind]), h
    return f


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["stack", "stack1", "stack2", "array", "concat", "concat1"])
def test_per_step_outputs_gathered_by_stack_or_concatenate_fold(kind: str, backend: str) -> None:
    f = _collect(kind)
    xs, h, w = random((20, 3, 4)), random((3, 5), seed=1), random((4, 5), seed=2, high=0.3)
    assert whiles(f, xs, h, w) == 1
    check_jit(f, xs, h, w, backend=backend, rtol=1e-5, atol=1e-5)
