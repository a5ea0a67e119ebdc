"""Ufuncs about a float's representation: fabs, ldexp, frexp, modf, nextafter and spacing.

Each is written on integer views of the float's bits (bitcast_convert) and exact float
operations, so results are bit-identical to numpy's C loops: ldexp follows the scaling steps of
C's scalbn (two exact steps at most, then one rounding, so subnormal results round once);
float16 follows numpy's own half loops (ldexp, frexp and modf through float32; nextafter and
spacing on the half's bits, where numpy's rules differ from C's).
"""

from __future__ import annotations

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.types import TensorType
from jitc.numpy._core import convert, lift
from jitc.numpy.comparisons import compare
from jitc.numpy.ufuncs import UFUNCS, select
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer

_BITS = {np.dtype(np.float16): dtypes.int16, np.dtype(np.float32): dtypes.int32,
         np.dtype(np.float64): dtypes.int64}


def _const(x: Tracer, value: object, dtype: object = None) -> Tracer:
    return lift(np.asarray(value, dtype=x.dtype if dtype is None else dtype), trace=x.trace)


def _as_bits(x: Tracer) -> Tracer:
    return emit(ops.BITCAST_CONVERT, [x], {}, TensorType(_BITS[x.dtype], x.shape))


def _as_float(bits: Tracer, dtype: np.dtype) -> Tracer:
    return emit(ops.BITCAST_CONVERT, [bits], {}, TensorType(dtypes.from_numpy(dtype),
                                                            bits.shape))


def _layout(dtype: np.dtype) -> tuple[int, int]:
    """Mantissa bits and exponent bias of a float dtype."""
    info = np.finfo(dtype)
    return info.nmant, info.maxexp - 1


def _fabs(x: Tracer) -> Tracer:
    return emit(ops.ABS, [x])


def _through_float32(impl, x: Tracer, *rest: Tracer):
    """numpy's half loops convert to float32, call the float routine and round back."""
    results = impl(convert(x, np.float32), *rest)
    if isinstance(results, tuple):
        return tuple(convert(r, np.float16) if r.dtype == np.float32 else r for r in results)
    return convert(results, np.float16)


def _ldexp(x: Tracer, n: Tracer) -> Tracer:
    if x.dtype == np.float16:
        return _through_float32(_ldexp, x, n)
    mantissa_bits, bias = _layout(x.dtype)
    bits = _BITS[x.dtype]
    # Exponents past +-3 * bias all saturate; clipping first keeps the arithmetic in range.
    limit = 3 * bias
    n = emit(ops.MIN, [emit(ops.MAX, [n, _const(n, -limit)]), _const(n, limit)])
    n = convert(n, bits.numpy)
    low = 1 - bias
    up_factor = _const(x, 2.0 ** bias)
    # Down in steps that stay normal, so that only the last multiply rounds (as scalbn does).
    down_factor = _const(x, 2.0 ** (low + mantissa_bits + 1))
    down_step = -low - (mantissa_bits + 1)
    y = x
    for _ in range(2):
        up = compare(n, _const(n, bias), "gt")
        y = select(up, emit(ops.MUL, [y, up_factor]), y)
        n = select(up, emit(ops.SUB, [n, _const(n, bias)]), n)
    n = emit(ops.MIN, [n, _const(n, bias)])
    for _ in range(2):
        down = compare(n, _const(n, low), "lt")
        y = select(down, emit(ops.MUL, [y, down_factor]), y)
        n = select(down, emit(ops.ADD, [n, _const(n, down_step)]), n)
    n = emit(ops.MAX, [n, _const(n, low)])
    power = emit(ops.SHIFT_LEFT, [emit(ops.ADD, [n, _const(n, bias)]),
                                  _const(n, mantissa_bits)])
    return emit(ops.MUL, [y, _as_float(power, x.dtype)])


def _frexp(x: Tracer) -> tuple[Tracer, Tracer]:
    if x.dtype == np.float16:
        return _through_float32(_frexp, x)
    mantissa_bits, bias = _layout(x.dtype)
    bits_dtype = _BITS[x.dtype].numpy
    zero = _const(x, 0)
    # Subnormals are first scaled into the normal range, and the scale taken off the exponent.
    prescale = mantissa_bits + 2
    subnormal = emit(ops.AND, [compare(emit(ops.ABS, [x]), _const(x, np.finfo(x.dtype).tiny),
                                       "lt"), compare(x, zero, "ne")])
    scaled = select(subnormal, emit(ops.MUL, [x, _const(x, 2.0 ** prescale)]), x)
    bits = _as_bits(scaled)
    exponent_mask = (1 << (8 * x.dtype.itemsize - 1 - mantissa_bits)) - 1
    biased = emit(ops.AND, [emit(ops.SHIFT_RIGHT_ARITHMETIC, [bits, _const(bits, mantissa_bits)]),
                            _const(bits, exponent_mask)])
    exponent = emit(ops.SUB, [biased, select(subnormal, _const(bits, bias - 1 + prescale),
                                             _const(bits, bias - 1))])
    # Keep sign and fraction, set the exponent of [0.5, 1).
    keep = np.asarray(~(exponent_mask << mantissa_bits), dtype=bits_dtype)
    mantissa_bits_set = emit(ops.OR, [emit(ops.AND, [bits, _const(bits, keep)]),
                                      _const(bits, (bias - 1) << mantissa_bits)])
    mantissa = _as_float(mantissa_bits_set, x.dtype)
    special = emit(ops.OR, [compare(x, zero, "eq"), emit(ops.NOT, [emit(ops.IS_FINITE, [x])])])
    return (select(special, x, mantissa),
            convert(select(special, _const(bits, 0), exponent), np.int32))


def _modf(x: Tracer) -> tuple[Tracer, Tracer]:
    if x.dtype == np.float16:
        return _through_float32(_modf, x)
    whole = np.trunc(x)
    infinite = emit(ops.AND, [emit(ops.NOT, [emit(ops.IS_FINITE, [x])]), compare(x, x, "eq")])
    # x - trunc(x) is exact; C's modf gives the fraction x's sign (-0.0 for -3.0 and -inf).
    fraction = select(infinite, _const(x, 0), emit(ops.SUB, [x, whole]))
    return np.copysign(fraction, x), whole


def _step_bits(x: Tracer, away_from_zero: Tracer) -> Tracer:
    """The float next to x: one unit of the bit pattern up or down in magnitude."""
    bits = _as_bits(x)
    step = select(away_from_zero, _const(bits, 1), _const(bits, -1))
    return _as_float(emit(ops.ADD, [bits, step]), x.dtype)


def _smallest_subnormal(x: Tracer, negative: Tracer | None = None) -> Tracer:
    tiny = np.finfo(x.dtype).smallest_subnormal
    return _const(x, tiny) if negative is None else \
        select(negative, _const(x, -tiny), _const(x, tiny))


def _nextafter(x: Tracer, y: Tracer) -> Tracer:
    zero = _const(x, 0)
    away = compare(compare(y, x, "gt"), compare(x, zero, "gt"), "eq")
    result = select(compare(x, zero, "eq"),
                    _smallest_subnormal(x, compare(y, zero, "lt")), _step_bits(x, away))
    # Equal arguments give y in C (nextafter(0.0, -0.0) is -0.0) but x in numpy's half loop.
    result = select(compare(x, y, "eq"), x if x.dtype == np.float16 else y, result)
    either_nan = emit(ops.OR, [compare(x, x, "ne"), compare(y, y, "ne")])
    return select(either_nan, _const(x, np.nan), result)


def _spacing(x: Tracer) -> Tracer:
    zero = _const(x, 0)
    if x.dtype == np.float16:
        # numpy's half spacing is the gap to the next half toward +inf, for either sign.
        following = _step_bits(x, emit(ops.NOT, [compare(x, zero, "lt")]))
    else:
        # C's: the gap to the next float away from zero, with x's sign.
        bits = _as_bits(x)
        following = _as_float(emit(ops.ADD, [bits, _const(bits, 1)]), x.dtype)
    gap = emit(ops.SUB, [following, x])
    gap = select(compare(x, zero, "eq"), _smallest_subnormal(x), gap)
    return select(emit(ops.IS_FINITE, [x]), gap, _const(x, np.nan))


for _ufunc, _impl in [(np.fabs, _fabs), (np.ldexp, _ldexp), (np.frexp, _frexp),
                      (np.modf, _modf), (np.nextafter, _nextafter), (np.spacing, _spacing)]:
    UFUNCS[_ufunc] = _impl
