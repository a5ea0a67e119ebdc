"""Exponential/logarithmic kernels of the vectorizable math library (public face: ``vmath``).

Each ``*_kernel(m, ...)`` builds straight-line IR with ``m`` (a :class:`MathBuilder`)
and returns the result value. Special values are handled with selects at the end so
the main path stays branch-free for the loop vectorizer. The polynomial coefficients
are minimax fits (Remez exchange in 50-digit arithmetic, weighted for the relative
error of the final result) over the reduced ranges stated next to each table.
"""

from __future__ import annotations

import math

from llvmlite import ir

from .vmath_base import MathBuilder, Value

LOG2E = 1.4426950408889634
# ln 2 split so that n * LN2_HI is exact inside an fma and the reduction x - n*ln2 is
# carried to twice the working precision.
LN2_HI = {32: 0.6931471824645996, 64: 0.6931471805599453}
LN2_LO = {32: -1.9046542121259336e-09, 64: 2.3190468138462996e-17}
INF = math.inf

# e^r = 1 + r + r^2 * Q(r), r in [-ln2/2, ln2/2]; max relative error 2^-28.3 / 2^-57.9.
EXP_Q = {
    32: (0.49999994, 0.1666652, 0.0416684, 0.008368851, 0.0013814322),
    64: (
        0.5000000000000011, 0.16666666666666408, 0.0416666666665281, 0.00833333333349693,
        0.0013888888944249076, 0.00019841269502727195, 2.480149238840447e-05,
        2.755758843483677e-06, 2.763052342889998e-07, 2.4999853646062163e-08,
    ),
}
# e^r - 1 = r + r^2/2 + r^3 * Q(r), r in [-ln2/2, ln2/2]; rel. error 2^-31.2 / 2^-61.7.
EXPM1_Q = {
    32: (0.16666666, 0.04166648, 0.00833342, 0.0013933422, 0.00019824062),
    64: (
        0.16666666666666677, 0.041666666666666574, 0.008333333333321988,
        0.0013888888888943492, 0.00019841269885442534, 2.4801587197027698e-05,
        2.755724473044618e-06, 2.7557387571532324e-07, 2.510890195056245e-08,
        2.087891672292474e-09,
    ),
}
# Clamp ranges: wide enough that the clamped value still overflows/underflows (or
# saturates expm1 at -1), narrow enough that 2^(n/2) stays a normal number.
EXP_RANGE = {32: (-104.0, 89.0), 64: (-746.0, 710.0)}
EXPM1_LO = {32: -30.0, 64: -60.0}

# f32: log(1+f) = f - f^2/2 + f^3 * P(f), f in [sqrt(1/2)-1, sqrt(2)-1]; rel. 2^-27.4.
LOG_P32 = (
    0.3333333, -0.2500082, 0.20001227, -0.16623357, 0.14201759, -0.13160183, 0.12761575,
    -0.07634495,
)
# f64: with s = f/(2+f), z = s^2: log(1+f) = 2s + s*R(z), R(z) = z * P(z) on
# z in [0, 0.0295]; absolute error of R 2^-58.5 (division-based, as a polynomial in f
# alone would need twice the degree at double precision).
LOG_R64 = (
    0.6666666666666735, 0.3999999999941109, 0.28571428743263544, 0.22222198475911115,
    0.18183569743210728, 0.15313903169156026, 0.14797508410453425,
)
# pow needs log to ~2^-64: log(1+f) = 2s + (2/3)s^3 + s^5 * P(z), the first two terms
# in double-word arithmetic; P has absolute error 2^-58.9 on the same z range.
LOG_P64_POW = (
    0.4, 0.2857142857142938, 0.2222222222164817, 0.1818181833703622, 0.15384594796178894,
    0.1333481332114045, 0.1170601481784655, 0.11725409857127907,
)
TWO_THIRDS_HI = 0.6666666666666666
TWO_THIRDS_LO = 3.700743415417188e-17
SQRT_HALF_BITS = {32: 0x3F3504F3, 64: 0x3FE6A09E667F3BCD}

# tanh(x) = x + x^3 * P(x^2) for |x| < TANH_SMALL; rel. error 2^-29.8 / 2^-60.6.
TANH_SMALL = 0.55
TANH_P = {
    32: (-0.33333316, 0.13332586, -0.05385231, 0.02107168, -0.0062742406),
    64: (
        -0.333333333333333, 0.13333333333326622, -0.05396825396376061, 0.021869488385855947,
        -0.008863232601445233, 0.0035920920304911316, -0.001455542846185423,
        0.0005884444882722057, -0.00023338157117212574, 8.331645665631611e-05,
        -1.9494693647962877e-05,
    ),
}


# -- exp / expm1 ---------------------------------------------------------------------


def _reduce_ln2(
    m: MathBuilder, x: Value, tail: Value | None = None
) -> tuple[Value, Value, Value]:
    """x (+ tail) = n*ln2 + r_hi + r_lo with |r| <= ln2/2; returns (n as float, r_hi, r_lo).

    With the fma, r_hi = x - n*LN2_HI is exact (the difference fits in one word), and
    r_lo = -n*LN2_LO (+ tail) is tiny, so keeping them apart carries r to twice the
    working precision at the cost of one extra add.
    """
    n = m.rint(m.mul(x, m.const(LOG2E)))
    neg_n = m.neg(n)
    r_hi = m.fma(neg_n, m.const(LN2_HI[m.bits]), x)
    lo_c = m.const(LN2_LO[m.bits])
    r_lo = m.mul(neg_n, lo_c) if tail is None else m.fma(neg_n, lo_c, tail)
    return n, r_hi, r_lo


def _exp_reduced(m: MathBuilder, x: Value, tail: Value | None = None) -> Value:
    """e^(x + tail) for x already clamped to EXP_RANGE (so n is a safe i32)."""
    hi, lo, n = _exp_reduced_dw(m, x, tail)
    return m.scale(m.add(hi, lo), n)


def _exp_reduced_dw(
    m: MathBuilder, x: Value, tail: Value | None = None
) -> tuple[Value, Value, Value]:
    """e^(x + tail) = 2^n * (hi + lo), n as i32, with |lo| < 0.1 (not normalized).

    1 + r_hi is split exactly and everything small is accumulated in lo, so the only
    significant rounding is the final hi + lo.
    """
    n, r_hi, r_lo = _reduce_ln2(m, x, tail)
    r = m.add(r_hi, r_lo)
    q = m.poly(r, EXP_Q[m.bits])
    hi, lo = m.fast_two_sum(m.const(1.0), r_hi)
    lo = m.add(lo, m.fma(m.mul(r, r), q, r_lo))
    return hi, lo, m.to_i32(n)


def _exp_short_f32(m: MathBuilder, x: Value) -> Value:
    """e^x for float32 x clamped to EXP_RANGE, with 1 + r summed in one word: 1 + (r_hi +
    (r^2 * Q(r) + r_lo)). The double-word 1 + r of `_exp_reduced` costs three more vector
    instructions (32 against 29 in softmax's exp-and-sum loop) for accuracy float32 does not
    need: every float32 input stays within exp's 1-ulp bound (the exhaustive test in
    tests/backends/test_vmath.py; the worst is in vmath.py's table)."""
    n, r_hi, r_lo = _reduce_ln2(m, x)
    # r_lo is added to the small term, not to r_hi: r rounded to one word cost up to 0.35 ulp
    # for results just below 1 (1.008 ulp in all). The polynomial still needs all of r: at
    # |n| near 126, r_lo (~2^-22) moves r^2 * Q(r) by up to 1.4 ulp.
    r = m.add(r_hi, r_lo)
    u = m.add(r_hi, m.fma(m.mul(r, r), m.poly(r, EXP_Q[32]), r_lo))
    return m.scale(m.add(m.const(1.0), u), m.to_i32(n))


def exp_kernel(m: MathBuilder, x: Value) -> Value:
    lo, hi = EXP_RANGE[m.bits]
    clamped = m.clamp(x, lo, hi)
    res = _exp_reduced(m, clamped) if m.is_f64 else _exp_short_f32(m, clamped)
    return m.select(m.isnan(x), x, res)


def expm1_kernel(m: MathBuilder, x: Value) -> Value:
    """e^x - 1 = 2^n * expm1(r) + (2^n - 1), with expm1(r) as a double word.

    Multiplying by 2^n is exact, so two_sum gives the final addition's rounding error
    and the result is rounded essentially once, even where n = +-1 makes the two terms
    cancel. For n above the precision 2^n - 1 is not representable; there the -1 is
    folded into the small term instead (as -2^-n).
    """
    lo = EXPM1_LO[m.bits]
    hi = EXP_RANGE[m.bits][1]
    n, r_hi, r_lo = _reduce_ln2(m, m.clamp(x, lo, hi))
    r = m.add(r_hi, r_lo)
    q = m.poly(r, EXPM1_Q[m.bits])
    w = m.fma(m.mul(r, r), m.fma(r, q, m.const(0.5)), r_lo)
    e_hi, e_lo = m.fast_two_sum(r_hi, w)

    ni = m.to_i32(n)
    top = m.exp_bias  # 2^top is the largest finite power of two
    i32 = m.i32
    over = m.b.icmp_signed(">", ni, m.iconst(top, i32))
    nc = m.select(over, m.iconst(top, i32), ni)
    t = m.pow2(nc)
    big = m.b.icmp_signed(">", nc, m.iconst(m.mant_bits + 1, i32))
    # 2^-n, capped so it stays a normal number; it is far below e's ulp there anyway.
    capped = m.select(m.b.icmp_signed(">", nc, m.iconst(top - 1, i32)),
                      m.iconst(top - 1, i32), nc)
    e_lo = m.select(big, m.sub(e_lo, m.pow2(m.b.neg(capped))), e_lo)
    c = m.select(big, t, m.sub(t, m.const(1.0)))
    s, err = m.two_sum(m.mul(t, e_hi), c)
    res = m.add(s, m.fma(t, e_lo, err))
    res = m.select(over, m.mul(res, m.const(2.0)), res)

    tiny = m.cmp("<", m.fabs(x), m.const(2.0 ** -(m.mant_bits + 2)))
    res = m.select(tiny, x, res)
    return m.select(m.isnan(x), x, res)


# -- log / log1p ---------------------------------------------------------------------


def _decompose(m: MathBuilder, x: Value) -> tuple[Value, Value]:
    """x = 2^k * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)); returns (k as float, f).

    Subtracting the bits of sqrt(1/2) before extracting the exponent centres the
    mantissa range on 1, which minimizes |f|. f = mantissa - 1 is exact (Sterbenz).
    Garbage-in for zero, negative, inf and NaN is fine: callers override those lanes.
    """
    ix = m.to_bits(x)
    t = m.b.sub(ix, m.iconst(SQRT_HALF_BITS[m.bits]))
    k = m.b.ashr(t, m.iconst(m.mant_bits))
    mant = m.from_bits(m.b.sub(ix, m.b.shl(k, m.iconst(m.mant_bits))))
    return m.from_i32(m.narrow(k)), m.sub(mant, m.const(1.0))


def _log1p_reduced(m: MathBuilder, f: Value) -> Value:
    """log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]."""
    if not m.is_f64:
        t = m.fma(f, m.poly(f, LOG_P32), m.const(-0.5))
        return m.fma(m.mul(f, f), t, f)
    # log(1+f) = f - s*(f - R) rewritten so the large term f is added last, exactly.
    s = m.div(f, m.add(f, m.const(2.0)))
    z = m.mul(s, s)
    big_r = m.mul(z, m.poly(z, LOG_R64))
    hfsq = m.mul(m.mul(f, f), m.const(0.5))
    return m.sub(f, m.sub(hfsq, m.mul(s, m.add(hfsq, big_r))))


def _combine_ln2(m: MathBuilder, k: Value, lp: Value) -> Value:
    """k*ln2 + lp, with the low part of ln2 folded into the small term first."""
    inner = m.fma(k, m.const(LN2_LO[m.bits]), lp)
    return m.fma(k, m.const(LN2_HI[m.bits]), inner)


def _log_finite(m: MathBuilder, x: Value) -> Value:
    """log(x) for finite x > 0, subnormals included (prescaled to normal)."""
    shift = m.mant_bits + 2
    sub = m.cmp("<", x, m.const(2.0 ** (1 - m.exp_bias)))
    xs = m.select(sub, m.mul(x, m.const(2.0**shift)), x)
    k, f = _decompose(m, xs)
    k = m.sub(k, m.select(sub, m.const(float(shift)), m.const(0.0)))
    return _combine_ln2(m, k, _log1p_reduced(m, f))


def log_kernel(m: MathBuilder, x: Value) -> Value:
    res = _log_finite(m, x)
    res = m.select(m.cmp("<", x, m.const(0.0)), m.const(math.nan), res)
    res = m.select(m.cmp("==", x, m.const(0.0)), m.const(-INF), res)
    # +inf and NaN (unordered ==) both return the input itself.
    return m.select(m.ucmp("==", x, m.const(INF)), x, res)


def log1p_kernel(m: MathBuilder, x: Value) -> Value:
    """log1p via u = 1 + x plus the exactly recovered rounding error of that sum.

    Near zero (where u lands in the central mantissa range) the reduced kernel is
    applied to x itself, which needs no correction at all.
    """
    one = m.const(1.0)
    u = m.add(x, one)
    k, f_u = _decompose(m, u)
    # Fast2Sum: with |x| <= 1 the error of 1 + x is x - (u - 1), else 1 - (u - x).
    small_x = m.cmp("<=", m.fabs(x), one)
    c = m.select(small_x, m.sub(x, m.sub(u, one)), m.sub(one, m.sub(u, x)))
    central = m.cmp("==", k, m.const(0.0))
    f = m.select(central, x, f_u)
    corr = m.select(central, m.const(0.0), m.div(c, u))
    res = _combine_ln2(m, k, m.add(_log1p_reduced(m, f), corr))

    res = m.select(m.cmp("<", x, m.const(-1.0)), m.const(math.nan), res)
    res = m.select(m.cmp("==", x, m.const(-1.0)), m.const(-INF), res)
    res = m.select(m.cmp("==", x, m.const(0.0)), x, res)  # keeps the sign of zero
    return m.select(m.ucmp("==", x, m.const(INF)), x, res)


# -- tanh / logistic -----------------------------------------------------------------


def tanh_kernel(m: MathBuilder, x: Value) -> Value:
    """Odd polynomial near zero; elsewhere 1 - 2q with q = w/(1+w), w = e^(-2|x|).

    q <= 1/4 there, so the subtraction cannot cancel and the result saturates to
    exactly 1. tanh rounds to 1 long before |x| = 10 (f32) / 20 (f64), so clamping
    there keeps w a normal number and its scaling a single multiply.
    """
    ax = m.fabs(x)
    z = m.mul(x, x)
    small = m.fma(ax, m.mul(z, m.poly(z, TANH_P[m.bits])), ax)
    t = m.mul(m.intrinsic("minnum", ax, m.pick(10.0, 20.0)), m.const(-2.0))
    hi, lo, n = _exp_reduced_dw(m, t)
    w = m.mul(m.add(hi, lo), m.pow2(n))
    large = m.fma(m.div(w, m.add(w, m.const(1.0))), m.const(-2.0), m.const(1.0))
    res = m.select(m.cmp("<", ax, m.const(TANH_SMALL)), small, large)
    # Both branches work on |x|; copysign restores oddness, including tanh(-0) = -0.
    return m.copysign(m.select(m.isnan(x), x, res), x)


def logistic_kernel(m: MathBuilder, x: Value) -> Value:
    """1/(1+e^-x) as q = E/(1+E) for x < 0 and 1 - q for x >= 0, with E = e^-|x|.

    E <= 1, so nothing overflows for large |x| and q follows E into the subnormals;
    q <= 1/2, so 1 - q cannot cancel. 1 + E is split exactly and the quotient gets one
    fma correction step (using 1/(1+E) = 1 - q, so no second division): that removes
    the roundings of the sum and of the division, leaving essentially exp's error.
    """
    lo, _ = EXP_RANGE[m.bits]
    one = m.const(1.0)
    e = _exp_reduced(m, m.clamp(m.neg(m.fabs(x)), lo, 0.0))
    d_hi, d_lo = m.fast_two_sum(one, e)
    q = m.div(e, d_hi)
    resid = m.sub(m.fma(m.neg(q), d_hi, e), m.mul(q, d_lo))
    q = m.fma(resid, m.sub(one, q), q)
    res = m.select(m.cmp("<", x, m.const(0.0)), q, m.sub(one, q))
    return m.select(m.isnan(x), x, res)


# -- pow -----------------------------------------------------------------------------


def _is_integer(m: MathBuilder, y: Value) -> Value:
    return m.cmp("==", m.floor(y), y)  # true for +-inf as well, which C99 wants


def _is_odd_integer(m: MathBuilder, y: Value) -> Value:
    half = m.mul(y, m.const(0.5))
    return m.and_(_is_integer(m, y), m.cmp("!=", m.floor(half), half))


def _log_dd(m: MathBuilder, x: Value) -> tuple[Value, Value]:
    """log(x) as an unevaluated sum hi + lo accurate to ~2^-64 relative (x > 0 finite)."""
    shift = m.mant_bits + 2
    sub = m.cmp("<", x, m.const(2.0 ** (1 - m.exp_bias)))
    xs = m.select(sub, m.mul(x, m.const(2.0**shift)), x)
    k, f = _decompose(m, xs)
    k = m.sub(k, m.select(sub, m.const(float(shift)), m.const(0.0)))

    # s = f / (2 + f) as a double word; 2 + f itself is not exact, so carry its error.
    two = m.const(2.0)
    d = m.add(two, f)
    d_lo = m.add(m.sub(two, d), f)
    s_hi = m.div(f, d)
    rem = m.fma(m.neg(s_hi), d, f)
    rem = m.fma(m.neg(s_hi), d_lo, rem)
    s_lo = m.div(rem, d)

    # (2/3) s^3 as a double word.
    sq_hi, sq_lo = m.two_prod(s_hi, s_hi)
    cube_hi, cube_lo = m.two_prod(sq_hi, s_hi)
    cube_lo = m.add(cube_lo, m.fma(sq_lo, s_hi, m.mul(m.mul(sq_hi, s_lo), m.const(3.0))))
    t_hi, t_lo = m.two_prod(cube_hi, m.const(TWO_THIRDS_HI))
    t_lo = m.add(t_lo, m.fma(cube_hi, m.const(TWO_THIRDS_LO),
                             m.mul(cube_lo, m.const(TWO_THIRDS_HI))))
    tail = m.mul(m.mul(cube_hi, sq_hi), m.poly(sq_hi, LOG_P64_POW))

    two_s = m.mul(s_hi, two)
    hi, err = m.fast_two_sum(two_s, t_hi)
    lo = m.add(m.add(m.add(err, m.mul(s_lo, two)), t_lo), tail)
    lm_hi, lm_lo = m.fast_two_sum(hi, lo)

    kl_hi, kl_lo = m.two_prod(k, m.const(LN2_HI[64]))
    kl_lo = m.fma(k, m.const(LN2_LO[64]), kl_lo)
    out_hi, out_err = m.two_sum(kl_hi, lm_hi)
    return m.fast_two_sum(out_hi, m.add(m.add(out_err, kl_lo), lm_lo))


def _pow_abs_f64(m: MathBuilder, ax: Value, y: Value) -> Value:
    """|x|^y for double: exp of y*log|x| carried in double-word precision."""
    l_hi, l_lo = _log_dd(m, ax)
    # Zero and infinity give +-inf logs; keep the double-word parts finite-or-inf
    # so that the overflow/underflow selects below decide those lanes.
    is_zero = m.cmp("==", ax, m.const(0.0))
    is_inf = m.cmp("==", ax, m.const(INF))
    l_hi = m.select(is_zero, m.const(-INF), m.select(is_inf, m.const(INF), l_hi))
    l_lo = m.select(m.or_(is_zero, is_inf), m.const(0.0), l_lo)

    t_hi, t_lo = m.two_prod(y, l_hi)
    t_lo = m.fma(y, l_lo, t_lo)
    lo, hi = EXP_RANGE[64]
    res = _exp_reduced(m, m.clamp(t_hi, lo, hi), t_lo)
    res = m.select(m.cmp(">", t_hi, m.const(hi)), m.const(INF), res)
    return m.select(m.cmp("<", t_hi, m.const(lo)), m.const(0.0), res)


def _pow_abs_f32(m: MathBuilder, ax: Value, y: Value) -> Value:
    """|x|^y for float: the double-precision log/exp leave ~2^-44 relative error,
    far below float's ulp, so one rounding to float gives a nearly exact result."""
    d = m.like(ir.DoubleType())
    axd = m.b.fpext(ax, d.ty)
    yd = m.b.fpext(y, d.ty)
    t = m.mul(yd, log_kernel(d, axd))
    return m.b.fptrunc(exp_kernel(d, t), m.ty)


def pow_kernel(m: MathBuilder, x: Value, y: Value) -> Value:
    """x^y with the C99 Annex F special cases layered over |x|^y by selects."""
    ax = m.fabs(x)
    res = _pow_abs_f64(m, ax, y) if m.is_f64 else _pow_abs_f32(m, ax, y)

    zero, one = m.const(0.0), m.const(1.0)
    x_neg = m.cmp("<", x, zero)
    odd = _is_odd_integer(m, y)
    # Sign bit of x, not x < 0: pow(-0, odd) must be -0 or -inf.
    x_signed = m.b.icmp_signed("<", m.to_bits(x), m.iconst(0))
    res = m.select(m.and_(x_signed, odd), m.neg(res), res)
    finite_x = m.cmp("<", ax, m.const(INF))
    finite_y = m.cmp("<", m.fabs(y), m.const(INF))
    bad = m.and_(m.and_(x_neg, finite_x), m.and_(finite_y, m.not_(_is_integer(m, y))))
    res = m.select(bad, m.const(math.nan), res)
    # (+-1)^(+-inf) is 1; the log-based path would give 0 * inf.
    res = m.select(m.and_(m.cmp("==", ax, one), m.not_(finite_y)), one, res)
    res = m.select(m.or_(m.isnan(x), m.isnan(y)), m.add(x, y), res)
    # x^0 and 1^y are 1 even for NaN operands.
    return m.select(m.or_(m.cmp("==", y, zero), m.cmp("==", x, one)), one, res)
