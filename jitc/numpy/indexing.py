"""numpy indexing on tracers: reading `x[index]`.

numpy itself checks every index first, on a stand-in array of the indexed shape with zero
strides: its IndexError messages and its result shape are the contract, so they come from
numpy. Then basic items (ints, slices, None, Ellipsis) become slice, reverse and reshape ops;
integer arrays and constant boolean masks become one gather; a slice with traced bounds
`x[t:t + L]` becomes a dynamic_slice. Writes (`x[index] = v`) are in jitc.numpy.scatter.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from jitc.ir import ops
from jitc.ir.ops.rules import broadcast_shapes as broadcast_extents
from jitc.ir.symbolic import Dim, DimLike, is_static
from jitc.numpy import symbolic_index
from jitc.numpy._core import implements, lift, normalize_axis, tracers_in, unsupported
from jitc.numpy.affine import static_difference
from jitc.numpy.shapes import (
    broadcast_to,
    concatenate,
    expand_dims,
    reshape,
    slice_axis,
    stack,
    transpose,
)
from jitc.numpy.ufuncs import compare, select
from jitc.tracing.errors import IndexingError, ShapeError, TraceError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer

Item = Any


# -- preparing and checking an index ---------------------------------------------------------

def prepare(index: Any, indexed: str = "") -> tuple[Item, ...]:
    """The index as a tuple of items; sequences that hold traced values become tracers.
    `indexed`: the indexed array's type, for messages."""
    items = index if isinstance(index, tuple) else (index,)
    prepared = []
    for item in items:
        if isinstance(item, (list, tuple)) and tracers_in(item):
            item = stack(list(item))
        if isinstance(item, Tracer) and item.dtype.kind not in "iub":
            raise IndexingError(located(
                f"arrays used as indices must be of integer (or boolean) type, got a traced "
                f"{item.aval.short()}" + (f" (indexing {indexed})" if indexed else "") +
                "; convert it with .astype(np.int64)"))
        prepared.append(item)
    return tuple(prepared)


def is_traced_mask(item: Item) -> bool:
    return isinstance(item, Tracer) and item.dtype == np.bool_


def _is_dynamic_slice(item: Item) -> bool:
    return isinstance(item, slice) and any(
        isinstance(part, Tracer) for part in (item.start, item.stop, item.step))


def dynamic_slice_length(item: slice, size: int) -> tuple[Any, int, int]:
    """(start, length, step) of a slice with traced bounds whose length is static.

    A bound computed from Python int arguments alone makes them extents instead
    (SpecializeArgument): with their values, or symbols whose constraints keep the slice in
    range, the slice is numpy's, where a traced one keeps its length (clamped at the end, a
    negative stop not wrapped)."""
    for bound in (item.start, item.stop):
        if isinstance(bound, Tracer):
            bound.int_argument_needed()
    if isinstance(item.step, Tracer) or (item.step is not None and int(item.step) <= 0):
        raise unsupported("a slice with traced bounds and a negative or traced step",
                          "Reverse the array first (x[::-1]) or use a positive step.")
    step = 1 if item.step is None else int(item.step)
    length = None
    if item.start is not None and item.stop is not None:
        length = static_difference(item.stop, item.start)
    if length is None:
        raise unsupported(
            "a slice whose length depends on traced values (x[t:] or x[:t])",
            "Write the slice with a static length, x[t:t + L] (L a Python int), or mask "
            "with np.where(np.arange(n) < t, x, 0).")
    length = max(length, 0)
    if is_static(size) and length > size:
        raise unsupported(
            f"a slice of traced start and length {length} on an axis of size {size}",
            "numpy would return fewer elements than the slice length; slice at most "
            f"{size} elements.")
    return item.start, length, step


def _stand_in(item: Item, shape: tuple[int, ...], axis: int | None) -> Item:
    """What numpy checks in place of a traced item: the same shape, a valid value."""
    if isinstance(item, Tracer):
        if not item.aval.is_static:
            return item  # jitc.numpy.symbolic_index gives it placeholder sizes
        return np.ones(item.shape, np.bool_) if item.dtype == np.bool_ else \
            np.zeros(item.shape, np.intp)
    if _is_dynamic_slice(item):
        size = shape[axis] if axis is not None and axis < len(shape) else 0
        _, length, step = dynamic_slice_length(item, size)
        return slice(0, length, step)
    return item


def _item_axes(items: tuple[Item, ...]) -> list[int | None]:
    """The array axis each item starts at (None after an Ellipsis: counted from the end)."""
    axes: list[int | None] = []
    axis: int | None = 0
    for item in items:
        axes.append(axis)
        if item is Ellipsis:
            axis = None
        elif axis is not None and item is not None:
            axis += _consumed(item)
    if None in axes:  # axes after the Ellipsis, counted back from the end
        end = 0
        for position in range(len(items) - 1, -1, -1):
            if items[position] is Ellipsis:
                break
            end += _consumed(items[position]) if items[position] is not None else 0
            axes[position] = -end
    return axes


def _consumed(item: Item) -> int:
    if isinstance(item, (np.ndarray, Tracer)) and item.dtype == np.bool_:
        return item.ndim
    if isinstance(item, (bool, np.bool_)):
        return 0
    return 1


def static_stand_in(shape: tuple[int, ...], index: Any) -> tuple[Item, ...]:
    """`index` with each traced slice as a static one of the same length and step, and each
    traced integer scalar as 0 (an integer, which views, where a 0-d array would copy): what
    numpy answers for it (view or copy, strides) is what it answers for the traced one."""
    items = prepare(index)
    axes = _item_axes(items)
    return tuple(0 if isinstance(it, Tracer) and it.ndim == 0 and it.dtype.kind in "iu" else
                 _stand_in(it, shape, None if ax is None else ax % max(len(shape), 1))
                 for it, ax in zip(items, axes))


def holds_extent(item: Item) -> bool:
    """A symbolic extent as an index or a slice bound (`x[pos]`, `x[:pos + 1]` with `pos` an
    int argument that the symbolic compilation gives as a dimension)."""
    return isinstance(item, Dim) or (isinstance(item, slice) and any(
        isinstance(part, Dim) for part in (item.start, item.stop, item.step)))


@functools.lru_cache(maxsize=1024)
def _dummy(shape: tuple[int, ...]) -> np.ndarray:
    """A read-only array of `shape` over one byte, for numpy to index."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), shape, (0,) * len(shape),
                                           writeable=False)


def numpy_result_shape(shape: tuple[DimLike, ...], items: tuple[Item, ...],
                       indexed: str) -> tuple[DimLike, ...] | None:
    """numpy's shape for `array[items]`; numpy's IndexError for an index it rejects. For a
    symbolic `shape` and a basic index, None: the slice ops that apply it give the shape
    (jitc.numpy.symbolic_index)."""
    axes = _item_axes(items)
    stand_ins = tuple(_stand_in(it, shape, None if ax is None else ax % max(len(shape), 1))
                      for it, ax in zip(items, axes))
    if not all(is_static(d) for d in shape) or any(
            (isinstance(it, Tracer) and not it.aval.is_static) or holds_extent(it)
            for it in items):
        return symbolic_index.result_shape(shape, items, axes, stand_ins, indexed)
    dummy = _dummy(tuple(shape))
    try:
        return dummy[stand_ins].shape
    except IndexError as exc:
        raise IndexingError(located(f"{exc} (indexing {indexed})")) from None


def expand(items: tuple[Item, ...], ndim: int) -> list[Item]:
    """Items with the Ellipsis replaced by full slices, lists as arrays and constant boolean
    masks as their nonzero() integer arrays (the index was checked by numpy already)."""
    consumed = sum(_consumed(it) for it in items if it is not None and it is not Ellipsis)
    out: list[Item] = []
    for item in items:
        if item is Ellipsis:
            out.extend([slice(None)] * (ndim - consumed))
            consumed = ndim
        elif isinstance(item, (list, tuple, range)):
            array = np.asarray(item)
            out.append(array.astype(np.intp) if array.size == 0 else array)
        elif isinstance(item, np.ndarray) and item.dtype == np.bool_ and item.ndim:
            out.extend(np.nonzero(item))
        else:
            out.append(item)
    return out + [slice(None)] * (ndim - consumed)


def _is_array(item: Item) -> bool:
    return isinstance(item, (np.ndarray, Tracer))


# -- x[index] ------------------------------------------------------------------------------

def getitem(x: Tracer, index: Any) -> Tracer:
    items = prepare(index, x.aval.short())
    for item in items:
        if is_traced_mask(item):
            raise unsupported("indexing with a traced boolean mask (its result shape depends "
                              "on the data)", "Use np.where(mask, x, fill) instead.")
    return index_positions(x, items, numpy_result_shape(x.shape, items, x.aval.short()))


def index_positions(x: Tracer, items: tuple[Item, ...], want: tuple[DimLike, ...] | None,
                    drop_out_of_range: bool = False) -> Tracer:
    """`x[items]` with numpy's result shape `want` (None: a basic index of a symbolic shape,
    whose shape the slices give). With drop_out_of_range, x holds non-negative positions and
    elements picked by an out-of-range traced index read -1."""
    x, items = take_dynamic_slices(x, items)
    expanded = expand(items, x.ndim)
    x, expanded = _scalar_masks(x, expanded)
    advanced = any(_is_array(it) for it in expanded)
    arrays: list[tuple[int, Any]] = []
    kinds = []  # per item, for numpy's rule on where the index dimensions go
    axis = 0
    for item in expanded:
        if item is None:
            kinds.append("new")
            continue
        if isinstance(item, slice):
            x = apply_slice(x, axis, item)
            kinds.append("slice")
        elif advanced:
            arrays.append((axis, item))
            kinds.append("array")
        else:
            n = x.shape[axis]
            i = item if isinstance(item, Dim) else int(item) % n if is_static(n) else \
                symbolic_index.integer_position(n, item)
            x = slice_axis(x, axis, i, i + 1)
            kinds.append("int")
        axis += 1
    if want is None:
        want = _basic_shape(x.shape, kinds)
    if advanced:
        first = kinds.index("array")
        last = len(kinds) - 1 - kinds[::-1].index("array")
        adjacent = all(k == "array" for k in kinds[first:last + 1])
        x = _gather(x, arrays, adjacent, drop_out_of_range)
    if math.prod(x.shape) != math.prod(want):
        raise AssertionError(f"indexing: {x.aval.short()} cannot become {want}")
    return reshape(x, want)


def _basic_shape(sliced: tuple[DimLike, ...], kinds: list[str]) -> tuple[DimLike, ...]:
    """The shape of a basic index: the sliced axes, less the integer-indexed ones, with a 1 per
    new axis."""
    sizes = iter(sliced)
    shape: list[DimLike] = []
    for kind in kinds:
        if kind == "new":
            shape.append(1)
            continue
        size = next(sizes)
        if kind == "slice":
            shape.append(size)
    return tuple(shape)


def _scalar_masks(x: Tracer, items: list[Item]) -> tuple[Tracer, list[Item]]:
    """A boolean scalar index is a new axis of length 1 indexed by [0] (True) or [] (False)."""
    out: list[Item] = []
    axis = 0
    for item in items:
        if isinstance(item, (bool, np.bool_)) or (isinstance(item, np.ndarray)
                                                   and item.dtype == np.bool_):
            x = expand_dims(x, axis)
            out.append(np.zeros(1 if item else 0, np.intp))
            axis += 1
            continue
        out.append(item)
        if item is not None:
            axis += 1
    return x, out


def apply_slice(x: Tracer, axis: int, item: slice) -> Tracer:
    if not is_static(x.shape[axis]) or any(isinstance(b, Dim) for b in (item.start, item.stop)):
        start, stop, step, reverse = symbolic_index.slice_bounds(x.shape[axis], item)
        if reverse:
            x = emit(ops.REVERSE, [x], {"dims": [axis]})
        return slice_axis(x, axis, start, stop, step)
    start, stop, step = item.indices(x.shape[axis])
    if step > 0:
        return slice_axis(x, axis, start, max(start, stop), step)
    count = len(range(start, stop, step))
    if not count:
        return slice_axis(x, axis, 0, 0)
    # A negative step: reverse, then take the mirrored positive-step slice.
    reversed_x = emit(ops.REVERSE, [x], {"dims": [axis]})
    first = x.shape[axis] - 1 - start
    return slice_axis(reversed_x, axis, first, first + (count - 1) * -step + 1, -step)


def take_dynamic_slices(x: Tracer, items: tuple[Item, ...]) -> tuple[Tracer, tuple[Item, ...]]:
    """Slices with traced bounds become one dynamic_slice of x; the items then index the
    block with static slices. numpy's negative start wraps; the start is then clamped so the
    block fits (numpy would shorten the result instead)."""
    if not any(_is_dynamic_slice(it) for it in items):
        return x, items
    axes = _item_axes(items)
    starts = [lift(np.int64(0))] * x.ndim
    sizes = list(x.shape)
    replaced = []
    for item, axis in zip(items, axes):
        if not _is_dynamic_slice(item):
            replaced.append(item)
            continue
        axis = axis % x.ndim
        n = x.shape[axis]
        start, length, step = dynamic_slice_length(item, n)
        start = lift(start, np.int64)
        size = lift(np.int64(n)) if is_static(n) else lift(n, np.int64)
        starts[axis] = select(compare(start, lift(np.int64(0)), "lt"),
                              np.add(start, size), start)
        sizes[axis] = length
        replaced.append(slice(None, None, step))
    block = emit(ops.DYNAMIC_SLICE, [x, *starts], {"sizes": sizes})
    return block, tuple(replaced)


def _gather(x: Tracer, arrays: list[tuple[int, Any]], adjacent: bool,
            drop_out_of_range: bool) -> Tracer:
    """Integer-array indexing of x's `arrays` axes (slices applied already) as one gather."""
    array_axes = [axis for axis, _ in arrays]
    indices = [lift(idx) if isinstance(idx, Tracer) else np.asarray(idx) for _, idx in arrays]
    shapes = [np.shape(i) if isinstance(i, np.ndarray) else i.shape for i in indices]
    index_shape = np.broadcast_shapes(*shapes) if all(is_static(d) for s in shapes for d in s) \
        else broadcast_extents(shapes)
    # Move the indexed axes to the front and flatten them into one, so one gather does it.
    rest = [a for a in range(x.ndim) if a not in array_axes]
    moved = transpose(x, array_axes + rest)
    sizes = [x.shape[a] for a in array_axes]
    total = math.prod(sizes)
    flat = reshape(moved, (total,) + tuple(x.shape[a] for a in rest))
    linear, valid = _linear_index(indices, sizes)
    if drop_out_of_range and valid is not None:
        # Out-of-range traced indices pick a row of -1 appended after the last one.
        sentinel = broadcast_to(lift(np.asarray(-1, x.dtype)), (1,) + flat.shape[1:])
        flat = concatenate([flat, sentinel])
        linear = select(valid, linear, lift(np.int64(total)))
    linear = broadcast_to(linear, index_shape)
    gathered = emit(ops.GATHER, [flat, linear], {"axis": 0})
    if adjacent and array_axes[0] > 0:
        k, first = len(index_shape), array_axes[0]
        perm = list(range(k, k + first)) + list(range(k)) + list(range(k + first,
                                                                       gathered.ndim))
        gathered = transpose(gathered, perm)
    return gathered


def _int64(extent: DimLike) -> Tracer:
    """An extent as an int64 scalar: a constant, or the call's value of a symbolic one."""
    return lift(np.int64(extent)) if is_static(extent) else lift(extent, np.int64)


def _linear_index(indices: list[Any], sizes: list[int]) -> tuple[Any, Any]:
    """Row-major position of each index tuple; negative indices wrap as in numpy. Also
    whether each traced index is in range (None when every index is a checked constant)."""
    linear = None
    valid = None
    stride = 1
    for idx, size in reversed(list(zip(indices, sizes))):
        traced = isinstance(idx, Tracer)
        if traced or not is_static(size):
            # A symbolic axis wraps constant negative indices at the call, as traced ones
            # (their range is a constraint of the call: jitc.numpy.symbolic_index).
            extent = _int64(size)
            idx = lift(idx, np.int64)
            wrapped = select(compare(idx, lift(np.int64(0)), "lt"), np.add(idx, extent), idx)
            if traced:
                inside = np.logical_and(compare(wrapped, lift(np.int64(0)), "ge"),
                                        compare(wrapped, extent, "lt"))
                valid = inside if valid is None else np.logical_and(valid, inside)
        else:
            wrapped = lift(np.asarray(idx, np.int64) % max(size, 1))
        term = wrapped if stride == 1 else np.multiply(wrapped, _int64(stride))
        linear = term if linear is None else np.add(linear, term)
        stride *= size
    return linear, valid


# -- numpy functions that index ----------------------------------------------------------------

@implements(np.take)
def take(a, indices, axis=None, out=None, mode=None):
    """numpy.take. numpy does not hand np.take(numpy_table, traced_ids) to jitc (it only
    dispatches on the array), so jitc.numpy.take is the spelling for a captured table."""
    if out is not None:
        raise unsupported("numpy.take(..., out=...)")
    if mode not in (None, "raise"):
        raise unsupported(f"numpy.take(..., mode={mode!r})")
    x = lift(a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    ax = normalize_axis(axis, x.ndim)
    if not isinstance(indices, Tracer):
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu" and indices.size:
            raise TraceError(located(f"numpy.take: indices must be integers, got "
                                     f"{indices.dtype}"))
        indices = indices.astype(np.intp)
    index = [slice(None)] * ax + [indices]
    return getitem(x, tuple(index))


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """numpy's take_along_axis as one integer-array index: `indices` on `axis`, and an arange
    broadcast along every other axis."""
    x = lift(arr)
    idx = indices if isinstance(indices, Tracer) else np.asarray(indices)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    ax = normalize_axis(axis, x.ndim)
    if idx.ndim != x.ndim:
        raise ShapeError(located(f"numpy.take_along_axis: indices of shape {np.shape(idx)} must "
                                 f"have as many dimensions as the array {x.aval.short()}"))
    index: list[Any] = []
    for d in range(x.ndim):
        if d == ax:
            index.append(idx)
        else:
            shape = [1] * x.ndim
            shape[d] = x.shape[d]
            index.append(np.arange(x.shape[d]).reshape(shape))
    return getitem(x, tuple(index))
