"""Random programs of in-place updates through views of argument and local arrays, run with
numpy and under jitc.jit: the results and the final contents of the argument must agree.

Each program is a list of steps over a pool of arrays (the argument `a`, a local copy, and the
views and results made on the way): take a view (basic indexing with any steps, a transpose,
a reshape), update one in place (`+=`, `*=`, `x[index] = value`, `np.copyto`), or read one
(its sum joins the results); every array and view of the pool is a result at the end. numpy
decides, in both runs, which reshapes are views. A program numpy refuses (a row index out of
range) must raise numpy's IndexError under jitc too.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import jitc

AXIS_SLICES = [slice(None), slice(1, None), slice(None, -1), slice(None, None, 2),
               slice(None, None, -1), slice(1, None, 2), slice(0, 1)]

step = st.one_of(
    st.tuples(st.just("slice"), st.integers(0, 9), st.lists(st.integers(0, 6), min_size=1,
                                                            max_size=2)),
    st.tuples(st.just("row"), st.integers(0, 9), st.integers(-2, 1)),
    st.tuples(st.just("transpose"), st.integers(0, 9)),
    st.tuples(st.just("reshape"), st.integers(0, 9)),
    st.tuples(st.just("iadd"), st.integers(0, 9), st.integers(-3, 3)),
    st.tuples(st.just("imul"), st.integers(0, 9), st.integers(-2, 2)),
    st.tuples(st.just("assign"), st.integers(0, 9), st.integers(0, 6), st.integers(-5, 5)),
    st.tuples(st.just("put"), st.integers(0, 9), st.integers(-2, 1), st.integers(-5, 5)),
    st.tuples(st.just("copyto"), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("read"), st.integers(0, 9)),
)


def run(steps: list[tuple], a: np.ndarray) -> list:
    """The program: the same Python code whether `a` is an array or a tracer."""
    pool = [a, a.copy()]
    results = []
    for op, i, *rest in steps:
        x = pool[i % len(pool)]
        if op == "slice" and x.ndim >= len(rest[0]):
            pool.append(x[tuple(AXIS_SLICES[k] for k in rest[0])])
        elif op == "row" and x.ndim >= 1 and -x.shape[0] <= rest[0] < x.shape[0]:
            pool.append(x[rest[0]])
        elif op == "transpose":
            pool.append(x.T)
        elif op == "reshape":
            pool.append(x.reshape(-1))
        elif op == "iadd":
            x += rest[0]
        elif op == "imul":
            x *= rest[0]
        elif op == "assign" and x.ndim >= 1:  # (numpy scalars take no item assignment)
            x[AXIS_SLICES[rest[0]]] = rest[1]
        elif op == "put" and x.ndim >= 1:  # numpy's IndexError where the row is not there
            x[rest[0]] = rest[1]
        elif op == "copyto" and x.ndim >= 1:
            source = pool[rest[0] % len(pool)]
            if _broadcasts(source.shape, x.shape):
                np.copyto(x, source)
        elif op == "read":
            results.append(x.sum())
    return results + [x * 1 for x in pool]  # every array and view as it ends


def _broadcasts(source: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(source, target) == target
    except ValueError:
        return False


def check(steps: list[tuple], shape: tuple[int, ...], dtype: type, backend: str) -> None:
    a = np.arange(np.prod(shape), dtype=dtype).reshape(shape)
    frozen = tuple(tuple(tuple(p) if isinstance(p, list) else p for p in s) for s in steps)
    agree(jitc.jit(run, static_argnums=0, backend=backend), frozen, a)


def agree(f, steps: tuple, a: np.ndarray) -> bool:
    """`f` (run compiled) gives numpy's results and leaves `a` as numpy leaves it, or raises
    numpy's IndexError where numpy does; whether numpy ran the program."""
    want_a = a.copy()
    try:
        want = run(steps, want_a)
    except IndexError:
        with pytest.raises(IndexError):
            f(steps, a)
        return False
    got = f(steps, a)
    np.testing.assert_array_equal(a, want_a)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert np.shape(g) == np.shape(w)
    return True


SHAPES = st.sampled_from([(4, 5), (3, 4), (2, 3, 4), (6,), (1, 5)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=8), SHAPES,
       st.sampled_from([np.float64, np.int64]))
# Found by this test: a numpy scalar taken from an array was written in place; a view written
# from another view of its root (np.copyto(a[:], a[::-1])) read its own update back.
@example([("row", 0, 0), ("iadd", 2, 1)], (6,), np.float64)
@example([("slice", 0, [0]), ("slice", 0, [0]), ("slice", 0, [4]), ("copyto", 2, 4)], (4, 5),
         np.float64)
def test_random_in_place_programs_match_numpy(steps, shape, dtype):
    check(steps, shape, dtype, "interpreter")


@pytest.mark.parametrize("backend", ["cpu", "c"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=2, max_size=8), SHAPES)
def test_random_in_place_programs_on_compiled_backends(backend, steps, shape):
    check(steps, shape, np.float64, backend)


# Steps whose Python code needs no extent as a number (the "row" step's range check does, a
# reshape of a symbolic array is a copy that refuses later writes, copyto checks broadcasting
# in Python): programs of these steps alone must compile symbolically.
SYMBOLIC_STEPS = {"slice", "transpose", "iadd", "imul", "assign", "put", "read"}


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=1, max_size=8), st.sampled_from([(5,), (4,), (2, 3)]))
@example([("slice", 0, [0, 2]), ("read", 2), ("transpose", 0), ("assign", 3, 1, 4)], (5,))
@example([("slice", 0, [1]), ("put", 2, -1, 3), ("assign", 0, 5, -2), ("iadd", 2, 1)], (2, 3))
@example([("put", 0, 1, 4), ("slice", 1, [3]), ("assign", 2, 6, 1), ("read", 0)], (4,))
@example([("slice", 0, [6]), ("put", 2, 1, 0)], (5,))  # out of range for every size
def test_random_in_place_programs_over_a_symbolic_first_axis(backend, steps, tail):
    """The same programs compiled once with the argument's first axis symbolic (views by basic
    indexing and transposes tracked, writes at ints and slices of that axis), for sizes from 0
    to 17; a program the symbolic trace refuses, or a size its constraints exclude, compiles
    exactly, with the same results."""
    frozen = tuple(tuple(tuple(p) if isinstance(p, list) else p for p in s) for s in steps)
    f = jitc.jit(run, static_argnums=0, backend=backend, dynamic={"a": {0: "n"}},
                 disk_cache=False)
    ran = False
    for rows in (3, 5, 2, 0, 1, 17):
        a = np.arange(rows * np.prod(tail), dtype=np.float64).reshape(rows, *tail)
        ran = agree(f, frozen, a) or ran
    if ran and all(s[0] in SYMBOLIC_STEPS for s in steps):  # (no compilation when none ran)
        assert [s["symbolic"] for s in f.compile_stats()].count(True) == 1
