"""Reductions with numpy's signatures: sum, prod, max, min, mean, var, std, argmax, any, all."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from jitc.ir import ops, symbolic
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType
from jitc.numpy import float16_order
from jitc.numpy._core import (
    convert,
    implements,
    ir_dtype,
    lift,
    normalize_axes,
    normalize_axis,
    unsupported,
)
from jitc.numpy.shapes import broadcast_to
from jitc.numpy.ufuncs import select
from jitc.tracing.errors import ShapeError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def _keep(x: Tracer, reduced: Tracer, axes: tuple[int, ...], keepdims: bool) -> Tracer:
    if not keepdims:
        return reduced
    shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
    return emit(ops.RESHAPE, [reduced], {}, TensorType(reduced.aval.dtype, shape))


def _check_unsupported(name: str, kwargs: dict[str, Any]) -> None:
    for key, value in kwargs.items():
        if key == "out" and value is not None:
            raise unsupported(f"numpy.{name}(..., out=...)", "Use the returned value.")
        if key == "where" and value is not True:
            raise unsupported(f"numpy.{name}(..., where=...)",
                              "Mask the input with np.where before reducing.")


def _masked(x: Tracer, where: object, fill: object) -> Tracer:
    """numpy's `where=` of a reduction: the elements left out count as `fill` (an identity)."""
    if where is True:
        return x
    mask = lift(where)
    if mask.dtype != np.bool_:
        mask = np.not_equal(mask, 0)
    return select(broadcast_to(mask, x.shape), x, lift(fill, x.dtype))


def _accumulator_dtype(x: Tracer, dtype: object, name: str) -> np.dtype:
    """numpy's sum/prod type: small integers and bool accumulate in the platform integer of
    their signedness (int64, or uint64 for unsigned)."""
    if dtype is not None:
        return ir_dtype(dtype).numpy
    if x.dtype.kind == "b" or (x.dtype.kind == "i" and x.dtype.itemsize < 8):
        return np.dtype(np.int64)
    if x.dtype.kind == "u":
        return np.dtype(np.uint64)
    return x.dtype


def reduce(x: Tracer, axes: tuple[int, ...], kind: str, keepdims: bool = False) -> Tracer:
    """One `reduce` op (a no-op reduce is skipped)."""
    if axes:
        reduced = emit(ops.REDUCE, [x], {"dims": axes, "kind": kind})
    else:
        reduced = x
    return _keep(x, reduced, axes, keepdims)


def _with_initial(x: Tracer, result: Tracer, initial: object, combine) -> Tracer:
    if initial is None:
        return result
    return combine(result, lift(initial, result.dtype))


@implements(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    _check_unsupported("sum", {"out": out})
    x = lift(a)
    axes = normalize_axes(axis, x.ndim)
    acc = _masked(convert(x, _accumulator_dtype(x, dtype, "sum")), where, 0)
    # With dtype=bool numpy stays in bool: adding bools is a logical or.
    kind = "or" if acc.dtype == np.bool_ else "sum"
    if float16_order.applies(acc, kind):
        return _keep(x, float16_order.reduce_in_numpys_order(acc, axes, kind, initial), axes,
                     keepdims)
    result = reduce(acc, axes, kind, keepdims)
    return _with_initial(x, result, initial, np.add)


@implements(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    _check_unsupported("prod", {"out": out})
    x = lift(a)
    axes = normalize_axes(axis, x.ndim)
    acc = _masked(convert(x, _accumulator_dtype(x, dtype, "prod")), where, 1)
    # With dtype=bool numpy stays in bool: multiplying bools is a logical and.
    kind = "and" if acc.dtype == np.bool_ else "prod"
    if float16_order.applies(acc, kind):
        return _keep(x, float16_order.reduce_in_numpys_order(acc, axes, kind, initial), axes,
                     keepdims)
    result = reduce(acc, axes, kind, keepdims)
    return _with_initial(x, result, initial, np.multiply)


def _complex_arg_extreme(x: Tracer, axis: int, largest: bool) -> Tracer:
    """numpy's argmax/argmin of complex values along `axis`: the first value holding a nan,
    else the first of the largest (smallest) in lexicographic order, real part first."""
    from jitc.numpy.complexes import parts
    re, im = parts(x)
    has_nan = np.logical_or(np.isnan(re), np.isnan(im))
    beyond = lift(-np.inf if largest else np.inf, re.dtype)

    def best(values: Tracer, among: Tracer) -> Tracer:
        candidates = select(among, values, broadcast_to(beyond, values.shape))
        return reduce(candidates, (axis,), "max" if largest else "min", keepdims=True)

    clean = np.logical_not(has_nan)
    on_top = np.logical_and(clean, np.equal(re, best(re, clean)))
    on_top = np.logical_and(on_top, np.equal(im, best(im, on_top)))
    first = emit(ops.ARGMAX, [convert(on_top, np.int8)], {"axis": axis})
    first_nan = emit(ops.ARGMAX, [convert(has_nan, np.int8)], {"axis": axis})
    return select(reduce(has_nan, (axis,), "or"), first_nan, first)


def _complex_extremum(name: str, x: Tracer, axes: tuple[int, ...], keepdims: bool,
                      initial: object, where: object) -> Tracer:
    """numpy's max/min of complex values (maximum.reduce): per output, the value at the
    complex argmax/argmin of the reduced axes taken in C order."""
    if initial is not None or where is not True:
        raise unsupported(f"numpy.{name}(..., initial=/where=) of complex values",
                          "Mask with np.where before reducing.")
    if builtins.any(x.shape[ax] == 0 for ax in axes):
        raise ShapeError(located(f"numpy.{name} of an empty axis of {x.aval.short()}: numpy "
                                 "raises here (no identity)"))
    kept = [d for d in range(x.ndim) if d not in axes]
    from jitc.numpy.shapes import reshape, transpose
    rows = reshape(transpose(x, kept + list(axes)), tuple(x.shape[d] for d in kept) + (-1,))
    at = _complex_arg_extreme(rows, rows.ndim - 1, name == "max")
    from jitc.numpy.indexing import take_along_axis
    picked = take_along_axis(rows, reshape(at, at.shape + (1,)), rows.ndim - 1)
    result = reshape(picked, at.shape)
    return _keep(x, result, axes, keepdims)


def _extremum(name: str, kind: str, a, axis, out, keepdims, initial, where):
    _check_unsupported(name, {"out": out})
    x = lift(a)
    axes = normalize_axes(axis, x.ndim)
    if x.dtype.kind == "c":
        return _complex_extremum(name, x, axes, keepdims, initial, where)
    if where is not True:
        if initial is None:
            raise ShapeError(located(
                f"numpy.{name}(..., where=...) needs initial=...: the maximum and minimum have "
                "no identity to give the elements left out (numpy raises here too)"))
        x = _masked(x, where, initial)
    if initial is None and builtins.any(x.shape[ax] == 0 for ax in axes):
        raise ShapeError(located(f"numpy.{name} of an empty axis of {x.aval.short()}: numpy "
                                 "raises here (no identity); pass initial=..."))
    if initial is None:
        # numpy raises for an empty axis: a symbolic one is checked at each call instead.
        for ax in axes:
            if not is_static(x.shape[ax]):
                symbolic.require(symbolic.at_least(x.shape[ax], 1),
                                 f"numpy.{name} of an axis that may be empty")
    result = reduce(x, axes, kind, keepdims)
    return _with_initial(x, result, initial, np.maximum if kind == "max" else np.minimum)


@implements(np.max, np.amax)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    return _extremum("max", "max", a, axis, out, keepdims, initial, where)


@implements(np.min, np.amin)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    return _extremum("min", "min", a, axis, out, keepdims, initial, where)


def _mean_dtype(x: Tracer, dtype: object) -> np.dtype:
    if dtype is not None:
        return ir_dtype(dtype).numpy
    return x.dtype if x.dtype.kind in "fc" else np.dtype(np.float64)


def _count(x: Tracer, axes: tuple[int, ...]) -> DimLike:
    n: DimLike = 1
    for a in axes:
        n *= x.shape[a]
    return n


def _number(count: DimLike, dtype: np.dtype) -> Tracer:
    """A count as a `dtype` scalar: a constant, or for a symbolic extent the call's value."""
    return lift(np.asarray(count, dtype=dtype)) if is_static(count) else lift(count, dtype)


@implements(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=True):
    _check_unsupported("mean", {"out": out})
    x = lift(a)
    axes = normalize_axes(axis, x.ndim)
    result_dtype = _mean_dtype(x, dtype)
    # numpy accumulates float16 means in float32.
    acc_dtype = np.dtype(np.float32) if result_dtype == np.float16 else result_dtype
    total = reduce(_masked(convert(x, acc_dtype), where, 0), axes, "sum", keepdims)
    if where is True:
        n = _number(_count(x, axes), acc_dtype)
    else:  # numpy divides by the number of elements the mask keeps
        kept = broadcast_to(lift(where, np.bool_), x.shape)
        n = reduce(convert(kept, acc_dtype), axes, "sum", keepdims)
    return convert(emit(ops.DIV, [total, n]), result_dtype)


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True, mean=None,
        correction=None):
    _check_unsupported("var", {"out": out, "where": where})
    if mean is not None:
        raise unsupported("numpy.var(..., mean=...)")
    x = lift(a)
    axes = normalize_axes(axis, x.ndim)
    ddof = correction if correction is not None else ddof
    result_dtype = _mean_dtype(x, dtype)
    if x.dtype == result_dtype == np.float16 and float16_order.applies(x, "sum"):
        return _float16_var(x, axes, ddof, keepdims)
    acc_dtype = np.dtype(np.float32) if result_dtype == np.float16 else result_dtype
    xc = convert(x, acc_dtype)
    centered = np.subtract(xc, _mean_keepdims(xc, axes))
    if centered.dtype.kind == "c":  # |x - mean|^2: real, as numpy's var of complex values
        centered = np.real(centered), np.imag(centered)
        squares = np.add(*(np.multiply(part, part) for part in centered))
        acc_dtype = result_dtype = squares.dtype
    else:
        squares = np.multiply(centered, centered)
    total = reduce(squares, axes, "sum", keepdims)
    divisor = _divisor(_count(x, axes), ddof, acc_dtype)
    return convert(emit(ops.DIV, [total, divisor]), result_dtype)


def _divisor(count: DimLike, ddof: object, dtype: np.dtype) -> Tracer:
    """numpy's divisor of a variance, `max(count - ddof, 0)`, as a `dtype` scalar."""
    if is_static(count):
        divisor = builtins.max(count - ddof, 0)  # type: ignore[operator]
        return lift(np.asarray(divisor, dtype=dtype))
    return convert(np.maximum(np.subtract(lift(count), ddof), 0), dtype)


def _float16_var(x: Tracer, axes: tuple[int, ...], ddof: int, keepdims: bool) -> Tracer:
    """numpy's var of float16 values, computed in float16 as numpy does (unlike its mean, which
    sums in float32): float16 sums in numpy's order, each divided by the count in float64 (an
    intp count promotes numpy's true_divide) and rounded back."""
    def divided(total: Tracer, count: int) -> Tracer:
        return convert(np.true_divide(convert(total, np.float64), np.float64(count)), np.float16)
    n = _count(x, axes)
    mean = divided(sum(x, axis=axes, keepdims=True), n)
    centered = np.subtract(x, mean)
    return divided(sum(np.multiply(centered, centered), axis=axes, keepdims=keepdims),
                   builtins.max(n - ddof, 0))


def _mean_keepdims(x: Tracer, axes: tuple[int, ...]) -> Tracer:
    total = reduce(x, axes, "sum", keepdims=True)
    return emit(ops.DIV, [total, _number(_count(x, axes), x.dtype)])


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True, mean=None,
        correction=None):
    v = var(a, axis, dtype, out, ddof, keepdims, where, mean, correction)
    return emit(ops.SQRT, [v])


def _arg(name: str, op, a, axis, out, keepdims):
    _check_unsupported(name, {"out": out})
    x = lift(a)
    if axis is not None:
        axis_ = normalize_axis(axis, x.ndim)
    if axis is None or x.ndim == 0:
        # A 0-d array is one element along its axis 0 (or -1), as in numpy.
        x = emit(ops.RESHAPE, [x], {}, TensorType(x.aval.dtype, (x.size,)))
        axis_ = 0
    if x.shape[axis_] == 0:
        raise ShapeError(located(f"numpy.{name} of an empty sequence ({x.aval.short()})"))
    if x.dtype.kind == "b":
        x = convert(x, np.int8)
    if x.dtype.kind == "c":
        result = _complex_arg_extreme(x, axis_, op is ops.ARGMAX)
    else:
        result = emit(op, [x], {"axis": axis_})
    if keepdims:
        shape = tuple(1 if (axis is None or a == axis_) else d for a, d in
                      enumerate(lift(a).shape))
        result = emit(ops.RESHAPE, [result], {}, TensorType(result.aval.dtype, shape))
    return result


@implements(np.argmax)
def argmax(a, axis=None, out=None, *, keepdims=False):
    return _arg("argmax", ops.ARGMAX, a, axis, out, keepdims)


@implements(np.argmin)
def argmin(a, axis=None, out=None, *, keepdims=False):
    return _arg("argmin", ops.ARGMIN, a, axis, out, keepdims)


def _logical(kind: str, a, axis, out, keepdims, where):
    _check_unsupported("any" if kind == "or" else "all", {"out": out})
    x = lift(a)
    if x.dtype != np.bool_:
        x = np.not_equal(x, 0)
    x = _masked(x, where, kind == "and")
    return reduce(x, normalize_axes(axis, x.ndim), kind, keepdims)


@implements(np.any)
def any(a, axis=None, out=None, keepdims=False, *, where=True):
    return _logical("or", a, axis, out, keepdims, where)


@implements(np.all)
def all(a, axis=None, out=None, keepdims=False, *, where=True):
    return _logical("and", a, axis, out, keepdims, where)


@implements(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    x = lift(a)
    return sum(x if x.dtype == np.bool_ else np.not_equal(x, 0), axis=axis, keepdims=keepdims)


_UFUNC_REDUCERS = {np.add: sum, np.multiply: prod, np.maximum: max, np.minimum: min,
                   np.logical_and: all, np.logical_or: any}


def ufunc_reduce(ufunc: np.ufunc, inputs: tuple, kwargs: dict[str, Any]) -> Tracer:
    """`np.add.reduce(x, axis=0)` and friends."""
    (a,) = inputs
    kwargs = dict(kwargs)
    kwargs.setdefault("axis", 0)
    reducer = _UFUNC_REDUCERS.get(ufunc)
    if reducer is None:
        from jitc.numpy.ufunc_methods import reduce_other
        return reduce_other(ufunc, a, **kwargs)
    if kwargs.get("dtype") is not None and reducer in (max, min, all, any):
        x = convert(lift(a), ir_dtype(kwargs.pop("dtype")).numpy)
        return reducer(x, **kwargs)
    if reducer in (all, any):
        initial = kwargs.pop("initial", None)
        result = reducer(a, **kwargs)
        if initial is None:
            return result
        return np.logical_and(result, bool(initial)) if reducer is all else \
            np.logical_or(result, bool(initial))
    return reducer(a, **kwargs)
