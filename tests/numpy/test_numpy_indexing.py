"""Basic and integer-array indexing, and `x[index] = value`, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc

X = random((4, 5, 6))
MASK = random((4, 5), np.bool_, seed=7)

BASIC = [
    ("int", 1), ("negative int", -1), ("ints", (1, 2)), ("all ints", (3, -2, 0)),
    ("numpy int", np.int64(2)), ("slice", slice(1, 3)), ("open slice", slice(None, 2)),
    ("step", slice(None, None, 2)), ("negative step", slice(None, None, -1)),
    ("negative step bounds", slice(3, 0, -2)), ("negative step past start", slice(-1, None, -3)),
    ("empty slice", slice(3, 1)), ("empty negative step", slice(1, 3, -1)),
    ("out-of-range slice", slice(-10, 10)), ("slices", (slice(1, None), slice(None, -1))),
    ("None", None), ("None middle", (slice(None), None, 1)), ("Ellipsis", Ellipsis),
    ("Ellipsis int", (Ellipsis, 0)), ("int Ellipsis", (1, Ellipsis)),
    ("Ellipsis None", (Ellipsis, None)), ("int Ellipsis slice", (0, ..., slice(1, 4, 2))),
    ("empty tuple", ()),
]

ADVANCED = [
    ("1-d", np.array([0, 2, 3])),
    ("list", [3, 0, 0]),
    ("negative", np.array([-1, -4, 2])),
    ("2-d index", np.array([[0, 1], [3, 2]])),
    ("0-d index array", np.array(2)),
    ("second axis", (slice(None), np.array([4, 0]))),
    ("last axis", (Ellipsis, np.array([[5], [0]]))),
    ("two broadcast", (np.array([[0], [3]]), np.array([1, 2, 4]))),
    ("two adjacent after slice", (slice(None), np.array([0, 4]), np.array([1, 5]))),
    ("non-adjacent", (np.array([0, 3]), slice(None), np.array([1, 5]))),
    ("non-adjacent via int", (np.array([0, 3]), slice(1, 3), 2)),
    ("int and array", (1, np.array([0, 2]))),
    ("array and int adjacent later", (slice(None), 1, np.array([0, 2]))),
    ("three arrays", (np.array([0, 1]), np.array([2, 3]), np.array([4, 5]))),
    ("array and slice", (np.array([2, 0]), slice(1, 4))),
    ("static boolean mask", MASK),
    ("static boolean mask 1-d", np.array([True, False, True, True])),
    ("boolean mask on axis 1", (slice(None), np.array([True, False, True, False, True]))),
    ("int list on two axes", ([0, 1], [2, 3])),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", [pytest.param(i, id=name) for name, i in BASIC + ADVANCED])
def test_getitem(index, backend):
    check_jit(lambda x: x[index], X, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", [pytest.param(i, id=name) for name, i in ADVANCED[:14]])
def test_getitem_with_traced_indices(index, backend):
    """The same integer arrays passed as arguments (values known only at run time)."""
    items = index if isinstance(index, tuple) else (index,)
    arrays = [np.asarray(i) for i in items if isinstance(i, (np.ndarray, list))]

    def take(x, *traced):
        supply = iter(traced)
        return x[tuple(next(supply) if isinstance(i, (np.ndarray, list)) else i for i in items)]
    check_jit(take, X, *arrays, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
def test_index_dtypes(dtype, backend):
    idx = np.array([[3, 0], [1, 2]], dtype)
    check_jit(lambda x, i: x[i, 1:], X, idx, backend=backend)
    check_jit(lambda x, i: x[:, i], X, idx, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_embedding_lookup_and_take(backend):
    table = random((10, 4))
    tokens = np.array([[1, 9, 0], [3, 3, 7]])
    check_jit(lambda t, i: t[i], table, tokens, backend=backend)
    check_jit(lambda t, i: np.take(t, i, axis=0), table, tokens, backend=backend)
    check_jit(lambda t, i: np.take(t, i), table, tokens, backend=backend)
    check_jit(lambda t, i: t.take(i[0], axis=1), table, tokens % 4, backend=backend)
    check_jit(lambda t, i: t[np.arange(2), i[:, 0] % 4], table, tokens, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_out_of_range_indices_are_clamped(backend):
    """Deliberately not numpy: traced index values are unknown at trace time, so instead of
    raising IndexError the gather clamps them into range (documented on the gather op). Static
    out-of-range indices still raise at trace time (see test_errors)."""
    x = np.arange(5.0)
    got = jitc.jit(lambda x, i: x[i], backend=backend)(x, np.array([7, -9, -1, 2]))
    # -1 wraps as in numpy; -9 + 5 = -4 is still negative and clamps to 0; 7 clamps to 4.
    np.testing.assert_array_equal(got, [4.0, 0.0, 4.0, 2.0])


SETITEMS = [
    ("int", 1, 0.5),
    ("negative int", -1, np.arange(6.0)),
    ("ints", (1, 2), np.arange(6.0)),
    ("scalar element", (0, 1, 2), -7.0),
    ("slice", slice(1, 3), 1.0),
    ("step slice", (slice(None), slice(None, None, 2)), np.ones((3, 6), np.float32)),
    ("negative step", (slice(None, None, -1), 0), np.arange(24.0).reshape(4, 6)),
    ("negative step stride", (slice(None), slice(4, None, -2)), np.arange(3 * 6.0).reshape(3, 6)),
    ("Ellipsis", (Ellipsis, 0), 2.0),
    ("Ellipsis broadcast", (Ellipsis, slice(0, 2)), np.array([3.0, 4.0])),
    ("everything", slice(None), 0.0),
    ("int value into float", 0, 3),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index,value", [pytest.param(i, v, id=name) for name, i, v in SETITEMS])
def test_setitem(index, value, backend):
    def assign(x):
        x[index] = value
        return x
    check_jit(assign, X, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_setitem_traced_values(backend):
    def assign(x, v):
        y = x * 2
        y[:, 0] = v
        y[-1] = v.sum()
        return y, x
    check_jit(assign, random((3, 4)), random((3,), seed=2), backend=backend)

    def cache_update(cache, new):  # a KV-cache style write of one time step
        cache[:, 2] = new
        return cache
    check_jit(cache_update, random((2, 5, 3)), random((2, 3), seed=3), backend=backend)

    def int_into_int(x):
        x[1:3] = 300  # numpy casts a Python int into int32 directly
        return x
    check_jit(int_into_int, random((4,), np.int32), backend=backend)
