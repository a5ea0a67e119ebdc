"""sort, argsort, ndarray.sort, partition, argpartition, median, percentile and quantile
against numpy: shapes (0-size, 1-size, every axis), dtypes, ties and nan, every backend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jitcheck import BACKENDS, check_jit, random

import jitc

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64]


def _with_ties_and_nans(shape, dtype, seed=0):
    """Few distinct values (many ties), and for floats nan, ±inf and both zeros."""
    x = random(shape, np.float64, seed=seed, low=-3, high=3).round()
    flat = x.reshape(-1)
    if np.dtype(dtype).kind == "f":
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan])
        flat[::4] = specials[np.arange(flat[::4].size) % specials.size]
    elif np.dtype(dtype).kind == "u":
        flat[:] = np.abs(flat)
    return x.astype(dtype)


def _stable(fn):
    """numpy's stable kind: the order jitc gives for every kind."""
    return lambda *a, **k: fn(*a, kind="stable", **k)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_and_argsort_along_every_axis(dtype, backend):
    x = _with_ties_and_nans((3, 7, 4), dtype)
    check_jit(lambda x: (np.sort(x, kind="stable"), np.sort(x, axis=0, kind="S"),
                         np.argsort(x, axis=1, stable=True), np.argsort(x, axis=None,
                                                                          kind="mergesort"),
                         np.sort(x[:, :0], axis=1), np.argsort(x[:1], axis=0),
                         np.sort(x[::-1, 2, ::2], axis=-2, kind="stable")),
              x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_keeps_the_bits_of_each_value(backend):
    """-0.0 stays -0.0 where it lands, and -0.0 and 0.0 keep their order (stable)."""
    x = np.array([0.0, -0.0, 1.0, -0.0, 0.0, np.nan, -1.0])
    got = jitc.jit(lambda x: np.sort(x, kind="stable"), backend=backend)(x)
    want = np.sort(x, kind="stable")
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ndarray_sort_is_in_place(backend):
    """The methods sort the caller's array and return None, as numpy's (jitc's partition is
    the full sort, which numpy's may not be: b's first row has distinct values)."""
    def f(a, b):
        returned = a.sort()
        b[1:].sort(axis=0)
        partitioned = b[0].partition(1)
        return returned is None and partitioned is None, a * 1, b.argsort(axis=1)
    a, b = _with_ties_and_nans((9,), np.float32), _with_ties_and_nans((4, 3), np.int32, 1)
    b[0] = [5, -2, 1]
    want_a, want_b = a.copy(), b.copy()
    want = f(want_a, want_b)
    got = jitc.jit(f, backend=backend)(a, b)
    assert got[0] and want[0]
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(b, want_b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_partition_and_argpartition(backend):
    """numpy leaves the order around kth open: compare the kth elements and the partition
    property; jitc's answer is the full stable sort."""
    x = _with_ties_and_nans((5, 8), np.float64, 2)

    def f(x):
        return (np.partition(x, 3), np.argpartition(x, (1, -2), axis=0),
                np.partition(x, [0, 7], axis=1))
    part, order, both = jitc.jit(f, backend=backend)(x)
    np.testing.assert_array_equal(part[:, 3], np.partition(x, 3)[:, 3])
    np.testing.assert_array_equal(part, np.sort(x, kind="stable"))
    np.testing.assert_array_equal(order, np.argsort(x, axis=0, kind="stable"))
    np.testing.assert_array_equal(both[:, [0, 7]], np.partition(x, [0, 7])[:, [0, 7]])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.float32, np.float64])
def test_median_percentile_quantile(dtype, backend):
    x = random((4, 6, 5), dtype, seed=3)
    if np.dtype(dtype).kind == "f":
        x[1, 2, 3] = np.nan

    def f(x):
        return (np.median(x), np.median(x, axis=1), np.median(x[:, :5], axis=(0, 2),
                                                                keepdims=True),
                np.median(x[:1, :1, :1], axis=-1), np.percentile(x, 30, axis=2),
                np.percentile(x, [0, 12.5, 50, 100], axis=0, keepdims=True),
                np.quantile(x, np.array([0.25, 0.75]), axis=(1, 2)),
                np.quantile(x[:, 0], np.float32(0.4), axis=1), np.quantile(x, 1))
    check_jit(f, x, backend=backend)


def test_median_of_an_empty_axis_is_nan():
    x = np.zeros((3, 0))
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.median(x, axis=1)
    np.testing.assert_array_equal(jitc.jit(lambda x: np.median(x, axis=1))(x), want)


@pytest.mark.parametrize("call, error, fragment", [
    (lambda x: np.sort(x, kind="bogo"), ValueError, "sort kind"),
    (lambda x: np.argsort(x, kind="quick", stable=True), ValueError, "at the same time"),
    (lambda x: np.sort(x, order="f"), jitc.TraceError, "order"),
    (lambda x: np.partition(x, 5), ValueError, r"kth\(=5\) out of bounds \(5\)"),
    (lambda x: np.quantile(x, x[0]), jitc.TraceError, "traced q"),
    (lambda x: np.quantile(x, 1.5), ValueError, "range"),
    (lambda x: np.percentile(x, 50, method="nearest"), jitc.TraceError, "method='nearest'"),
    (lambda x: np.sort(x.sum()), np.exceptions.AxisError, "dimension 0"),
])
def test_errors_name_the_construct(call, error, fragment):
    with pytest.raises(error, match=fragment):
        jitc.jit(call)(np.arange(5.0))


@pytest.mark.parametrize("function", [np.percentile, np.nanpercentile, np.quantile,
                                      np.nanquantile])
@pytest.mark.parametrize("q", [150, -1, np.nan, [50, 101], 100.0000001])
def test_q_out_of_range_raises_numpys_value_error(function, q):
    """The message is numpy's, in the caller's units (percent or fraction)."""
    x = np.arange(5.0)
    with pytest.raises(ValueError) as numpys:
        function(x, q)
    with pytest.raises(ValueError) as ours:
        jitc.jit(lambda x: function(x, q))(x)
    assert str(numpys.value) in str(ours.value)


_FLOATS = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.nan, np.inf, -np.inf, 1e-300])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_FLOATS, min_size=0, max_size=40),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_random_rows_with_ties_and_nans_match_numpy_stable(values, dtype):
    """The compiled sort (cpu; one compilation per length and dtype) against numpy's stable
    sort on rows full of ties, zeros of both signs and nans."""
    x = np.array(values, dtype)
    got_values, got_order = _compiled_sort(x)
    np.testing.assert_array_equal(got_order, np.argsort(x, kind="stable"))
    want = np.sort(x, kind="stable")
    np.testing.assert_array_equal(got_values, want)
    np.testing.assert_array_equal(np.signbit(got_values), np.signbit(want))


_SORT = jitc.jit(lambda x: (np.sort(x, kind="stable"), np.argsort(x, kind="stable")))


def _compiled_sort(x):
    return _SORT(x)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), dtype=st.sampled_from([np.int8, np.uint8, np.int32, np.int64]))
def test_random_integer_rows_match_numpy_stable(data, dtype):
    info = np.iinfo(dtype)
    values = data.draw(st.lists(st.sampled_from([int(info.min), int(info.max), 0, 1, 2]),
                                max_size=30))
    x = np.array(values, dtype)
    got_values, got_order = _compiled_sort(x)
    np.testing.assert_array_equal(got_values, np.sort(x, kind="stable"))
    np.testing.assert_array_equal(got_order, np.argsort(x, kind="stable"))


def test_long_rows_use_every_radix_pass():
    """Rows long enough for the wide digits, with keys differing in every byte."""
    rng = np.random.default_rng(0)
    for x in (rng.standard_normal(40_000), rng.integers(-2**62, 2**62, 40_000),
              (rng.standard_normal(40_000) * 1e30).astype(np.float32)):
        got_values, got_order = _compiled_sort(x)
        np.testing.assert_array_equal(got_order, np.argsort(x, kind="stable"))
        np.testing.assert_array_equal(got_values, np.sort(x))


def test_rows_split_across_threads_keep_their_own_scratch():
    x = random((64, 3000), np.float32, seed=7)
    x[3, 5] = -0.0
    sort = jitc.jit(lambda x: (np.sort(x, axis=1), np.argsort(x, axis=1)), num_threads=2)
    values, order = sort(x)
    np.testing.assert_array_equal(values, np.sort(x, axis=1, kind="stable"))
    np.testing.assert_array_equal(np.signbit(values),
                                  np.signbit(np.sort(x, axis=1, kind="stable")))
    np.testing.assert_array_equal(order, np.argsort(x, axis=1, kind="stable"))


def test_cuda_sorts_short_rows_in_shared_memory_and_long_rows_by_rank():
    """The grid simulator runs both CUDA kernels: the bitonic network up to 2048 elements a
    row (padded to a power of two) and the rank kernel beyond."""
    x = _with_ties_and_nans((3, 2049), np.float32, seed=4)

    def f(x):
        return (np.sort(x[:, :2048], axis=1, kind="stable"), np.argsort(x[:, :1000], axis=1,
                                                                       kind="stable"),
                np.argsort(x[:, :33].T, axis=0, kind="stable"), np.sort(x, axis=1,
                                                                        kind="stable"))
    check_jit(f, x, backend="cuda-sim")


def test_scratch_of_many_short_rows_stays_small():
    """Scratch is a few rows' worth, not one per row: 100000 rows of 4 along axis 0."""
    x = random((4, 100_000), np.float32)
    compiled = jitc.jit(lambda x: np.argsort(x, axis=0)).lower(x).compile()
    assert compiled.executable.workspace_bytes <= 16 * 1024
    np.testing.assert_array_equal(jitc.jit(lambda x: np.argsort(x, axis=0))(x),
                                  np.argsort(x, axis=0, kind="stable"))
