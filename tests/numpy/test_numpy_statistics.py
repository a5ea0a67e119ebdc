"""cov, corrcoef and interp, against numpy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc


def _quiet(fn):
    """numpy warns for zero degrees of freedom and 0/0; jitc computes the same values."""
    def run(*args):
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args)
    return run


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int64])
def test_cov(dtype, backend):
    m = random((3, 7), dtype, low=-5, high=5)
    y = random((7,), dtype, seed=1, low=-5, high=5)
    check_jit(_quiet(lambda m, y: (
        np.cov(m), np.cov(m, y), np.cov(m.T, rowvar=False), np.cov(m[:, ::2], bias=True),
        np.cov(y), np.cov(m, ddof=0), np.cov(m, y, ddof=3), np.cov(m.T, y, rowvar=False),
        np.cov(m[:, :1]), np.cov(m[:0]), np.cov(m[:, :0]), np.cov(y[:2], ddof=2),
        np.cov(m, dtype=np.float32), np.cov(y[3]))), m, y, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_corrcoef(dtype, backend):
    m = random((4, 9), dtype, low=-5, high=5)
    m[2] = m[2, 0]  # a constant row: nan correlations, as in numpy
    y = random((9,), dtype, seed=1, low=-5, high=5)
    check_jit(_quiet(lambda m, y: (
        np.corrcoef(m), np.corrcoef(m, y), np.corrcoef(m.T, rowvar=False), np.corrcoef(y),
        np.corrcoef(m[:, ::-3]), np.corrcoef(m[:0]), np.corrcoef(m, dtype=np.float32),
        np.corrcoef(m[2]))), m, y, backend=backend)


def test_cov_refuses_weights_and_checks_as_numpy():
    with pytest.raises(jitc.TraceError, match="fweights"):
        jitc.jit(lambda m: np.cov(m, fweights=[1, 2]))(np.ones((2, 2)))
    with pytest.raises(ValueError, match="more than 2 dimensions"):
        jitc.jit(np.cov)(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="ddof must be integer"):
        jitc.jit(lambda m: np.cov(m, ddof=1.5))(np.ones((2, 2)))


XP = np.array([-2.0, 0.0, 1.0, 1.0, 3.0, 4.0])
FP = np.array([1.0, -np.inf, 2.0, 5.0, np.inf, np.inf])
X = np.array([[-3.0, -2.0, -1.0, 0.0, 0.5, 1.0, 2.0], [3.0, 3.5, 4.0, 5.0, np.nan, -np.inf,
                                                       np.inf]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_interp_edge_cases(backend):
    finite = np.array([1.0, 0.0, 2.0, 5.0, -1.0, 7.0])
    check_jit(_quiet(lambda x, xp, fp, finite: (
        np.interp(x, xp, fp), np.interp(x, xp, finite), np.interp(x, xp, finite, -9.0, 9),
        np.interp(x, xp, finite, left=np.nan), np.interp(x, xp[:1], finite[:1], 4.0, 5.0),
        np.interp(x, xp[:2], finite[:2]), np.interp(x[:, ::3], xp[::-2][::-1], fp[::2]),
        np.interp(x[:0], xp, finite), np.interp(0.25, xp, finite), np.interp(x, [0, 1], [1, 1]),
        np.interp(x, xp, fp[::-1]))), X, XP, FP, finite, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.float32])
def test_interp_dtypes(dtype, backend):
    x = random((11,), dtype, low=-4, high=8)
    xp = np.sort(random((5,), dtype, seed=1, low=-3, high=6))
    fp = random((5,), dtype, seed=2, low=-3, high=6)
    check_jit(lambda x, xp, fp: (np.interp(x, xp, fp), np.interp(x, xp, fp, left=fp[1]),
                                 np.interp(x[3], xp, fp)), x, xp, fp, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_interp_periodic(backend):
    x = np.array([-180.0, -10, 0, 5, 90, 359, 360, 725, np.nan])
    fp = np.array([5.0, 10, 3, 4, 0])
    check_jit(_quiet(lambda x, fp: (np.interp(x, [190, -190, 350, -350, 0], fp, period=360),
                                    np.interp(x, np.array([1, 2, 3]), fp[:3], period=-2.5))),
              x, fp, backend=backend)


def test_interp_errors_as_numpy():
    with pytest.raises(ValueError, match="same length"):
        jitc.jit(np.interp)(np.ones(2), np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="empty"):
        jitc.jit(np.interp)(np.ones(2), np.ones(0), np.ones(0))
    with pytest.raises(ValueError, match="non-zero"):
        jitc.jit(lambda x: np.interp(x, [1, 2], [3, 4], period=0))(np.ones(2))
    with pytest.raises(jitc.TraceError, match="period"):
        jitc.jit(lambda x, xp: np.interp(x, xp, [3, 4], period=1))(np.ones(2), np.ones(2))
