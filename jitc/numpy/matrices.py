"""Diagonals and rotations: diagonal, trace, diag and rot90, from slices (a strided slice of
the flattened square picks a diagonal), reshapes, reverses and selects."""

from __future__ import annotations

import numpy as np

from jitc.ir import ops
from jitc.numpy._core import check_static_int, implements, lift, normalize_axis
from jitc.numpy.reductions import sum as sum_
from jitc.numpy.shapes import flip, moveaxis, reshape, slice_axis, transpose
from jitc.numpy.ufuncs import select
from jitc.tracing.errors import ShapeError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


@implements(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    x = lift(a)
    if x.ndim < 2:
        raise ShapeError(located(f"diag requires an array of at least two dimensions, got "
                                 f"{x.aval.short()}"))
    first, second = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    if first == second:
        raise ShapeError(located("axis1 and axis2 cannot be the same"))
    k = check_static_int(offset, "the diagonal offset")
    x = moveaxis(x, (first, second), (-2, -1))
    rows, cols = x.shape[-2], x.shape[-1]
    row0, col0 = (0, k) if k >= 0 else (-k, 0)
    length = max(0, min(rows - row0, cols - col0))
    row0, col0 = min(row0, rows), min(col0, cols)  # an offset past the matrix: empty
    square = slice_axis(slice_axis(x, x.ndim - 2, row0, row0 + length), x.ndim - 1, col0,
                        col0 + length)
    flat = reshape(square, x.shape[:-2] + (length * length,))
    # Elements 0, length + 1, 2 * (length + 1), ... of the flattened square are its diagonal.
    picked = slice_axis(flat, flat.ndim - 1, 0, length * length, length + 1) if length > 1 \
        else flat
    return picked.copy_tracer()


@implements(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return sum_(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype, out=out)


@implements(np.diag)
def diag(v, k=0):
    x = lift(v)
    k = check_static_int(k, "the diagonal offset k")
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ShapeError(located(f"Input must be 1- or 2-d, got {x.aval.short()}"))
    n = x.shape[0] + abs(k)
    # Row i holds x[i] (k >= 0) or x[i - |k|] (k < 0) on the diagonal k.
    padded = _pad_1d(x, 0 if k >= 0 else -k, k if k >= 0 else 0)
    mask = lift(np.eye(n, n, k, dtype=bool))
    return select(mask, reshape(padded, (n, 1)), lift(np.zeros((), x.dtype)))


def _pad_1d(x: Tracer, low: int, high: int) -> Tracer:
    if not (low or high):
        return x
    return emit(ops.PAD, [x, lift(np.zeros((), x.dtype))],
                {"low": [low], "high": [high], "interior": [0]})


@implements(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    x = lift(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ShapeError(located("len(axes) must be 2."))
    first, second = normalize_axis(axes[0], x.ndim), normalize_axis(axes[1], x.ndim)
    if first == second:
        raise ShapeError(located("Axes must be different."))
    k = check_static_int(k, "the number of rotations k") % 4
    if k == 0:
        return x.copy_tracer()
    if k == 2:
        return flip(flip(x, first), second)
    order = list(range(x.ndim))
    order[first], order[second] = order[second], order[first]
    if k == 1:
        return transpose(flip(x, second), order)
    return flip(transpose(x, order), second)
