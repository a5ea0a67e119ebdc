"""numpy.lib.stride_tricks.sliding_window_view: every window of an array, as a view.

numpy builds the windows from strides alone: a read-only view whose windowed axes shrink to
`n - w + 1` and whose window axes follow the array's. Traced, the windows are computed: per
windowed axis one gather whose indices are two iotas added (start + offset), which fusion
folds into whatever reads the windows: a moving average reads the array k times from cache
instead of materializing the windows. (One slice per window offset, stacked, was measured
slower: the loop re-rolling pass turns the stack into a while loop that fusion cannot see
through.)
The result is still tracked as a view of the array (jitc.tracing.effects.Window), so a later
write into the array is seen through the windows, and a write into them is refused as numpy
refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.symbolic import is_static
from jitc.ir.types import TensorType
from jitc.numpy._core import check_static_int, implements, lift, normalize_axis
from jitc.numpy.shapes import broadcast_to, transpose
from jitc.tracing import effects
from jitc.tracing.errors import TraceError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


@implements(np.lib.stride_tricks.sliding_window_view)
def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    # subok only matters for ndarray subclasses, which a traced array never is.
    array = lift(x)
    window, axes = _window_axes(array, window_shape, axis)
    result = effects.derive(array, windows(array, window, axes),
                            effects.Window(window, axes, bool(writeable)))
    if result._view is None and not writeable:  # a copy standing for the view
        result._readonly = effects.WINDOWS
    return result


def _window_axes(x: Tracer, window_shape: object, axis: object
                 ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """numpy's checks, in numpy's order and with its messages: the window extents, and the
    (non-negative, possibly repeated) axis each one slides along."""
    items = tuple(window_shape) if np.iterable(window_shape) else (window_shape,)
    window = tuple(check_static_int(w, "a window_shape extent") for w in items)
    if any(w < 0 for w in window):
        raise ValueError(located("`window_shape` cannot contain negative values"))
    if axis is None:
        axes = tuple(range(x.ndim))
        if len(window) != len(axes):
            raise ValueError(located(
                "Since axis is `None`, must provide window_shape for all dimensions of `x`; "
                f"got {len(window)} window_shape elements and `x.ndim` is {x.ndim}."))
    else:
        listed = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        axes = tuple(normalize_axis(a, x.ndim) for a in listed)
        if len(window) != len(axes):
            raise ValueError(located(
                "Must provide matching length window_shape and axis; got "
                f"{len(window)} window_shape elements and {len(axes)} axes elements."))
    trimmed = list(x.shape)
    for ax, w in zip(axes, window):
        if not is_static(trimmed[ax]):
            raise TraceError(located(
                f"sliding_window_view along axis {ax} of {x.aval.short()}, whose extent is "
                "symbolic: whether the window fits, and how many windows there are, depend on "
                "the call. Window static axes only (a symbolic batch axis is fine), or trace "
                "with static shapes."))
        if trimmed[ax] < w:
            raise ValueError(located("window shape cannot be larger than input array shape"))
        trimmed[ax] -= w - 1
    return window, axes


def windows(x: Tracer, window: Sequence[int], axes: Sequence[int]) -> Tracer:
    """The value of numpy's sliding_window_view(x, window, axes) (checked arguments): `x`
    with each windowed axis shrunk to n - w + 1, followed by axes of extents `window`."""
    trimmed = list(x.shape)
    for ax, w in zip(axes, window):
        trimmed[ax] -= w - 1
    out_shape = (*trimmed, *window)
    if not window:
        return x
    if 0 in window:  # no element at all; the windowed axis may even outgrow the array
        return broadcast_to(lift(np.zeros((), x.dtype)), out_shape)
    return _gathered(x, window, axes)


def _gathered(x: Tracer, window: Sequence[int], axes: Sequence[int]) -> Tracer:
    """Per windowed axis one gather with indices `start + offset` (two iotas added): the
    window axis lands next to the axis it slides along, and a transpose moves the window axes
    to the end in numpy's order."""
    value = x
    position = list(range(x.ndim))  # where each axis of x is in `value`
    window_at: list[int] = []  # where each window axis is in `value`
    for ax, w in zip(axes, window):
        at = position[ax]
        count = value.shape[at] - w + 1
        index_type = TensorType(dtypes.int64, (count, w))
        starts = emit(ops.IOTA, [], {"dimension": 0}, index_type)
        offsets = emit(ops.IOTA, [], {"dimension": 1}, index_type)
        value = emit(ops.GATHER, [value, emit(ops.ADD, [starts, offsets])], {"axis": at})
        position = [p + 1 if p > at else p for p in position]
        window_at = [p + 1 if p > at else p for p in window_at] + [at + 1]
    return transpose(value, position + window_at)
