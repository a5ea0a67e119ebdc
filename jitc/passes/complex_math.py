"""numpy's complex arithmetic written with real ops on (real, imaginary) pairs.

The formulas follow numpy's own loops (numpy/_core/src/umath/loops*.src and npymath): Smith's
division with numpy's branches, `hypot` without overflow for abs, and the textbook forms of
exp, log, sqrt, sin and cos (numpy's results for finite arguments; see docs/dtypes.md for the
special values where they may differ).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Value
from jitc.ir.types import TensorType

Pair = tuple[Value, Value]


class RealOps:
    """Short spellings of real ops on one builder, for the formulas below."""

    def __init__(self, builder: Builder) -> None:
        self.b = builder

    def op(self, op, *xs: Value, **attrs: object) -> Value:
        return self.b.emit(op, list(xs), attrs or None)

    def add(self, x: Value, y: Value) -> Value:
        return self.op(ops.ADD, x, y)

    def sub(self, x: Value, y: Value) -> Value:
        return self.op(ops.SUB, x, y)

    def mul(self, x: Value, y: Value) -> Value:
        return self.op(ops.MUL, x, y)

    def div(self, x: Value, y: Value) -> Value:
        return self.op(ops.DIV, x, y)

    def neg(self, x: Value) -> Value:
        return self.op(ops.NEG, x)

    def abs(self, x: Value) -> Value:
        return self.op(ops.ABS, x)

    def cmp(self, x: Value, y: Value, direction: str) -> Value:
        return self.op(ops.COMPARE, x, y, direction=direction)

    def select(self, pred: Value, on_true: Value, on_false: Value) -> Value:
        return self.op(ops.SELECT, pred, on_true, on_false)

    def both(self, x: Value, y: Value) -> Value:
        return self.op(ops.AND, x, y)

    def either(self, x: Value, y: Value) -> Value:
        return self.op(ops.OR, x, y)

    def const(self, value: float, like: Value) -> Value:
        """A scalar constant of `like`'s dtype (elementwise ops broadcast it)."""
        array = np.asarray(value, dtype=like.type.dtype.numpy)
        return self.b.emit(ops.CONSTANT, [], {"value": ops.CONSTANT.attrs[0].normalize(array)})

    def full(self, value: float, like: Value) -> Value:
        """`value` in `like`'s dtype and shape."""
        scalar = self.const(value, like)
        if like.type.rank == 0:
            return scalar
        return self.b.emit(ops.BROADCAST_IN_DIM, [scalar], {"dims": []},
                           TensorType(like.type.dtype, like.type.shape))

    def isinf(self, x: Value) -> Value:
        return self.cmp(self.abs(x), self.const(np.inf, x), "eq")

    def isnan(self, x: Value) -> Value:
        return self.cmp(x, x, "ne")


def multiply(r: RealOps, x: Pair, y: Pair) -> Pair:
    (a, b), (c, d) = x, y
    return r.sub(r.mul(a, c), r.mul(b, d)), r.add(r.mul(a, d), r.mul(b, c))


def divide(r: RealOps, x: Pair, y: Pair) -> Pair:
    """numpy's complex division: Smith's method, scaling by the larger part of the divisor."""
    (a, b), (c, d) = x, y
    abs_c, abs_d = r.abs(c), r.abs(d)
    zero = r.const(0.0, c)
    one = r.const(1.0, c)
    # |c| >= |d|: rat = d/c, scl = 1/(c + d*rat)
    rat1 = r.div(d, c)
    scl1 = r.div(one, r.add(c, r.mul(d, rat1)))
    re1 = r.mul(r.add(a, r.mul(b, rat1)), scl1)
    im1 = r.mul(r.sub(b, r.mul(a, rat1)), scl1)
    # |c| < |d|: rat = c/d, scl = 1/(d + c*rat)
    rat2 = r.div(c, d)
    scl2 = r.div(one, r.add(d, r.mul(c, rat2)))
    re2 = r.mul(r.add(r.mul(a, rat2), b), scl2)
    im2 = r.mul(r.sub(r.mul(b, rat2), a), scl2)
    # A zero divisor: each part divided by |0| (inf or nan, as numpy gives).
    re0, im0 = r.div(a, abs_c), r.div(b, abs_d)
    divisor_zero = r.both(r.cmp(abs_c, zero, "eq"), r.cmp(abs_d, zero, "eq"))
    first = r.cmp(abs_c, abs_d, "ge")
    re = r.select(first, r.select(divisor_zero, re0, re1), re2)
    im = r.select(first, r.select(divisor_zero, im0, im1), im2)
    return re, im


def hypot(r: RealOps, x: Value, y: Value) -> Value:
    """sqrt(x*x + y*y) without overflow or underflow; inf if either part is, even with nan."""
    ax, ay = r.abs(x), r.abs(y)
    big, small = r.op(ops.MAX, ax, ay), r.op(ops.MIN, ax, ay)
    zero, one = r.const(0.0, x), r.const(1.0, x)
    ratio = r.div(small, big)
    scaled = r.mul(big, r.op(ops.SQRT, r.add(one, r.mul(ratio, ratio))))
    result = r.select(r.cmp(big, zero, "eq"), zero, scaled)
    return r.select(r.either(r.isinf(ax), r.isinf(ay)), r.const(np.inf, x), result)


def exp(r: RealOps, x: Pair) -> Pair:
    a, b = x
    scale = r.op(ops.EXP, a)
    re, im = r.mul(scale, r.op(ops.COS, b)), r.mul(scale, r.op(ops.SIN, b))
    # A zero imaginary part stays exactly zero (exp of a real value), as in numpy.
    real_input = r.cmp(b, r.const(0.0, b), "eq")
    return r.select(real_input, scale, re), r.select(real_input, b, im)


def log(r: RealOps, x: Pair) -> Pair:
    a, b = x
    return r.op(ops.LOG, hypot(r, a, b)), r.op(ops.ATAN2, b, a)


def sqrt(r: RealOps, x: Pair) -> Pair:
    """numpy's csqrt: t = sqrt((|a| + |z|) / 2); the part on the side of a gets t, the other
    b / 2t, with the sign of b. Large arguments are scaled by 1/4 so |a| + |z| cannot
    overflow."""
    a, b = x
    zero = r.const(0.0, a)
    big = r.cmp(r.op(ops.MAX, r.abs(a), r.abs(b)),
                r.const(np.finfo(a.type.dtype.numpy).max / 4, a), "ge")
    quarter = r.select(big, r.const(0.25, a), r.const(1.0, a))
    sa, sb = r.mul(a, quarter), r.mul(b, quarter)
    t = r.op(ops.SQRT, r.mul(r.add(r.abs(sa), hypot(r, sa, sb)), r.const(0.5, a)))
    t = r.mul(t, r.select(big, r.const(2.0, a), r.const(1.0, a)))
    two_t = r.add(t, t)
    b_negative = _sign_bit(r, b)
    t_signed = r.select(b_negative, r.neg(t), t)  # copysign(t, b), -0.0 included
    a_non_negative = r.cmp(a, zero, "ge")
    re = r.select(a_non_negative, t, r.div(r.abs(b), two_t))
    im = r.select(a_non_negative, r.div(b, two_t), t_signed)
    # sqrt(+-0 + bj) for b = +-0 is (+0, b); an infinite b gives (inf, b) whatever a is.
    both_zero = r.both(r.cmp(a, zero, "eq"), r.cmp(b, zero, "eq"))
    re = r.select(both_zero, zero, re)
    im = r.select(both_zero, b, im)
    inf_b = r.isinf(b)
    re = r.select(inf_b, r.const(np.inf, a), re)
    im = r.select(inf_b, b, im)
    return re, im


def _sign_bit(r: RealOps, x: Value) -> Value:
    """Whether x's sign bit is set (true for -0.0 too, unlike x < 0)."""
    bits = dtypes.int64 if x.type.dtype.bits == 64 else dtypes.int32
    as_int = r.b.emit(ops.BITCAST_CONVERT, [x], {}, TensorType(bits, x.type.shape))
    return r.cmp(as_int, r.const(0, as_int), "lt")


def _cosh_sinh(r: RealOps, x: Value) -> tuple[Value, Value]:
    half = r.const(0.5, x)
    up, down = r.op(ops.EXP, x), r.op(ops.EXP, r.neg(x))
    cosh = r.mul(half, r.add(up, down))
    # sinh near 0 from expm1, where e**x - e**-x cancels: (em1 + em1 / (em1 + 1)) / 2.
    em1 = r.op(ops.EXPM1, r.abs(x))
    small = r.mul(half, r.add(em1, r.div(em1, r.add(em1, r.const(1.0, x)))))
    small = r.select(r.isinf(em1), em1, small)
    sinh = r.mul(small, r.op(ops.SIGN, x))
    return cosh, sinh


def sin(r: RealOps, x: Pair) -> Pair:
    a, b = x
    cosh, sinh = _cosh_sinh(r, b)
    return r.mul(r.op(ops.SIN, a), cosh), r.mul(r.op(ops.COS, a), sinh)


def cos(r: RealOps, x: Pair) -> Pair:
    a, b = x
    cosh, sinh = _cosh_sinh(r, b)
    return r.mul(r.op(ops.COS, a), cosh), r.neg(r.mul(r.op(ops.SIN, a), sinh))


def tanh(r: RealOps, x: Pair) -> Pair:
    """Kahan's ctanh (as in the C libraries numpy calls): with t = tan b, s = sinh a,
    tanh = ((1 + t^2) s sqrt(1 + s^2), t) / (1 + (1 + t^2) s^2); past |a| = 22 (9 for
    float32), where that overflows, (sign a, 4 sin b cos b e^(-2|a|))."""
    a, b = x
    sin_b, cos_b = r.op(ops.SIN, b), r.op(ops.COS, b)
    t = r.div(sin_b, cos_b)
    one = r.const(1.0, a)
    beta = r.add(one, r.mul(t, t))
    _, s = _cosh_sinh(r, a)
    rho = r.op(ops.SQRT, r.add(one, r.mul(s, s)))
    denominator = r.add(one, r.mul(beta, r.mul(s, s)))
    re = r.div(r.mul(r.mul(beta, rho), s), denominator)
    im = r.div(t, denominator)
    decay = r.op(ops.EXP, r.neg(r.abs(a)))
    far_im = r.mul(r.mul(r.mul(r.const(4.0, a), sin_b), cos_b), r.mul(decay, decay))
    limit = 22.0 if a.type.dtype.bits == 64 else 9.0
    far = r.cmp(r.abs(a), r.const(limit, a), "ge")
    return r.select(far, r.op(ops.SIGN, a), re), r.select(far, far_im, im)


UNARY: dict[object, Callable[[RealOps, Pair], Pair]] = {
    ops.EXP: exp, ops.LOG: log, ops.SQRT: sqrt, ops.SIN: sin, ops.COS: cos, ops.TANH: tanh,
}
