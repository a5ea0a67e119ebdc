"""Sorting and order statistics of traced arrays: sort, argsort, ndarray.sort, partition,
argpartition, median, percentile, quantile (and their nan-ignoring forms in nanfunctions.py).

Everything ends in the `sort` op, which is stable with nan last: numpy's `kind="stable"`
exactly, and one of the answers numpy allows for every other kind (numpy leaves the order of
equal elements, and partition the order around `kth`, unspecified). The order statistics
follow numpy's own algorithm on the sorted array, with the interpolation weights computed at
trace time from the static `q`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jitc.ir import ops, symbolic
from jitc.ir.symbolic import DimLike, at_most, is_static
from jitc.numpy._core import (
    convert,
    implements,
    lift,
    normalize_axis,
    refuse_complex_quantile,
    unsupported,
)
from jitc.numpy.indexing import take_along_axis
from jitc.numpy.shapes import reshape, slice_axis, squeeze, stack
from jitc.numpy.ufuncs import select
from jitc.tracing.errors import TraceError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def _check_kind(name: str, kind: object, order: object, stable: object = None) -> None:
    """numpy's checks of `kind` (its first letter, any case, picks quick, heap, merge or
    stable), `stable=` and `order=`; every kind gives jitc's stable sort."""
    if order is not None:
        raise unsupported(f"numpy.{name}(..., order=...)",
                          "jitc has no structured dtypes; sort the field's array instead.")
    if kind is not None and stable is not None:
        raise ValueError(located("`kind` and keyword parameters can't be provided at the same "
                                 "time. Use only one of them."))
    if kind is not None and not (isinstance(kind, str) and kind[:1].lower() in "qhms"
                                 and kind[:1]):
        raise ValueError(located(f"sort kind must be one of 'quick', 'heap', or 'stable' "
                                 f"(got {kind!r})"))


def _axis_of(x: Tracer, axis: object, name: str) -> tuple[Tracer, int]:
    """The array and the non-negative axis numpy sorts along (axis=None: the flat array)."""
    if axis is None:
        return reshape(x, (-1,)), 0
    if x.ndim == 0:
        raise np.exceptions.AxisError(located(
            f"numpy.{name}: axis {axis} is out of bounds for array of dimension 0"))
    return x, normalize_axis(axis, x.ndim)


def sort_along(x: Tracer, axis: int, output: str = "values") -> Tracer:
    """x stably sorted along `axis`, nan last: the values, or (output="indices") the int64
    positions they come from."""
    if at_most(x.shape[axis], 1):  # a symbolic axis is sorted at each call
        if output == "values":
            return x.copy_tracer()
        return lift(np.zeros(x.shape, np.int64)).copy_tracer()
    if x.dtype.kind == "c":
        order = _complex_order(x, axis)
        return order if output == "indices" else take_along_axis(x, order, axis)
    keys = convert(x, np.uint8) if x.dtype == np.bool_ else x
    out = emit(ops.SORT, [keys], {"axis": axis, "output": output})
    return convert(out, np.bool_) if output == "values" and x.dtype == np.bool_ else out


def _complex_order(x: Tracer, axis: int) -> Tracer:
    """numpy's stable order of complex values: by real part, then imaginary part, with the
    values that hold a nan after the others in groups: re+nan*j (by re), then nan+im*j (by
    im), then nan+nan*j. Three stable sorts, least significant key first (an LSD sort), so
    each backend's real sort gives it."""
    from jitc.numpy.complexes import parts
    re, im = parts(x)
    nan_re, nan_im = np.isnan(re), np.isnan(im)
    group = np.add(np.multiply(convert(nan_re, np.int8), np.int8(2)), convert(nan_im, np.int8))
    within_group = select(nan_re, im, re)
    order = sort_along(im, axis, "indices")
    for key in (within_group, group):
        reordered = take_along_axis(key, order, axis)
        order = take_along_axis(order, sort_along(reordered, axis, "indices"), axis)
    return order


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    _check_kind("sort", kind, order, stable)
    x, axis_ = _axis_of(lift(a), axis, "sort")
    return sort_along(x, axis_)


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    _check_kind("argsort", kind, order, stable)
    x, axis_ = _axis_of(lift(a), axis, "argsort")
    return sort_along(x, axis_, "indices")


@implements(np.sort_complex)
def sort_complex(a):
    """The flat-axis-last sort, as complex: complex64 from int8, uint8, int16 and uint16 (numpy's
    'bhBH'), complex128 from every other real dtype."""
    x = sort_along(*_axis_of(lift(a), -1, "sort_complex"))
    if x.dtype.kind == "c":
        return x
    return convert(x, np.complex64 if x.dtype.char in "bhBH" else np.complex128)


def sort_in_place(a: Any, axis: int = -1, kind: object = None, order: object = None, *,
                  stable: object = None) -> None:
    """`ndarray.sort`: the traced array sorted in place (the caller's array too, when it is an
    argument of the jitted function), as numpy's method; it returns None."""
    from jitc.numpy.scatter import _replace, _traced_target
    target = _traced_target(a, "ndarray.sort")
    _check_kind("ndarray.sort", kind, order, stable)
    if axis is None:
        raise TypeError(located("ndarray.sort: axis must be an integer, not None "
                                "(numpy's method sorts along one axis)"))
    x, axis_ = _axis_of(target, axis, "ndarray.sort")
    _replace(target, sort_along(x, axis_))


def partition_in_place(a: Any, kth: object, axis: int = -1, kind: str = "introselect",
                       order: object = None) -> None:
    """`ndarray.partition`: in place, like ndarray.sort (a full sort is a valid partition)."""
    from jitc.numpy.scatter import _replace, _traced_target
    target = _traced_target(a, "ndarray.partition")
    _replace(target, partition(target, kth, axis, kind, order))


def _check_kth(kth: object, n: int, name: str) -> None:
    """numpy's checks of a partition's kth: static integers, each within the axis."""
    if isinstance(kth, Tracer):
        raise TraceError(located(f"numpy.{name}: kth must be static (a Python int or a "
                                 "sequence of them), not a traced value"))
    values = np.atleast_1d(np.asarray(kth))
    if values.dtype.kind not in "iu" or values.ndim > 1:
        raise TypeError(located(f"numpy.{name}: kth must be an integer or a 1-d sequence of "
                                f"integers, got {kth!r}"))
    for k in values.tolist():
        if not -n <= k < n:
            raise ValueError(located(f"kth(={k}) out of bounds ({n})"))


@implements(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """A full sort: a valid partition for every kth (numpy leaves the rest's order open)."""
    _check_partition_kind(kind, order, "partition")
    x, axis_ = _axis_of(lift(a), axis, "partition")
    _check_kth(kth, x.shape[axis_], "partition")
    return sort_along(x, axis_)


@implements(np.argpartition)
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    _check_partition_kind(kind, order, "argpartition")
    x, axis_ = _axis_of(lift(a), axis, "argpartition")
    _check_kth(kth, x.shape[axis_], "argpartition")
    return sort_along(x, axis_, "indices")


def _check_partition_kind(kind: object, order: object, name: str) -> None:
    if order is not None:
        raise unsupported(f"numpy.{name}(..., order=...)", "jitc has no structured dtypes.")
    if kind != "introselect":
        raise ValueError(located(f"numpy.{name}: select kind must be 'introselect' "
                                 f"(got {kind!r})"))


# -- order statistics ---------------------------------------------------------------------------

def reduced_last(x: Tracer, axis: object) -> tuple[Tracer, tuple[int, ...]]:
    """x with the reduced axes (numpy's axis: None, int or tuple) merged into its last one,
    and the shape keepdims gives."""
    if axis is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(normalize_axis(a, x.ndim) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(located(f"repeated axis in {axis!r}"))
    else:
        axes = (normalize_axis(axis, x.ndim),) if x.ndim else ()
    kept = [d for d in range(x.ndim) if d not in axes]
    kept_shape = tuple(x.shape[d] for d in kept)
    moved = np.transpose(x, kept + sorted(axes)) if axes else x
    # The merged length written out: numpy's -1 cannot be inferred beside an empty axis.
    merged = reshape(moved, kept_shape + (math.prod(x.shape[a] for a in axes),))
    keep_shape = tuple(1 if d in axes else x.shape[d] for d in range(x.ndim))
    return merged, keep_shape


def with_kept_dims(result: Tracer, keep_shape: tuple[int, ...], lead: tuple[int, ...],
                   keepdims: bool) -> Tracer:
    """numpy's keepdims: the reduced axes back as 1s, after the `lead` axes (q's)."""
    if keepdims:
        return reshape(result, lead + keep_shape)
    return result


def _has_nan_last(s: Tracer) -> Tracer | None:
    """Where a row of the sorted `s` holds a nan (it sorts last); None for integers."""
    if s.dtype.kind not in "fc":
        return None
    return np.isnan(squeeze(slice_axis(s, s.ndim - 1, s.shape[-1] - 1, s.shape[-1]), -1))


def _at(s: Tracer, position: int) -> Tracer:
    return squeeze(slice_axis(s, s.ndim - 1, position, position + 1), -1)


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    if out is not None:
        raise unsupported("numpy.median(..., out=...)", "Use the returned value.")
    x, keep_shape = reduced_last(lift(a), axis)
    n = x.shape[-1]
    result_dtype = np.result_type(x.dtype, np.float64) if x.dtype.kind in "biu" else x.dtype
    if is_static(n) and n == 0:
        return with_kept_dims(lift(np.full(x.shape[:-1], np.nan, result_dtype)).copy_tracer(),
                       keep_shape, (), keepdims)
    if not is_static(n):  # numpy's nan for an empty axis is the exact compilation's
        symbolic.require(symbolic.at_least(n, 1), "numpy.median over a symbolic axis")
    s = sort_along(x, x.ndim - 1)
    low, high = _at(s, (n - 1) // 2), _at(s, n // 2)
    # numpy's mean of the middle element(s): float16 adds in float32, integers in float64.
    wide = np.float32 if x.dtype == np.float16 else result_dtype
    odd = convert(low, result_dtype)
    total = np.add(convert(low, wide), convert(high, wide))
    even = convert(np.true_divide(total, np.asarray(2, wide)), result_dtype)
    if is_static(n):
        result = odd if n % 2 else even
    else:  # the parity of a symbolic extent is the call's
        result = select(np.equal(np.remainder(lift(n, np.int64), 2), 1), odd, even)
    nan_rows = _has_nan_last(s)
    if nan_rows is not None:
        result = select(nan_rows, lift(np.nan, result.dtype), result)
    return with_kept_dims(result, keep_shape, (), keepdims)


def static_q(q: object, name: str) -> np.ndarray:
    from jitc.numpy.histograms import known
    q = known(q)
    if isinstance(q, Tracer) or (isinstance(q, (list, tuple)) and
                                 any(isinstance(v, Tracer) for v in q)):
        raise unsupported(f"numpy.{name} with traced q",
                          "Pass q as a constant (a number, list or numpy array).")
    return np.asanyarray(q)


def _lerp_one(s: Tracer, previous: int, following: int, t: Any) -> Tracer:
    """numpy's `_lerp` of rows of the sorted `s` between two positions, weight t."""
    low, high = _at(s, previous), _at(s, following)
    diff = np.subtract(high, low)
    if t >= 0.5:
        return np.subtract(high, np.multiply(diff, 1 - t))
    return np.add(low, np.multiply(diff, t))


def _positions(n: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numpy's neighbouring positions and weights (`_get_indexes`, `_get_gamma`) for the
    linear method: computed on q's own dtype, as numpy does."""
    virtual = np.asanyarray((n - 1) * q)
    previous = np.floor(virtual)
    following = previous + 1
    above, below = virtual >= n - 1, virtual < 0
    previous = np.where(above, -1, np.where(below, 0, previous))
    following = np.where(above, -1, np.where(below, 0, following))
    gamma = np.asanyarray(virtual - previous, dtype=virtual.dtype)
    return previous.astype(np.int64) % n, following.astype(np.int64) % n, gamma


def _symbolic_quantiles(s: Tracer, n: DimLike, q: np.ndarray, weak: bool) -> list[Tracer]:
    """`_positions` and `_lerp_one` for a symbolic axis length: the positions and weights are
    values of the call, computed as numpy computes them."""
    rows = []
    last = lift(n - 1)  # numpy's Python int n - 1
    for v in q.reshape(-1):
        fraction = lift(v.item()) if weak else lift(np.asarray(v))
        virtual = np.multiply(last, fraction)
        if q.dtype.kind in "biu":  # the element at the whole virtual index, no lerp
            rows.append(s[..., virtual])
            continue
        previous = np.floor(virtual)
        above, below = np.greater_equal(virtual, last), np.less(virtual, 0)
        zero, end = lift(np.asarray(0, virtual.dtype)), lift(np.asarray(-1, virtual.dtype))
        following = select(above, end, select(below, zero, np.add(previous, 1)))
        previous = select(above, end, select(below, zero, previous))
        gamma = np.subtract(virtual, previous)
        rest = np.subtract(1, gamma)
        if weak:  # numpy's gamma and 1 - gamma are then Python floats: weakly typed
            gamma, rest = (Tracer(t.trace, t.value, True) for t in (gamma, rest))
        low = s[..., previous.astype(np.int64)]
        high = s[..., following.astype(np.int64)]
        diff = np.subtract(high, low)
        rows.append(select(np.greater_equal(gamma, 0.5),
                           np.subtract(high, np.multiply(diff, rest)),
                           np.add(low, np.multiply(diff, gamma))))
    return rows


def _quantile(name: str, a, q: np.ndarray, weak: bool, axis, method: str,
              keepdims: bool) -> Tracer:
    if method != "linear":
        raise unsupported(f"numpy.{name}(..., method={method!r})",
                          "jitc computes the default method='linear'.")
    if q.ndim > 1:
        raise ValueError(located("q must be a scalar or 1d"))
    refuse_complex_quantile(lift(a), name)
    x, keep_shape = reduced_last(lift(a), axis)
    n = x.shape[-1]
    if not is_static(n):  # numpy's IndexError for an empty axis is the exact compilation's
        symbolic.require(symbolic.at_least(n, 1), f"numpy.{name} over a symbolic axis")
    elif n == 0:
        raise IndexError(located(f"numpy.{name} of an empty axis: index -1 is out of bounds "
                                 "for axis 0 with size 0"))
    s = sort_along(x, x.ndim - 1)
    if not is_static(n):
        rows = _symbolic_quantiles(s, n, q, weak)
    elif q.dtype.kind in "biu":
        # integer q (0 or 1): numpy takes the element at the whole virtual index, no lerp
        rows = [_at(s, int(v)) for v in ((n - 1) * q).reshape(-1).tolist()]
    else:
        previous, following, gamma = _positions(n, q)
        rows = [_lerp_one(s, int(p), int(f), float(g) if weak else g) for p, f, g in
                zip(previous.reshape(-1), following.reshape(-1), gamma.reshape(-1))]
    result = rows[0] if q.ndim == 0 else stack(rows)
    nan_rows = _has_nan_last(s)
    if nan_rows is not None:
        result = select(nan_rows, lift(np.nan, result.dtype), result)
    return with_kept_dims(result, keep_shape, q.shape, keepdims)


def check_q_range(q: np.ndarray, name: str, percent: bool = False) -> None:
    """numpy checks q as fractions (after dividing percents by 100) but words the error in the
    caller's units."""
    if not (np.all(q >= 0) and np.all(q <= 1)):
        bounds = "Percentiles must be in the range [0, 100]" if percent \
            else "Quantiles must be in the range [0, 1]"
        raise ValueError(located(f"{bounds} ({name})"))


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    qs, weak = quantile_arguments("quantile", q, out, weights, interpolation)
    return _quantile("quantile", a, qs, weak, axis, method, keepdims)


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    qs, weak = quantile_arguments("percentile", q, out, weights, interpolation, percent=True)
    return _quantile("percentile", a, qs, weak, axis, method, keepdims)


def quantile_arguments(name: str, q: object, out: object, weights: object,
                       interpolation: object, percent: bool = False) -> tuple[np.ndarray, bool]:
    """numpy.`name`'s static q as fractions (from percents when `percent`), checked as numpy
    checks it, and whether it was a weak Python scalar."""
    check_quantile_options(name, out, weights, interpolation)
    qs = static_q(q, name)
    if percent:
        qs = np.true_divide(qs, 100)
    check_q_range(qs, f"numpy.{name}", percent)
    return np.asanyarray(qs), type(q) in (int, float)


def check_quantile_options(name: str, out: object, weights: object, interpolation: object) -> None:
    if out is not None:
        raise unsupported(f"numpy.{name}(..., out=...)", "Use the returned value.")
    if weights is not None:
        raise unsupported(f"numpy.{name}(..., weights=...)",
                          "Only the unweighted, method='linear' form is traced.")
    if interpolation is not None:
        raise unsupported(f"numpy.{name}(..., interpolation=...)", "Use method=.")
