"""numpy indexing writes on tracers: `x[index] = v`, `ufunc.at`, `np.put`, `np.place`,
`np.putmask`.

A write is a function of the old array: basic indices (ints, slices) become a pad and a select;
a traced slice start becomes a dynamic_update_slice; integer-array indices become a scatter
built from existing ops. The scatter views x as rows (M, R) written by K index tuples:
- constant indices: numpy computes, at trace time, which of the K updates lands last in each
  row (numpy's sequential order: the last write wins), so the write is one gather and a select;
- traced indices: row m takes the update max{k : position[k] == m}, a max-reduction over a
  (K, M) comparison that the backends fuse (cost K * M, no K * M temporary).
`ufunc.at` accumulates duplicates: constant indices apply the ufunc once per occurrence rank
(numpy's exact order); traced ones reduce the matching updates and apply the ufunc once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jitc.ir import dtypes, ops, symbolic
from jitc.ir.opdef import IRTypeError
from jitc.ir.ops import reduce_identity
from jitc.ir.ops.rules import broadcast_shapes
from jitc.ir.symbolic import Dim, DimLike, is_static
from jitc.ir.types import TensorType
from jitc.numpy import symbolic_write
from jitc.numpy._core import implements, lift, unsupported, whole_slice
from jitc.numpy.indexing import (
    expand,
    holds_extent,
    index_positions,
    is_traced_mask,
    numpy_result_shape,
    prepare,
    take_dynamic_slices,
)
from jitc.numpy.reductions import reduce
from jitc.numpy.shapes import broadcast_to, reshape
from jitc.numpy.ufuncs import compare, select
from jitc.tracing import effects
from jitc.tracing.effects import broadcasts_into
from jitc.tracing.errors import IndexingError, ShapeError, TraceError, located
from jitc.tracing.state import emit, extent_value
from jitc.tracing.tracer import Tracer

Item = Any

# Constant-index ufunc.at applies the ufunc once per occurrence rank up to this many ranks.
_MAX_RANKS = 16
# ufunc.at with traced indices: the reduction that combines several updates of one element.
_AT_REDUCTIONS = {np.add: "sum", np.subtract: "sum", np.multiply: "prod",
                  np.maximum: "max", np.minimum: "min"}


def setitem(x: Tracer, index: Any, update: Any) -> Tracer:
    """The array `x` with `update` written at `index`, as numpy's `x[index] = update`."""
    return _write(x, index, update, None)


def _write(x: Tracer, index: Any, update: Any, ufunc: np.ufunc | None) -> Tracer:
    items = prepare(index, x.aval.short())
    expanded = expand(items, x.ndim)
    in_range: set[int] = set()  # ids of traced positions the call's constraints keep in range
    if any(holds_extent(it) for it in expanded):
        items = tuple(_extents_as_positions(x, expanded, in_range))
        expanded = list(items)
    axis = _traced_position(x, expanded) if ufunc is None else None
    if axis is not None:
        target = (*x.shape[:axis], *x.shape[axis + 1:])
        return _assign_at(x, axis, expanded[axis], _value(x, update, target, items, ufunc),
                          id(expanded[axis]) in in_range)
    if ufunc is None:
        _check_whole_mask_value(x, items, update)
    if any(is_traced_mask(it) for it in items):
        if ufunc is not None:
            raise unsupported(f"numpy.{ufunc.__name__}.at with a traced boolean mask",
                              f"Use np.where(mask, np.{ufunc.__name__}(x, v), x).")
        # A select at the mask's positions (`scores[mask] = -inf`), whatever the extents.
        return _assign_traced_mask(x, items, update)
    if not x.aval.is_static and (ufunc is not None or _indexes_symbolic_axes(x, items)):
        if ufunc is None and symbolic_write.writable(items):
            return symbolic_write.assign(x, items, update)
        raise _symbolic_write_refused(x, ufunc)
    target = numpy_result_shape(x.shape, items, x.aval.short()) if x.aval.is_static else \
        _basic_target(x, expanded)
    value = _value(x, update, target, items, ufunc)
    if any(isinstance(it, slice) and _traced_slice(it) for it in items):
        return _write_dynamic(x, items, value, target, ufunc)
    basic = all(it is None or isinstance(it, slice) or _static_int(it) for it in expanded)
    if basic and ufunc is None:
        return _assign_basic(x, expanded, value)
    lead = _row_prefix(expanded, x.ndim)
    positions = _positions(x, items, expanded, lead, target)
    return _scatter(x, lead, positions, value, ufunc)


def _indexes_symbolic_axes(x: Tracer, items: tuple[Item, ...]) -> bool:
    """Whether a write at `items` needs more than ints and slices over x's static axes (with
    every symbolic axis taken whole): such a write's positions depend on the symbols."""
    expanded = expand(items, x.ndim)
    if not all(it is None or isinstance(it, slice) or _static_int(it) for it in expanded):
        return True
    axes = [it for it in expanded if it is not None]
    return any(not is_static(n) and not whole_slice(item) for n, item in zip(x.shape, axes)) or \
        any(isinstance(it, slice) and _traced_slice(it) for it in axes)


def _basic_target(x: Tracer, items: list[Item]) -> tuple[DimLike, ...]:
    """numpy's shape for `x[items]`, ints and slices with every symbolic axis taken whole
    (_indexes_symbolic_axes), and numpy's IndexError for an int out of bounds."""
    shape: list[DimLike] = []
    axes = iter(enumerate(x.shape))
    for item in items:
        if item is None:
            shape.append(1)
            continue
        axis, n = next(axes)
        if _static_int(item):
            if not -n <= item < n:  # type: ignore[operator]
                raise IndexingError(located(f"index {item} is out of bounds for axis {axis} "
                                            f"with size {n} (indexing {x.aval.short()})"))
        else:
            shape.append(n if not is_static(n) else len(range(*item.indices(n))))
    return tuple(shape)


def _symbolic_write_refused(x: Tracer, ufunc: np.ufunc | None) -> TraceError:
    what = f"numpy.{ufunc.__name__}.at" if ufunc is not None else "an indexed write"
    return TraceError(located(
        f"{what} into {x.aval.short()}, which has symbolic dimensions, at positions that "
        "depend on them: only ints and slices over the static dimensions, with every symbolic "
        "one taken whole (x[:, 0] = v, x[..., :3] += v), are supported with symbolic "
        "dimensions. Compute the new array instead (np.where, np.concatenate), or trace with "
        "static shapes."))


def _check_whole_mask_value(x: Tracer, items: tuple[Item, ...], update: Any) -> None:
    """numpy's rule for `x[mask] = v` with one mask over every axis: v has at most 1 axis."""
    if len(items) != 1 or not isinstance(items[0], (np.ndarray, Tracer)):
        return
    mask = items[0]
    if mask.dtype == np.bool_ and mask.ndim == x.ndim and np.ndim(update) > 1:
        raise TypeError(located(
            "NumPy boolean array indexing assignment requires a 0 or 1-dimensional input, "
            f"input has {np.ndim(update)} dimensions (assigning into {x.aval.short()}); "
            "flatten the value or use np.where(mask, value, x)"))


def _traced_slice(item: slice) -> bool:
    return any(isinstance(p, Tracer) for p in (item.start, item.stop, item.step))


def _static_int(item: Item) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _value(x: Tracer, update: Any, target: tuple[int, ...], items: tuple[Item, ...],
           ufunc: np.ufunc | None) -> Tracer:
    """The update in x's dtype (numpy casts it; ufunc.at casts the ufunc's result),
    broadcast to the indexed shape as numpy does (extra leading 1s are dropped)."""
    # A copy: the reshapes below are not the user's, and must not make views of `update`'s
    # root (with symbolic dimensions that would refuse later writes into it).
    value = (lift(update) if ufunc is not None else lift(update, x.dtype)).copy_tracer()
    shape = value.shape
    while len(shape) > len(target) and shape[0] == 1:
        shape = shape[1:]
    if not broadcasts_into(shape, target):
        advanced = any(isinstance(it, (np.ndarray, list, range, Tracer)) for it in items)
        message = (f"shape mismatch: value array of shape {value.shape} could not be broadcast "
                   f"to indexing result of shape {target}") if advanced else \
            (f"could not broadcast input array from shape {value.shape} into shape {target}")
        raise ShapeError(located(f"{message} (assigning into {x.aval.short()})"))
    return broadcast_to(reshape(value, shape), target)


# -- basic indices and traced slice starts -------------------------------------------------------

def _assign_basic(x: Tracer, items: list[Item], value: Tracer) -> Tracer:
    """Ints and slices: the update padded into place and selected over x."""
    low, high, interior, block, reversed_axes = [], [], [], [], []
    whole = True
    for axis, item in enumerate(it for it in items if it is not None):
        n = x.shape[axis]
        if not is_static(n):  # taken whole (_indexes_symbolic_axes)
            low.append(0)
            high.append(0)
            interior.append(0)
            block.append(n)
            continue
        if _static_int(item):
            item = slice(int(item) % n, int(item) % n + 1)
        start, stop, step = item.indices(n)
        positions = range(start, stop, step)
        if step < 0:
            positions = positions[::-1]
            reversed_axes.append(axis)
        count = len(positions)
        lo = positions[0] if count else 0
        low.append(lo)
        interior.append(abs(step) - 1 if count > 1 else 0)
        high.append(n - (lo + (count - 1) * abs(step) + 1) if count else n)
        block.append(count)
        whole = whole and count == n and abs(step) == 1
    value = reshape(value, tuple(block))
    if reversed_axes:
        value = emit(ops.REVERSE, [value], {"dims": reversed_axes})
    if whole:
        return value
    if not any(interior):
        # A block: written at constant starts, which the simplifier joins when a loop fills
        # an array block by block.
        starts = [lift(np.int64(lo)) for lo in low]
        return emit(ops.DYNAMIC_UPDATE_SLICE, [x, value, *starts])
    attrs = {"low": low, "high": high, "interior": interior}
    placed = emit(ops.PAD, [value, lift(np.zeros((), x.dtype))], attrs)
    true = broadcast_to(lift(np.True_), tuple(block))
    mask = emit(ops.PAD, [true, lift(np.False_)], attrs)
    return emit(ops.SELECT, [mask, placed, x])


def _write_dynamic(x: Tracer, items: tuple[Item, ...], value: Tracer,
                   target: tuple[int, ...], ufunc: np.ufunc | None) -> Tracer:
    """Traced slice starts: write into the dynamic block, then put the block back (both with
    the same clamped starts)."""
    block, static_items = take_dynamic_slices(x, items)
    starts = list(block.value.producer.operands[1:])
    updated = _write(block, static_items, value, ufunc)
    start_tracers = [Tracer(x.trace, s) for s in starts]
    return emit(ops.DYNAMIC_UPDATE_SLICE, [x, updated, *start_tracers])


def _extents_as_positions(x: Tracer, items: list[Item], in_range: set[int]) -> list[Item]:
    """`items` with each symbolic position on a static axis (an int argument the symbolic
    compilation gives as an extent: `cache[pos] = k`, `x[pos:pos + 2] += v`) as a traced
    one, the call's constraints keeping it in range; where numpy would wrap a negative one or
    raise IndexError, the call compiles exactly instead. A slice of symbolic length stays (its
    write is refused: exact compilations)."""
    out: list[Item] = []
    axes = iter(x.shape)
    for item in items:
        n = next(axes) if item is not None else None
        if n is None or not is_static(n) or not holds_extent(item):
            out.append(item)
            continue
        start, length = (item, 1) if not isinstance(item, slice) else _static_length(item, n)
        if length is None:
            out.append(item)
            continue
        why = f"writing {x.aval.short()} at a position given by an int argument"
        symbolic.require(symbolic.at_least(start, 0), why)
        symbolic.require(symbolic.at_least(n - length, start), why)
        position = extent_value(start) if isinstance(start, Dim) else start
        in_range.add(id(position))
        out.append(position if not isinstance(item, slice) else
                   slice(position, position + length))
    return out


def _static_length(item: slice, n: int) -> tuple[Any, int | None]:
    """(start, length) of a unit-step slice whose bounds differ by a constant (`pos:pos + 2`),
    else (None, None)."""
    if item.step not in (None, 1) or item.start is None or item.stop is None:
        return None, None
    length = item.stop - item.start
    return (item.start, length) if isinstance(length, int) and 0 <= length <= n else \
        (None, None)


def _traced_position(x: Tracer, items: list[Item]) -> int | None:
    """The axis at which `items` pick one position by a traced integer scalar, every other
    axis whole and static (`cache[pos] = k`, `kc[:, pos] = k`); None for other indices."""
    traced = [axis for axis, item in enumerate(items) if isinstance(item, Tracer)]
    if len(items) != x.ndim or len(traced) != 1:
        return None
    axis = traced[0]
    position = items[axis]
    if position.ndim != 0 or position.dtype.kind not in "iu":
        return None
    others = [a for a in range(x.ndim) if a != axis]
    if not all(whole_slice(items[a]) and is_static(x.shape[a]) for a in others):
        return None
    return axis


def _assign_at(x: Tracer, axis: int, position: Tracer, value: Tracer,
               in_range: bool = False) -> Tracer:
    """x with the slice at `position` of `axis` replaced by `value`: one dynamic_update_slice,
    which a written argument's buffer takes in place (only the slice is stored). Before, a
    write off the first axis (`kc[:, pos] = k`) was a scatter over the whole array: 6 ms for
    a 12x256x64 cache. A position out of range writes nothing (the slice written is the one
    already there), as for other traced indices (docs/jit.md). `in_range`: the call's
    constraints keep the position in [0, n) (an int argument's extent), so the block is the
    value alone, which leaves the write in place in a captured cache (it reads no old slice)."""
    n = x.shape[axis]
    if is_static(n) and n == 0:
        return x
    if in_range:
        zero = lift(np.int64(0))
        starts = [lift(position, np.int64) if a == axis else zero for a in range(x.ndim)]
        block = tuple(1 if a == axis else d for a, d in enumerate(x.shape))
        return emit(ops.DYNAMIC_UPDATE_SLICE, [x, reshape(value, block), *starts])
    # A symbolic extent is the call's (the block needs n >= 1: an empty x compiles exactly).
    extent = lift(np.int64(n)) if is_static(n) else lift(extent_value(n), np.int64)
    index = lift(position, np.int64)
    zero = lift(np.int64(0))
    wrapped = select(compare(index, zero, "lt"), np.add(index, extent), index)
    inside = np.logical_and(compare(wrapped, zero, "ge"), compare(wrapped, extent, "lt"))
    starts = [wrapped if a == axis else zero for a in range(x.ndim)]
    block = tuple(1 if a == axis else d for a, d in enumerate(x.shape))
    current = emit(ops.DYNAMIC_SLICE, [x, *starts], {"sizes": list(block)})
    updated = select(broadcast_to(inside, block), reshape(value, block), current)
    return emit(ops.DYNAMIC_UPDATE_SLICE, [x, updated, *starts])


# -- integer-array indices -------------------------------------------------------------------

def _row_prefix(items: list[Item], ndim: int) -> int:
    """k when the index is integer arrays (or ints) on the first k axes and full slices
    after: the scatter then moves whole rows of size prod(shape[k:]). Otherwise ndim."""
    lead = 0
    for item in items:
        if item is None:
            return ndim
        if isinstance(item, (np.ndarray, Tracer)) or _static_int(item):
            lead += 1
            continue
        break
    rest = items[lead:]
    if all(whole_slice(it) for it in rest) and lead:
        return lead
    return ndim


def _positions(x: Tracer, items: tuple[Item, ...], expanded: list[Item], lead: int,
               target: tuple[int, ...]) -> np.ndarray | Tracer:
    """For each written row (in the order of the indexed result), its row number in
    x viewed as (prod(shape[:lead]), rest); -1 for a dropped out-of-range traced index."""
    rows = math.prod(x.shape[:lead])
    index = tuple(expanded[:lead]) if lead < x.ndim else items
    index_shape = target[:len(target) - (x.ndim - lead)]
    if not any(isinstance(it, Tracer) for it in index):
        table = np.arange(rows, dtype=np.int64).reshape(x.shape[:lead])
        return np.asarray(table[index]).reshape(-1)
    iota = emit(ops.IOTA, [], {"dimension": 0}, TensorType(dtypes.int64, (rows,)))
    grid = reshape(iota, x.shape[:lead])
    positions = index_positions(grid, tuple(index), index_shape, drop_out_of_range=True)
    return reshape(positions, (-1,))


def _scatter(x: Tracer, lead: int, positions: np.ndarray | Tracer, value: Tracer,
             ufunc: np.ufunc | None) -> Tracer:
    rows, width = math.prod(x.shape[:lead]), math.prod(x.shape[lead:])
    count = positions.shape[0]
    if count == 0 or rows == 0 or width == 0:
        return x
    table = reshape(x, (rows, width))
    updates = reshape(value, (count, width))
    if ufunc is not None:
        result = _accumulate(table, positions, updates, ufunc)
    else:
        winner = _last_writer(positions, rows)
        written = compare(winner, lift(np.int64(0)), "ge") if isinstance(winner, Tracer) \
            else winner >= 0
        rows_taken = emit(ops.GATHER, [updates, lift(winner)], {"axis": 0})
        if isinstance(written, np.ndarray) and written.all():
            result = rows_taken
        else:
            result = select(_column(lift(written), width), rows_taken, table)
    return reshape(result, x.shape)


def _column(flags: Tracer, width: int) -> Tracer:
    return emit(ops.BROADCAST_IN_DIM, [flags], {"dims": [0]},
                TensorType(flags.aval.dtype, (flags.shape[0], width)))


def _last_writer(positions: np.ndarray | Tracer, rows: int) -> np.ndarray | Tracer:
    """Per row, the number of the last update written to it, or -1."""
    count = positions.shape[0]
    if isinstance(positions, np.ndarray):
        winner = np.full(rows, -1, np.int64)
        kept = positions >= 0
        np.maximum.at(winner, positions[kept], np.arange(count, dtype=np.int64)[kept])
        return winner
    hits = _hits(positions, rows)
    numbers = emit(ops.IOTA, [], {"dimension": 0}, TensorType(dtypes.int64, (count, rows)))
    candidates = select(hits, numbers, broadcast_to(lift(np.int64(-1)), (count, rows)))
    return reduce(candidates, (0,), "max")


def _hits(positions: Tracer, rows: int) -> Tracer:
    """hits[k, m]: update k writes row m."""
    count = positions.shape[0]
    spread = emit(ops.BROADCAST_IN_DIM, [positions], {"dims": [0]},
                  TensorType(dtypes.int64, (count, rows)))
    row_numbers = emit(ops.IOTA, [], {"dimension": 1}, TensorType(dtypes.int64, (count, rows)))
    return compare(spread, row_numbers, "eq")


def _accumulate(table: Tracer, positions: np.ndarray | Tracer, updates: Tracer,
                ufunc: np.ufunc) -> Tracer:
    """ufunc.at: every update applied, duplicates included."""
    rows, width = table.shape
    if isinstance(positions, np.ndarray):
        ranks = _occurrence_tables(positions, rows)
        if len(ranks) <= _MAX_RANKS or ufunc not in _AT_REDUCTIONS:
            for rank in ranks:
                taken = emit(ops.GATHER, [updates, lift(np.maximum(rank, 0))], {"axis": 0})
                combined = lift(ufunc(table, taken), table.dtype)
                table = select(_column(lift(rank >= 0), width), combined, table)
            return table
        positions = lift(positions)
    kind = _AT_REDUCTIONS.get(ufunc)
    if kind is None:
        raise unsupported(f"numpy.{ufunc.__name__}.at with traced indices",
                          "Supported with traced indices: add, subtract, multiply, maximum, "
                          "minimum.")
    loop = ufunc.resolve_dtypes((table.dtype, updates.dtype, None))
    if np.dtype(loop[2]) != table.dtype:
        raise TraceError(located(
            f"numpy.{ufunc.__name__}.at of {updates.dtype} updates into {table.aval.short()} "
            f"with traced indices computes in {loop[2]}; cast the updates to {table.dtype}"))
    updates = lift(updates, table.dtype)
    count = updates.shape[0]
    hits = _hits(positions, rows)
    shape = (count, rows, width)
    spread_hits = emit(ops.BROADCAST_IN_DIM, [hits], {"dims": [0, 1]},
                       TensorType(hits.aval.dtype, shape))
    spread = emit(ops.BROADCAST_IN_DIM, [updates], {"dims": [0, 2]},
                  TensorType(updates.aval.dtype, shape))
    identity = lift(np.asarray(reduce_identity(kind, table.dtype), table.dtype))
    combined = reduce(select(spread_hits, spread, broadcast_to(identity, shape)), (0,), kind)
    touched = reduce(hits, (0,), "or")
    return select(_column(touched, width), lift(ufunc(table, combined), table.dtype), table)


def _occurrence_tables(positions: np.ndarray, rows: int) -> list[np.ndarray]:
    """tables[r][m]: the number of the r-th update of row m, or -1."""
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    first = np.ones(len(ordered), bool)
    first[1:] = ordered[1:] != ordered[:-1]
    starts = np.maximum.accumulate(np.where(first, np.arange(len(ordered)), 0))
    rank = np.arange(len(ordered)) - starts
    tables = []
    for r in range(int(rank.max()) + 1 if len(rank) else 0):
        table = np.full(rows, -1, np.int64)
        chosen = (rank == r) & (ordered >= 0)
        table[ordered[chosen]] = order[chosen]
        tables.append(table)
    return tables


# -- traced boolean masks ----------------------------------------------------------------------

def _assign_traced_mask(x: Tracer, items: tuple[Item, ...], update: Any) -> Tracer:
    """`x[mask] = v` with a traced mask over consecutive axes and full slices elsewhere: a
    select. v must not depend on the number of selected elements."""
    expanded = expand(items, x.ndim)
    masks = [i for i, it in enumerate(expanded) if is_traced_mask(it)]
    others_full = all(whole_slice(it) for i, it in enumerate(expanded) if i != masks[0])
    if len(masks) != 1 or not others_full:
        raise unsupported("a traced boolean mask combined with other indices",
                          "Build the result with np.where(mask, value, x).")
    axis = masks[0]
    mask = expanded[axis]
    if mask.shape != x.shape[axis:axis + mask.ndim]:
        raise IndexingError(located(
            f"boolean index did not match indexed array along axis {axis}; the mask has "
            f"shape {mask.shape}, the indexed axes {x.shape[axis:axis + mask.ndim]} "
            f"(indexing {x.aval.short()})"))
    before, after = x.shape[:axis], x.shape[axis + mask.ndim:]
    value = lift(update, x.dtype)
    shape = value.shape
    while len(shape) > len(before) + 1 + len(after) and shape[0] == 1:
        shape = shape[1:]
    inner = shape[max(len(shape) - len(after), 0):]
    if len(shape) > len(after):
        if shape[len(shape) - len(after) - 1] != 1:
            raise unsupported(
                f"x[mask] = v with a traced mask and v of shape {value.shape} (one value per "
                "selected element: their number is known only at run time)",
                "Use np.place(x, mask, v), or np.where(mask, w, x) with w shaped like x.")
        shape = shape[:len(shape) - len(after) - 1] + (1,) * mask.ndim + inner
    try:
        fits = len(shape) <= x.ndim and broadcast_shapes([shape, x.shape]) == x.shape
    except (ValueError, IRTypeError):
        fits = False
    if not fits:
        raise ShapeError(located(f"could not broadcast the assigned value {value.aval.short()} "
                                 f"into x[mask] of {x.aval.short()}"))
    spread_value = broadcast_to(reshape(value, shape), x.shape)
    spread_mask = broadcast_to(reshape(mask, (1,) * len(before) + mask.shape +
                                       (1,) * len(after)), x.shape)
    return select(spread_mask, spread_value, x)


def _prefix_count(flags: Tracer) -> Tracer:
    """Inclusive running count of a 1-d boolean array, in log2(n) shifted adds."""
    counts = lift(flags, np.int64)
    n = counts.shape[0]
    shift = 1
    while shift < n:
        shifted = emit(ops.PAD, [counts, lift(np.int64(0))],
                       {"low": [shift], "high": [-shift], "interior": [0]})
        counts = np.add(counts, shifted)
        shift *= 2
    return counts


# -- numpy functions that write in place -------------------------------------------------------

def ufunc_at(ufunc: np.ufunc, inputs: tuple, kwargs: dict[str, Any]) -> None:
    """`ufunc.at(a, indices, b)`: a[indices] = ufunc(a[indices], b) for every index,
    duplicates included, in place."""
    if ufunc.nin != 2 or len(inputs) != 3 or kwargs:
        raise unsupported(f"numpy.{ufunc.__name__}.at with these arguments",
                          "Binary ufuncs are supported: ufunc.at(a, indices, b).")
    target, indices, updates = inputs
    written = _write(_traced_target(target, f"numpy.{ufunc.__name__}.at"), indices, updates,
                     ufunc)
    _replace(target, written)


@implements(np.put)
def put(a, ind, v, mode="raise"):
    x = _traced_target(a, "numpy.put")
    flat = reshape(x, (-1,))
    size = flat.shape[0]
    if isinstance(ind, Tracer):
        index = reshape(lift(ind, np.int64), (-1,))
        if mode == "wrap":
            index = np.remainder(index, np.int64(max(size, 1)))
        elif mode == "clip":
            index = np.clip(index, 0, size - 1)
    else:
        index = np.asarray(ind).reshape(-1)
        if index.dtype.kind not in "iu" and index.size:
            raise IndexingError(located(f"numpy.put: indices must be integers, got "
                                        f"{index.dtype}"))
        index = index.astype(np.int64)
        if mode == "wrap":
            index = index % max(size, 1)
        elif mode == "clip":
            index = np.clip(index, 0, size - 1)
        elif index.size and (index.max() >= size or index.min() < -size):
            bad = int(index.max() if index.max() >= size else index.min())
            raise IndexingError(located(f"index {bad} is out of bounds for axis 0 with size "
                                        f"{size} (numpy.put into {x.aval.short()})"))
    values = reshape(lift(v, x.dtype), (-1,))
    count = index.shape[0]
    if count and values.shape[0] == 0:
        raise ShapeError(located("numpy.put: cannot put an empty array of values"))
    if count:
        repeat = np.arange(count) % values.shape[0]
        values = emit(ops.GATHER, [values, lift(repeat)], {"axis": 0}) \
            if values.shape[0] != count else values
    written = setitem(flat, index, values) if count else flat
    _replace(a, reshape(written, x.shape))


@implements(np.putmask)
def putmask(a, mask, values):
    x = _traced_target(a, "numpy.putmask")
    flags = lift(mask, np.bool_)
    if flags.size != x.size:
        raise ShapeError(located("putmask: mask and data must be the same size"))
    _check_safe_cast(values, x, "putmask")
    flat_values = reshape(lift(values, x.dtype), (-1,))
    n = flat_values.shape[0]
    if n == 0:
        _replace(a, x)
        return
    if n != x.size:
        flat_values = emit(ops.GATHER, [flat_values, lift(np.arange(x.size) % n)], {"axis": 0})
    spread = reshape(flat_values, x.shape)
    _replace(a, select(reshape(flags, x.shape), spread, x))


@implements(np.place)
def place(arr, mask, vals):
    x = _traced_target(arr, "numpy.place")
    flags = reshape(lift(mask, np.bool_), (-1,))
    if flags.shape[0] != x.size:
        raise ShapeError(located("place: mask and data must be the same size"))
    _check_safe_cast(vals, x, "place")
    flat_values = reshape(lift(vals, x.dtype), (-1,))
    n = flat_values.shape[0]
    if n == 0:
        if isinstance(mask, Tracer) or np.any(mask):
            raise ShapeError(located("Cannot insert from an empty array!" if not isinstance(
                mask, Tracer) else "numpy.place: vals is empty but the mask is traced"))
        return
    # The i-th selected element takes vals[i % n]: numpy's cycling.
    ranks = _prefix_count(flags)
    chosen = np.remainder(np.subtract(ranks, np.int64(1)), np.int64(n))
    taken = emit(ops.GATHER, [flat_values, chosen], {"axis": 0})
    flat = reshape(x, (-1,))
    _replace(arr, reshape(select(flags, taken, flat), x.shape))


def _check_safe_cast(values: Any, x: Tracer, what: str) -> None:
    """numpy's putmask and place cast array values (not Python scalars or lists) 'safe'."""
    if isinstance(values, Tracer) and values.weak:
        return
    if isinstance(values, (np.ndarray, Tracer)) and not np.can_cast(values.dtype, x.dtype):
        raise TypeError(located(
            f"numpy.{what}: Cannot cast array data from dtype('{values.dtype}') to "
            f"dtype('{x.dtype}') according to the rule 'safe'; convert the values with "
            f".astype(np.{x.dtype})"))


def _traced_target(a: Any, what: str) -> Tracer:
    if not isinstance(a, Tracer):
        raise TraceError(located(
            f"{what} writes into a numpy array that is not traced ({type(a).__name__}); "
            "jitc can only write traced arrays in place. Pass the array as an argument of "
            "the jitted function, or copy it first (a = np.array(a) inside the function)."))
    if what in _READONLY_MESSAGES:
        effects.refuse_readonly_write(a, _READONLY_MESSAGES[what])
    return a


# numpy's messages for these functions' writes into a read-only view (the others say
# "assignment destination is read-only" here, where numpy's words are its internals').
_READONLY_MESSAGES = {"numpy.put": "put: output array is read-only",
                      "numpy.putmask": "putmask: output array is read-only",
                      "ndarray.sort": "sort array is read-only",
                      "ndarray.partition": "partition array is read-only"}


def _replace(target: Any, new: Tracer) -> None:
    """Writes `new` into `target` in place, through its __setitem__ (so every in-place
    update takes the same route)."""
    target[...] = new
