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


def _an_array(traced: Tracer) -> Tracer:
    """`traced` as an ndarray: a 0-d result then stays a 0-d array where numpy would return
    a scalar (`np.asarray(x.sum())`, `np.zeros(())` are arrays; `x.sum()` is a scalar)."""
    if not traced._array:
        traced = traced.copy_tracer()
        traced._array = True
    return traced


def asarray(a, dtype=None, order=None, *, copy=None, device=None, like=None):
    if isinstance(a, Tracer):
        return _an_array(a if dtype is None else lift(a, dtype))
    if isinstance(a, (list, tuple)) and any(isinstance(v, Tracer) for v in a):
        from jitc.numpy.shapes import stack
        return lift(stack(list(a)), dtype)
    return np.asarray(a, dtype=dtype)


def array(a, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    result = asarray(a, dtype)
    if copy and result is a and isinstance(a, Tracer):
        return _an_array(a.copy_tracer())  # a new array: writes must not reach `a`
    return _an_array(result) if isinstance(result, Tracer) else result


# -- creation inside a traced function -----------------------------------------------------------
# numpy's creation functions called with shapes alone never see a tracer, so they return plain
# arrays, and a plain array cannot record `y[i] = traced_value`. Inside a trace the function's
# `np` is a stand-in (jitc.tracing.capture) whose creation functions return traced arrays of the
# same value: fresh arrays that later writes update, as numpy's are.


def _traced(array: np.ndarray) -> Tracer:
    traced = _an_array(lift(array).copy_tracer())
    if array.dtype.kind in "biuf":
        traced._known = array  # still static (an index, histogram edges) until written
    return traced


def _filled(shape, value, dtype) -> Tracer:
    fill = np.asarray(value, dtype=dtype if dtype is not None else np.asarray(value).dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return _an_array(broadcast_to(lift(fill), shape).copy_tracer())


def _traced_zeros(shape, dtype=float, order="C", *, device=None, like=None):
    return _filled(shape, 0, dtype)


def _traced_ones(shape, dtype=None, order="C", *, device=None, like=None):
    return _filled(shape, 1, float if dtype is None else dtype)


def _traced_full(shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    if isinstance(fill_value, Tracer):
        return _an_array(full(shape, fill_value, dtype).copy_tracer())
    return _filled(shape, fill_value, dtype)


def _traced_array(a, dtype=None, *args, copy=True, **kwargs):
    if isinstance(a, Tracer):
        result = a if dtype is None else lift(a, dtype)
        return _an_array(result.copy_tracer() if copy and result is a else result)
    if isinstance(a, (list, tuple)) and any(isinstance(v, Tracer) for v in a):
        return asarray(a, dtype)
    return _traced(np.array(a, dtype, *args, copy=True, **kwargs))


def _traced_asarray(a, dtype=None, *args, **kwargs):
    if isinstance(a, Tracer) or (isinstance(a, (list, tuple))
                                 and any(isinstance(v, Tracer) for v in a)):
        return asarray(a, dtype)
    if isinstance(a, np.ndarray) and (dtype is None or a.dtype == dtype):
        return a  # numpy's asarray is the array itself: writes must reach it
    return _traced(np.asarray(a, dtype, *args, **kwargs))


def _from_numpy(fn):
    def traced(*args, **kwargs):
        result = fn(*args, **kwargs)
        if isinstance(result, tuple):  # linspace(..., retstep=True)
            return (traced_array(result[0]),) + result[1:]
        return traced_array(result)

    def traced_array(result):
        return result if isinstance(result, Tracer) else _traced(result)
    traced.__name__ = fn.__name__
    return traced


TRACED_CREATION = {
    np.zeros: _traced_zeros, np.ones: _traced_ones, np.empty: _traced_zeros,
    np.full: _traced_full, np.array: _traced_array, np.asarray: _traced_asarray,
    **{fn: _from_numpy(fn) for fn in (np.arange, np.eye, np.identity, np.linspace, np.tri)},
}


class TracingNumpy:
    """The numpy module as a traced function sees it: creation functions give traced arrays,
    `np.random` is refused, everything else is numpy's own."""

    def __init__(self, module) -> None:
        self._module = module

    def __getattr__(self, name: str):
        if name == "random":
            return _RandomRefused()
        value = getattr(self._module, name)
        return TRACED_CREATION.get(value, value) if callable(value) else value


class _RandomRefused:
    """`np.random` inside a traced function: it would run once, at trace time, and every call
    would reuse the same numbers (a silent wrong answer); so it is an error."""

    def __getattr__(self, name: str):
        function = getattr(np.random, name)

        def refused(*args, **kwargs):
            from jitc.tracing.errors import TraceError, located
            from jitc.tracing.state import current_trace
            error = TraceError(located(
                f"numpy.random.{name} inside a jitted function would run once, when the "
                "function is traced, and every call would reuse the same numbers.\nDraw them "
                "outside and pass them in: rng = np.random.default_rng(); f(x, "
                "rng.standard_normal(x.shape))."))
            state = current_trace()
            if state is None:
                raise error
            return state.obstacle(error, function(*args, **kwargs))
        return refused

    def __repr__(self) -> str:
        return f"<numpy as seen by a traced function ({self._module.__name__})>"
