"""numpy ufuncs on tracers: numpy picks the loop dtypes, jitc emits the ops.

`ufunc.resolve_dtypes` gives exactly the input and output dtypes numpy would compute in
(including NEP 50 weak Python scalars), so promotion never drifts from numpy's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.types import TensorType
from jitc.numpy._core import (
    convert,
    implements,
    ir_dtype,
    is_python_scalar,
    lift,
    result_type,
    trace_of,
    unsupported,
)
from jitc.numpy.comparisons import (
    COMPARISONS,
    compare,
    comparison_dtypes,
    out_of_range_literal,
)
from jitc.tracing.errors import TraceError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer

UfuncImpl = Callable[..., Tracer]
UFUNCS: dict[np.ufunc, UfuncImpl] = {}


def _register(ufunc: np.ufunc):
    def wrap(impl: UfuncImpl) -> UfuncImpl:
        UFUNCS[ufunc] = impl
        return impl
    return wrap


def _op(op):
    def impl(*xs: Tracer) -> Tracer:
        return emit(op, xs)
    return impl


def _const_like(x: Tracer, value: object) -> Tracer:
    return lift(np.asarray(value, dtype=x.dtype), trace=x.trace)


def select(pred: Tracer, on_true: Tracer, on_false: Tracer) -> Tracer:
    return emit(ops.SELECT, [pred, on_true, on_false])


def _to_bool(x: Tracer) -> Tracer:
    return x if x.dtype == np.bool_ else compare(x, _const_like(x, 0), "ne")


def _all_true_like(x: Tracer) -> Tracer:
    true = lift(np.True_, trace=x.trace)
    return emit(ops.BROADCAST_IN_DIM, [true], {"dims": []}, TensorType(true.aval.dtype, x.shape))


for _ufunc, _irop in [
        (np.subtract, ops.SUB), (np.true_divide, ops.DIV), (np.fmod, ops.REM),
        (np.negative, ops.NEG), (np.sign, ops.SIGN), (np.exp, ops.EXP),
        (np.expm1, ops.EXPM1), (np.log, ops.LOG), (np.log1p, ops.LOG1P), (np.sqrt, ops.SQRT),
        (np.tanh, ops.TANH), (np.sin, ops.SIN), (np.cos, ops.COS), (np.rint, ops.ROUND),
        (np.arctan2, ops.ATAN2),
        (np.bitwise_and, ops.AND), (np.bitwise_or, ops.OR), (np.bitwise_xor, ops.XOR),
        (np.invert, ops.NOT), (np.left_shift, ops.SHIFT_LEFT)]:
    UFUNCS[_ufunc] = _op(_irop)


@_register(np.add)
def _add(x: Tracer, y: Tracer) -> Tracer:
    return emit(ops.OR if x.dtype == np.bool_ else ops.ADD, [x, y])


@_register(np.multiply)
def _multiply(x: Tracer, y: Tracer) -> Tracer:
    return emit(ops.AND if x.dtype == np.bool_ else ops.MUL, [x, y])


@_register(np.maximum)
def _maximum(x: Tracer, y: Tracer) -> Tracer:
    return emit(ops.MAX, [x, y])


@_register(np.minimum)
def _minimum(x: Tracer, y: Tracer) -> Tracer:
    return emit(ops.MIN, [x, y])


@_register(np.fmax)
def _fmax(x: Tracer, y: Tracer) -> Tracer:
    if x.dtype.kind != "f":
        return emit(ops.MAX, [x, y])
    return select(_isnan(y), x, select(_isnan(x), y, emit(ops.MAX, [x, y])))


@_register(np.fmin)
def _fmin(x: Tracer, y: Tracer) -> Tracer:
    if x.dtype.kind != "f":
        return emit(ops.MIN, [x, y])
    return select(_isnan(y), x, select(_isnan(x), y, emit(ops.MIN, [x, y])))


@_register(np.right_shift)
def _right_shift(x: Tracer, y: Tracer) -> Tracer:
    op = ops.SHIFT_RIGHT_LOGICAL if x.dtype.kind == "u" else ops.SHIFT_RIGHT_ARITHMETIC
    return emit(op, [x, y])


@_register(np.positive)
def _positive(x: Tracer) -> Tracer:
    return x


@_register(np.square)
def _square(x: Tracer) -> Tracer:
    return emit(ops.MUL, [x, x])


@_register(np.reciprocal)
def _reciprocal(x: Tracer) -> Tracer:
    return emit(ops.DIV, [_const_like(x, 1), x])


@_register(np.power)
def _power(x: Tracer, y: Tracer) -> Tracer:
    return emit(ops.POW, [x, y])


def _floor_divide_parts(x: Tracer, y: Tracer) -> tuple[Tracer, Tracer]:
    """numpy's floor division and modulo: quotient rounded down, remainder with y's sign."""
    zero = _const_like(x, 0)
    rem = emit(ops.REM, [x, y])
    if x.dtype.kind == "f":
        quotient = emit(ops.DIV, [emit(ops.SUB, [x, rem]), y])
    else:
        quotient = emit(ops.DIV, [x, y])
    if x.dtype.kind == "u":
        return quotient, rem
    adjust = emit(ops.AND, [compare(rem, zero, "ne"),
                            compare(compare(rem, zero, "lt"), compare(y, zero, "lt"), "ne")])
    one = _const_like(x, 1)
    quotient = select(adjust, emit(ops.SUB, [quotient, one]), quotient)
    modulo = select(adjust, emit(ops.ADD, [rem, y]), rem)
    if x.dtype.kind == "f":
        # numpy rounds the quotient to an integral value and gives zero remainders y's sign.
        # A zero quotient takes the sign of x / y (numpy's copysign(0, a / b)).
        ratio = emit(ops.DIV, [x, y])
        rounded = emit(ops.ROUND, [quotient])
        rounded = select(compare(rounded, zero, "eq"), _copysign(zero, ratio), rounded)
        quotient = select(compare(y, zero, "eq"), ratio, rounded)
        # Not 0 * y: that is nan for an infinite y, whose zero remainders are zeros too.
        signed_zero = select(compare(y, zero, "lt"), _const_like(x, -0.0), zero)
        modulo = select(compare(modulo, zero, "eq"), signed_zero, modulo)
    return quotient, modulo


@_register(np.floor_divide)
def _floor_divide(x: Tracer, y: Tracer) -> Tracer:
    return _floor_divide_parts(x, y)[0]


@_register(np.remainder)
def _remainder(x: Tracer, y: Tracer) -> Tracer:
    return _floor_divide_parts(x, y)[1]


def _isnan(x: Tracer) -> Tracer:
    return compare(x, x, "ne")


@_register(np.isnan)
def _isnan_ufunc(x: Tracer) -> Tracer:
    return _isnan(x) if x.dtype.kind == "f" else emit(ops.NOT, [_all_true_like(x)])


@_register(np.isfinite)
def _isfinite(x: Tracer) -> Tracer:
    return emit(ops.IS_FINITE, [x]) if x.dtype.kind == "f" else _all_true_like(x)


@_register(np.isinf)
def _isinf(x: Tracer) -> Tracer:
    if x.dtype.kind != "f":
        return emit(ops.NOT, [_all_true_like(x)])
    return emit(ops.AND, [emit(ops.NOT, [emit(ops.IS_FINITE, [x])]), compare(x, x, "eq")])


for _ufunc, _direction in COMPARISONS.items():
    def _cmp(x: Tracer, y: Tracer, direction: str = _direction) -> Tracer:
        return compare(x, y, direction)
    UFUNCS[_ufunc] = _cmp


@_register(np.logical_not)
def _logical_not(x: Tracer) -> Tracer:
    return emit(ops.NOT, [_to_bool(x)])


for _ufunc, _irop in [(np.logical_and, ops.AND), (np.logical_or, ops.OR),
                      (np.logical_xor, ops.XOR)]:
    def _logical(x: Tracer, y: Tracer, op=_irop) -> Tracer:
        return emit(op, [_to_bool(x), _to_bool(y)])
    UFUNCS[_ufunc] = _logical


# numpy keeps integers and bools as they are under abs (bool only), floor, ceil and trunc.
@_register(np.absolute)
def _absolute(x: Tracer) -> Tracer:
    return x if x.dtype == np.bool_ else emit(ops.ABS, [x])


@_register(np.floor)
def _floor(x: Tracer) -> Tracer:
    return emit(ops.FLOOR, [x]) if x.dtype.kind == "f" else x


@_register(np.ceil)
def _ceil(x: Tracer) -> Tracer:
    return emit(ops.CEIL, [x]) if x.dtype.kind == "f" else x


@_register(np.trunc)
def _trunc(x: Tracer) -> Tracer:
    if x.dtype.kind != "f":
        return x
    return select(compare(x, _const_like(x, 0), "lt"), emit(ops.CEIL, [x]),
                  emit(ops.FLOOR, [x]))


@_register(np.exp2)
def _exp2(x: Tracer) -> Tracer:
    return emit(ops.POW, [_const_like(x, 2), x])


@_register(np.log2)
def _log2(x: Tracer) -> Tracer:
    return emit(ops.MUL, [emit(ops.LOG, [x]), _const_like(x, 1 / math.log(2))])


@_register(np.log10)
def _log10(x: Tracer) -> Tracer:
    return emit(ops.MUL, [emit(ops.LOG, [x]), _const_like(x, 1 / math.log(10))])


@_register(np.tan)
def _tan(x: Tracer) -> Tracer:
    return emit(ops.DIV, [emit(ops.SIN, [x]), emit(ops.COS, [x])])


@_register(np.arctan)
def _arctan(x: Tracer) -> Tracer:
    return emit(ops.ATAN2, [x, _all_ones_like(x)])


def _all_ones_like(x: Tracer) -> Tracer:
    return emit(ops.BROADCAST_IN_DIM, [_const_like(x, 1)], {"dims": []}, x.aval)


def _sqrt_one_minus_square(x: Tracer) -> Tracer:
    one = _const_like(x, 1)
    return emit(ops.SQRT, [emit(ops.MUL, [emit(ops.SUB, [one, x]), emit(ops.ADD, [one, x])])])


@_register(np.arcsin)
def _arcsin(x: Tracer) -> Tracer:
    return emit(ops.ATAN2, [x, _sqrt_one_minus_square(x)])


@_register(np.arccos)
def _arccos(x: Tracer) -> Tracer:
    return emit(ops.ATAN2, [_sqrt_one_minus_square(x), x])


@_register(np.sinh)
def _sinh(x: Tracer) -> Tracer:
    # (e^a - e^-a) / 2 = (em1 + em1 / (em1 + 1)) / 2 with em1 = expm1(a), accurate near 0,
    # evaluated at a = |x| (where em1 + 1 does not cancel) and given the sign of x.
    em1 = emit(ops.EXPM1, [emit(ops.ABS, [x])])
    one, half = _const_like(x, 1), _const_like(x, 0.5)
    magnitude = emit(ops.MUL, [half, emit(ops.ADD, [em1, emit(ops.DIV, [em1, emit(ops.ADD, [
        em1, one])])])])
    magnitude = select(_isposinf(em1), em1, magnitude)  # inf / inf would give nan
    signed = emit(ops.MUL, [magnitude, emit(ops.SIGN, [x])])
    return select(compare(x, _const_like(x, 0), "eq"), x, signed)  # sinh(-0.0) is -0.0


def _isposinf(x: Tracer) -> Tracer:
    return compare(x, _const_like(x, np.inf), "eq")


@_register(np.cosh)
def _cosh(x: Tracer) -> Tracer:
    half = _const_like(x, 0.5)
    return emit(ops.MUL, [half, emit(ops.ADD, [emit(ops.EXP, [x]),
                                               emit(ops.EXP, [emit(ops.NEG, [x])])])])


@_register(np.arctanh)
def _arctanh(x: Tracer) -> Tracer:
    one, half = _const_like(x, 1), _const_like(x, 0.5)
    ratio = emit(ops.DIV, [emit(ops.ADD, [x, x]), emit(ops.SUB, [one, x])])
    return emit(ops.MUL, [half, emit(ops.LOG1P, [ratio])])


@_register(np.arcsinh)
def _arcsinh(x: Tracer) -> Tracer:
    one = _const_like(x, 1)
    a = emit(ops.ABS, [x])
    a2 = emit(ops.MUL, [a, a])
    inner = emit(ops.ADD, [a, emit(ops.DIV, [a2, emit(ops.ADD, [one, emit(
        ops.SQRT, [emit(ops.ADD, [one, a2])])])])])
    magnitude = emit(ops.LOG1P, [inner])
    # Past 1/eps, sqrt(1 + a*a) is a (and a*a overflows, inf/inf would give nan): log(2a).
    large = compare(a, _const_like(x, 1 / np.finfo(x.dtype).eps), "gt")
    magnitude = select(large, emit(ops.ADD, [emit(ops.LOG, [a]), _const_like(x, math.log(2))]),
                       magnitude)
    zero = _const_like(x, 0)
    signed = select(compare(x, zero, "lt"), emit(ops.NEG, [magnitude]), magnitude)
    return select(compare(x, zero, "eq"), x, signed)  # arcsinh(-0.0) is -0.0


@_register(np.arccosh)
def _arccosh(x: Tracer) -> Tracer:
    # log(x + sqrt(x*x - 1)) as log1p((x - 1) + ...): x - 1 is exact near 1, where log would
    # lose the small argument.
    one = _const_like(x, 1)
    below = emit(ops.SUB, [x, one])
    root = emit(ops.SQRT, [emit(ops.MUL, [below, emit(ops.ADD, [x, one])])])
    result = emit(ops.LOG1P, [emit(ops.ADD, [below, root])])
    # Past 1/eps, sqrt(x*x - 1) is x (and x*x may overflow): log(2x).
    large = compare(x, _const_like(x, 1 / np.finfo(x.dtype).eps), "gt")
    result = select(large, emit(ops.ADD, [emit(ops.LOG, [x]), _const_like(x, math.log(2))]),
                    result)
    # Below 1 the value is nan; far below, (x - 1) + sqrt(x*x - 1) rounds to -1 and log1p
    # would give -inf.
    return select(compare(x, one, "lt"), _const_like(x, np.nan), result)


@_register(np.hypot)
def _hypot(x: Tracer, y: Tracer) -> Tracer:
    # big * sqrt(1 + (small / big)**2) does not overflow where x*x + y*y would.
    ax, ay = emit(ops.ABS, [x]), emit(ops.ABS, [y])
    big, small = emit(ops.MAX, [ax, ay]), emit(ops.MIN, [ax, ay])
    zero, one = _const_like(x, 0), _const_like(x, 1)
    ratio = emit(ops.DIV, [small, big])
    scaled = emit(ops.MUL, [big, emit(ops.SQRT, [emit(ops.ADD, [one, emit(ops.MUL, [ratio,
                                                                                  ratio])])])])
    result = select(compare(big, zero, "eq"), zero, scaled)
    # An infinite side wins even over nan, as in C's hypot.
    return select(emit(ops.OR, [_isposinf(ax), _isposinf(ay)]), _const_like(x, np.inf), result)


@_register(np.logaddexp)
def _logaddexp(x: Tracer, y: Tracer) -> Tracer:
    big = emit(ops.MAX, [x, y])
    gap = emit(ops.NEG, [emit(ops.ABS, [emit(ops.SUB, [x, y])])])
    result = emit(ops.ADD, [big, emit(ops.LOG1P, [emit(ops.EXP, [gap])])])
    # Equal arguments (infinities too, whose difference is nan) give x + log(2).
    return select(compare(x, y, "eq"), emit(ops.ADD, [x, _const_like(x, math.log(2))]), result)


@_register(np.copysign)
def _copysign(x: Tracer, y: Tracer) -> Tracer:
    # Compare through division so -0.0 counts as negative: 1/-0 = -inf.
    zero, one = _const_like(x, 0), _const_like(x, 1)
    negative_zero = emit(ops.AND, [compare(y, zero, "eq"),
                                   compare(emit(ops.DIV, [one, y]), zero, "lt")])
    negative = emit(ops.OR, [compare(y, zero, "lt"), negative_zero])
    magnitude = emit(ops.ABS, [x])
    return select(negative, emit(ops.NEG, [magnitude]), magnitude)


@_register(np.signbit)
def _signbit(x: Tracer) -> Tracer:
    # The sign bit itself, so -0.0 and -nan count as negative, as in numpy.
    bits = dtypes.int64 if x.dtype.itemsize == 8 else dtypes.int32
    as_int = emit(ops.BITCAST_CONVERT, [x], {}, TensorType(bits, x.shape))
    return compare(as_int, lift(np.zeros((), bits.numpy), trace=x.trace), "lt")


@_register(np.heaviside)
def _heaviside(x: Tracer, at_zero: Tracer) -> Tracer:
    zero, one = _const_like(x, 0), _const_like(x, 1)
    step = select(compare(x, zero, "lt"), zero, select(compare(x, zero, "gt"), one, at_zero))
    return select(_isnan(x), x, step)


@_register(np.cbrt)
def _cbrt(x: Tracer) -> Tracer:
    magnitude = emit(ops.ABS, [x])
    root = emit(ops.POW, [magnitude, _const_like(x, 1 / 3)])
    # 1/3 is not a float: one Newton step r - (r - |x|/r^2)/3 takes pow's few ulp to about one.
    square = emit(ops.MUL, [root, root])
    step = emit(ops.SUB, [root, emit(ops.DIV, [magnitude, square])])
    refined = emit(ops.SUB, [root, emit(ops.MUL, [step, _const_like(x, 1 / 3)])])
    root = select(emit(ops.IS_FINITE, [step]), refined, root)  # 0 and inf: 0/0, inf/inf
    signed = select(compare(x, _const_like(x, 0), "lt"), emit(ops.NEG, [root]), root)
    return select(compare(x, _const_like(x, 0), "eq"), x, signed)  # cbrt(-0.0) is -0.0


@_register(np.logaddexp2)
def _logaddexp2(x: Tracer, y: Tracer) -> Tracer:
    big = emit(ops.MAX, [x, y])
    gap = emit(ops.NEG, [emit(ops.ABS, [emit(ops.SUB, [x, y])])])
    tail = emit(ops.LOG1P, [emit(ops.POW, [_const_like(x, 2), gap])])
    result = emit(ops.ADD, [big, emit(ops.MUL, [tail, _const_like(x, 1 / math.log(2))])])
    return select(compare(x, y, "eq"), emit(ops.ADD, [x, _const_like(x, 1)]), result)


def _scale_by(factor: float) -> UfuncImpl:
    def impl(x: Tracer) -> Tracer:
        return emit(ops.MUL, [x, _const_like(x, factor)])
    return impl


for _ufunc, _factor in [(np.deg2rad, math.pi / 180), (np.radians, math.pi / 180),
                        (np.rad2deg, 180 / math.pi), (np.degrees, 180 / math.pi)]:
    UFUNCS[_ufunc] = _scale_by(_factor)
UFUNCS[np.float_power] = _op(ops.POW)  # numpy's loops are float64 already
UFUNCS[np.conjugate] = _positive  # real dtypes only


@implements(np.nan_to_num)
def nan_to_num(a, copy=True, nan=0.0, posinf=None, neginf=None):
    x = lift(a)
    if x.dtype.kind == "c":  # each part on its own, as numpy
        from jitc.numpy.complexes import make, parts
        return make(*(nan_to_num(part, copy, nan, posinf, neginf) for part in parts(x)))
    if x.dtype.kind != "f":
        return x
    info = np.finfo(x.dtype)
    big = _const_like(x, info.max if posinf is None else posinf)
    small = _const_like(x, info.min if neginf is None else neginf)
    finite = emit(ops.IS_FINITE, [x])
    replaced = select(_isnan(x), _const_like(x, nan),
                      select(compare(x, _const_like(x, 0), "gt"), big, small))
    return select(finite, x, replaced)


# -- dispatch ----------------------------------------------------------------------------------

# Ufuncs jitc spells with several rounding float ops. numpy evaluates float16 loops in float32
# and rounds once at the end; jitc does the same for these so float16 results agree.
_WIDEN_FLOAT16 = frozenset({
    np.sinh, np.cosh, np.tan, np.arcsin, np.arccos, np.arctanh, np.arcsinh, np.arccosh,
    np.hypot, np.logaddexp, np.logaddexp2, np.log2, np.log10, np.floor_divide, np.remainder,
    np.heaviside, np.cbrt, np.signbit})

# Of those, numpy's float16 loop rounds a correctly rounded value: cbrt's to float16, hypot's
# through float32 (libm's hypotf rounds a float64 hypotenuse). jitc's float64 evaluation rounded
# the same way gives numpy's bits, where a float32 one misses some float16 midpoints.
_FLOAT16_THROUGH_FLOAT64 = {np.cbrt: np.float16, np.hypot: np.float32}

_UNSUPPORTED_KWARGS = ("out", "where", "casting", "order", "subok", "signature")


def apply_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict[str, Any]) -> Any:
    """Tracer.__array_ufunc__: numpy calls this for every ufunc that touches a tracer."""
    name = f"numpy.{ufunc.__name__}"
    if method == "reduce":
        from jitc.numpy.reductions import ufunc_reduce
        return ufunc_reduce(ufunc, inputs, kwargs)
    if method == "at":
        from jitc.numpy.scatter import ufunc_at
        return ufunc_at(ufunc, inputs, kwargs)
    if method != "__call__":
        from jitc.numpy.ufunc_methods import apply_method
        return apply_method(ufunc, method, inputs, kwargs)
    if ufunc is np.matmul:
        from jitc.numpy.linalg import matmul
        return matmul(*inputs, **kwargs)
    out = kwargs.pop("out", None)
    if out is not None:
        return _into_out(ufunc, inputs, kwargs, out)
    for key in _UNSUPPORTED_KWARGS:
        if kwargs.get(key) is not None and not (key == "where" and kwargs[key] is True):
            raise unsupported(f"{name}(..., {key}=...)",
                              "Traced arrays are immutable: use the returned value instead of "
                              "out=, and np.where(...) instead of where=.")
    impl = UFUNCS.get(ufunc)
    if impl is None:
        from jitc.numpy.dispatch import unsupported_call
        return unsupported_call(ufunc, name, inputs, kwargs)
    return call_ufunc(ufunc, impl, inputs, kwargs.get("dtype"))


def _into_out(ufunc: np.ufunc, inputs: tuple, kwargs: dict[str, Any], out: Any) -> Any:
    """`np.add(a, b, out=c)`: the result written into `c` (numpy's same_kind casting)."""
    from jitc.tracing import effects
    targets = out if isinstance(out, tuple) else (out,)
    if len(targets) != 1 or not isinstance(targets[0], Tracer):
        raise unsupported(f"numpy.{ufunc.__name__}(..., out=...) into an array that is not "
                          "traced", "Pass the output array as an argument of the jitted "
                          "function (or return the result instead).")
    result = apply_ufunc(ufunc, "__call__", inputs, kwargs)
    return effects.write_result(targets[0], result, f"numpy.{ufunc.__name__}(..., out=...)")


def call_ufunc(ufunc: np.ufunc, impl: UfuncImpl, inputs: tuple, dtype: object = None) -> Any:
    from jitc.numpy._core import dtype_key
    keys = tuple(dtype_key(x) for x in inputs)
    if all(isinstance(k, type) for k in keys):
        # Python scalars alone: numpy makes each an array of its default dtype (int64,
        # float64); resolving the weak types alone would pick object loops for comparisons.
        defaults = {int: np.int64, float: np.float64, complex: np.complex128}
        keys = tuple(np.dtype(defaults[k]) for k in keys)
    try:
        if dtype is None:
            loop = ufunc.resolve_dtypes(keys + (None,) * ufunc.nout)
        else:
            wanted = (None,) * ufunc.nin + (ir_dtype(dtype).numpy,) * ufunc.nout
            loop = ufunc.resolve_dtypes(keys + (None,) * ufunc.nout, signature=wanted)
    except (TypeError, np.exceptions.DTypePromotionError) as exc:
        listed = ", ".join(str(k.__name__ if isinstance(k, type) else k) for k in keys)
        raise TraceError(located(f"numpy.{ufunc.__name__} does not accept ({listed}): "
                                 f"{exc}")) from None
    state = trace_of(*inputs)
    if any(d.kind == "c" for d in loop):
        return _call_complex(ufunc, impl, inputs, loop, state)
    special = _scalar_exponent(ufunc, inputs, loop)
    if special is not None:
        return special
    compute = loop
    if ufunc in COMPARISONS:
        settled = out_of_range_literal(ufunc, inputs, loop[0])
        if settled is not None:
            return convert(settled, loop[ufunc.nin])
        compute = comparison_dtypes(ufunc, inputs, loop)
    if ufunc in _WIDEN_FLOAT16 and loop[0] == np.float16:
        wide = np.float64 if ufunc in _FLOAT16_THROUGH_FLOAT64 else np.float32
        compute = tuple(np.dtype(wide) if d == np.float16 else d for d in loop)
    operands = [lift(x, compute[i], state) for i, x in enumerate(inputs)]
    if ufunc in _FLOAT16_THROUGH_FLOAT64 and loop[0] == np.float16:
        return convert(convert(impl(*operands), _FLOAT16_THROUGH_FLOAT64[ufunc]), np.float16)
    if ufunc.nout > 1:  # frexp, modf: a tuple of results, as numpy gives
        return tuple(convert(r, d) for r, d in zip(impl(*operands), loop[ufunc.nin:],
                                                   strict=True))
    return convert(impl(*operands), loop[ufunc.nin])


def _call_complex(ufunc: np.ufunc, impl: UfuncImpl, inputs: tuple, loop: tuple,
                  state: Any) -> Tracer:
    """A ufunc's complex loop: numpy's complex formulas, or a clear refusal naming it."""
    from jitc.numpy import complexes
    if ufunc is np.power:
        return complexes.power(lift(inputs[0], loop[0], state), inputs[1])
    special = complexes.COMPLEX_UFUNCS.get(ufunc)
    if special is None and ufunc not in complexes.COMPLEX_AS_IS:
        listed = ", ".join(str(d) for d in loop[:ufunc.nin])
        raise unsupported(f"numpy.{ufunc.__name__} of complex values ({listed})",
                          "jitc traces complex values through + - * /, abs, exp, log, sqrt, "
                          "sin, cos, tanh, integer powers, == and != (docs/dtypes.md).")
    operands = [lift(x, loop[i], state) for i, x in enumerate(inputs)]
    return convert((special or impl)(*operands), loop[ufunc.nin])


def apply_operator(ufunc: np.ufunc, inputs: tuple) -> Tracer:
    """A Python operator on a tracer (`x * 2.0`, `-x`): numpy's ufunc, except that the result
    of Python scalars alone stays weakly typed, as the Python scalar it stands for would be.
    Calling the ufunc itself (`np.exp(s)`) gives a numpy scalar, strongly typed as numpy's."""
    result = apply_ufunc(ufunc, "__call__", inputs, {})
    if all(is_python_scalar(x) or getattr(x, "weak", False) for x in inputs):
        result = Tracer(result.trace, result.value, weak=True)
    return result


def _scalar_exponent(ufunc: np.ufunc, inputs: tuple, loop: tuple) -> Tracer | None:
    """x ** 2 and x ** -1 with a constant exponent become a multiply or a division: the same
    correctly rounded result, far cheaper than pow."""
    if ufunc is not np.power or loop[0].kind != "f" or isinstance(inputs[1], Tracer):
        return None
    exponent = np.asarray(inputs[1])
    if exponent.ndim != 0 or float(exponent) not in (2.0, -1.0):
        return None
    x = lift(inputs[0], loop[0])
    if np.broadcast_shapes(x.shape, exponent.shape) != x.shape:
        return None
    if float(exponent) == 2.0:
        return emit(ops.MUL, [x, x])
    return emit(ops.DIV, [_const_like(x, 1), x])


def ufunc_result_dtype(ufunc: np.ufunc, *xs: object) -> np.dtype:
    from jitc.numpy._core import dtype_key
    return ufunc.resolve_dtypes(tuple(dtype_key(x) for x in xs) + (None,))[-1]


__all__ = ["UFUNCS", "apply_operator", "apply_ufunc", "call_ufunc", "compare", "select",
           "result_type"]
