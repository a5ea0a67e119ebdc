"""Shared machinery of jitc.numpy: lifting values into the trace, numpy's dtype promotion,
and the registry that maps numpy functions to their traced implementations."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from jitc.arguments import check_plain_array
from jitc.ir import dtypes, ops
from jitc.ir.symbolic import Dim
from jitc.ir.types import TensorType
from jitc.tracing.errors import ShapeError, TraceError, located
from jitc.tracing.state import TraceState, current_trace, emit, extent_value
from jitc.tracing.tracer import Tracer

ArrayLike = Any

# numpy function -> traced implementation (used by Tracer.__array_function__)
HANDLED: dict[Callable, Callable] = {}


def is_tracer(x: object) -> bool:
    return isinstance(x, Tracer)


def tracers_in(args: Iterable[object]) -> list[Tracer]:
    found: list[Tracer] = []
    for a in args:
        if isinstance(a, Tracer):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(tracers_in(a))
    return found


def trace_of(*args: object) -> TraceState:
    state = current_trace()
    if state is not None:
        return state
    found = tracers_in(args)
    if found:
        return found[0].trace
    if state is None:
        raise TraceError("jitc: no active trace")
    return state


def implements(*numpy_functions: Callable, eager: Callable | None = None):
    """Register a traced implementation of numpy functions.

    The decorated function becomes the public jitc.numpy function: with no tracer among its
    arguments it simply runs numpy (`eager`, default the first numpy function), so jitc.numpy
    code also works outside jit.
    """
    def wrap(impl: Callable) -> Callable:
        fallback = eager or (numpy_functions[0] if numpy_functions else None)

        @functools.wraps(impl)
        def public(*args: Any, **kwargs: Any) -> Any:
            if fallback is not None and not tracers_in(args) and \
                    not tracers_in(kwargs.values()) and not _extents_in(args, kwargs):
                return fallback(*args, **kwargs)
            return impl(*args, **kwargs)

        for fn in numpy_functions:
            HANDLED[fn] = impl
        return public
    return wrap


def _extents_in(args: tuple, kwargs: dict) -> bool:
    """Whether a symbolic extent is among the arguments (or in a shape tuple among them):
    numpy would need its value (`np.linspace(0, 1, x.shape[0])`), jitc takes it."""
    return any(isinstance(v, Dim) or (isinstance(v, tuple) and any(isinstance(d, Dim)
                                                                     for d in v))
               for v in (*args, *kwargs.values()))


def unsupported(name: str, hint: str = "") -> TraceError:
    extra = f"\n{hint}" if hint else ""
    return TraceError(located(
        f"{name} is not supported inside jitc.jit yet.{extra}\nThe supported numpy surface is "
        "listed in docs/jit.md."))


def refuse_complex_order(x: Any, name: str) -> None:
    """Sorts and extrema of complex values: numpy orders them by real part, then imaginary
    part (nan parts last), an order jitc's sort and max/min ops do not have."""
    if x.dtype.kind == "c":
        raise unsupported(f"numpy.{name} of complex values ({x.dtype})",
                          "numpy orders complex values by real part, then imaginary part; jitc "
                          "does not trace that order yet. Take np.real(x) or np.abs(x) first "
                          "if that is what is meant (docs/dtypes.md).")


def refuse_complex_quantile(x: Any, name: str) -> None:
    """numpy's quantile and percentile refuse complex values with this TypeError."""
    if x.dtype.kind == "c":
        raise TypeError(located(f"numpy.{name}: a must be an array of real numbers"))


# -- dtypes ----------------------------------------------------------------------------------

def is_python_scalar(x: object) -> bool:
    """A Python bool, int, float or complex; numpy scalars (np.float64 subclasses float) are
    not."""
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def dtype_key(x: object) -> object:
    """What numpy's promotion sees: a dtype, or a Python scalar type for weak values.

    Under NEP 50 Python ints, floats and complexes are weak; a Python bool is simply numpy's
    bool."""
    if isinstance(x, Tracer):
        if x.weak and x.dtype.kind != "b":
            return {"i": int, "u": int, "f": float, "c": complex}[x.dtype.kind]
        return x.dtype
    if isinstance(x, bool):
        return np.dtype(np.bool_)
    if is_python_scalar(x) or isinstance(x, Dim):  # an extent is the Python int numpy sees
        return int if isinstance(x, Dim) else type(x)
    if isinstance(x, (np.dtype, type, str)):  # np.result_type(x, np.float64) passes dtypes
        return np.dtype(x)
    return np.asarray(x).dtype


_WEAK_SAMPLE = {int: 0, float: 0.0, complex: 0j}


def result_type(*xs: object) -> np.dtype:
    keys = [dtype_key(x) for x in xs]
    samples = [_WEAK_SAMPLE.get(k, k) for k in keys]
    return np.result_type(*samples)


def ir_dtype(dtype: object) -> dtypes.DType:
    try:
        return dtypes.from_numpy(dtype)
    except TypeError as exc:
        raise TraceError(located(str(exc))) from None


def convert(x: Tracer, dtype: object, discard_imaginary: bool = False) -> Tracer:
    """x converted to `dtype`. A complex x becomes real only when the caller says so
    (`astype`): anywhere else that would drop the imaginary parts, and jitc refuses."""
    target = ir_dtype(dtype)
    if x.value.type.dtype is target:
        return x
    if x.dtype.kind == "c" and not (target.is_complex or target.is_bool or discard_imaginary):
        raise TraceError(located(
            f"this computation would convert complex values ({x.dtype}) to {target.numpy}, "
            "dropping their imaginary parts: it is not traced for complex values yet. Take "
            "np.real(x) or np.abs(x) first if that is what is meant (docs/dtypes.md lists what "
            "is traced for complex values)."))
    return emit(ops.CONVERT, [x], {}, TensorType(target, x.shape))


def lift(x: ArrayLike, dtype: object = None, trace: TraceState | None = None) -> Tracer:
    """x as a tracer of the current trace, converted to `dtype` when one is given."""
    if isinstance(x, Tracer):
        return x if dtype is None else convert(x, dtype)
    state = trace or trace_of()
    if isinstance(x, Dim):  # a symbolic extent used as a number: the call's value
        extent = extent_value(x, state)
        return extent if dtype is None else convert(extent, dtype)
    if isinstance(x, (list, tuple)):
        if tracers_in(x):
            return stack_values(x, dtype)
        x = np.asarray(x)
    target = None if dtype is None else ir_dtype(dtype)
    if isinstance(x, np.ndarray):
        captured = state.captured.get(id(x))
        if captured is not None:  # read at call time (jitc.tracing.capture)
            return captured if target is None else convert(captured, target.numpy)
        check_plain_array(x, located("an array used in the traced function"))
        return state.constant(x if target is None or x.dtype == target.numpy
                              else x.astype(target.numpy))
    if is_python_scalar(x) and target is None:
        return state.constant(x, weak=True)
    array = np.asarray(x) if target is None else np.asarray(x, dtype=target.numpy)
    if not dtypes.is_supported_numpy(array.dtype):
        raise TraceError(located(f"values of type {type(x).__name__} ({array.dtype}) cannot "
                                 "be used in jitc code"))
    return state.constant(array.item() if array.ndim == 0 else array,
                          dtypes.from_numpy(array.dtype))


def lift_all(xs: Sequence[ArrayLike], dtype: object = None) -> list[Tracer]:
    """Lift several values, promoted to one dtype (numpy's rules) unless `dtype` is given."""
    state = trace_of(*xs)
    target = dtype if dtype is not None else result_type(*xs)
    return [lift(x, target, state) for x in xs]


def stack_values(xs: Sequence[ArrayLike], dtype: object = None) -> Tracer:
    from jitc.numpy.shapes import stack
    return stack(list(xs)) if dtype is None else convert(stack(list(xs)), dtype)


def whole_slice(item: object) -> bool:
    """Whether `item` is `:`, asked part by part: `==` on slices compares their bounds with
    `==`, which for traced bounds is a traced comparison, not a bool."""
    return isinstance(item, slice) and item.start is None and item.stop is None and \
        item.step is None


def check_static_int(value: object, what: str) -> int:
    if isinstance(value, Tracer):
        value.int_argument_needed()
        raise TraceError(located(f"{what} must be a static integer, not a traced value; make "
                                 "it static with static_argnums or compute it from shapes"))
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise TraceError(located(f"{what} must be an integer, got {value!r}")) from None


def normalize_axis(axis: object, ndim: int, what: str = "axis") -> int:
    a = check_static_int(axis, what)
    if not (a in (0, -1) if ndim == 0 else -ndim <= a < ndim):
        raise ShapeError(located(f"{what} {a} is out of bounds for an array of dimension "
                                 f"{ndim}"))
    return a % ndim if ndim else 0


def normalize_axes(axis: object, ndim: int) -> tuple[int, ...]:
    """numpy's axis argument (None, int or tuple) as sorted, distinct, non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        if ndim == 0 and axis:
            raise ShapeError(located(f"axis {axis[0]} is out of bounds for an array of "
                                     "dimension 0"))
        axes = [normalize_axis(a, ndim) for a in axis]
    else:
        single = normalize_axis(axis, ndim)
        # numpy takes an int axis 0 (or -1) of a 0-d array, which has no axis to reduce.
        axes = [single] if ndim else []
    if len(set(axes)) != len(axes):
        raise ShapeError(located(f"repeated axis in {axis!r}"))
    return tuple(sorted(axes))
