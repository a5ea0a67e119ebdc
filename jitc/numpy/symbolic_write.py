"""`x[index] = v` at positions that depend on a symbolic dimension (docs/dynamic-shapes.md):
`x[0] = 1`, `x[-1] = row`, `x[1:] += 1`, `x[::2] = 0`, `x[-2:] = tail` over a symbolic axis.

The write is a select over the whole array: each indexed axis contributes a mask of the
positions its int or slice names, computed from the call's extent with numpy's own clamping
of slice bounds (negative bounds count from the end, bounds past the end stop there, a slice
may be empty), so no size needs a constraint for the positions alone. The value is placed by
gathering it along each axis where it has more than one element; there it must have numpy's
slice length, which is the slice op's extent under the constraints reads of that slice record
(`x[1:] = y` needs `y` of `n-1` elements and `n >= 1`). An int index out of range is numpy's
IndexError; for a symbolic axis the call checks it as a constraint (`x[-1]` needs `n >= 1`),
so a call it does not fit never runs this code (jit then compiles that size exactly and numpy's
error comes from tracing it).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from jitc.ir import dtypes, ops, symbolic
from jitc.ir.opdef import IRTypeError
from jitc.ir.ops.rules import require_equal
from jitc.ir.symbolic import Dim, DimLike, is_static
from jitc.ir.types import TensorType
from jitc.numpy._core import lift
from jitc.numpy.indexing import apply_slice, expand, numpy_result_shape
from jitc.numpy.shapes import broadcast_to, concatenate, reshape
from jitc.numpy.ufuncs import compare, select
from jitc.tracing.errors import IndexingError, ShapeError, located
from jitc.tracing.state import emit, extent_value
from jitc.tracing.tracer import Tracer

Item = Any


def writable(items: tuple[Item, ...]) -> bool:
    """Whether this module writes at `items`: ints, slices with int or extent bounds and a
    constant step, None and Ellipsis (no arrays, masks or traced bounds)."""
    for item in items:
        if item is None or item is Ellipsis or _is_int(item):
            continue
        if not isinstance(item, slice):
            return False
        if not all(b is None or _is_int(b) or isinstance(b, Dim) for b in (item.start,
                                                                          item.stop)):
            return False
        if not (item.step is None or _is_int(item.step)):
            return False
    return True


def assign(x: Tracer, items: tuple[Item, ...], update: Any) -> Tracer:
    """The array `x` (with symbolic dimensions) after numpy's `x[items] = update`."""
    numpy_result_shape(x.shape, items, x.aval.short())  # numpy's checks of the static axes
    expanded = expand(items, x.ndim)
    axes = _axes(x, expanded)
    value = _placed_value(x, expanded, axes, update)
    if _one_row(x, axes):
        return _row_update(x, int(axes[0][1]), value)
    mask = None
    for axis, item in axes:
        n = x.shape[axis]
        if _whole(item, n):
            continue
        positions = emit(ops.IOTA, [], {"dimension": 0}, TensorType(dtypes.int64, (n,)))
        start, stop, step = _bounds(item, n, x, axis)
        inside = _inside(positions, start, stop, step)
        if value.shape[axis] != 1:
            value = _gather_along(value, axis, _ordinal(positions, start, step))
        spread = emit(ops.BROADCAST_IN_DIM, [inside], {"dims": [axis]},
                      TensorType(dtypes.bool_, x.shape))
        mask = spread if mask is None else np.logical_and(mask, spread)
    value = broadcast_to(value, x.shape)
    return value if mask is None else select(mask, value, x)


def _one_row(x: Tracer, axes: list[tuple[int, Item]]) -> bool:
    """Whether the write is one row of the symbolic first axis (`x[-1] = row`, `x[0] += v`),
    every other axis whole and static."""
    return (len(axes) == x.ndim and _is_int(axes[0][1]) and not is_static(x.shape[0])
            and all(is_static(x.shape[a]) and _whole(item, x.shape[a]) for a, item in axes[1:]))


def _row_update(x: Tracer, index: int, value: Tracer) -> Tracer:
    """x with row `index` (counted from the end when negative; `_axes` required the call's
    extent to hold it) replaced: one dynamic_update_slice, which the cpu backend stores in a
    written argument's buffer in place, instead of a select over every row."""
    position = lift(np.int64(index)) if index >= 0 else \
        np.add(lift(extent_value(x.shape[0]), np.int64), np.int64(index))
    block = broadcast_to(value, (1, *x.shape[1:]))
    zero = lift(np.int64(0))
    return emit(ops.DYNAMIC_UPDATE_SLICE, [x, block, position] + [zero] * (x.ndim - 1))


def _is_int(item: Item) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _axes(x: Tracer, expanded: list[Item]) -> list[tuple[int, Item]]:
    """(axis of x, item) for each item that indexes an axis (None adds one to the value only);
    an int on a symbolic axis requires the call's extent to hold it, as a read of it does."""
    axes = []
    axis = 0
    for item in expanded:
        if item is None:
            continue
        if _is_int(item) and not is_static(x.shape[axis]):
            _require_position(x, axis, int(item))
        axes.append((axis, item))
        axis += 1
    return axes


def _require_position(x: Tracer, axis: int, index: int) -> None:
    n = x.shape[axis]
    need = index + 1 if index >= 0 else -index
    why = f"writing at index {index} of axis {axis} of {x.aval.short()}"
    try:
        symbolic.require(symbolic.at_least(n, need), why)
    except symbolic.ConstraintError:
        raise IndexingError(located(f"index {index} is out of bounds for axis {axis} with "
                                    f"size {n} for every size ({why})")) from None


def _whole(item: Item, n: DimLike) -> bool:
    """Whether a slice takes the whole axis in order, for every extent."""
    if not isinstance(item, slice):
        return False
    if is_static(n) and all(b is None or _is_int(b) for b in (item.start, item.stop)):
        return item.indices(n) == (0, n, 1)
    return item.start in (None, 0) and item.stop is None and item.step in (None, 1)


# -- the value, shaped like x ------------------------------------------------------------------

def _placed_value(x: Tracer, expanded: list[Item], axes: list[tuple[int, Item]],
                  update: Any) -> Tracer:
    """The update in x's dtype, with x's rank: extent 1 where it broadcasts or an int
    indexes, else numpy's number of positions along that axis (equal to the value's)."""
    # A copy: the reshapes below must not become views of the user's array.
    value = lift(update, x.dtype).copy_tracer()
    target = _target(x, expanded)
    shape = value.shape
    while len(shape) > len(target) and shape[0] == 1:
        shape = shape[1:]
    if len(shape) > len(target):
        raise _mismatch(value, expanded, x)
    aligned = (1,) * (len(target) - len(shape)) + tuple(shape)
    per_axis: list[DimLike] = []
    slots = iter(zip(aligned, target))
    for item in expanded:
        if _is_int(item):
            per_axis.append(1)
            continue
        extent, (axis, slot) = next(slots)
        if extent == 1:  # a static 1 broadcasts whatever numpy's length is
            if item is not None:
                per_axis.append(1)
            continue
        if item is None:
            raise _mismatch(value, expanded, x)
        try:
            require_equal(extent, _length(x, axis, slot),
                          f"writing {list(value.shape)} into {_text(expanded)}")
        except IRTypeError:
            raise _mismatch(value, expanded, x) from None
        per_axis.append(extent)
    return reshape(reshape(value, tuple(shape)), tuple(per_axis))


def _target(x: Tracer, expanded: list[Item]) -> list[tuple[int | None, Item]]:
    """numpy's indexed shape as (axis of x, item) per dimension (None for a new axis)."""
    target: list[tuple[int | None, Item]] = []
    axis = 0
    for item in expanded:
        if item is None:
            target.append((None, None))
            continue
        if not _is_int(item):
            target.append((axis, item))
        axis += 1
    return target


def _length(x: Tracer, axis: int | None, item: Item) -> DimLike:
    """numpy's number of positions of `item` on `axis`: a static count, or the slice op's
    extent, which records what a read of the same slice needs (`n >= 1` for `x[1:]`)."""
    if axis is None:
        return 1
    n = x.shape[axis]
    if is_static(n) and all(b is None or _is_int(b) for b in (item.start, item.stop)):
        return len(range(*item.indices(n)))
    if _whole(item, n):
        return n
    probe = emit(ops.IOTA, [], {"dimension": 0}, TensorType(dtypes.int8, (n,)))
    return apply_slice(probe, 0, item).shape[0]  # dead code: its shape rule is what counts


def _text(expanded: list[Item]) -> str:
    """The index as the user wrote it (after the Ellipsis is expanded), for messages."""
    return "x[" + ", ".join(_item_text(item) for item in expanded) + "]"


def _item_text(item: Item) -> str:
    if not isinstance(item, slice):
        return str(item)
    parts = ["" if b is None else str(b) for b in (item.start, item.stop)]
    return ":".join(parts) + ("" if item.step is None else f":{item.step}")


def _mismatch(value: Tracer, expanded: list[Item], x: Tracer) -> ShapeError:
    return ShapeError(located(
        f"could not broadcast input array from shape {value.shape} into {_text(expanded)} of "
        f"{x.aval.short()}: numpy needs each of the value's extents to be 1 or the number of "
        "positions the index names there, for every size"))


# -- positions along one axis --------------------------------------------------------------------

def _int64(extent: DimLike) -> Tracer:
    return lift(np.int64(extent)) if is_static(extent) else lift(extent, np.int64)


def _bounds(item: Item, n: DimLike, x: Tracer, axis: int) -> tuple[Tracer, Tracer, int]:
    """(start, stop, step) of `item` on an axis of the call's extent `n`, clamped exactly as
    numpy's slice.indices(n) clamps them; an int `i` is the slice i:i+1 (from the end when
    negative; its range is the call's constraint, _axes)."""
    size = _int64(n)
    if _is_int(item):
        index = int(item)
        start = _int64(index) if index >= 0 else np.add(size, _int64(index))
        return start, np.add(start, _int64(1)), 1
    step = 1 if item.step is None else operator.index(item.step)
    if step == 0:
        raise ValueError(located("slice step cannot be zero"))
    if step > 0:
        low, high = _int64(0), size
        start = low if item.start is None else _clamp(_from_end(item.start, size), low, high)
        stop = high if item.stop is None else _clamp(_from_end(item.stop, size), low, high)
        return start, stop, step
    low, high = _int64(-1), np.subtract(size, _int64(1))
    start = high if item.start is None else _clamp(_from_end(item.start, size), low, high)
    stop = low if item.stop is None else _clamp(_from_end(item.stop, size), low, high)
    return start, stop, step


def _from_end(bound: int | Dim, size: Tracer) -> Tracer:
    value = _int64(bound)
    if _is_int(bound):
        return np.add(size, value) if int(bound) < 0 else value
    return select(compare(value, _int64(0), "lt"), np.add(size, value), value)


def _clamp(value: Tracer, low: Tracer, high: Tracer) -> Tracer:
    return np.minimum(np.maximum(value, low), high)


def _inside(positions: Tracer, start: Tracer, stop: Tracer, step: int) -> Tracer:
    """Which positions of the axis the slice start:stop:step names."""
    if step > 0:
        inside = np.logical_and(compare(positions, start, "ge"), compare(positions, stop, "lt"))
        offset = np.subtract(positions, start)
    else:
        inside = np.logical_and(compare(positions, start, "le"), compare(positions, stop, "gt"))
        offset = np.subtract(start, positions)
    if abs(step) == 1:
        return inside
    on_step = compare(np.remainder(offset, _int64(abs(step))), _int64(0), "eq")
    return np.logical_and(inside, on_step)


def _ordinal(positions: Tracer, start: Tracer, step: int) -> Tracer:
    """For each position the slice names, which element of the slice it is."""
    offset = np.subtract(positions, start) if step > 0 else np.subtract(start, positions)
    return offset if abs(step) == 1 else np.floor_divide(offset, _int64(abs(step)))


def _gather_along(value: Tracer, axis: int, ordinal: Tracer) -> Tracer:
    """value's elements along `axis` taken at `ordinal` (clamped into range by the gather:
    positions outside the slice are not selected). One element more, a zero slab, keeps the
    gathered axis non-empty for every size, so that an empty slice needs no constraint."""
    slab = list(value.shape)
    slab[axis] = 1
    padded = concatenate([value, broadcast_to(lift(np.zeros((), value.dtype)), tuple(slab))],
                         axis=axis)
    return emit(ops.GATHER, [padded, ordinal], {"axis": axis})
