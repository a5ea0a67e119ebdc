"""Array creation. Creation from shapes alone runs numpy eagerly (the result is a constant);
the `*_like` functions and `full` with a traced fill value build traced arrays."""

from __future__ import annotations

import numpy as np

from jitc.numpy._core import implements, ir_dtype, lift, result_type
from jitc.numpy.shapes import broadcast_to
from jitc.tracing.tracer import Tracer

# Shape-only creation functions: plain numpy, so they fold to constants when traced.
zeros = np.zeros
ones = np.ones
empty = np.zeros  # a traced program never sees uninitialised memory
arange = np.arange
linspace = np.linspace
eye = np.eye
identity = np.identity
tri = np.tri


def _like(prototype, value, dtype, shape) -> Tracer:
    x = lift(prototype)
    target = ir_dtype(dtype).numpy if dtype is not None else x.dtype
    out_shape = x.shape if shape is None else ((shape,) if isinstance(shape, int) else shape)
    return broadcast_to(lift(value, target), tuple(out_shape))


@implements(np.zeros_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, 0, dtype, shape)


@implements(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, 1, dtype, shape)


@implements(np.empty_like)
def empty_like(prototype, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(prototype, 0, dtype, shape)


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(a, fill_value, dtype, shape)


def full(shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    if not isinstance(fill_value, Tracer):
        return np.full(shape, fill_value, dtype)
    target = ir_dtype(dtype).numpy if dtype is not None else result_type(fill_value)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return broadcast_to(lift(fill_value, target), shape)


def asarray(a, dtype=None, order=None, *, copy=None, device=None, like=None):
    if isinstance(a, Tracer):
        return a if dtype is None else lift(a, dtype)
    if isinstance(a, (list, tuple)) and any(isinstance(v, Tracer) for v in a):
        from jitc.numpy.shapes import stack
        return lift(stack(list(a)), dtype)
    return np.asarray(a, dtype=dtype)


def array(a, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    result = asarray(a, dtype)
    if copy and result is a and isinstance(a, Tracer):
        from jitc.numpy.shapes import fresh
        return fresh(a)
    return result
