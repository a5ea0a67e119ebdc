"""numpy indexing on tracers: basic indexing (ints, slices, None, Ellipsis) becomes slice,
reverse and reshape; integer-array indexing becomes one gather; `x[i] = v` becomes a pad and a
select."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jitc.ir import ops
from jitc.ir.types import TensorType
from jitc.numpy._core import implements, lift, normalize_axis, unsupported
from jitc.numpy.shapes import broadcast_to, reshape, slice_axis, transpose
from jitc.numpy.ufuncs import compare, select
from jitc.tracing.errors import ShapeError, TraceError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def _expand(index: Any, ndim: int) -> list[Any]:
    """The index as a list with Ellipsis replaced by full slices."""
    items = list(index) if isinstance(index, tuple) else [index]
    ellipses = [i for i, it in enumerate(items) if it is Ellipsis]
    if len(ellipses) > 1:
        raise ShapeError(located("an index can only have a single ellipsis ('...')"))
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis
                   and not (isinstance(it, np.ndarray) and it.dtype == np.bool_))
    consumed += sum(it.ndim for it in items
                    if isinstance(it, np.ndarray) and it.dtype == np.bool_)
    if consumed > ndim:
        raise ShapeError(located(f"too many indices: array is {ndim}-dimensional, but "
                                 f"{consumed} were indexed"))
    fill = [slice(None)] * (ndim - consumed)
    if ellipses:
        at = ellipses[0]
        return items[:at] + fill + items[at + 1:]
    return items + fill


def _is_array_index(item: Any) -> bool:
    if isinstance(item, Tracer):
        return True
    return isinstance(item, (np.ndarray, list)) and not isinstance(item, bool)


def _static_int(item: Any) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def getitem(x: Tracer, index: Any) -> Tracer:
    indexed = x.aval.short()
    items = _expand(index, x.ndim)
    # numpy: boolean masks are their nonzero() integer arrays; with any array index present,
    # integer scalars count as (0-d) array indices too.
    expanded: list[Any] = []
    for item in items:
        if isinstance(item, Tracer) and item.dtype == np.bool_:
            raise unsupported("indexing with a traced boolean mask (its result shape depends "
                              "on the data)", "Use np.where(mask, x, fill) instead.")
        if isinstance(item, list):
            item = np.asarray(item)
        if isinstance(item, np.ndarray) and item.dtype == np.bool_:
            expanded.extend(np.nonzero(item))
        elif isinstance(item, (np.ndarray, Tracer)) and item.dtype.kind not in "iu":
            raise TraceError(located(f"arrays used as indices must be of integer (or "
                                     f"boolean) type, got {item.dtype}"))
        else:
            expanded.append(item)
    advanced = any(_is_array_index(it) for it in expanded)
    # First pass: slices, static ints (when basic) and None.
    out_shape_items: list[Any] = []
    axis = 0
    for item in expanded:
        if item is None:
            out_shape_items.append(None)
            continue
        if isinstance(item, slice):
            x = _apply_slice(x, axis, item)
            out_shape_items.append("keep")
            axis += 1
        elif _static_int(item) and not advanced:
            n = x.shape[axis]
            i = int(item)
            if not -n <= i < n:
                raise _out_of_bounds(i, axis, n, indexed)
            x = slice_axis(x, axis, i % n, i % n + 1)
            out_shape_items.append("drop")
            axis += 1
        else:
            out_shape_items.append(("array", axis, item))
            axis += 1
    if advanced:
        if None in out_shape_items:
            raise unsupported("mixing None/np.newaxis with integer-array indices")
        return _advanced(x, out_shape_items, indexed)
    shape = []
    axis = 0
    for entry in out_shape_items:
        if entry is None:
            shape.append(1)
        elif entry == "keep":
            shape.append(x.shape[axis])
            axis += 1
        else:
            axis += 1
    return reshape(x, shape)


def _apply_slice(x: Tracer, axis: int, item: slice) -> Tracer:
    for part in (item.start, item.stop, item.step):
        if isinstance(part, Tracer):
            raise unsupported("slices with traced bounds (the result shape would depend on "
                              "data)", "Use jitc.lax.dynamic_slice with a static size.")
    start, stop, step = item.indices(x.shape[axis])
    if step > 0:
        return slice_axis(x, axis, start, max(start, stop), step)
    # A negative step: reverse, then take the mirrored positive-step slice.
    n = x.shape[axis]
    count = len(range(start, stop, step))
    reversed_x = emit(ops.REVERSE, [x], {"dims": [axis]})
    first = n - 1 - start
    return slice_axis(reversed_x, axis, first, first + (count - 1) * -step + 1 if count else
                      first, -step) if count else slice_axis(x, axis, 0, 0)


def _advanced(x: Tracer, entries: list[Any], indexed: str) -> Tracer:
    array_axes = [e[1] for e in entries if isinstance(e, tuple)]
    indices = []
    for e in entries:
        if isinstance(e, tuple):
            idx = lift(e[2])
            if idx.dtype.kind not in "iu":
                raise TraceError(located(f"index arrays must be integers, got {idx.dtype}"))
            indices.append(idx)
    try:
        index_shape = np.broadcast_shapes(*(i.shape for i in indices))
    except ValueError:
        shapes = " ".join(str(i.shape) for i in indices)
        raise ShapeError(located(f"shape mismatch: indexing arrays could not be broadcast "
                                 f"together with shapes {shapes}")) from None
    _check_static_bounds(x, array_axes, entries, indexed)
    # Move the indexed axes to the front and flatten them into one, so one gather does it.
    rest = [a for a in range(x.ndim) if a not in array_axes]
    moved = transpose(x, array_axes + rest)
    sizes = [x.shape[a] for a in array_axes]
    flat = reshape(moved, (math.prod(sizes),) + tuple(x.shape[a] for a in rest))
    linear = None
    stride = 1
    for idx, size in reversed(list(zip(indices, sizes))):
        idx = np.asarray(idx) if not isinstance(idx, Tracer) else idx
        idx = lift(idx, np.int64)
        wrapped = select(compare(idx, lift(np.int64(0)), "lt"),
                         np.add(idx, np.int64(size)), idx)
        term = wrapped if stride == 1 else np.multiply(wrapped, np.int64(stride))
        linear = term if linear is None else np.add(linear, term)
        stride *= size
    linear = broadcast_to(linear, index_shape)
    gathered = emit(ops.GATHER, [flat, linear], {"axis": 0})
    adjacent = array_axes == list(range(array_axes[0], array_axes[0] + len(array_axes)))
    if adjacent and array_axes[0] > 0:
        k, first = len(index_shape), array_axes[0]
        perm = list(range(k, k + first)) + list(range(k)) + list(range(k + first,
                                                                       gathered.ndim))
        gathered = transpose(gathered, perm)
    return gathered


def _out_of_bounds(index: int, axis: int, size: int, indexed: str) -> ShapeError:
    return ShapeError(located(f"index {index} is out of bounds for axis {axis} with size {size} "
                              f"(indexing {indexed})"))


def _check_static_bounds(x: Tracer, axes: list[int], entries: list[Any], indexed: str) -> None:
    arrays = [e[2] for e in entries if isinstance(e, tuple)]
    for axis, idx in zip(axes, arrays):
        if isinstance(idx, Tracer):
            continue
        values = np.asarray(idx)
        n = x.shape[axis]
        if values.size and (values.max() >= n or values.min() < -n):
            bad = values.max() if values.max() >= n else values.min()
            raise _out_of_bounds(int(bad), axis, n, indexed)


@implements(np.take)
def take(a, indices, axis=None, out=None, mode=None):
    if out is not None:
        raise unsupported("numpy.take(..., out=...)")
    x = lift(a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    ax = normalize_axis(axis, x.ndim)
    index = [slice(None)] * ax + [indices]
    return getitem(x, tuple(index))


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """numpy's take_along_axis as one integer-array index: `indices` on `axis`, and an arange
    broadcast along every other axis."""
    x = lift(arr)
    idx = indices if isinstance(indices, Tracer) else np.asarray(indices)  # static: bound-checked
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    ax = normalize_axis(axis, x.ndim)
    if idx.ndim != x.ndim:
        raise ShapeError(located(f"numpy.take_along_axis: indices {idx.aval.short()} must have "
                                 f"as many dimensions as the array {x.aval.short()}"))
    index: list[Any] = []
    for d in range(x.ndim):
        if d == ax:
            index.append(idx)
        else:
            shape = [1] * x.ndim
            shape[d] = x.shape[d]
            index.append(np.arange(x.shape[d]).reshape(shape))
    return getitem(x, tuple(index))


# -- x[index] = update ---------------------------------------------------------------------------

def setitem(x: Tracer, index: Any, update: Any) -> Tracer:
    """The array `x` with `update` written at a basic index (ints, slices, Ellipsis)."""
    items = _expand(index, x.ndim)
    low, high, interior, region = [], [], [], []
    for axis, item in enumerate(items):
        n = x.shape[axis]
        if _static_int(item):
            i = int(item)
            if not -n <= i < n:
                raise _out_of_bounds(i, axis, n, x.aval.short())
            item = slice(i % n, i % n + 1)
            region.append((1, False))
        elif isinstance(item, slice):
            region.append((None, True))
        else:
            raise unsupported("assignment through integer-array, mask or None indices",
                              "Build the result with np.where(mask, value, x) instead.")
        start, stop, step = item.indices(n)
        positions = range(start, stop, step)
        if step < 0:
            positions = positions[::-1]
        count = len(positions)
        lo = positions[0] if count else 0
        stride = abs(step)
        low.append(lo)
        interior.append(stride - 1 if count else 0)
        high.append(n - (lo + (count - 1) * stride + 1) if count else n)
        region[-1] = (count, region[-1][1], step < 0)
    block_shape = tuple(r[0] for r in region)
    value = lift(update, x.dtype)
    kept_shape = tuple(r[0] for r in region if r[1])
    try:
        value = broadcast_to(value, kept_shape)
    except ShapeError:
        raise ShapeError(located(f"could not broadcast the assigned value "
                                 f"{value.aval.short()} into the indexed shape "
                                 f"{kept_shape}")) from None
    value = reshape(value, block_shape)
    reversed_axes = [a for a, r in enumerate(region) if r[2]]
    if reversed_axes:
        value = emit(ops.REVERSE, [value], {"dims": reversed_axes})
    attrs = {"low": low, "high": high, "interior": interior}
    placed = emit(ops.PAD, [value, lift(np.zeros((), x.dtype))], attrs)
    true = broadcast_to(lift(np.True_), block_shape)
    mask = emit(ops.PAD, [true, lift(np.False_)], attrs)
    if placed.shape != x.shape:
        raise AssertionError("setitem placement mismatch")
    return emit(ops.SELECT, [mask, placed, x])


def _typed(x: Tracer, shape: tuple[int, ...]) -> TensorType:
    return TensorType(x.aval.dtype, shape)
