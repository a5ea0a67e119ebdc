"""numpy's nan-ignoring reductions on traced arrays: nansum, nanprod, nanmax, nanmin,
nanargmax, nanargmin, nanmean, nanvar, nanstd, nanmedian, nanquantile, nanpercentile, and the
nan-ignoring scans nancumsum and nancumprod.

Each follows numpy's own recipe (numpy/lib/_nanfunctions_impl.py): the nans are replaced by
the reduction's identity and counted, so dtypes and the all-nan cases are numpy's. Arrays that
cannot hold nan go straight to the plain reduction, as in numpy. numpy's warnings ("Mean of
empty slice", "All-NaN slice encountered") concern values known only when the compiled code
runs and are not given.
"""

from __future__ import annotations

import builtins

import numpy as np

from jitc.ir.symbolic import is_static
from jitc.numpy._core import (
    convert,
    implements,
    lift,
    normalize_axes,
    refuse_complex_order,
    refuse_complex_quantile,
    unsupported,
)
from jitc.numpy.indexing import take_along_axis
from jitc.numpy.reductions import argmax, argmin, max, mean, min, prod, std, sum, var
from jitc.numpy.shapes import expand_dims, squeeze, stack
from jitc.numpy.sorting import (
    median,
    quantile,
    quantile_arguments,
    reduced_last,
    sort_along,
    with_kept_dims,
)
from jitc.numpy.ufunc_methods import cumprod, cumsum
from jitc.numpy.ufuncs import select
from jitc.tracing.errors import located
from jitc.tracing.tracer import Tracer


def _nan_mask(x: Tracer) -> Tracer | None:
    return np.isnan(x) if x.dtype.kind == "f" else None


def _replaced(x: Tracer, mask: Tracer, value: float) -> Tracer:
    return select(mask, lift(value, x.dtype), x)


def _only_true_where(name: str, where: object, out: object = None) -> None:
    if out is not None:
        raise unsupported(f"numpy.{name}(..., out=...)", "Use the returned value.")
    if where is not True:
        raise unsupported(f"numpy.{name}(..., where=...)",
                          "Mask the input with np.where before reducing.")


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    _only_true_where("nansum", where, out)
    x = lift(a)
    mask = _nan_mask(x)
    x = x if mask is None else _replaced(x, mask, 0)
    return sum(x, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial)


@implements(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    _only_true_where("nanprod", where, out)
    x = lift(a)
    mask = _nan_mask(x)
    x = x if mask is None else _replaced(x, mask, 1)
    return prod(x, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial)


@implements(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    x = lift(a)
    mask = _nan_mask(x)
    return cumsum(x if mask is None else _replaced(x, mask, 0), axis=axis, dtype=dtype, out=out)


@implements(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    x = lift(a)
    mask = _nan_mask(x)
    return cumprod(x if mask is None else _replaced(x, mask, 1), axis=axis, dtype=dtype,
                   out=out)


def _nan_extremum(largest: bool, a, axis, keepdims, initial) -> Tracer:
    x = lift(a)
    refuse_complex_order(x, "nanmax" if largest else "nanmin")
    reducer = max if largest else min
    mask = _nan_mask(x)
    if mask is None:
        return reducer(x, axis=axis, keepdims=keepdims, initial=initial)
    # numpy's fmax/fmin reduction: nans are skipped, an all-nan slice gives nan
    result = reducer(_replaced(x, mask, -np.inf if largest else np.inf), axis=axis,
                     keepdims=keepdims, initial=initial)
    if initial is not None:
        return result
    all_nan = np.all(mask, axis=axis, keepdims=keepdims)
    return select(all_nan, lift(np.nan, result.dtype), result)


@implements(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    _only_true_where("nanmax", where, out)
    return _nan_extremum(True, a, axis, keepdims, initial)


@implements(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    _only_true_where("nanmin", where, out)
    return _nan_extremum(False, a, axis, keepdims, initial)


def _nan_arg(largest: bool, a, axis, out, keepdims) -> Tracer:
    """numpy's nanargmax: nans replaced by -inf (nanargmin: inf). numpy raises ValueError on
    an all-nan slice; the compiled code cannot raise, and gives -1 there instead."""
    x = lift(a)
    refuse_complex_order(x, "nanargmax" if largest else "nanargmin")
    mask = _nan_mask(x)
    arg = argmax if largest else argmin
    if mask is None:
        return arg(x, axis=axis, out=out, keepdims=keepdims)
    result = arg(_replaced(x, mask, -np.inf if largest else np.inf), axis=axis, out=out,
                 keepdims=keepdims)
    all_nan = np.all(mask, axis=axis, keepdims=keepdims)
    return select(all_nan, lift(-1, result.dtype), result)


@implements(np.nanargmax)
def nanargmax(a, axis=None, out=None, *, keepdims=False):
    return _nan_arg(True, a, axis, out, keepdims)


@implements(np.nanargmin)
def nanargmin(a, axis=None, out=None, *, keepdims=False):
    return _nan_arg(False, a, axis, out, keepdims)


def _divide_by_count(total: Tracer, count: Tracer) -> Tracer:
    """numpy's `_divide_by_count`: the quotient kept in the total's dtype."""
    return convert(np.true_divide(total, count), total.dtype)


def _check_inexact(name: str, dtype: object) -> None:
    if dtype is not None and not np.issubdtype(np.dtype(dtype), np.inexact):
        raise TypeError(located(f"numpy.{name}: If a is inexact, then dtype must be inexact"))


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    _only_true_where("nanmean", where, out)
    x = lift(a)
    mask = _nan_mask(x)
    if mask is None:
        return mean(x, axis=axis, dtype=dtype, keepdims=keepdims)
    _check_inexact("nanmean", dtype)
    count = sum(np.logical_not(mask), axis=axis, dtype=np.int64, keepdims=keepdims)
    total = sum(_replaced(x, mask, 0), axis=axis, dtype=dtype, keepdims=keepdims)
    return _divide_by_count(total, count)


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
           mean=None, correction=None):
    _only_true_where("nanvar", where, out)
    if mean is not None:
        raise unsupported("numpy.nanvar(..., mean=...)", "Let nanvar compute the mean.")
    x = lift(a)
    mask = _nan_mask(x)
    if mask is None:
        return var(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                   correction=correction)
    _check_inexact("nanvar", dtype)
    if correction is not None:
        if ddof != 0:
            raise ValueError(located("ddof and correction can't be provided simultaneously."))
        ddof = correction
    arr = _replaced(x, mask, 0)
    count = sum(np.logical_not(mask), axis=axis, dtype=np.int64, keepdims=True)
    average = _divide_by_count(sum(arr, axis=axis, dtype=dtype, keepdims=True), count)
    centered = convert(np.subtract(arr, average), arr.dtype)  # numpy writes into arr
    centered = _replaced(centered, mask, 0)
    squares = np.multiply(centered, centered)
    total = sum(squares, axis=axis, dtype=dtype, keepdims=keepdims)
    if not keepdims:
        count = squeeze(count, normalize_axes(axis, x.ndim)) if x.ndim else count
    dof = np.subtract(count, ddof)
    result = _divide_by_count(total, dof)
    return select(np.less_equal(dof, 0), lift(np.nan, result.dtype), result)


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
           mean=None, correction=None):
    x = lift(a)
    if _nan_mask(x) is None:
        _only_true_where("nanstd", where, out)
        return std(x, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                   correction=correction)
    v = nanvar(x, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
               correction=correction)
    return np.sqrt(v)


@implements(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median of each slice's numbers: after the sort the k numbers come first (nan
    sorts last), so the middle ones are at the run-time positions (k - 1) // 2 and k // 2."""
    if out is not None:
        raise unsupported("numpy.nanmedian(..., out=...)", "Use the returned value.")
    x = lift(a)
    refuse_complex_order(x, "nanmedian")
    if _nan_mask(x) is None or x.size == 0:
        return median(x, axis=axis, keepdims=keepdims)
    rows, keep_shape = reduced_last(x, axis)
    s = sort_along(rows, rows.ndim - 1)
    count = sum(np.logical_not(np.isnan(rows)), axis=-1, dtype=np.int64)
    low_at = np.maximum(np.floor_divide(np.subtract(count, 1), 2), 0)
    high_at = np.minimum(np.floor_divide(count, 2), rows.shape[-1] - 1)

    def at(position: Tracer) -> Tracer:
        return squeeze(take_along_axis(s, expand_dims(position, -1), axis=-1), -1)
    low, high = at(low_at), at(high_at)
    wide = np.float32 if x.dtype == np.float16 else x.dtype
    middle = np.true_divide(np.add(convert(low, wide), convert(high, wide)),
                            np.asarray(2, wide))
    odd = np.equal(np.remainder(count, 2), 1)
    result = select(odd, low, convert(middle, x.dtype))
    result = select(np.equal(count, 0), lift(np.nan, x.dtype), result)
    return with_kept_dims(result, keep_shape, (), keepdims)


def _nan_quantile(name: str, a, q, weak: bool, axis, method: str, keepdims: bool) -> Tracer:
    """numpy's `_nanquantile_1d` on every slice at once: the linear quantile of the slice's k
    numbers, which the sort puts first, so the positions (k - 1) * q are known at run time
    and read with a gather; the interpolation weight is computed as numpy does (a Python
    float for a scalar q: then it rounds to the array's float dtype)."""
    if method != "linear":
        raise unsupported(f"numpy.{name}(..., method={method!r})",
                          "jitc computes the default method='linear'.")
    x = lift(a)
    refuse_complex_quantile(x, name)
    if _nan_mask(x) is None:
        return quantile(x, q, axis=axis, keepdims=keepdims)
    if q.ndim > 1:
        raise ValueError(located("q must be a scalar or 1d"))
    rows, keep_shape = reduced_last(x, axis)
    s = sort_along(rows, rows.ndim - 1)
    last = rows.shape[-1] - 1
    count = sum(np.logical_not(np.isnan(rows)), axis=-1, dtype=np.int64)
    top = np.subtract(count, 1)

    # (`max` here is numpy's, of this module: the bound takes Python's, or the call's.)
    upper = builtins.max(last, 0) if is_static(last) else np.maximum(lift(last), 0)

    def at(position: Tracer) -> Tracer:
        position = np.clip(position, 0, upper)
        return squeeze(take_along_axis(s, expand_dims(position, -1), axis=-1), -1)

    def one(value: float) -> Tracer:
        virtual = np.multiply(convert(top, np.float64), np.asarray(value, q.dtype))
        floor = convert(np.floor(virtual), np.int64)
        above = np.greater_equal(virtual, convert(top, np.float64))
        previous = select(above, top, floor)
        following = select(above, top, np.add(floor, 1))
        gamma = np.subtract(virtual, convert(select(above, lift(-1), floor), np.float64))
        low, high = at(previous), at(following)
        weight = convert(gamma, x.dtype) if weak else gamma
        rest = np.subtract(1.0, gamma)
        rest = convert(rest, x.dtype) if weak else rest
        diff = np.subtract(high, low)
        lerp = select(np.greater_equal(gamma, 0.5), np.subtract(high, np.multiply(diff, rest)),
                      np.add(low, np.multiply(diff, weight)))
        return select(np.equal(count, 0), lift(np.nan, lerp.dtype), lerp)
    results = [one(float(v)) for v in q.reshape(-1).tolist()]
    result = results[0] if q.ndim == 0 else stack(results)
    return with_kept_dims(result, keep_shape, q.shape, keepdims)


@implements(np.nanquantile)
def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    qs, weak = quantile_arguments("nanquantile", q, out, weights, interpolation)
    return _nan_quantile("nanquantile", a, qs, weak, axis, method, keepdims)


@implements(np.nanpercentile)
def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    qs, weak = quantile_arguments("nanpercentile", q, out, weights, interpolation,
                                  percent=True)
    return _nan_quantile("nanpercentile", a, qs, weak, axis, method, keepdims)
