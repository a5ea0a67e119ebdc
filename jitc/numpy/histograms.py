"""Counting into bins: bincount, histogram, searchsorted and digitize.

The result length of bincount and histogram must be known while tracing, so it comes from
constants (a constant input, `minlength`, a bin count or constant edges). Counting is a
compare-and-sum over (values, bins), which the backends fuse (no values x bins temporary);
searchsorted is a binary search of log2(n) gathers, each a whole-array step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy._core.multiarray import _monotonicity

from jitc.numpy._core import check_static_int, implements, lift
from jitc.numpy.reductions import sum as sum_
from jitc.numpy.shapes import broadcast_to, concatenate, ravel, reshape, slice_axis
from jitc.numpy.ufuncs import select
from jitc.tracing.errors import ShapeError, TraceError, located
from jitc.tracing.tracer import Tracer


def numpy_checks(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """Run numpy's own argument checks on stand-ins (arrays of the right shapes and dtypes that
    take no memory); numpy's errors are re-raised with the user's line."""
    try:
        return fn(*args, **kwargs)
    except TypeError as exc:
        raise TraceError(located(str(exc))) from None
    except ValueError as exc:
        raise ShapeError(located(str(exc))) from None


def stand_in(x: Any) -> Any:
    """A tracer as a zero-filled array of its shape and dtype taking no memory; others as
    they are."""
    if not isinstance(x, Tracer):
        return x
    return np.lib.stride_tricks.as_strided(np.zeros(1, x.dtype), x.shape, (0,) * x.ndim,
                                           writeable=False)


def known(x: Any) -> Any:
    """An `np.array([...])` written in the traced function as the constant it still is."""
    if isinstance(x, Tracer) and x._known is not None:
        return x._known
    return x


# -- searchsorted and digitize -------------------------------------------------------------

def _before(x: Tracer, y: Tracer) -> Tracer:
    """x < y in numpy's sort order, where NaN comes after every number."""
    less = np.less(x, y)
    if x.dtype.kind != "f":
        return less
    return np.logical_or(less, np.logical_and(np.isnan(y), np.logical_not(np.isnan(x))))


def _search_dtype(a: Any, v: Any) -> np.dtype:
    """numpy compares in the common dtype of `a` and `v`, a Python scalar `v` counting as the
    array numpy makes of it (searchsorted takes no part in NEP 50's weak scalars)."""
    return np.promote_types(lift(a).dtype, v.dtype if isinstance(v, Tracer)
                            else np.asarray(v).dtype)


def sorted_position(a: Tracer, v: Tracer, side: str) -> Tracer:
    """For each element of v, its insertion index into the sorted 1-d `a` (int64)."""
    n = a.shape[0]
    lo = lift(np.zeros(v.shape, np.intp))
    hi = lift(np.full(v.shape, n, np.intp))
    # The interval [lo, hi) at least halves each step: n.bit_length() steps empty it.
    for _ in range(n.bit_length()):
        mid = np.right_shift(np.add(lo, hi), 1)
        probe = a[np.minimum(mid, n - 1)]
        right_of = _before(probe, v) if side == "left" else np.logical_not(_before(v, probe))
        moves_lo = np.logical_and(right_of, np.less(lo, hi))
        lo = select(moves_lo, np.add(mid, 1), lo)
        hi = select(right_of, hi, mid)  # a finished search has mid == lo == hi
    return lo


def _check_sorted(a: Any, what: str) -> None:
    """A constant `a` must be sorted as numpy's search assumes; a traced one cannot be checked
    (docs/jit.md)."""
    if isinstance(a, Tracer):
        return
    values = np.asarray(a)
    if values.ndim == 1 and not np.array_equal(np.sort(values), values,
                                               equal_nan=values.dtype.kind == "f"):
        raise ShapeError(located(
            f"{what}: the constant array searched is not sorted; numpy's answer then "
            "depends on its search order. Sort it first (np.sort), or pass sorter="))


@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    if side not in ("left", "right"):
        raise ShapeError(located(f"side must be 'left' or 'right' (got {side!r})"))
    if sorter is not None:
        if isinstance(sorter, Tracer):
            raise TraceError(located("numpy.searchsorted with a traced sorter= is not "
                                     "supported; pass np.take(a, sorter) as `a` instead"))
        a = lift(a)[np.asarray(sorter)] if isinstance(a, Tracer) else \
            np.asarray(a)[np.asarray(sorter)]
    numpy_checks(np.searchsorted, stand_in(a), stand_in(v), side)
    _check_sorted(known(a), "numpy.searchsorted")
    dtype = _search_dtype(a, v)
    return sorted_position(lift(a, dtype), lift(v, dtype), side)


@implements(np.digitize)
def digitize(x, bins, right=False):
    bins = known(bins)
    if isinstance(bins, Tracer):
        raise TraceError(located(
            "numpy.digitize with traced bins is not supported: whether they increase or "
            "decrease decides the algorithm. Pass constant bins, or for increasing bins write "
            "np.searchsorted(bins, x, side='left' if right else 'right')"))
    bins = np.asarray(bins)
    numpy_checks(np.digitize, stand_in(x), bins, right)
    side = "left" if right else "right"
    dtype = _search_dtype(bins, x)
    if _monotonicity(bins) == -1:
        found = sorted_position(lift(bins[::-1], dtype), lift(x, dtype), side)
        return np.subtract(lift(np.asarray(len(bins), np.intp)), found)
    return sorted_position(lift(bins, dtype), lift(x, dtype), side)


# -- bincount and histogram ----------------------------------------------------------------

def _count_into(index: Tracer, length: int, weights: Tracer | None) -> Tracer:
    """result[k] = the number (or the summed weights) of the elements of 1-d `index` equal
    to k, for k < length."""
    matches = np.equal(reshape(index, (-1, 1)), lift(np.arange(length, dtype=index.dtype)))
    if weights is None:
        return sum_(matches, axis=0, dtype=np.intp)
    zero = lift(np.zeros((), weights.dtype))
    return sum_(select(matches, reshape(weights, (-1, 1)), zero), axis=0)


@implements(np.bincount)
def bincount(x, weights=None, minlength=0):
    if isinstance(minlength, Tracer):
        minlength = check_static_int(minlength, "numpy.bincount's minlength")
    x = known(x)
    numpy_checks(np.bincount, stand_in(x), stand_in(weights), minlength)
    if isinstance(x, Tracer):
        length = _traced_bincount_length(x, minlength)
        index = x
    else:
        values = np.asarray(x)
        length = np.bincount(values, minlength=minlength).shape[0]  # numpy's errors too
        index = lift(values)
    if index.shape[0] == 0:  # numpy counts nothing, in int64 even with weights
        return lift(np.zeros(length, np.intp)).copy_tracer()
    w = None if weights is None else lift(weights, np.float64)
    return _count_into(lift(index, np.intp), length, w)


def _traced_bincount_length(x: Tracer, minlength: int) -> int:
    if minlength == 0:
        raise TraceError(located(
            "numpy.bincount of a traced array: the result length (its largest value + 1) "
            "depends on the data. Pass minlength=N, the number of bins, so the length is N "
            "(values must then lie in [0, N): see docs/jit.md)"))
    return minlength


def _histogram_edges(a: Tracer, bins: Any, range_: Any, weights: Any) -> np.ndarray:
    """numpy's bin edges, computed by numpy from the static bins and range."""
    if isinstance(bins, str):
        raise TraceError(located(
            f"numpy.histogram with bins={bins!r}: the bin width depends on the data. Pass a "
            "bin count with range=(lo, hi), or explicit edges"))
    if isinstance(bins, Tracer) or (isinstance(range_, (tuple, list))
                                    and any(isinstance(r, Tracer) for r in range_)):
        raise TraceError(located(
            "numpy.histogram with traced bins or range: numpy checks that edges increase and "
            "are finite, which tracing cannot. Pass constant bins (or range=)"))
    if np.ndim(bins) == 0 and range_ is None:
        raise TraceError(located(
            "numpy.histogram of a traced array without range=: the edges would come from "
            "its minimum and maximum, and numpy refuses non-finite ones, which tracing cannot "
            "check. Pass range=(lo, hi) (e.g. the known bounds of the data)"))
    _, edges = numpy_checks(np.histogram, stand_in(a), bins, range_, False,
                            stand_in(weights))
    if np.ndim(bins) == 0:
        # numpy computes edges for its stand-in data from the range alone: they are exact.
        return edges
    return np.asarray(bins)


def _kept(x: Tracer, edges: np.ndarray, bins: Any, range_: Any) -> Tracer:
    """The values numpy counts at all. With a bin count numpy compares the data with the
    range as given (widened by 0.5 when empty), in numpy's promotion: the edges it returns
    may round the ends differently, and values between the two go to the end bins."""
    if np.ndim(bins):
        low, high = lift(edges[:1]), lift(edges[-1:])
    else:
        low, high = range_
        if low == high:
            low, high = low - 0.5, high + 0.5
    return np.logical_and(np.greater_equal(x, low), np.less_equal(x, high))


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    x = lift(a)
    bins = known(bins)
    edges = _histogram_edges(x, bins, range, weights)
    column = reshape(ravel(x), (-1, 1))
    kept = _kept(column, edges, bins, range)
    # numpy compares values with edges in the edges' dtype (a bin count: numpy's bin type) or
    # in the common dtype of values and edges (explicit edges: a searchsorted).
    edge_dtype = np.result_type(edges.dtype, x.dtype) if np.ndim(bins) else edges.dtype
    below = np.less(lift(column, edge_dtype), lift(edges[:-1].astype(edge_dtype)))
    n = len(edges) - 1
    # Bin j takes the kept values from edge j up to edge j + 1; the last one all the rest.
    at_or_past = np.logical_and(kept, np.logical_not(below))
    if weights is None:
        # Counts as differences of the numbers of values at or past each left edge: one
        # comparison and one addition per value and bin (the edges increase), 2.5x faster than
        # testing both ends of each bin.
        reached = sum_(at_or_past, axis=0, dtype=np.intp)
        counts = concatenate([np.subtract(slice_axis(reached, 0, 0, n - 1),
                                          slice_axis(reached, 0, 1, n)),
                              slice_axis(reached, 0, n - 1, n)])
    else:
        # Weighted sums per bin, not differences of running ones: those would round otherwise.
        upper = concatenate([slice_axis(below, 1, 1, n),
                             broadcast_to(lift(True), (below.shape[0], 1))], axis=1)
        in_bin = np.logical_and(at_or_past, upper)
        w = ravel(lift(weights))
        # numpy adds weights in float64 (bincount) and casts the sums to the weights' dtype.
        wide = lift(w, np.float64 if w.dtype.kind == "f" else np.int64)
        zero = lift(np.zeros((), wide.dtype))
        counts = lift(sum_(select(in_bin, reshape(wide, (-1, 1)), zero), axis=0), w.dtype)
    if density:
        widths = lift(np.diff(edges).astype(float))
        counts = np.true_divide(np.true_divide(counts, widths), sum_(counts))
    return counts, lift(edges).copy_tracer()  # a fresh array each call, as numpy's
