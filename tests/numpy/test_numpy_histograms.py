"""bincount, histogram, searchsorted and digitize, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc

INTS = [np.int8, np.uint8, np.int32, np.int64]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS + [np.bool_])
def test_bincount_of_traced_values_with_minlength(dtype, backend):
    x = random((13,), dtype, low=0, high=6)
    w = random((13,), np.float32)
    w[3] = np.nan
    check_jit(lambda x, w: (np.bincount(x, minlength=7), np.bincount(x[::-2], minlength=9),
                            np.bincount(x, weights=w, minlength=8),
                            np.bincount(x[:0], minlength=2)), x, w, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bincount_of_constant_values_with_traced_weights(backend):
    def f(w, i):
        ids = np.array([4, 0, 1, 1, 4, 7])
        return (np.bincount(ids, w), np.bincount(ids, weights=i, minlength=10),
                np.bincount(np.array([4, 1, 4]), w[::2], minlength=2),
                np.bincount(np.array([3]), w[:1]),
                np.bincount(np.array([], np.int64), w[:0]))
    check_jit(f, random((6,), np.float64), random((6,), np.int32), backend=backend)


def test_bincount_errors():
    with pytest.raises(jitc.TraceError, match=r"Pass minlength=N"):
        jitc.jit(np.bincount)(np.arange(3))
    with pytest.raises(ValueError, match="too deep"):
        jitc.jit(lambda x: np.bincount(x, minlength=3))(np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match="same length"):
        jitc.jit(lambda x, w: np.bincount(x, w, minlength=3))(np.zeros(2, np.int64),
                                                              np.ones(3))
    with pytest.raises(ValueError, match="must not be negative"):
        jitc.jit(lambda x: np.bincount(x, minlength=-1))(np.zeros(2, np.int64))
    with pytest.raises(TypeError, match="safe"):
        jitc.jit(lambda x: np.bincount(x, minlength=3))(np.zeros(2))
    with pytest.raises(ValueError, match="negative"):
        jitc.jit(lambda w: np.bincount(np.array([1, -1]), w))(np.ones(2))


def _edge_heavy(shape, dtype, seed=0):
    """Random values, with many exactly on bin edges of range (-2, 2) and outside it, NaN."""
    x = random(shape, np.float64, seed=seed, low=-2.5, high=2.5)
    flat = x.reshape(-1)
    flat[::3] = np.linspace(-2, 2, 9)[np.arange(flat[::3].size) % 9]
    if np.dtype(dtype).kind == "f":
        flat[1::7] = np.nan
    return x.astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int64])
def test_histogram_with_bin_count_and_range(dtype, backend):
    x = _edge_heavy((5, 7), dtype)
    w = random((5, 7), np.float32, seed=1)
    check_jit(lambda x, w: (np.histogram(x, 8, range=(-2, 2)),
                            np.histogram(x[:, ::2], bins=3, range=(-1.5, 0.1)),
                            np.histogram(x, 4, range=(1, 1)),
                            np.histogram(x, 5, range=(-2, 2), weights=w),
                            np.histogram(x, 6, range=(-2, 2), density=True),
                            np.histogram(x[:0], 2, range=(0, 1))), x, w, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_histogram_with_explicit_edges(dtype, backend):
    x = _edge_heavy((40,), dtype, seed=2)
    w = random((40,), np.int32, seed=3)
    check_jit(lambda x, w: (np.histogram(x, [-2, -0.5, 0, 0, 1, 2]),
                            np.histogram(x, np.array([-1, 1])),
                            np.histogram(x, [-2.5, 1, 1], weights=w),
                            np.histogram(x[::3], [0.5, 1.5, 2.5], density=True),
                            np.histogram(x, [0.25, 2.0], weights=w.astype(np.float64))),
              x, w, backend=backend)


def test_histogram_refuses_what_tracing_cannot_check():
    x = np.arange(5.0)
    with pytest.raises(jitc.TraceError, match=r"Pass range=\(lo, hi\)"):
        jitc.jit(lambda x: np.histogram(x, 4))(x)
    with pytest.raises(jitc.TraceError, match="bins='auto'"):
        jitc.jit(lambda x: np.histogram(x, "auto", range=(0, 1)))(x)
    with pytest.raises(jitc.TraceError, match="traced bins"):
        jitc.jit(lambda x, e: np.histogram(x, e))(x, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="monotonically"):
        jitc.jit(lambda x: np.histogram(x, [0, 2, 1]))(x)
    with pytest.raises(ValueError, match="same shape"):
        jitc.jit(lambda x: np.histogram(x, 2, range=(0, 1), weights=x[:2]))(x)


SORTED = np.array([-np.inf, -1.0, 0.0, 0.0, 0.0, 2.5, 7.0, np.inf, np.nan, np.nan])
PROBES = np.array([[-np.inf, -2.0, -1.0, 0.0, -0.0, 1.0], [2.5, 3.0, 7.0, np.inf, np.nan, 9e9]])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_floats_with_numpys_nan_order(side, backend):
    check_jit(lambda a, v: [np.searchsorted(a[:n], v, side) for n in (0, 1, 2, 5, 8, 10)]
              + [np.searchsorted(a, v[:, ::-2], side=side), a.searchsorted(v[0, 2], side),
                 np.searchsorted(a, v[:0], side), np.searchsorted(a[::3], 1.5, side)],
              SORTED, PROBES, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS)
def test_searchsorted_ints(dtype, backend):
    a = np.sort(random((9,), dtype, low=-5, high=5))
    v = random((4, 3), dtype, seed=1, low=-6, high=6)
    check_jit(lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, "right"),
                            np.searchsorted(a, 2.5), np.searchsorted(a, 1000),
                            np.searchsorted(a, v.astype(np.float32) + 0.5)), a, v,
              backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_searchsorted_in_constant_arrays(backend):
    table = np.array([0.1, 0.2, 0.4], np.float32)
    shuffled = np.array([3.0, 1.0, 2.0])
    check_jit(lambda v: (np.searchsorted(np.array([1, 3, 3, 9]), v),
                         np.searchsorted(table, v, "right"),  # compared in float64, as numpy
                         np.searchsorted(shuffled, v, sorter=[1, 2, 0])),
              np.array([0.1, 0.2, 3.0, 4.0]), backend=backend)


def test_searchsorted_refuses_an_unsorted_constant():
    with pytest.raises(ValueError, match="not sorted"):
        jitc.jit(lambda v: np.searchsorted(np.array([3, 1, 2]), v))(np.ones(2))
    with pytest.raises(ValueError, match="side"):
        jitc.jit(lambda a: np.searchsorted(a, 1, side="middle"))(np.ones(2))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("right", [False, True])
def test_digitize(right, backend):
    x = np.array([-np.inf, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, np.nan, np.inf])
    check_jit(lambda x: (np.digitize(x, [0.0, 1.0, 2.0], right=right),
                         np.digitize(x, np.array([2.0, 1.0, 1.0, 0.0]), right),
                         np.digitize(x[::2], [np.nan], right), np.digitize(x, [], right),
                         np.digitize(x[1:3], [3, 2, np.nan], right),
                         np.digitize(x[1:7].astype(np.int32), [-1, 1, 2], right),
                         np.digitize(x[3], [0, 1], right)), x, backend=backend)


def test_digitize_errors():
    with pytest.raises(jitc.TraceError, match="traced bins"):
        jitc.jit(np.digitize)(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="monotonically"):
        jitc.jit(lambda x: np.digitize(x, [1, 3, 2]))(np.ones(2))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_histogram_counts_by_the_range_as_given(backend):
    # A float32 range end makes numpy compute the edges in float32, yet it keeps the values
    # up to the range end as given: those between the two land in the last bin.
    r = (np.float32(0.1), 0.9)
    edges = np.histogram(np.zeros(0), 13, range=r)[1]
    x = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf),
                        [0.9, np.nextafter(0.9, 1)]])
    check_jit(lambda x: (np.histogram(x, 13, range=r), np.histogram(x.astype(np.float32), 5,
                                                                   range=(0.1, 0.9))),
              x, backend=backend)
