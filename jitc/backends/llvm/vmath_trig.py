"""Trigonometric kernels of the vectorizable math library (public face: ``vmath``).

sin/cos reduce by pi/2 with a three-part Cody-Waite constant and evaluate both
polynomials on |r| <= pi/4, picking and signing by the quadrant with selects and a sign
bit flip. The reduction is accurate while the quadrant count j is exact in the working
precision (|x| < 2^24 for float, 2^48 for double); lanes beyond that take an exact
Payne-Hanek reduction (vmath_trig_huge.py) that only runs when a lane needs it. atan2
reduces to atan on [0, 1/2] through the octant symmetries. Coefficients are minimax fits
(Remez, relative error of the result).
"""

from __future__ import annotations

import math

from llvmlite import ir

from .vmath_base import MathBuilder, Value
from .vmath_trig_huge import HUGE, call_huge

# 2/pi = hi + lo, so that the quadrant j can be chosen from an exact product.
TWO_OVER_PI = {32: (0.6366197466850281, 2.5682552973194106e-08),
               64: (0.6366197723675814, -3.935735335036497e-17)}
# pi/2 = P1 + P2 + P3 (each a float of the working precision). Because the fma forms
# x - j*P1 exactly, P1 needs no trailing zero bits, so the three parts carry 72 (f32) or
# 159 (f64) bits of pi/2.
PIO2_PARTS = {
    32: (1.5707963705062866, -4.371138828673793e-08, -1.7151245100058819e-15),
    64: (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33),
}
# Inside the accurate domain |r| <= pi/4 (j is exact) and |r_lo| = |j * P3| stays below
# these; outside it the clamps are what keeps sin/cos bounded.
R_CLAMP = 0.7854 * 1.02
R_LO_CLAMP = {32: 2.0**-20, 64: 2.0**-50}

# sin r = r + r^3 * S(r^2) on [0, pi/4]; relative error 2^-28.0 / 2^-57.9.
SIN_S = {
    32: (-0.16666655, 0.008332156, -0.00019514632),
    64: (
        -0.1666666666666663, 0.008333333333322005, -0.0001984126982949549,
        2.7557313587618415e-06, -2.5050742307870868e-08, 1.5895904742832633e-10,
    ),
}
# cos r = 1 - r^2/2 + r^4 * C(r^2) on [0, pi/4]; relative error 2^-33.0 / 2^-63.9.
COS_C = {
    32: (0.041666646, -0.001388731, 2.4432413e-05),
    64: (
        0.041666666666666595, -0.0013888888888872895, 2.4801587288748207e-05,
        -2.755731414862903e-07, 2.0875696573316868e-09, -1.135831052711222e-11,
    ),
}
# atan u = u + u^3 * A(u^2) on [0, 1/2]; relative error 2^-31.9 / 2^-57.8.
ATAN_A = {
    32: (-0.33333328, 0.19999489, -0.1427207, 0.10940901, -0.07983736, 0.038718402),
    64: (
        -0.3333333333333298, 0.19999999999902976, -0.14285714276373918, 0.11111110659105572,
        -0.09090896231170201, 0.07692073696330777, -0.06663808375694731,
        0.05858283560800286, -0.05121936811313074, 0.04186308962018843,
        -0.027431786958187536, 0.010114616814996301,
    ),
}
# pi/4 = hi + lo; multiples k*pi/4 (k = 0..4) are formed exactly as double words.
PIO4 = {32: (0.7853981852531433, -2.1855694143368964e-08),
        64: (0.7853981633974483, 3.061616997868383e-17)}


def _cody_waite(m: MathBuilder, x: Value) -> tuple[Value, Value, Value]:
    """(r, r_lo, j): x = j*pi/2 + r + r_lo with |r| <= pi/4, j integral (as a float)."""
    # j = rint(x * 2/pi), computed so that it is right even when the rounded product
    # lands near a half-integer: otherwise |r| could exceed pi/4 by ~|x| * 2^-24 and
    # leave the polynomials' range for large x.
    c_hi, c_lo = TWO_OVER_PI[m.bits]
    t = m.mul(x, m.const(c_hi))
    t_err = m.fma(x, m.const(c_lo), m.fma(x, m.const(c_hi), m.neg(t)))
    j = m.rint(t)
    j = m.add(j, m.rint(m.add(m.sub(t, j), t_err)))
    neg_j = m.neg(j)
    p1, p2, p3 = PIO2_PARTS[m.bits]
    # r + r_lo = x - j*pi/2. The first step is exact; the third part is kept apart and
    # fed into the polynomials as a first-order correction instead of being added,
    # which saves a rounding of r (worth ~1 ulp where sin(r) falls just below a power
    # of two, e.g. r ~ 0.125).
    r = m.fma(neg_j, m.const(p1), x)
    r = m.fma(neg_j, m.const(p2), r)
    r_lo = m.mul(neg_j, m.const(p3))
    return r, r_lo, j


def quadrant_of(m: MathBuilder, j: Value) -> Value:
    """j mod 4 as an i32, formed exactly in floating point so that any integral j works;
    the clamp only matters for NaN (inf/NaN inputs), keeping fptosi free of poison."""
    j_mod4 = m.fma(m.floor(m.mul(j, m.const(0.25))), m.const(-4.0), j)
    return m.to_i32(m.clamp(j_mod4, 0.0, 3.0))


def sin_cos_reduced(m: MathBuilder, r: Value, r_lo: Value, q: Value,
                    quadrant_offset: int) -> Value:
    """sin (offset 0) or cos (offset 1) of q*pi/2 + r + r_lo, for |r| <= pi/4 and the
    quadrant q an i32 (only q mod 4 counts)."""
    # Only matters beyond the accurate domain, where r and r_lo are no longer small:
    # clamping keeps the polynomials, and so the results, within [-1, 1].
    r = m.clamp(r, -R_CLAMP, R_CLAMP)
    r_lo = m.clamp(r_lo, -R_LO_CLAMP[m.bits], R_LO_CLAMP[m.bits])

    z = m.mul(r, r)
    # sin(r + r_lo) ~ sin(r) + r_lo and cos(r + r_lo) ~ cos(r) - r*r_lo.
    s = m.add(r, m.fma(m.mul(r, z), m.poly(z, SIN_S[m.bits]), r_lo))
    c = m.fma(z, m.fma(z, m.poly(z, COS_C[m.bits]), m.const(-0.5)), m.const(1.0))
    c = m.fma(m.neg(r), r_lo, c)

    q = m.b.add(q, m.iconst(quadrant_offset, m.i32))
    odd = m.b.trunc(q, m.shaped(ir.IntType(1)))
    res = m.select(odd, c, s)
    # Quadrants 2 and 3 negate: move bit 1 of q into the sign bit.
    flip = m.b.shl(m.widen(m.b.and_(q, m.iconst(2, m.i32))), m.iconst(m.bits - 2))
    return m.from_bits(m.b.xor(m.to_bits(res), flip))


def _sin_cos(m: MathBuilder, x: Value, quadrant_offset: int) -> Value:
    """sin(x) for offset 0, cos(x) = sin(x + pi/2) for offset 1."""
    # Past the Cody-Waite domain the quadrant count is no longer exact: those lanes take
    # the exact (Payne-Hanek) reduction, whose code only runs when a lane needs it. It
    # comes first so that only x is live across its (cold) calls: after them, the fast
    # path's temporaries would have to be spilled.
    exact = call_huge(m, x, quadrant_offset, sin_cos_reduced)
    r, r_lo, j = _cody_waite(m, x)
    res = sin_cos_reduced(m, r, r_lo, quadrant_of(m, j), quadrant_offset)
    huge = m.and_(m.cmp(">=", m.fabs(x), m.const(HUGE[m.bits])),
                  m.cmp("<", m.fabs(x), m.const(math.inf)))
    res = m.select(huge, exact, res)

    if quadrant_offset == 0:
        res = m.select(m.cmp("==", x, m.const(0.0)), x, res)  # sin(-0) = -0
    # inf - inf and NaN - NaN are both NaN, propagating a NaN payload.
    return m.select(m.cmp("<", m.fabs(x), m.const(math.inf)), res, m.sub(x, x))


def sin_kernel(m: MathBuilder, x: Value) -> Value:
    return _sin_cos(m, x, 0)


def cos_kernel(m: MathBuilder, x: Value) -> Value:
    return _sin_cos(m, x, 1)


def atan2_kernel(m: MathBuilder, y: Value, x: Value) -> Value:
    """atan2 as C + s*atan(u): C a multiple of pi/4 chosen by the octant, s = +-1.

    With n = min(|x|,|y|), d = max(|x|,|y|): u = n/d when n <= d/2, otherwise
    u = (n-d)/(n+d) and C gains pi/4; the latter numerator is exact (Sterbenz), so
    only one division is needed and |u| <= 1/2. The octant constant and the leading
    term s*u are summed with two_sum and the polynomial tail added to the error term,
    so the result is rounded essentially once, even where C and s*u nearly cancel.
    """
    ax, ay = m.fabs(x), m.fabs(y)
    swap = m.cmp(">", ay, ax)
    num = m.select(swap, ax, ay)
    den = m.select(swap, ay, ax)
    # Keep n + d finite near the overflow threshold (power-of-two scaling is exact).
    k = m.select(m.cmp(">", den, m.const(2.0 ** (m.exp_bias // 2))), m.const(0.25),
                 m.const(1.0))
    num, den = m.mul(num, k), m.mul(den, k)
    big = m.cmp(">", num, m.mul(den, m.const(0.5)))
    u = m.div(m.select(big, m.sub(num, den), num), m.select(big, m.add(num, den), den))
    # 0/0 and inf/inf: atan2 defines these by the direction, i.e. u = 0 and C = 0 or
    # pi/4 (before the quadrant adjustments).
    both_inf = m.cmp("==", num, m.const(math.inf))
    u = m.select(m.or_(m.cmp("==", den, m.const(0.0)), both_inf), m.const(0.0), u)
    big = m.or_(big, both_inf)

    z = m.mul(u, u)
    tail = m.mul(m.mul(u, z), m.poly(z, ATAN_A[m.bits]))

    zero, one = m.const(0.0), m.const(1.0)
    # The sign bit, not x < 0: atan2(+-0, -0) must be +-pi.
    x_signed = m.b.icmp_signed("<", m.to_bits(x), m.iconst(0))
    octant = m.select(big, one, zero)
    octant = m.select(swap, m.sub(m.const(2.0), octant), octant)
    octant = m.select(x_signed, m.sub(m.const(4.0), octant), octant)
    sign = m.select(m.b.xor(swap, x_signed), m.const(-1.0), one)
    hi, lo = PIO4[m.bits]
    c_hi = m.mul(octant, m.const(hi))
    c_lo = m.fma(octant, m.const(lo), m.fma(octant, m.const(hi), m.neg(c_hi)))

    s, err = m.two_sum(c_hi, m.mul(sign, u))
    res = m.add(s, m.add(err, m.fma(sign, tail, c_lo)))
    res = m.copysign(res, y)
    return m.select(m.or_(m.isnan(x), m.isnan(y)), m.add(x, y), res)
