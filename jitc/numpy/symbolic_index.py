"""Indexing an array whose shape has symbolic dimensions (docs/dynamic-shapes.md).

numpy still checks the index, on a stand-in array in which each symbolic extent is a distinct
placeholder size; what numpy cannot know about a symbolic axis (is `x[5]` in range, is `x[1:]`
non-empty) becomes a constraint of the call, recorded by the slice op's shape rule: `x[1:]`
and `x[-1]` need `n >= 1`, `x[:3]` needs `n >= 3`. A call that breaks one fails with an error
naming it rather than getting numpy's clamped answer, which a program compiled for the general
case cannot give.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from jitc.ir import symbolic
from jitc.ir.symbolic import Dim, DimLike, is_static
from jitc.numpy._core import unsupported, whole_slice
from jitc.tracing.errors import IndexingError, located
from jitc.tracing.tracer import Tracer

# Placeholder sizes of symbolic axes: primes, so that no product of static extents hits one.
_PLACEHOLDERS = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069)


class _Placeholders:
    """A distinct placeholder size per symbolic extent (equal extents share one), none equal
    to a static size of the index; and back."""

    def __init__(self, taken: set[int]) -> None:
        self.free = iter(p for p in _PLACEHOLDERS if p not in taken)
        self.sizes: dict[Dim, int] = {}

    def concrete(self, shape: tuple[DimLike, ...]) -> tuple[int, ...]:
        return tuple(self.sizes.setdefault(d, next(self.free)) if isinstance(d, Dim) else d
                     for d in shape)  # type: ignore[misc]

    def symbolic(self, shape: tuple[int, ...]) -> tuple[DimLike, ...]:
        back = {p: d for d, p in self.sizes.items()}
        return tuple(back.get(d, d) for d in shape)


def integer_position(size: DimLike, index: object) -> DimLike:
    """The position numpy's integer index names on an axis of `size` (negative from the end);
    on a symbolic axis, the slice taking it records that it is in range."""
    i = operator.index(index)  # type: ignore[arg-type]
    return i if i >= 0 else size + i


def _position(size: DimLike, bound: object) -> DimLike:
    if isinstance(bound, Dim):
        return bound
    return integer_position(size, bound)


def _clamped(position: DimLike, size: DimLike) -> DimLike:
    """numpy clamps a slice bound to the axis; where the bound is past the end for every size
    (`x[:n+1]`), so does this (elsewhere the slice rule records what it needs)."""
    try:
        return size if position >= size else position
    except symbolic.UnknownDimensionError:
        return position


def slice_bounds(size: DimLike, item: slice) -> tuple[DimLike, DimLike, int, bool]:
    """(start, limit, step, reversed) of numpy's `item` on a symbolic axis: the elements
    `start:limit:step` of the axis, reversed first when `reversed`. Bounds outside the axis
    are constraints of the call (the slice op's rule records them), never clamped."""
    step = 1 if item.step is None else operator.index(item.step)
    if step == 0:
        raise ValueError(located("slice step cannot be zero"))
    start, stop = item.start, item.stop
    statics = [b for b in (start, stop) if b is not None]
    if len(statics) == 2 and all(isinstance(b, (int, np.integer)) for b in statics) and \
            (start >= 0) == (stop >= 0) and (stop - start) * step <= 0:
        return 0, 0, 1, False  # empty for every size (x[3:1], x[-1:-3])
    if step > 0:
        lo = 0 if start is None else _position(size, start)
        hi = size if stop is None else _position(size, stop)
        return _clamped(lo, size), _clamped(hi, size), step, False
    if any(isinstance(b, Dim) for b in statics):
        raise unsupported("a slice with a negative step and symbolic bounds",
                          "Reverse the array first (x[::-1]) and slice with a positive step.")
    # On the reversed axis, position i is size-1-i and the step is positive.
    lo = 0 if start is None else size - 1 - _position(size, start)
    hi = size if stop is None else size - 1 - _position(size, stop)
    return lo, hi, -step, True


def _is_advanced(item: Any) -> bool:
    return not (item is None or item is Ellipsis or isinstance(item, (slice, Dim)) or (
        isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))))


def _zero_strided(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape),
                                           writeable=False)


def _constant_positions(item: Any) -> np.ndarray | None:
    if isinstance(item, (list, tuple, range)):
        item = np.asarray(item)
    if isinstance(item, np.ndarray) and item.dtype.kind in "iu" and item.size:
        return item
    return None


def _require_in_range(size: Dim, positions: np.ndarray, indexed: str) -> None:
    """Constant integer indices into a symbolic axis: numpy's IndexError for a size they do
    not fit is the call's constraint."""
    why = f"indexing {indexed} with constant indices {positions.min()}..{positions.max()}"
    try:
        if positions.max() >= 0:
            symbolic.require(symbolic.at_least(size, int(positions.max()) + 1), why)
        if positions.min() < 0:
            symbolic.require(symbolic.at_least(size, -int(positions.min())), why)
    except symbolic.ConstraintError as exc:
        raise IndexingError(located(str(exc))) from None


def result_shape(shape: tuple[DimLike, ...], items: tuple[Any, ...],
                 axes: list[int | None], stand_ins: tuple[Any, ...],
                 indexed: str) -> tuple[DimLike, ...] | None:
    """numpy's checks of `array[items]` where the array or a traced index has symbolic
    dimensions; None when the index is basic (the ops that apply it give the shape), else the
    shape of the advanced index. `axes` is the axis each item starts at; `stand_ins` are the
    items as numpy may see them (a traced index of symbolic shape as itself)."""
    rank = len(shape)
    taken = {d for d in shape if isinstance(d, int)}
    taken |= {d for it in stand_ins if isinstance(it, np.ndarray) for d in it.shape}
    taken |= {d for it in stand_ins if isinstance(it, Tracer) for d in it.shape
              if isinstance(d, int)}
    placeholders = _Placeholders(taken)
    concrete = placeholders.concrete(shape)
    checked = []
    for item, stand_in, axis in zip(items, stand_ins, axes):
        on_symbol = axis is not None and -rank <= axis < rank and not is_static(shape[axis])
        covered = shape[axis:axis + np.ndim(item) or None] if axis is not None else ()
        if isinstance(item, np.ndarray) and item.dtype == np.bool_ and item.ndim and \
                not all(is_static(d) for d in covered):
            raise IndexingError(located(
                f"a constant boolean index of shape {item.shape} cannot match the symbolic "
                f"extents ({', '.join(map(str, covered))}) of {indexed} for every size; build "
                "the mask from the array (np.arange(x.shape[0]) % 2 == 0) and use "
                "np.where(mask, x, fill)"))
        positions = _constant_positions(item)
        if on_symbol and positions is not None:
            _require_in_range(shape[axis], positions, indexed)  # type: ignore[arg-type,index]
            stand_in = np.zeros(positions.shape, np.intp)
        # numpy would check an integer against the placeholder: the call checks it instead.
        if (on_symbol and not _is_advanced(item) and isinstance(item, (int, np.integer))) \
                or isinstance(item, Dim):
            stand_in = 0  # a symbolic position: the slice taking it records that it fits
        elif isinstance(item, slice) and any(isinstance(b, Dim) for b in (item.start,
                                                                          item.stop)):
            stand_in = slice(None, None, item.step)  # symbolic bounds: the slice rule checks
        elif isinstance(stand_in, Tracer):  # a traced index of symbolic shape
            stand_in = _zero_strided(placeholders.concrete(stand_in.shape),
                                     np.bool_ if stand_in.dtype == np.bool_ else np.intp)
        checked.append(stand_in)
    dummy = _zero_strided(concrete, np.int8)
    try:
        want = dummy[tuple(checked)].shape
    except IndexError as exc:
        raise IndexingError(located(f"{exc} (indexing {indexed})")) from None
    if not any(_is_advanced(it) for it in items):
        return None
    for item, axis in zip(items, axes):
        whole = item is None or item is Ellipsis or whole_slice(item) or _is_advanced(item)
        if axis is not None and -rank <= axis < rank and not is_static(shape[axis]) and \
                not whole:
            raise unsupported(
                f"indexing {indexed} with an integer array or mask together with a slice or "
                "integer on a symbolic axis",
                "Index the symbolic axes with ':' or an integer array only, or apply the "
                "slice in a separate indexing step.")
    return placeholders.symbolic(want)


__all__ = ["integer_position", "result_shape", "slice_bounds"]
