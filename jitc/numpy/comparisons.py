"""numpy's exact comparisons of integers: a signed with an unsigned 64-bit integer, and an
integer array with a Python int that its dtype cannot hold.

numpy 2 compares these by value (`uint64_array > -1` is all True, `int8_array < 300` too)
rather than after a conversion that would wrap or round; so do we.
"""

from __future__ import annotations

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.types import TensorType
from jitc.numpy._core import is_python_scalar, lift
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer

COMPARISONS = {np.equal: "eq", np.not_equal: "ne", np.less: "lt", np.less_equal: "le",
               np.greater: "gt", np.greater_equal: "ge"}
_SWAPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def compare(x: Tracer, y: Tracer, direction: str) -> Tracer:
    if {x.dtype.kind, y.dtype.kind} == {"i", "u"} and x.dtype.itemsize == y.dtype.itemsize:
        return _compare_mixed_sign(x, y, direction)
    return emit(ops.COMPARE, [x, y], {"direction": direction})


def _compare_mixed_sign(x: Tracer, y: Tracer, direction: str) -> Tracer:
    """A signed with an unsigned integer of one width (numpy's uint64-int64 loops): a negative
    signed value is below every unsigned one; any other compares as unsigned."""
    if x.dtype.kind == "i":
        x, y, direction = y, x, _SWAPPED[direction]
    as_unsigned = emit(ops.COMPARE, [x, _reinterpret(y, x)], {"direction": direction})
    zero = lift(0, y.dtype, y.trace)
    negative = emit(ops.COMPARE, [y, zero], {"direction": "lt"})
    if direction in ("gt", "ge", "ne"):  # true whenever y is negative
        return emit(ops.OR, [negative, as_unsigned])
    return emit(ops.AND, [emit(ops.NOT, [negative]), as_unsigned])


def _reinterpret(y: Tracer, like: Tracer) -> Tracer:
    """y's bits as `like`'s dtype of the same width: a convert would be the same, but would
    mark a Python int argument `y` as one that must fit the unsigned dtype (jitc.arguments)."""
    return emit(ops.BITCAST_CONVERT, [y], {}, TensorType(like.value.type.dtype, y.shape))


def out_of_range_literal(ufunc: np.ufunc, inputs: tuple, dtype: np.dtype) -> Tracer | None:
    """The comparison of an integer array with a Python int literal outside its dtype's range:
    the same answer for every element, that of the dtype's nearest bound (None otherwise)."""
    if dtype.kind not in "iu" or len(inputs) != 2:
        return None
    info = np.iinfo(dtype)
    for i, x in enumerate(inputs):
        if _is_python_int(x) and not info.min <= x <= info.max:
            other = inputs[1 - i]
            if _is_python_int(other) or lift(other).dtype.kind not in "iu":
                return None  # numpy compares a bool array in int64, and so overflows
            bound = int(info.max) if x > info.max else int(info.min)
            values = (x, bound) if i == 0 else (bound, x)
            answer = bool(ufunc(*values))
            array = lift(other)
            scalar = lift(np.bool_(answer), trace=array.trace)
            return emit(ops.BROADCAST_IN_DIM, [scalar], {"dims": []},
                        TensorType(dtypes.bool_, array.shape))
    return None


def _is_python_int(x: object) -> bool:
    return is_python_scalar(x) and isinstance(x, int) and not isinstance(x, bool)


def comparison_dtypes(ufunc: np.ufunc, inputs: tuple, loop: tuple) -> tuple:
    """The dtypes to compare in: numpy's loop, except that a Python int argument (a weak
    int64 tracer, value unknown) meets a narrower integer array in int64, and a uint64
    array as itself (an exact mixed-sign comparison)."""
    dtype = loop[0]
    weak = [isinstance(x, Tracer) and x.weak and x.dtype.kind in "iu" for x in inputs]
    if dtype.kind not in "iu" or dtype == np.int64 or not any(weak):
        return loop
    int64 = np.dtype(np.int64)
    if dtype == np.uint64:
        operands = tuple(int64 if w else dtype for w in weak)
    else:
        operands = (int64,) * ufunc.nin
    return operands + loop[ufunc.nin:]
