"""Evenly spaced values and coordinate grids: linspace, logspace, geomspace and meshgrid, with
traced ends (the number of values is static, or for linspace a symbolic extent). Each follows
numpy's own algorithm step by step, so the rounding is numpy's."""

from __future__ import annotations

import math
import operator

import numpy as np

from jitc.ir import symbolic
from jitc.ir.ops.rules import broadcast_shapes
from jitc.ir.symbolic import Dim, DimLike, is_static
from jitc.numpy._core import convert, implements, ir_dtype, lift, result_type
from jitc.numpy.creation import arange
from jitc.numpy.reductions import any as any_
from jitc.numpy.shapes import (
    broadcast_arrays,
    broadcast_to,
    concatenate,
    expand_dims,
    moveaxis,
    reshape,
    slice_axis,
)
from jitc.numpy.ufuncs import select
from jitc.tracing.errors import ShapeError, located
from jitc.tracing.tracer import Tracer


def _count(num: object) -> DimLike:
    if isinstance(num, Dim):
        return num  # the call's (linspace records the constraint it needs)
    if isinstance(num, Tracer):
        from jitc.numpy._core import check_static_int
        return check_static_int(num, "the number of samples num")
    count = operator.index(num)
    if count < 0:
        raise ShapeError(located(f"Number of samples, {count}, must be non-negative."))
    return count


def _replace_end(y: Tracer, value: Tracer, last: bool) -> Tracer:
    """y with its first (or last) row along axis 0 replaced by `value`."""
    n = y.shape[0]
    row = reshape(broadcast_to(value, y.shape[1:]), (1,) + y.shape[1:])
    if last:
        return concatenate([slice_axis(y, 0, 0, n - 1), row], axis=0)
    return concatenate([row, slice_axis(y, 0, 1, n)], axis=0)


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    num = _count(num)
    div = num - 1 if endpoint else num
    if not is_static(num):
        # A symbolic number of samples: numpy's branch for a positive divisor, which the
        # call must then have (1 sample, or 0, compiles exactly).
        try:
            symbolic.require(symbolic.at_least(div, 1), "numpy.linspace with a symbolic num")
        except symbolic.ConstraintError as exc:
            raise ShapeError(located(str(exc))) from None
    dt = result_type(start, stop)
    if dt.kind != "f":
        dt = np.dtype(np.float64)
    start_, stop_ = lift(start), lift(stop)
    delta = np.subtract(lift(stop_, dt), lift(start_, dt))
    y = reshape(convert(lift(arange(num)), dt), (num,) + (1,) * delta.ndim)
    if not is_static(div) or div > 0:
        step = np.true_divide(delta, div)
        zero_step = np.equal(step, 0)
        if delta.ndim:  # numpy asks whether any step is zero, not each one
            zero_step = any_(zero_step)
        spread = np.true_divide(y, div)
        y = select(broadcast_to(zero_step, broadcast_shapes([y.shape, delta.shape])),
                   np.multiply(spread, delta), np.multiply(y, step))
    else:
        step = math.nan
        y = np.multiply(y, delta)
    y = convert(np.add(y, start_), dt)
    if endpoint and (not is_static(num) or num > 1):
        y = _replace_end(y, lift(stop_, dt), last=True)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtype is not None:
        if ir_dtype(dtype).numpy.kind in "iu":
            y = np.floor(y)
        y = convert(y, ir_dtype(dtype).numpy)
    y = y.copy_tracer() if y is start_ or y is stop_ else y
    return (y, step) if retstep else y


@implements(np.logspace)
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    if not isinstance(base, (float, int)) and np.ndim(base):
        ndmax = len(np.broadcast_shapes(np.shape(start), np.shape(stop), np.shape(base)))
        start, stop, base = (reshape(lift(v), (1,) * (ndmax - np.ndim(v)) + np.shape(v))
                             for v in (start, stop, base))
        base = expand_dims(base, axis)
    y = linspace(start, stop, num=num, endpoint=endpoint, axis=axis)
    result = np.power(base, y)
    return result if dtype is None else convert(result, ir_dtype(dtype).numpy)


@implements(np.geomspace)
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """numpy's geomspace. numpy raises when an end is zero; a traced zero cannot be seen while
    tracing and gives nan (docs/jit.md)."""
    num = _count(num)
    for end in (start, stop):
        if not isinstance(end, Tracer) and np.any(np.asarray(end) == 0):
            raise ShapeError(located("Geometric sequence cannot include zero"))
    dt = result_type(start, stop, float(num), np.zeros((), dtype))
    start_, stop_ = lift(start, dt), lift(stop, dt)
    out_sign = np.sign(start_)
    start_ = np.true_divide(start_, out_sign)
    stop_ = np.true_divide(stop_, out_sign)
    result = logspace(np.log10(start_), np.log10(stop_), num=num, endpoint=endpoint,
                      base=10.0, dtype=dt)
    if num > 0:
        result = _replace_end(result, start_, last=False)
        if num > 1 and endpoint:
            result = _replace_end(result, stop_, last=True)
    result = np.multiply(result, out_sign)
    if axis != 0:
        result = moveaxis(result, 0, axis)
    return convert(result, ir_dtype(dtype if dtype is not None else dt).numpy)


@implements(np.meshgrid)
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ShapeError(located("Valid values for `indexing` are 'xy' and 'ij'."))
    ndim = len(xi)
    ones = (1,) * ndim
    output = [reshape(lift(x), ones[:i] + (-1,) + ones[i + 1:]) for i, x in enumerate(xi)]
    if indexing == "xy" and ndim > 1:
        output[0] = reshape(output[0], (1, -1) + ones[2:])
        output[1] = reshape(output[1], (-1, 1) + ones[2:])
    if not sparse:
        output = list(broadcast_arrays(*output))
    return tuple(x.copy_tracer() for x in output)

