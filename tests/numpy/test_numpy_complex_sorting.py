"""Sorting complex values against numpy: lexicographic by real, then imaginary part, with the
values that hold a nan after the others (re+nan*j, then nan+im*j, then nan+nan*j), stable,
on every backend; sort, argsort, partition, ndarray.sort, sort_complex and median. And the
extrema in that order (max, min, argmax, argmin, ptp), where the first value holding a nan
wins, as in numpy's maximum.reduce."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jitcheck import BACKENDS, check_jit

import jitc

_PARTS = [0.0, -0.0, 1.0, -1.0, 2.0, np.nan, np.inf, -np.inf]


def _complex_with_ties_and_nans(shape, dtype, seed=0):
    """Parts drawn from few values (many ties in either part), nan and ±inf among them."""
    rng = np.random.default_rng(seed)
    re, im = rng.choice(_PARTS, size=(2,) + shape)
    x = np.empty(shape, dtype)
    x.real, x.imag = re, im
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_sort_argsort_partition_of_complex_along_every_axis(dtype, backend):
    x = _complex_with_ties_and_nans((3, 9, 4), dtype)

    def f(x):
        return (np.sort(x, kind="stable"), np.sort(x, axis=1, kind="stable"),
                np.argsort(x, axis=0, kind="stable"), np.argsort(x, axis=None, kind="stable"),
                np.sort(x[:, :1], axis=1), np.argsort(x[0, ::-2], kind="stable"))
    check_jit(f, x, backend=backend)
    part, order = jitc.jit(lambda x: (np.partition(x, 4, axis=1),
                                      np.argpartition(x, 2, axis=1)), backend=backend)(x)
    np.testing.assert_array_equal(part[:, 4], np.partition(x, 4, axis=1)[:, 4])
    np.testing.assert_array_equal(order, np.argsort(x, axis=1, kind="stable"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sort_complex_and_median_of_complex(backend):
    x = _complex_with_ties_and_nans((4, 6), np.complex128, seed=1)
    finite = np.nan_to_num(x, nan=0.5, posinf=3.0, neginf=-3.0)

    def f(x, finite, small, reals):
        return (np.sort_complex(x), np.sort_complex(small), np.sort_complex(reals),
                np.median(x, axis=1), np.median(finite, axis=0), np.median(finite[:3], axis=0))
    with np.errstate(invalid="ignore"):  # inf - inf in the mean of two middle values
        # 0.0 and -0.0 sort as equal: which of the two numpy's partition puts in the middle
        # is its own choice, so the sign of a zero median is not compared.
        check_jit(f, x, finite, np.array([3, -1, 2], np.int8),
                  np.array([2.5, -1.0], np.float16), backend=backend, signed_zeros=False)


def test_ndarray_sort_of_complex_is_in_place():
    x = _complex_with_ties_and_nans((10,), np.complex64, seed=2)
    want = np.sort(x, kind="stable")
    got = x.copy()
    jitc.jit(lambda a: a.sort())(got)
    np.testing.assert_array_equal(got, want)


def test_two_sorts_of_one_type_one_reading_a_gather():
    """The rank of each element's rank: two sort kernels of the same shape and dtype, the
    second reading a gather (the cpu backend once shared their body without the scratch
    slot)."""
    x = np.array([3.0, 1.0, 2.0, 5.0, 1.0])
    f = jitc.jit(lambda x: np.argsort(x[np.argsort(x, kind="stable")] * -1, kind="stable"))
    np.testing.assert_array_equal(f(x), np.argsort(np.sort(x, kind="stable") * -1,
                                                   kind="stable"))


_ROW = 16
_VALUES = st.builds(complex, st.sampled_from(_PARTS), st.sampled_from(_PARTS))
_COMPILED: dict[tuple[object, object], jitc.Jitted] = {}


def _compiled(backend: str, dtype: type):
    key = (backend, dtype)
    if key not in _COMPILED:
        _COMPILED[key] = jitc.jit(lambda x: (np.sort(x, kind="stable"),
                                             np.argsort(x, kind="stable")), backend=backend)
    return _COMPILED[key]


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_VALUES, min_size=_ROW, max_size=_ROW),
       dtype=st.sampled_from([np.complex64, np.complex128]))
def test_random_complex_rows_match_numpy_stable(backend, values, dtype):
    """Rows of ties, zeros of both signs, infinities and nans in either part."""
    x = np.array(values, dtype)
    got_values, got_order = _compiled(backend, dtype)(x)
    np.testing.assert_array_equal(got_order, np.argsort(x, kind="stable"))
    want = np.sort(x, kind="stable")
    assert got_values.dtype == want.dtype
    np.testing.assert_array_equal(got_values, want)
    np.testing.assert_array_equal(np.signbit(got_values.real), np.signbit(want.real))
    np.testing.assert_array_equal(np.signbit(got_values.imag), np.signbit(want.imag))


def _same_values_and_zero_signs(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "c":
        for part in (np.real, np.imag):
            np.testing.assert_array_equal(np.signbit(part(got)), np.signbit(part(want)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_extrema_of_complex_along_every_axis(dtype, backend):
    x = _complex_with_ties_and_nans((4, 5, 3), dtype, seed=3)
    finite = np.nan_to_num(x, nan=0.5)

    def f(x, finite):
        return (np.max(x, axis=0), np.min(x, axis=2), np.argmax(x, axis=1), np.argmin(x),
                x.max(axis=(0, 2), keepdims=True), np.max(finite), np.min(finite, axis=1),
                np.argmax(finite, axis=0), np.argmin(finite[:, :, 0], axis=1),
                np.ptp(finite[..., 0], axis=0))
    with np.errstate(invalid="ignore"):  # inf - inf in ptp
        want = f(x, finite)
        got = jitc.jit(f, backend=backend)(x, finite)
    for g, w in zip(got, want, strict=True):
        _same_values_and_zero_signs(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_VALUES, min_size=_ROW, max_size=_ROW))
def test_random_complex_extrema_match_numpy(backend, values):
    x = np.array(values, np.complex128)
    key = ("extrema", backend)
    if key not in _COMPILED:
        _COMPILED[key] = jitc.jit(lambda x: (np.max(x), np.min(x), np.argmax(x), np.argmin(x)),
                                  backend=backend)
    for g, w in zip(_COMPILED[key](x), (np.max(x), np.min(x), np.argmax(x), np.argmin(x)),
                    strict=True):
        _same_values_and_zero_signs(g, w)
