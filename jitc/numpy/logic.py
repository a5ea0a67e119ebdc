"""Comparisons of whole traced arrays: isclose, allclose, array_equal, array_equiv.

numpy returns a Python bool from allclose and array_equal; traced, the answer is known only
when the compiled code runs, so they give a 0-d bool array, which numpy code uses the same way
(`np.where(np.allclose(a, b), ...)`, a result, an `&`); an `if` on it needs jitc.lax.cond.
"""

from __future__ import annotations

import numpy as np

from jitc.numpy._core import implements, lift, result_type
from jitc.numpy.reductions import all as all_
from jitc.tracing.tracer import Tracer


@implements(np.isclose)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy's formula: |x - y| <= atol + rtol * |y| where y is finite, or x == y; y is
    made inexact first (so |MIN_INT| does not wrap)."""
    x = a if isinstance(a, (int, float)) else lift(a)
    y = b
    if isinstance(y, int) and not isinstance(y, bool):
        y = float(y)
    elif not isinstance(y, float):
        y = lift(y)
        y = lift(y, result_type(y, 1.0))
    close = np.less_equal(np.abs(np.subtract(x, y)), np.add(atol, np.multiply(rtol, np.abs(y))))
    result = np.logical_or(np.logical_and(close, np.isfinite(y)), np.equal(x, y))
    if equal_nan:
        result = np.logical_or(result, np.logical_and(np.isnan(x), np.isnan(y)))
    return lift(result)


@implements(np.allclose)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return all_(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


def _equal_where_not_nan(a1: Tracer, a2: Tracer, equal_nan: bool) -> Tracer:
    same = np.equal(a1, a2)
    if equal_nan and (a1.dtype.kind == "f" or a2.dtype.kind == "f"):
        same = np.logical_or(same, np.logical_and(np.isnan(a1), np.isnan(a2)))
    return all_(same)


@implements(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    """False (numpy's Python bool) when the shapes differ, which tracing knows; else the
    traced comparison."""
    a1, a2 = lift(a1), lift(a2)
    if a1.shape != a2.shape:
        return False
    return _equal_where_not_nan(a1, a2, equal_nan)


@implements(np.array_equiv)
def array_equiv(a1, a2):
    a1, a2 = lift(a1), lift(a2)
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return False
    return _equal_where_not_nan(a1, a2, False)
