"""Indexing programs built at random from slices and indices computed from an int argument,
run jitted and plain over a sequence of values (negative, past the end, 0 and 1 included):
the results, their shapes and dtypes, the errors and the array written must be numpy's.

The one documented difference left alone: a traced integer index out of range (numpy's
IndexError) reads a clamped element and writes nothing (docs/jit.md, "Indexing")."""

from __future__ import annotations

import random

import numpy as np
import pytest

import jitc

ROWS = 12
TEMPLATES = (
    "return x[{i}].sum(0) * 1.0",
    "return x[{i}]",
    "x[{i}] = v\n    return x.sum()",
    "x[{i}] += 1\n    return x[{j}]",
    "y = x[{i}]\n    y *= 2\n    return x",
    "return np.zeros({e}) + x[0, 0]",
    "return x[{i}, {k}]",
    "x[{i}, {k}] = 7\n    return x[{j}].copy()",
    "r = x[{j}]\n    x[{i}] = -1\n    return r",
)
VALUES = (0, 1, 2, 3, 5, 7, 11, 12, 13, 20, -1, -2, -6, -13)


def _expression(rng: random.Random) -> str:
    offset = rng.choice([0, 0, 1, 2, -1, -2, 3])
    if rng.random() < 0.25:
        return f"p * 2 + {offset}"
    return f"p + {offset}" if offset else "p"


def _bound(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.15:
        return ""
    if r < 0.3:
        return str(rng.choice([0, 1, 3, -1, -4, 20]))
    return _expression(rng)


def _index(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return f"{_bound(rng)}:{_bound(rng)}{rng.choice(['', '', '', ':2'])}"
    if r < 0.8:
        return _expression(rng)
    return rng.choice([":", "1", "-1"])


def _program(rng: random.Random):
    body = rng.choice(TEMPLATES).format(i=_index(rng), j=_index(rng), e=_expression(rng),
                                        k=rng.choice([":", _expression(rng), "1"]))
    source = f"def f(x, v, p):\n    {body}\n"
    namespace = {"np": np}
    exec(compile(source, "<indexing program>", "exec"), namespace)
    return source, namespace["f"]


def _run(fn, p):
    x = np.arange(ROWS * 3, dtype=np.float64).reshape(ROWS, 3)
    try:
        return fn(x, np.float64(-5.5), p), None, x
    except Exception as exc:  # compared with the other side's
        return None, exc, x


@pytest.mark.parametrize("seed", range(12))
def test_random_indexing_programs_match_numpy(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(8):
        source, fn = _program(rng)
        jitted = jitc.jit(fn)
        for p in rng.sample(VALUES, 8):
            want, numpy_error, numpy_x = _run(fn, p)
            got, jit_error, jit_x = _run(jitted, p)
            where = f"{source}with p = {p}"
            if numpy_error is not None:
                if jit_error is None and isinstance(numpy_error, IndexError) and \
                        "out of bounds" in str(numpy_error):
                    continue  # a traced index out of range: clamped (documented)
                assert isinstance(jit_error, type(numpy_error)), (where, numpy_error, jit_error)
                continue
            assert jit_error is None, (where, jit_error)
            assert np.shape(got) == np.shape(want), where
            assert np.asarray(got).dtype == np.asarray(want).dtype, where
            np.testing.assert_array_equal(got, want, err_msg=where)
            np.testing.assert_array_equal(jit_x, numpy_x, err_msg=where)
