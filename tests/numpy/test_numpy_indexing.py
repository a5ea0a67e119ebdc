"""Basic and integer-array indexing, and `x[index] = value`, against numpy."""

from __future__ import annotations

import re

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


# -- numpy's shapes for every kind of index (issue: a[range(1)] on (1, 3) gave (3,)) ----------

SHAPED_READS = [
    ("range", (1, 3), range(1)), ("empty range", (2, 3), range(0)), ("empty list", (2, 3), []),
    ("list of ints", (4, 3), [3, -1, 0, 0]), ("range on axis 1", (2, 3), (slice(None), range(2))),
    ("nested list", (4, 3), [[0, 1], [2, 3]]), ("tuple in tuple", (4, 3), ((0, 2), 1)),
    ("None first", (2, 3, 4), (None, [0, 1], 2)),
    ("None between arrays", (2, 3, 4), ([0, 1], None, [1, 2])),
    ("None around", (2, 3, 4), (None, [0, 1], None, 2)),
    ("None after array", (2, 3, 4), (slice(None), [2, 0], None)),
    ("Ellipsis None array", (2, 3, 4), (..., None, [1, 0])),
    ("None slice array", (2, 3, 4), (slice(None), None, [1, 0], slice(1, None))),
    ("True", (2, 3), True), ("False", (2, 3), False), ("True and int", (2, 3), (True, 1)),
    ("np.True_ with array", (2, 3), (np.True_, [0, 1])),
    ("0-d int array", (2, 3), np.array(1)), ("0-d int arrays", (2, 3), (np.array(1), 2)),
    ("size-0 axis slice", (0, 3), slice(None)), ("size-0 axis empty index", (0, 3), []),
    ("size-1 axes", (1, 1, 2), (0, [0, 0], -1)), ("mask with a size-0 axis", (2, 0),
                                                  np.array([True, False])),
    ("0-d array None", (), None), ("0-d array Ellipsis", (), ...), ("0-d empty tuple", (), ()),
    ("mask of every axis", (2, 3), np.array([[True, False, True], [False, False, True]])),
    ("mask after Ellipsis", (2, 3, 2), (..., np.array([True, False]))),
    ("mask between slices", (2, 3, 2), (slice(None), np.array([False, True, True]), 0)),
    ("negative step and array", (4, 5), (slice(None, None, -2), [4, 0])),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_getitem_has_numpy_shapes(backend):
    """All cases in one compiled function per backend (one compile, many outputs)."""
    arrays = [random(shape, seed=n) for n, (_, shape, _) in enumerate(SHAPED_READS)]

    def read_all(*xs):
        return tuple(x[index] for x, (_, _, index) in zip(xs, SHAPED_READS))
    check_jit(read_all, *arrays, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.int64,
                                   np.float16, np.float32, np.float64])
def test_getitem_dtypes(dtype, backend):
    x = random((3, 4), dtype, seed=5)
    check_jit(lambda x, i: (x[i], x[[2, -1]], x[..., None, 1], x[1:, ::-2], x[i, i % 4]),
              x, np.array([[0, 2], [-1, 1]]), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_table_lookups(backend):
    """A captured numpy table indexed by traced ids: numpy never hands table[ids] or
    np.take(table, ids) to jitc (both dispatch on the table only), so the spellings that
    trace are jitc.numpy.take and the one-hot comparison; a traced scalar index works too."""
    table = random((10, 4), seed=3)
    ids = np.array([[1, 9, 0], [3, 3, 7]])

    def embed(ids, i):
        return (jitc.numpy.take(table, ids, axis=0), jitc.numpy.take(table, i, axis=0),
                np.take_along_axis(table[:2], ids[:, :1] % 4, axis=1))

    want = (table[ids], table[5], np.take_along_axis(table[:2], ids[:, :1] % 4, axis=1))
    got = jitc.jit(embed, backend=backend)(ids, np.int64(5))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# -- slices with traced bounds -------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_slice_starts(backend):
    x = random((10, 3), seed=4)

    def windows(x, t, i):  # every window lies inside x for these t and i, as numpy requires
        return (x[t:t + 4], x[i * 3:(i + 1) * 3], x[t + 1:5 + t:2, 1], x[-2 - t:-t, :],
                x[1:, t - 1:t + 1], x[t:t], x[..., t - 1:t + 1], x[i - 9 + t:t + i - 7])
    for t, i in [(1, 0), (2, 1), (1, 2), (2, 2)]:
        check_jit(windows, x, np.int64(t), i, backend=backend)


def test_traced_slice_start_is_clamped_past_the_end():
    """Deliberately not numpy (documented): the block keeps its static length, so a start
    past n - L is clamped (numpy would return fewer elements). A start from a Python int
    argument is an extent instead, with numpy's answer."""
    window = jitc.jit(lambda x, t: x[t:t + 3])
    np.testing.assert_array_equal(window(np.arange(5.0), np.int64(4)), [2.0, 3.0, 4.0])
    for t in (4, 3, 2, 5, 0, -2, -4):
        np.testing.assert_array_equal(window(np.arange(5.0), t), np.arange(5.0)[t:t + 3])


@pytest.mark.parametrize("fn,fragment", [
    (lambda x, t: x[t:], "x[t:t + L]"),
    (lambda x, t: x[:t], "x[t:t + L]"),
    (lambda x, t: x[t:2 * t], "x[t:t + L]"),
    (lambda x, t: x[t:t + 9], "slice at most 5 elements"),
    (lambda x, t: x[t + 2:t:-1], "positive step"),
])
def test_traced_slice_errors(fn, fragment):
    # A numpy integer stays traced (a Python int would be an extent: test_int_extents.py).
    with pytest.raises(jitc.TraceError) as info:
        jitc.jit(fn)(np.arange(5.0), np.int64(1))
    where, source, explanation = str(info.value).split("\n", 2)
    assert "test_numpy_indexing.py" in where and "lambda x, t" in source
    assert fragment in explanation


# -- numpy's IndexError for every index numpy rejects ----------------------------------------

INDEX_ERRORS = [
    ("short mask", (3,), np.array([True, False]),
     "boolean index did not match indexed array along axis 0; size of axis is 3 but size of "
     "corresponding boolean axis is 2"),
    ("long mask", (3,), np.array([True] * 5), "size of corresponding boolean axis is 5"),
    ("mask on axis 1", (2, 3), (slice(None), np.array([True, False])),
     "along axis 1; size of axis is 3"),
    ("2-d mask of wrong shape", (2, 3), np.ones((3, 2), bool), "did not match"),
    ("float", (3,), 1.0, "only integers, slices (`:`), ellipsis (`...`)"),
    ("float in list", (3,), [0, 1.5], "only integers, slices"),
    ("float array", (3,), np.array([1.0]), "arrays used as indices must be of integer"),
    ("int out of range", (3, 4), 5, "index 5 is out of bounds for axis 0 with size 3"),
    ("negative out of range", (3, 4), (0, -5), "index -5 is out of bounds for axis 1 with size 4"),
    ("array out of range", (3, 4), (slice(None), [0, 4]),
     "index 4 is out of bounds for axis 1 with size 4"),
    ("too many indices", (3,), (0, 0), "too many indices for array"),
    ("two ellipses", (3,), (..., ...), "an index can only have a single ellipsis"),
    ("index into size 0", (0,), [0], "index 0 is out of bounds for axis 0 with size 0"),
]


@pytest.mark.parametrize("shape,index,message", [pytest.param(s, i, m, id=n)
                                                 for n, s, i, m in INDEX_ERRORS])
def test_index_errors_are_numpys(shape, index, message):
    x = np.zeros(shape, np.float32)
    with pytest.raises(IndexError) as numpy_error:
        x[index]
    with pytest.raises(jitc.IndexingError) as info:
        jitc.jit(lambda x: x[index])(x)
    text = str(info.value)
    assert str(numpy_error.value) in text and message in text
    assert "test_numpy_indexing.py" in text and f"(indexing f32[{','.join(map(str, shape))}])" \
        in text


def test_traced_float_index_is_an_index_error():
    with pytest.raises(IndexError, match=re.escape("must be of integer (or boolean) type, got "
                                                   "a traced f64[1] (indexing f64[3]); convert "
                                                   "it with .astype")):
        jitc.jit(lambda x, i: x[i])(np.arange(3.0), np.array([0.5]))


def test_a_row_at_a_traced_index_is_a_view_that_writes_back():
    """numpy's x[i] with an integer i is a view: writes through it reach x. A traced i (an
    int argument) took a copy once, and the writes were lost."""
    def scale_row(x, i):
        row = x[i - 2]
        row *= 2
        x[i, 1:] += row[:2]
        return x, row

    for i in (1, 7, 0, 11, -5):
        plain, jitted = np.arange(36.0).reshape(12, 3), np.arange(36.0).reshape(12, 3)
        want = scale_row(plain, i)
        got = jitc.jit(scale_row)(jitted, i)
        np.testing.assert_array_equal(jitted, plain)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
