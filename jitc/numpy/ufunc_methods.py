"""The methods of numpy's ufuncs on tracers: `outer`, `reduce`, `accumulate`, and the running
reductions `np.cumsum` and `np.cumprod`.

A running reduction along an axis of length n is a Hillis-Steele scan: log2(n) steps, each
combining every element with the one `shift` places before it (a pad shifts the array along the
axis, a select keeps the first `shift` elements). It needs the ufunc to be associative, and a
float result is rounded in another order than numpy's element-by-element loop (as a jitc sum is),
except float16 sums and products, which follow numpy's loop (float16_order.py): their rounding
after every element is visible.
A reduction the `reduce` op has no kind for (bitwise_or, fmax, ...) halves the axis each step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.symbolic import is_static
from jitc.ir.types import TensorType
from jitc.numpy import float16_order
from jitc.numpy._core import (
    convert,
    dtype_key,
    implements,
    ir_dtype,
    lift,
    normalize_axes,
    normalize_axis,
    unsupported,
)
from jitc.numpy.shapes import broadcast_to, concatenate, ravel, reshape, slice_axis, transpose
from jitc.numpy.ufuncs import UFUNCS, call_ufunc, select
from jitc.tracing.errors import IndexingError, ShapeError, TraceError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer

# Ufuncs whose reduce and accumulate jitc traces: the associative ones (a scan and a tree may
# group their operands in any order). numpy folds from the left; for these it is the same value.
ASSOCIATIVE = frozenset({
    np.add, np.multiply, np.maximum, np.minimum, np.fmax, np.fmin, np.logical_and,
    np.logical_or, np.logical_xor, np.bitwise_and, np.bitwise_or, np.bitwise_xor})

# Where numpy accumulates bool and small integers in the platform integer, as np.sum does.
_UPCASTING = frozenset({np.add, np.multiply})


def _not_associative(ufunc: np.ufunc, method: str) -> TraceError:
    names = ", ".join(sorted(u.__name__ for u in ASSOCIATIVE))
    return unsupported(f"numpy.{ufunc.__name__}.{method}",
                       f"jitc traces {method} for associative ufuncs: {names}.")


def method_dtype(ufunc: np.ufunc, x: Tracer, dtype: object, name: str) -> np.dtype:
    """The dtype numpy's ufunc.reduce / accumulate computes and returns in."""
    if dtype is not None:
        wanted = ir_dtype(dtype).numpy
        return ufunc.resolve_dtypes((wanted, wanted, None), signature=(None, None, wanted))[-1]
    if ufunc in _UPCASTING and x.dtype.kind in "biu" and x.dtype.itemsize < 8:
        return np.dtype(np.uint64 if x.dtype.kind == "u" else np.int64)
    key = dtype_key(x)
    return ufunc.resolve_dtypes((key, key, None))[-1]


def _combine(ufunc: np.ufunc) -> Callable[[Tracer, Tracer], Tracer]:
    """The ufunc applied to two tracers of one dtype, which is also its result dtype."""
    impl = UFUNCS[ufunc]

    def combine(earlier: Tracer, later: Tracer) -> Tracer:
        return call_ufunc(ufunc, impl, (earlier, later), earlier.dtype)
    return combine


# -- outer -------------------------------------------------------------------------------------

def outer(ufunc: np.ufunc, inputs: tuple, kwargs: dict[str, Any]) -> Tracer:
    """`ufunc.outer(a, b)`: ufunc(a[..., None, ..., None], b), of shape a.shape + b.shape."""
    if ufunc.nin != 2 or len(inputs) != 2:
        raise unsupported(f"numpy.{ufunc.__name__}.outer with these arguments",
                          "Binary ufuncs are supported: ufunc.outer(a, b).")
    a, b = inputs
    if not isinstance(a, Tracer):
        a = np.asarray(a)
    if not isinstance(b, Tracer):
        b = np.asarray(b)
    spread = reshape(lift(a), a.shape + (1,) * b.ndim) if b.ndim else a
    return ufunc(spread, b, **kwargs)


# -- reduce ------------------------------------------------------------------------------------

def reduce_other(ufunc: np.ufunc, a: Any, axis: object = 0, dtype: object = None,
                 out: object = None, keepdims: bool = False, initial: object = None,
                 where: object = True) -> Tracer:
    """`ufunc.reduce` of an associative ufunc the `reduce` op has no kind for."""
    name = f"numpy.{ufunc.__name__}.reduce"
    if ufunc not in ASSOCIATIVE:
        raise _not_associative(ufunc, "reduce")
    if out is not None:
        raise unsupported(f"{name}(..., out=...)", "Use the returned value.")
    x = lift(a)
    result_dtype = method_dtype(ufunc, x, dtype, name)
    x = convert(x, result_dtype)
    axes = normalize_axes(axis, x.ndim)
    fill = ufunc.identity if initial is None else initial
    if where is not True:
        if fill is None:
            raise ShapeError(located(
                f"{name}: numpy.{ufunc.__name__} has no identity, so a where= mask needs "
                "initial=... (numpy raises here too)"))
        x = select(broadcast_to(lift(where, np.bool_), x.shape), x, lift(fill, result_dtype))
    kept = [d for i, d in enumerate(x.shape) if i not in axes]
    count = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
    if count == 0:
        if fill is None:
            raise ShapeError(located(
                f"{name} of an empty axis of {x.aval.short()}: numpy.{ufunc.__name__} has no "
                "identity; pass initial=..."))
        result = broadcast_to(lift(fill, result_dtype), tuple(kept))
    else:
        moved = transpose(x, [i for i in range(x.ndim) if i not in axes] + list(axes))
        result = _halving(reshape(moved, tuple(kept) + (count,)), _combine(ufunc))
        if initial is not None:
            result = _combine(ufunc)(lift(initial, result_dtype), result)
    if keepdims:
        result = reshape(result, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return result


def _halving(x: Tracer, combine: Callable[[Tracer, Tracer], Tracer]) -> Tracer:
    """x combined along its last axis (of length >= 1) in log2(n) halving steps."""
    ax = x.ndim - 1
    while x.shape[ax] > 1:
        n = x.shape[ax]
        half = n // 2
        paired = combine(slice_axis(x, ax, 0, half), slice_axis(x, ax, half, 2 * half))
        x = paired if n % 2 == 0 else concatenate([paired, slice_axis(x, ax, n - 1, n)], ax)
    return reshape(x, x.shape[:ax])


def _sequential_scan(x: Tracer, axis: int, combine: Callable[[Tracer, Tracer], Tracer]
                     ) -> Tracer:
    """The running combination along a symbolic axis: one step per element in a loop whose
    trip count is the call's extent, combining in numpy's own order."""
    from jitc import lax  # jitc.lax builds on jitc.numpy
    rows = transpose(x, [axis] + [a for a in range(x.ndim) if a != axis])
    n = rows.shape[0]
    # One spare row, so that the one-row blocks fit even when the axis is empty.
    spare = [0] * x.ndim
    spare[0] = 1
    rows = emit(ops.PAD, [rows, lift(np.zeros((), x.dtype))],
                {"low": [0] * x.ndim, "high": spare, "interior": [0] * x.ndim})
    zeros = [np.int64(0)] * (x.ndim - 1)
    block = [1, *rows.shape[1:]]

    def step(i: Tracer, acc: Tracer) -> Tracer:
        previous = lax.dynamic_slice(acc, [i - 1, *zeros], block)
        current = lax.dynamic_slice(acc, [i, *zeros], block)
        return lax.dynamic_update_slice(acc, combine(previous, current), [i, *zeros])

    done = slice_axis(lax.fori_loop(np.int64(1), lift(n, np.int64), step, rows), 0, 0, n)
    order = list(range(1, axis + 1)) + [0] + list(range(axis + 1, x.ndim))
    return transpose(done, order)


# -- accumulate, cumsum, cumprod -----------------------------------------------------------------

def scan(x: Tracer, axis: int, combine: Callable[[Tracer, Tracer], Tracer]) -> Tracer:
    """The running combination of x along `axis`: out[i] = x[0] op x[1] op ... op x[i]."""
    n = x.shape[axis]
    if not is_static(n):
        return _sequential_scan(x, axis, combine)
    if n <= 1:
        return x
    position = emit(ops.IOTA, [], {"dimension": axis}, TensorType(dtypes.int64, x.shape))
    zero = lift(np.zeros((), x.dtype))
    shift = 1
    while shift < n:
        low, high = [0] * x.ndim, [0] * x.ndim
        low[axis], high[axis] = shift, -shift
        earlier = emit(ops.PAD, [x, zero], {"low": low, "high": high, "interior": [0] * x.ndim})
        reaches = np.greater_equal(position, lift(np.int64(shift)))
        x = select(reaches, combine(earlier, x), x)
        shift *= 2
    return x


def accumulate(ufunc: np.ufunc, a: Any, axis: object = 0, dtype: object = None,
               out: object = None, name: str | None = None) -> Tracer:
    """`ufunc.accumulate(a, axis)`; `np.cumsum` and `np.cumprod` with axis=None flatten."""
    name = name or f"numpy.{ufunc.__name__}.accumulate"
    if ufunc not in ASSOCIATIVE:
        raise _not_associative(ufunc, "accumulate")
    if out is not None:
        raise unsupported(f"{name}(..., out=...)", "Use the returned value.")
    x = lift(a)
    if axis is None:
        x, axis = ravel(x), 0
    if x.ndim == 0:
        raise ShapeError(located(f"{name}: cannot accumulate a 0-d array ({x.aval.short()})"))
    ax = normalize_axis(axis, x.ndim)
    x = convert(x, method_dtype(ufunc, x, dtype, name))
    kind = {np.add: "sum", np.multiply: "prod"}.get(ufunc, "")
    if float16_order.applies(x, kind):
        return float16_order.accumulate_in_numpys_order(x, ax, kind)
    return scan(x, ax, _combine(ufunc)).copy_tracer()


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    x = lift(a)
    if axis is None and x.ndim == 0:
        x = ravel(x)
    return accumulate(np.add, x, axis, dtype, out, "numpy.cumsum")


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    x = lift(a)
    if axis is None and x.ndim == 0:
        x = ravel(x)
    return accumulate(np.multiply, x, axis, dtype, out, "numpy.cumprod")


def reduceat(ufunc: np.ufunc, array: Any, indices: Any, axis: object = 0, dtype: object = None,
             out: object = None) -> Tracer:
    """numpy's `ufunc.reduceat` with constant indices: one reduction per slice
    indices[k]:indices[k + 1] (or the element at indices[k] when the slice is empty)."""
    name = f"numpy.{ufunc.__name__}.reduceat"
    if ufunc not in ASSOCIATIVE:
        raise _not_associative(ufunc, "reduceat")
    if out is not None:
        raise unsupported(f"{name}(..., out=...)", "Use the returned value.")
    if isinstance(indices, Tracer):
        indices = indices._known if indices._known is not None else indices
    if isinstance(indices, Tracer):
        raise TraceError(located(
            f"{name} with traced indices: the slices they delimit must be known while "
            "tracing. Pass constant indices"))
    x = lift(array)
    stand_in = np.lib.stride_tricks.as_strided(np.zeros(1, x.dtype), x.shape, (0,) * x.ndim,
                                               writeable=False)
    try:
        numpy_result = ufunc.reduceat(stand_in, indices, axis=axis, dtype=dtype)
    except IndexError as exc:
        raise IndexingError(located(f"{name}: {exc}")) from None
    except TypeError as exc:
        raise TraceError(located(f"{name}: {exc}")) from None
    except ValueError as exc:
        raise ShapeError(located(f"{name}: {exc}")) from None
    result_dtype = numpy_result.dtype
    x = convert(x, result_dtype)
    ax = normalize_axis(axis, x.ndim)
    starts = np.asarray(indices, np.intp).reshape(-1)
    if starts.size == 0:
        return lift(numpy_result).copy_tracer()
    ends = np.append(starts[1:], x.shape[ax])
    pieces = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        if start < end:
            part = slice_axis(x, ax, start, end)
            pieces.append(reduce_other(ufunc, part, axis=ax, keepdims=True)
                          if ufunc not in _UPCASTING else
                          ufunc.reduce(part, axis=ax, dtype=result_dtype, keepdims=True))
        else:
            pieces.append(slice_axis(x, ax, start, start + 1))
    return concatenate(pieces, axis=ax) if len(pieces) > 1 else pieces[0].copy_tracer()


def apply_method(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict[str, Any]) -> Any:
    """ufunc.outer / accumulate / reduceat, reached through Tracer.__array_ufunc__."""
    if method == "outer":
        return outer(ufunc, inputs, kwargs)
    if method == "accumulate":
        return accumulate(ufunc, *inputs, **kwargs)
    if method == "reduceat":
        return reduceat(ufunc, *inputs, **kwargs)
    raise unsupported(f"numpy.{ufunc.__name__}.{method}")
