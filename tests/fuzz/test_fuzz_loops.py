"""Differential fuzzing of Python loops: random loop bodies (carried values, rows of an input,
constants computed from the index, steps that differ with the index, values read two steps
later, early breaks, per-step outputs stacked or written into an array) run with numpy and under
`jitc.jit`, where tracing unrolls them and the re-roller folds what it can. Whatever it folds
or leaves, the answer must be numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitc

QUICK = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))

STEPS = [
    ("scale_add_row", st.floats(-0.9, 0.9).map(lambda a: round(a, 3))),
    ("tanh", st.none()),
    ("add_index", st.floats(-0.5, 0.5).map(lambda s: round(s, 3))),
    ("every", st.tuples(st.integers(2, 4), st.integers(0, 3))),
    ("accumulate", st.none()),
    ("two_back", st.none()),
    ("reverse", st.none()),
    ("window", st.none()),
    ("product", st.none()),
    ("break_at", st.integers(0, 30)),
]


def make_program(steps: list[tuple[str, object]], collect: str):
    def program(x, h, w):
        acc = np.zeros_like(h)
        older = h * 0.5
        out = np.zeros((x.shape[0], h.shape[0]), h.dtype)
        hs = []
        for t in range(x.shape[0]):
            for name, arg in steps:
                if name == "scale_add_row":
                    h = h * arg + x[t]
                elif name == "tanh":
                    h = np.tanh(h)
                elif name == "add_index":
                    h = h + t * arg
                elif name == "every" and t % arg[0] == arg[1] % arg[0]:
                    h = h * 0.5 - 1
                elif name == "accumulate":
                    acc = acc + h
                elif name == "two_back":
                    older, h = h, older + h * 0.25
                elif name == "reverse":
                    h = h[::-1]
                elif name == "window" and t + 2 <= x.shape[0]:
                    h = h + x[t:t + 2].sum(axis=0) * 0.1
                elif name == "product":
                    h = np.tanh(h @ w)
                elif name == "break_at" and t == arg:
                    break
            else:
                if collect == "out":
                    out[t] = h
                elif collect == "stack":
                    hs.append(h)
                continue
            break
        gathered = np.stack(hs) if hs else out
        return h, acc, gathered
    return program


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@QUICK
@given(steps=st.lists(st.sampled_from(STEPS).flatmap(
           lambda s: s[1].map(lambda arg, name=s[0]: (name, arg))), min_size=1, max_size=5),
       trips=st.integers(0, 24), collect=st.sampled_from(["none", "out", "stack"]))
def test_random_loops_match_numpy(backend: str, steps, trips: int, collect: str) -> None:
    rng = np.random.default_rng(trips)
    x = rng.standard_normal((trips, 6))
    h = rng.standard_normal(6)
    w = rng.standard_normal((6, 6)) * 0.4
    program = make_program(steps, collect)
    want = program(x.copy(), h.copy(), w.copy())
    got = jitc.jit(program, backend=backend)(x, h, w)
    for g, e in zip(got, want, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10, err_msg=str(steps))
