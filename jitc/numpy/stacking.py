"""Arrays assembled from other arrays' elements with static shapes: atleast_3d, dstack, resize,
delete (static indices) and ediff1d, written on reshapes, concatenations and gathers."""

from __future__ import annotations

import numpy as np

from jitc.ir import ops
from jitc.numpy._core import check_static_int, implements, lift, normalize_axis
from jitc.numpy.shapes import concatenate, reshape
from jitc.passes.fold import constant_array
from jitc.tracing.errors import TraceError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def _at_least_3d(a: object) -> Tracer:
    x = lift(a)
    if x.ndim == 0:
        return reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return reshape(x, (1, x.shape[0], 1))
    if x.ndim == 2:
        return reshape(x, x.shape + (1,))
    return x


@implements(np.atleast_3d)
def atleast_3d(*arys):
    out = tuple(_at_least_3d(a) for a in arys)
    return out[0] if len(out) == 1 else out


@implements(np.dstack)
def dstack(tup):
    if not isinstance(tup, (list, tuple)):
        raise TypeError(located("arrays to stack must be passed as a \"sequence\" type such as "
                                "list or tuple."))
    return concatenate([_at_least_3d(x) for x in tup], axis=2)


def _gather_flat(flat: Tracer, positions: np.ndarray) -> Tracer:
    """The elements of the 1-d `flat` at the static `positions`."""
    if positions.size == flat.shape[0] and np.array_equal(positions, np.arange(flat.shape[0])):
        return flat
    return emit(ops.GATHER, [flat, lift(positions.astype(np.int64), trace=flat.trace)],
                {"axis": 0})


@implements(np.resize)
def resize(a, new_shape):
    x = lift(a)
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    shape = tuple(check_static_int(n, "numpy.resize's new_shape") for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(located("all elements of `new_shape` must be non-negative"))
    size = int(np.prod(shape, dtype=np.int64))
    flat = reshape(x, (-1,))
    if x.size == 0 or size == 0:
        # numpy fills with zeros when there is nothing to repeat.
        return lift(np.zeros(shape, x.dtype), trace=x.trace)
    return reshape(_gather_flat(flat, np.arange(size) % x.size), shape)


@implements(np.delete)
def delete(arr, obj, axis=None):
    if isinstance(obj, Tracer):
        # An index array made inside the function (np.array([...])) is a constant of the trace.
        known = constant_array(obj.value)
        if known is not None:
            return delete(arr, known, axis)
        raise TraceError(located(
            "numpy.delete with traced indices: the result's length would depend on their "
            "values, known only when the compiled code runs. Pass the indices as constants "
            "(static_argnums), or keep the shape with np.where(mask, x, fill)."))
    x = lift(arr)
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    axis = normalize_axis(axis, x.ndim)
    # numpy's own delete on the positions settles which survive, with numpy's errors.
    kept = np.delete(np.arange(x.shape[axis]), obj)
    if kept.size == x.shape[axis]:
        return x.copy_tracer()
    moved = np.moveaxis(x, axis, 0)
    rows = reshape(moved, (moved.shape[0], -1))
    picked = emit(ops.GATHER, [rows, lift(kept.astype(np.int64), trace=x.trace)], {"axis": 0})
    return np.moveaxis(reshape(picked, (kept.size,) + moved.shape[1:]), 0, axis)


def _edge(values: object, dtype: np.dtype, which: str) -> Tracer | None:
    if values is None:
        return None
    from_dtype = values.dtype if isinstance(values, Tracer) else np.asanyarray(values).dtype
    if not np.can_cast(from_dtype, dtype, casting="same_kind"):
        raise TypeError(located(f"dtype of `{which}` must be compatible with input `ary` under "
                                "the `same_kind` rule."))
    return reshape(lift(values, dtype), (-1,))


@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    flat = reshape(lift(ary), (-1,))
    difference = np.subtract(flat[1:], flat[:-1])
    begin = _edge(to_begin, flat.dtype, "to_begin")
    end = _edge(to_end, flat.dtype, "to_end")
    parts = [p for p in (begin, difference, end) if p is not None]
    return difference if len(parts) == 1 else concatenate(parts)


__all__ = ["atleast_3d", "delete", "dstack", "ediff1d", "resize"]
