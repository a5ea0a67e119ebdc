"""Array creation. Creation from static shapes alone runs numpy eagerly (the result is a
constant); sizes that are symbolic dimensions (`np.zeros((n, d))`, `np.tri(n)` with
`n = x.shape[0]` of an array with symbolic dimensions) build traced arrays from `iota` and
broadcasts instead. The `*_like` functions and `full` with a traced fill value build traced
arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from jitc.ir import dtypes, ops, symbolic
from jitc.ir.symbolic import Dim, DimLike
from jitc.ir.types import TensorType
from jitc.numpy._core import HANDLED, convert, implements, ir_dtype, lift, result_type
from jitc.numpy.shapes import broadcast_to
from jitc.tracing.errors import ShapeError, TraceError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def _symbolic(*values: object) -> bool:
    """Whether a size argument (or a shape of them) holds a symbolic dimension."""
    return any(isinstance(v, Dim) or (isinstance(v, (tuple, list)) and _symbolic(*v))
               for v in values)


def _shape(shape: object) -> tuple[DimLike, ...]:
    return (shape,) if isinstance(shape, (int, np.integer, Dim)) else tuple(shape)  # type: ignore


def _positions(shape: tuple[DimLike, ...], axis: int) -> Tracer:
    """Each element's index along `axis` (int64), for a shape that may be symbolic."""
    return emit(ops.IOTA, [], {"dimension": axis}, TensorType(dtypes.int64, shape))


def _matrix_size(n: DimLike, m: DimLike | None, name: str) -> tuple[DimLike, DimLike]:
    m = n if m is None else m
    for size in (n, m):
        if not isinstance(size, Dim) and int(size) < 0:
            raise ShapeError(located(f"negative dimensions are not allowed (numpy.{name})"))
    return n, m


def tri(N, M=None, k=0, dtype=float, *, like=None):
    """numpy.tri; symbolic sizes give a traced matrix."""
    if not _symbolic(N, M):
        return np.tri(N, M, k, dtype)
    rows, cols = _matrix_size(N, M, "tri")
    shape = (rows, cols)
    # numpy: greater_equal.outer(arange(N), arange(-k, M - k)), row >= column - k.
    mask = np.greater_equal(np.add(_positions(shape, 0), int(k)), _positions(shape, 1))
    return convert(mask, ir_dtype(dtype).numpy)


def eye(N, M=None, k=0, dtype=float, order="C", *, device=None, like=None):
    """numpy.eye; symbolic sizes give a traced matrix."""
    if not _symbolic(N, M):
        return np.eye(N, M, k, dtype, order)
    rows, cols = _matrix_size(N, M, "eye")
    shape = (rows, cols)
    diagonal = np.equal(np.subtract(_positions(shape, 1), _positions(shape, 0)), int(k))
    return convert(diagonal, ir_dtype(dtype).numpy)


def identity(n, dtype=None, *, like=None):
    return eye(n, dtype=float if dtype is None else dtype)


def arange(*args: Any, dtype=None, device=None, like=None, **kwargs: Any):
    """numpy.arange; a symbolic bound (`np.arange(x.shape[0])`) gives a traced vector of
    integers. Its length must not be negative: `arange(a, b)` records `b >= a`."""
    if not _symbolic(*args, *kwargs.values()):
        return np.arange(*args, dtype=dtype, **kwargs)
    bounds = dict(zip(("start", "stop", "step"), args), **kwargs)
    if "stop" not in bounds:
        bounds = {"start": 0, "stop": bounds["start"], "step": bounds.get("step", 1)}
    start, stop, step = bounds["start"], bounds["stop"], bounds.get("step", 1)
    if step is None:
        step = 1
    if not all(isinstance(v, (int, np.integer, Dim)) for v in (start, stop, step)) or \
            isinstance(step, Dim) or step <= 0:
        raise TraceError(located(
            "numpy.arange with a symbolic bound needs integer bounds and a positive static "
            f"step, got arange({start}, {stop}, {step})"))
    try:
        symbolic.require(symbolic.at_least(stop, start), "numpy.arange with a symbolic bound")
    except symbolic.ConstraintError as exc:
        raise ShapeError(located(str(exc))) from None
    length = symbolic.ceil_divide(stop - start, int(step))
    values = _positions((length,), 0)
    if step != 1:
        values = np.multiply(values, int(step))
    if not (isinstance(start, int) and start == 0):
        values = np.add(values, lift(start, np.int64))
    return values if dtype is None else convert(values, ir_dtype(dtype).numpy)


def _filled_shape(shape: object, value: object, dtype: object) -> Tracer:
    fill = np.asarray(value, dtype=dtype if dtype is not None else np.asarray(value).dtype)
    return broadcast_to(lift(fill), _shape(shape))


def zeros(shape, dtype=float, order="C", *, device=None, like=None):
    if not _symbolic(shape):
        return np.zeros(shape, dtype, order)
    return _filled_shape(shape, 0, dtype)


def ones(shape, dtype=None, order="C", *, device=None, like=None):
    if not _symbolic(shape):
        return np.ones(shape, dtype, order)
    return _filled_shape(shape, 1, float if dtype is None else dtype)


empty = zeros  # a traced program never sees uninitialised memory


# `np.tri(n, like=x)` with x traced: numpy hands the call to jitc (NEP 35).
HANDLED.update({np.tri: tri, np.eye: eye, np.identity: identity, np.arange: arange,
                np.zeros: zeros, np.ones: ones, np.empty: zeros})


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
        if not _symbolic(shape):
            return np.full(shape, fill_value, dtype)
        return _filled_shape(shape, fill_value, dtype)
    target = ir_dtype(dtype).numpy if dtype is not None else result_type(fill_value)
    return broadcast_to(lift(fill_value, target), _shape(shape))


HANDLED[np.full] = full


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
    return _an_array(_filled_shape(shape, value, dtype).copy_tracer())


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


def _linspace(*args, **kwargs):
    """numpy.linspace, or jitc's for a symbolic number of samples (numpy's needs an int)."""
    if _symbolic(*args, *kwargs.values()):
        from jitc.numpy.ranges import linspace
        return linspace(*args, **kwargs)
    return np.linspace(*args, **kwargs)


TRACED_CREATION = {
    np.zeros: _traced_zeros, np.ones: _traced_ones, np.empty: _traced_zeros,
    np.full: _traced_full, np.array: _traced_array, np.asarray: _traced_asarray,
    np.linspace: _from_numpy(_linspace), np.arange: _from_numpy(arange),
    np.eye: _from_numpy(eye), np.identity: _from_numpy(identity), np.tri: _from_numpy(tri),
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
