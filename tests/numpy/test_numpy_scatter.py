"""Writes through indices (`x[index] = v`, `x[index] += v`, ufunc.at, np.put, np.place,
np.putmask) against numpy: integer arrays with duplicates, masks, traced indices, dtypes."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jitcheck import BACKENDS, check_jit, random

import jitc

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64, np.float16,
          np.float32, np.float64]

# (name, shape, index, value): numpy's `x[index] = value`, duplicates written last-wins.
WRITES = [
    ("duplicates last wins", (5,), [0, 0, 1, 0], np.array([1, 2, 3, 4])),
    ("negative and range", (5,), range(-1, 2), 9),
    ("2-d index array", (4, 3), np.array([[0, 3], [3, 1]]), np.arange(4).reshape(2, 2, 1)),
    ("rows broadcast", (4, 3), [2, 0, 2], np.arange(3)),
    ("two arrays", (4, 3), ([0, 1, 0], [2, 2, 2]), np.array([5, 6, 7])),
    ("array after slice", (4, 3), (slice(1, 3), [0, 0]), np.array([[1, 2], [3, 4]])),
    ("non-adjacent", (2, 3, 4), ([1, 0], slice(None), [3, 3]), np.arange(6).reshape(2, 3)),
    ("None and array", (2, 3), (None, [1, 1], 0), np.array([[4, 5]])),
    ("constant mask", (3, 4), np.arange(12).reshape(3, 4) % 3 == 0, 7),
    ("mask values", (3, 4), np.array([True, False, True]), np.arange(8).reshape(2, 4)),
    ("mask on axis 1", (3, 4), (slice(None), np.array([1, 0, 0, 1], bool)), np.arange(6)
     .reshape(3, 2)),
    ("size-0 index", (3, 4), [], 1), ("size-0 array", (0, 4), [], 1),
    ("size-1 axes", (1, 1, 3), (0, [0, 0], -1), np.array([8, 9])),
    ("Ellipsis and array", (2, 3, 4), (..., [0, -1]), 3),
    ("leading 1s in value", (4,), [1, 2], np.ones((1, 1, 2))),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_through_constant_indices(backend):
    """All cases in one function per backend: each case writes a fresh copy."""
    arrays = [random(shape, np.float32, seed=n) for n, (_, shape, _, _) in enumerate(WRITES)]

    def write_all(*xs):
        for x, (_, _, index, value) in zip(xs, WRITES):
            x[index] = value
        return xs
    check_jit(write_all, *arrays, backend=backend)


def _traced_form(index):
    """The index with its integer arrays taken out, to be passed as arguments."""
    items = index if isinstance(index, tuple) else (index,)
    arrays = [np.asarray(i) for i in items if isinstance(i, (list, range, np.ndarray))
              and np.asarray(i).dtype != np.bool_ and np.asarray(i).size]
    return items, arrays


TRACEABLE = [w for w in WRITES if _traced_form(w[2])[1]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_through_traced_indices(backend):
    """The same writes with the integer arrays passed as arguments (a max-reduction picks
    the last write per element at run time)."""
    arguments, layouts = [], []
    for n, (_, shape, index, value) in enumerate(TRACEABLE):
        items, arrays = _traced_form(index)
        arguments += [random(shape, np.float32, seed=n), *arrays]
        layouts.append((items, len(arrays), value))

    def write_all(*args):
        supply, outs = iter(args), []
        for items, count, value in layouts:
            x = next(supply)
            traced = [next(supply) for _ in range(count)]
            swap = iter(traced)
            index = tuple(next(swap) if isinstance(i, (list, range, np.ndarray))
                          and np.asarray(i).dtype != np.bool_ and np.asarray(i).size else i
                          for i in items)
            x[index] = value
            outs.append(x)
        return tuple(outs)
    check_jit(write_all, *arguments, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_write_dtypes(dtype, backend):
    def write(x, i, m):
        x[[2, 0, 2]] = x[1]
        x[i] = x[0, ::-1]
        x[m] = x[3, 0]
        x[1:3, 1] = True if dtype == np.bool_ else 3
        return x
    x = random((4, 3), dtype, seed=9)
    check_jit(write, x, np.array([3, -1, 1]), x[:, 0] > x[0, 0], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_augmented_assignment_does_not_accumulate_duplicates(backend):
    """numpy's `x[idx] += v` reads once and writes once per index (the last write wins);
    np.add.at accumulates."""
    def bump(x, idx, v):
        y = x.copy()
        y[idx] += v
        z = x.copy()
        np.add.at(z, idx, v)
        w = x.copy()
        w[[0, 0, 3]] -= 1.5
        return y, z, w
    check_jit(bump, random((5, 2)), np.array([0, 0, 3, 0, -1]), random((5, 2), seed=1),
              backend=backend)


# ufunc.at on constant and traced indices, float and integer dtypes.
AT_UFUNCS = [np.add, np.subtract, np.multiply, np.maximum, np.minimum]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.uint8])
def test_ufunc_at(dtype, backend):
    idx = np.array([3, 0, 3, 3, -1, 1])

    def scatter(x, i, v):
        outs = []
        for ufunc in AT_UFUNCS:
            a, b, c = x.copy(), x.copy(), x.copy()
            ufunc.at(a, idx, v)       # constant indices: applied in numpy's order
            ufunc.at(b, i, v)         # traced indices
            ufunc.at(c, (i, 1), v[:, 0])
            outs += [a, b, c]
        return tuple(outs)
    x = random((5, 2), dtype, seed=2, low=0, high=4)
    v = random((6, 2), dtype, seed=3, low=0, high=4)
    check_jit(scatter, x, idx, v, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_add_at_histogram(backend):
    """Many duplicates (more occurrence ranks than the unrolled constant path takes)."""
    samples = np.random.default_rng(0).integers(0, 6, 200)

    def histogram(counts, traced_samples):
        a, b = counts.copy(), counts.copy()
        np.add.at(a, samples, 1)
        np.add.at(b, traced_samples, np.ones(200, np.int64))
        return a, b
    check_jit(histogram, np.zeros(6, np.int64), samples, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_mask_assignment(backend):
    def clip_rows(y, row, col):
        a = y.copy()
        a[a < 0] = 0
        b = y.copy()
        b[b[:, 0] > 0] = row            # one row value for every selected row
        c = y.copy()
        c[:, c[0] > 0] = col[:, None]   # a column broadcast into every selected column
        d = y.copy()
        d[..., d[0] < 0] = np.float32(-1)
        e = y.copy()
        e[e[:, 0] > 1] = np.ones((1, 1))  # leading 1s are dropped, as in numpy
        return a, b, c, d, e
    check_jit(clip_rows, random((4, 5)), random((5,), seed=1), random((4,), seed=2),
              backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_put_place_putmask(backend):
    def fill(y, ids, m):
        a, b, c, d, e, f, g = (y.copy() for _ in range(7))
        np.put(a, [0, 7, -1, 0], [1.0, 2.0])               # values cycle; last write wins
        np.put(b, ids, 5.0)
        np.put(c, [9, -13], [3.0], mode="wrap")
        np.put(d, [20, -3], [4.0, 6.0], mode="clip")       # clip takes negatives to 0
        np.place(e, e > 0, [10.0, 20.0, 30.0])             # the selected elements cycle vals
        np.place(f, m, [7.0, 8.0])
        np.putmask(g, g < 0, np.arange(5, dtype=np.int8))  # values by position, cycled
        return a, b, c, d, e, f, g
    check_jit(fill, random((2, 4)), np.array([1, -2, 1]), random((2, 4), np.bool_, seed=4),
              backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_through_traced_slice_starts(backend):
    """A KV cache: cache[:, pos:pos + n] = k with pos traced; and += through one."""
    def update(cache, k, pos):
        cache[:, pos:pos + 2] = k
        cache[0, pos + 2, ::2] += 1.0
        return cache
    for pos in (0, 3, 1):
        check_jit(update, random((2, 6, 3)), random((2, 2, 3), seed=1), np.int64(pos),
                  backend=backend)


def test_traced_out_of_range_writes_are_dropped():
    """Deliberately not numpy (documented): a traced index is not known at trace time, so
    instead of IndexError an out-of-range write is dropped (reads clamp)."""
    def write(x, i):
        x[i] = 1.0
        return x
    got = jitc.jit(write)(np.zeros(5), np.array([7, -9, -1, 2]))
    np.testing.assert_array_equal(got, [0.0, 0.0, 1.0, 0.0, 1.0])


# -- errors: numpy's exception types -------------------------------------------------------

def _assign(index, value):
    def write(x):
        x[index] = value
        return x
    return write


@pytest.mark.parametrize("fn,kind,fragment", [
    (_assign([0, 1], np.ones(3)), ValueError, "shape mismatch: value array of shape (3,) could "
     "not be broadcast to indexing result of shape (2,)"),
    (_assign(slice(0, 2), np.ones(3)), ValueError, "could not broadcast input array from shape "
     "(3,) into shape (2,)"),
    (_assign(5, 1.0), IndexError, "index 5 is out of bounds for axis 0 with size 4"),
    (_assign(np.array([True, False]), 1.0), IndexError, "boolean index did not match"),
    (_assign([0.5], 1.0), IndexError, "only integers, slices"),
    (_assign(np.ones(4, bool), np.ones((1, 1))), TypeError, "requires a 0 or 1-dimensional "
     "input, input has 2 dimensions"),
])
def test_write_errors(fn, kind, fragment):
    x = np.zeros(4)
    with pytest.raises(kind):
        fn(x.copy())
    with pytest.raises(kind) as info:
        jitc.jit(fn)(x)
    assert fragment in str(info.value) and "test_numpy_scatter.py" in str(info.value)


def test_traced_mask_with_one_value_per_selected_element_is_refused():
    def write(x, m):
        x[m] = np.arange(2.0)
        return x
    with pytest.raises(jitc.TraceError, match=r"np.place\(x, mask, v\)"):
        jitc.jit(write)(np.zeros(3), np.array([True, False, True]))


def test_put_into_a_captured_array_writes_it_back():
    table = np.zeros(4)

    def write(v):
        np.put(table, [0, 2], v)
        return v
    jitc.jit(write)(np.full(2, 3.0))
    np.testing.assert_array_equal(table, [3.0, 0.0, 3.0, 0.0])


@pytest.mark.parametrize("function", [np.putmask, np.place])
def test_putmask_and_place_cast_array_values_safely(function):
    def write(x, v):
        function(x, x > 0, v)
        return x
    with pytest.raises(TypeError):
        write(np.ones(3, np.float32), np.ones(2))
    with pytest.raises(TypeError, match=re.escape("Cannot cast array data from dtype('float64') "
                                                  "to dtype('float32') according to the rule "
                                                  "'safe'")):
        jitc.jit(write)(np.ones(3, np.float32), np.ones(2))


def test_put_out_of_range_is_an_index_error():
    def write(x):
        np.put(x, [4], 1.0)
        return x
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        jitc.jit(write)(np.zeros((2, 2)))


# -- random writes, compared with numpy -----------------------------------------------------

@st.composite
def _write_cases(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)))
    items = []
    for n in shape[:draw(st.integers(1, len(shape)))]:
        if draw(st.integers(0, 5)) == 0:
            items.append(None)  # a new axis consumes none of the array's
        kind = draw(st.sampled_from(["int", "array", "slice", "mask"] if n else
                                    ["slice", "array"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "array":
            size = draw(st.integers(0, 4)) if n else 0
            items.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=size,
                                                max_size=size)) if n else [], np.int64))
        elif kind == "slice":
            items.append(slice(draw(st.integers(-5, 5)), draw(st.integers(-5, 5)),
                               draw(st.sampled_from([1, 2, -1, -2]))))
        else:
            items.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
    accumulate = draw(st.booleans())
    return shape, tuple(items), accumulate, draw(st.integers(0, 2 ** 16))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_write_cases())
def test_random_writes_match_numpy(case):
    shape, index, accumulate, seed = case
    x = random(shape, np.float64, seed=seed)
    try:
        target = np.zeros(shape)[index].shape
    except IndexError:  # then jitc raises numpy's IndexError too
        with pytest.raises(IndexError):
            jitc.jit(_assign(index, 1.0))(x)
        return
    value = random(target[len(target) // 2:], np.float64, seed=seed + 1)
    traced = [i for i in index if isinstance(i, np.ndarray) and i.dtype != np.bool_]

    def write(x, *arrays):
        swap = iter(arrays)
        at = tuple(next(swap) if isinstance(i, np.ndarray) and i.dtype != np.bool_ else i
                   for i in index)
        y = x.copy()
        if accumulate:
            np.add.at(y, at, value)
        else:
            y[at] = value
        z = x.copy()
        z[index] = value
        return y, z
    check_jit(write, x, *traced)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_into_a_copy_leave_the_original(backend):
    """x.copy(), np.copy, astype and flatten are new arrays: writing one must not change x."""
    def write_copies(x):
        a, b, c, d = x.copy(), np.copy(x), x.astype(x.dtype), x.flatten()
        a[0] = 1.0
        b[[1]] = 2.0
        c[x > 0] = 3.0
        d[-1] += 4.0
        return x, a, b, c, d
    check_jit(write_copies, random((3,)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_reach_the_callers_array(backend):
    """Every kind of indexing write on an argument changes the caller's array as numpy does:
    `=` through duplicates (last wins), `+=` through duplicates (once per element), a mask,
    np.add.at (once per occurrence), np.put, np.place and np.putmask, in sequence."""
    def write(a, idx, mask):
        a[idx] = 7.0
        a[idx[::-1]] += 1.0
        a[mask] = -1.0
        np.add.at(a, idx, 2.0)
        np.put(a, [0, 0, 3], [5.0, 6.0, 8.0])
        np.place(a, a > 7.5, [9.0, 10.0])
        np.putmask(a, a < -0.5, np.arange(6.0))
        return a.sum()

    def arguments():
        return (np.arange(6.0), np.array([1, 1, 2, 4, 1]),
                np.array([True, False, False, False, False, True]))
    want_args, got_args = arguments(), arguments()
    want = write(*want_args)
    got = jitc.jit(write, backend=backend)(*got_args)
    assert got == want
    np.testing.assert_array_equal(got_args[0], want_args[0])
