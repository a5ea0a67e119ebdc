"""Statistics of traced data: cov, corrcoef and interp, each following numpy's own algorithm
(numpy's shape handling, normalisation and, for interp, its special cases at the sample
points) so the results are numpy's up to rounding order."""

from __future__ import annotations

import warnings

import numpy as np

from jitc.ir.symbolic import is_static
from jitc.numpy._core import implements, lift, normalize_axes, unsupported
from jitc.numpy.histograms import known, numpy_checks, sorted_position, stand_in
from jitc.numpy.linalg import dot
from jitc.numpy.matrices import diagonal
from jitc.numpy.reductions import mean
from jitc.numpy.shapes import clip, concatenate, reshape, squeeze, transpose
from jitc.numpy.ufuncs import select
from jitc.tracing.errors import TraceError, located
from jitc.tracing.tracer import Tracer


def _quiet_numpy_checks(fn, *args, **kwargs):
    """numpy's checks on stand-ins, without the warnings numpy gives for their zero data."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return numpy_checks(fn, *args, **kwargs)


def _at_least_2d_rows(x: Tracer) -> Tracer:
    return reshape(x, (1, -1)) if x.ndim < 2 else x


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    if fweights is not None or aweights is not None:
        raise unsupported("numpy.cov(..., fweights=, aweights=)",
                          "Weighted covariance: center with np.average and use np.dot.")
    _quiet_numpy_checks(np.cov, stand_in(m), stand_in(y), rowvar, bias, ddof, dtype=dtype)
    m = lift(m)
    if dtype is None:
        dtype = np.result_type(m.dtype, np.float64) if y is None else \
            np.result_type(m.dtype, lift(y).dtype, np.float64)
    x = _at_least_2d_rows(lift(m, dtype))
    if not rowvar and m.ndim != 1:
        x = transpose(x)
    if x.shape[0] == 0:
        return lift(np.array([]).reshape(0, 0)).copy_tracer()
    if y is not None:
        rows = _at_least_2d_rows(lift(lift(y), dtype))
        if not rowvar and rows.shape[0] != 1:
            rows = transpose(rows)
        x = concatenate([x, rows], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    # numpy warns "Degrees of freedom <= 0" on each call and divides by zero.
    fact = max(x.shape[1] - int(ddof), 0.0)
    centered = np.subtract(x, reshape(mean(x, axis=1), (-1, 1)))
    c = dot(centered, np.conj(transpose(centered)))  # numpy conjugates (complex values)
    with np.errstate(divide="ignore"):
        scale = float(np.true_divide(1, fact))
    return squeeze(np.multiply(c, scale))


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return np.true_divide(c, c)  # nan for nan, inf or 0; 1 otherwise (numpy's rule)
    stddev = np.sqrt(diagonal(c))
    c = np.true_divide(c, reshape(stddev, (-1, 1)))
    c = np.true_divide(c, reshape(stddev, (1, -1)))
    return clip(c, -1, 1)


# -- interp -----------------------------------------------------------------------------------

def _periodic(x: Tracer, xp: object, fp: Tracer, period: object) -> tuple:
    """numpy's reduction of a periodic interpolation to a plain one over one extended
    period; the sort of xp needs its values, so they must be constants."""
    xp = known(xp)
    if isinstance(xp, Tracer) or isinstance(period, Tracer):
        raise TraceError(located(
            "numpy.interp(..., period=) with traced sample points xp or period: numpy sorts "
            "xp % period, which tracing cannot. Pass constant xp and period, or sort the "
            "points yourself and call np.interp without period="))
    period = abs(period)
    x = np.remainder(x, period)
    xp = np.asarray(xp, np.float64) % period
    order = np.argsort(xp)
    xp = xp[order]
    fp = fp[order]
    xp = np.concatenate((xp[-1:] - period, xp, xp[0:1] + period))
    last, first = fp[fp.shape[0] - 1:], fp[:1]
    return x, lift(xp), concatenate([last, fp, first])


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    _quiet_numpy_checks(np.interp, stand_in(x), stand_in(known(xp)), stand_in(fp),
                        None if left is None else stand_in(left),
                        None if right is None else stand_in(right), stand_in(period))
    values, points, samples = (lift(lift(v), np.float64) for v in (x, known(xp), fp))
    if period is not None:
        values, points, samples = _periodic(values, known(xp), samples, period)
        left = right = None
    n = points.shape[0]
    first_y, last_y = samples[0], samples[n - 1]
    below = first_y if left is None else lift(lift(left), np.float64)
    above = last_y if right is None else lift(lift(right), np.float64)
    first_x, last_x = points[0], points[n - 1]
    if n == 1:
        inside = first_y
    else:
        inside = _between_points(values, points, samples)
    # numpy's order of cases: below the first point, above the last, then inside.
    result = select(np.less(values, first_x), below,
                    select(np.greater(values, last_x), above, inside))
    result = select(np.isnan(values), values, result) if n > 1 else result
    return result.copy_tracer() if result is values else result


def _between_points(x: Tracer, xp: Tracer, fp: Tracer) -> Tracer:
    """numpy's value for x within [xp[0], xp[-1]]: exact at sample points, otherwise the
    slope from the left point, or from the right one if that gives nan."""
    n = xp.shape[0]
    j = np.subtract(sorted_position(xp, x, "right"), 1)  # the last point <= x
    at = np.clip(j, 0, n - 2)
    x0, x1, y0, y1 = xp[at], xp[np.add(at, 1)], fp[at], fp[np.add(at, 1)]
    slope = np.true_divide(np.subtract(y1, y0), np.subtract(x1, x0))
    value = np.add(np.multiply(slope, np.subtract(x, x0)), y0)
    from_right = np.add(np.multiply(slope, np.subtract(x, x1)), y1)
    value = select(np.isnan(value), from_right, value)
    value = select(np.logical_and(np.isnan(value), np.equal(y0, y1)), y0, value)
    value = select(np.equal(x0, x), y0, value)
    return select(np.equal(j, n - 1), fp[n - 1], value)


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    """numpy's ptp: the maximum minus the minimum, in the array's dtype (integers wrap)."""
    if out is not None:
        raise unsupported("numpy.ptp(..., out=...)", "Use the returned value.")
    x = lift(a)
    return np.subtract(np.max(x, axis=axis, keepdims=keepdims),
                       np.min(x, axis=axis, keepdims=keepdims))


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=np._NoValue):
    """numpy's average, its weight checks and dtypes included. Weights that sum to zero
    make numpy raise ZeroDivisionError; the compiled code, which cannot raise, divides by the
    zero (inf or nan), as a plain division would."""
    x = lift(a)
    axes = None if axis is None else normalize_axes(axis, x.ndim)
    keep = {} if keepdims is np._NoValue else {"keepdims": keepdims}
    if weights is None:
        avg = mean(x, axis=axes, **keep)
        if is_static(avg.size) and avg.size == 0:
            raise ZeroDivisionError(located("numpy.average of an empty result: numpy divides "
                                            "the sizes, a.size / 0"))
        # numpy's Python float a.size / avg.size; with symbolic sizes, its value at the call
        # (which records avg.size >= 1, where numpy would raise).
        ratio = x.size / avg.size
        scale = lift(np.asarray(ratio, avg.dtype)) if is_static(x.size) else \
            lift(ratio, avg.dtype)
    else:
        w = lift(weights)
        if x.shape != w.shape:
            if axes is None:
                raise TypeError(located("Axis must be specified when shapes of a and weights "
                                        "differ."))
            if w.shape != tuple(x.shape[ax] for ax in axes):
                raise ValueError(located("Shape of weights must be consistent with shape of a "
                                         "along specified axis."))
            w = np.transpose(w, tuple(int(i) for i in np.argsort(axes)))
            w = reshape(w, tuple(s if ax in axes else 1 for ax, s in enumerate(x.shape)))
        if x.dtype.kind in "biu":
            dtype = np.result_type(x.dtype, w.dtype, "f8")
        else:
            dtype = np.result_type(x.dtype, w.dtype)
        scale = np.sum(w, axis=axes, dtype=dtype, **keep)
        products = np.multiply(lift(x, dtype), lift(w, dtype))
        avg = np.true_divide(np.sum(products, axis=axes, **keep), scale)
    if not returned:
        return avg
    if scale.shape != avg.shape:
        scale = np.broadcast_to(scale, avg.shape).copy()
    return avg, scale
