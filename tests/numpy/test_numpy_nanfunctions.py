"""The nan-ignoring reductions, isclose/allclose/array_equal, kron, cross, convolve/correlate,
ptp and average against numpy: nans (all-nan slices too), 0-size and 1-size shapes, dtypes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc

FLOATS = [np.float16, np.float32, np.float64]


def _with_nans(shape, dtype, seed=0):
    x = random(shape, dtype, seed=seed)
    if np.dtype(dtype).kind == "f" and x.size:
        flat = x.reshape(-1)
        flat[::5] = np.nan
        if x.ndim == 2 and x.shape[0] > 1:
            x[-1] = np.nan  # an all-nan row
    return x


def _quiet(fn):
    """numpy warns on all-nan slices and empty means; jitc (values unknown) does not."""
    def run(*args):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args)
    return run


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FLOATS + [np.int32])
def test_nan_reductions(dtype, backend):
    x = _with_nans((4, 6), dtype)

    def f(x):
        return (np.nansum(x), np.nansum(x, axis=1, keepdims=True), np.nanprod(x, axis=0),
                np.nanmax(x, axis=1), np.nanmin(x), np.nanmin(x[:, :0], axis=0),
                np.nanmax(x, axis=0, initial=-5), np.nanmean(x, axis=1),
                np.nanmean(x, axis=(0, 1)), np.nanvar(x, axis=1), np.nanvar(x, ddof=1),
                np.nanstd(x, axis=0, keepdims=True), np.nanmedian(x, axis=1),
                np.nanmedian(x, axis=0, keepdims=True), np.nanmedian(x[:1, :1]),
                np.nanquantile(x, 0.3, axis=1), np.nanpercentile(x, [0, 10, 50, 100], axis=0),
                np.nanquantile(x, np.array([0.25, 0.8]), axis=1, keepdims=True),
                np.nanpercentile(x, 62.5))
    check_jit(_quiet(f), x, backend=backend, rtol=5e-3 if dtype == np.float16 else None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nanargmax_and_nanargmin(backend):
    x = random((2, 5), np.float32)
    x[0, [1, 3]] = x[1, 4] = np.nan
    check_jit(lambda x: (np.nanargmax(x, axis=1), np.nanargmin(x), np.nanargmin(x, axis=0,
                                                                             keepdims=True),
                         np.nanargmax(np.where(np.isnan(x), 0, x).astype(np.int8))), x,
              backend=backend)


def test_nanargmax_of_an_all_nan_slice_is_minus_one():
    """numpy raises ValueError there; the compiled code cannot raise (docs/jit.md)."""
    x = np.array([[np.nan, np.nan], [1.0, np.nan]])
    np.testing.assert_array_equal(jitc.jit(lambda x: np.nanargmax(x, axis=1))(x), [-1, 0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_isclose_allclose_array_equal(backend):
    x = _with_nans((3, 4), np.float64)
    y = x + np.array([0, 1e-9, 1e-3, 0])
    i = random((3, 4), np.int32)

    def f(x, y, i):
        return (np.isclose(x, y), np.isclose(x, y, equal_nan=True, rtol=0, atol=1e-6),
                np.isclose(i, 2), np.isclose(x, np.inf), np.isclose(i, i.astype(np.float32)),
                np.allclose(x, y), np.allclose(x[:, :2], y[:, :2], equal_nan=True),
                np.allclose(i, i), np.array_equal(x, x), np.array_equal(x, x, equal_nan=True),
                np.array_equal(i, i.astype(np.float64)), np.array_equal(x, x[:2]),
                np.array_equiv(i, i[:1]), np.array_equiv(i[0], i[:1]))
    check_jit(f, x, y, i, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_kron_cross_convolve_correlate(dtype, backend):
    a, b = random((2, 3), dtype), random((3, 2), dtype, seed=1)
    u, v = random((4, 3), dtype, seed=2), random((3,), dtype, seed=3)
    s, t = random((7,), dtype, seed=4), random((3,), dtype, seed=5)

    def f(a, b, u, v, s, t):
        out = [np.kron(a, b), np.kron(a[0], b), np.kron(a, 3), np.kron(a[:, :0], b),
               np.cross(u, v), np.cross(u.T, v, axisa=0), np.cross(u, u[::-1], axisc=0)]
        for mode in ("full", "same", "valid"):
            out += [np.convolve(s, t, mode), np.convolve(t, s, mode),
                    np.correlate(s, t, mode), np.correlate(t, s, mode),
                    np.correlate(s[:1], t[:1], mode)]
        return out
    check_jit(f, a, b, u, v, s, t, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ptp_and_average(backend):
    x = random((3, 4, 2), np.float32)
    i = random((3, 4), np.int8, low=-100, high=100)
    w = random((4,), np.float32, low=0.5, high=2)

    def f(x, i, w):
        return (np.ptp(x), np.ptp(x, axis=1, keepdims=True), np.ptp(i, axis=0),
                np.average(x), np.average(x, axis=(0, 2), keepdims=True),
                np.average(x, axis=1, weights=w), np.average(i, axis=1, weights=w.astype(int),
                                                             returned=True),
                np.average(x, weights=x + 4, returned=True), np.average(i))
    check_jit(f, x, i, w, backend=backend)


@pytest.mark.parametrize("call, error, fragment", [
    (lambda x: np.convolve(x, x[:0]), ValueError, "cannot be empty"),
    (lambda x: np.correlate(x, x, mode="middle"), ValueError, "mode"),
    (lambda x: np.cross(x[:4], x[:4]), ValueError, "incompatible dimensions"),
    (lambda x: np.average(x.reshape(2, 3), weights=x[:3]), TypeError, "Axis must be"),
    (lambda x: np.average(x.reshape(2, 3), axis=1, weights=x[:2]), ValueError, "consistent"),
    (lambda x: np.nanmean(x, dtype=int), TypeError, "must be inexact"),
])
def test_errors(call, error, fragment):
    with pytest.raises(error, match=fragment):
        jitc.jit(call)(np.arange(6.0))
