"""Vectorizable transcendental functions emitted as plain LLVM IR.

Why this exists: ``llvm.exp.*`` and friends are lowered to one scalar libm call per
lane after loop vectorization on the CPU, and they abort code generation for NVPTX
("no libcall available"). These emitters instead build range reduction plus
polynomial approximations from ordinary arithmetic, integer/bit ops, ``select`` and a
handful of intrinsics that lower to single instructions (``fma``, ``fabs``, ``floor``,
``rint``, ``copysign``, ``minnum``/``maxnum``). There is no control flow, so the loop
vectorizer widens the code (to ``<16 x float>`` with AVX-512), and the same IR compiles
for ``nvptx64``. ``llvm.fma`` assumes a target with hardware fma (x86-64-v3 and newer,
AArch64, every NVPTX target); elsewhere LLVM would fall back to a correct but slow
``fma`` libcall.

Usage: ``emit_exp(builder, x)`` returns the result for a ``float`` or ``double`` value
(vectors of them work too). Half precision callers extend to float and truncate back.
Each function is defined once per module as an ``internal alwaysinline`` helper
(``jitc.vmath.<name>.<type>``) and called: the optimizer inlines it before vectorizing,
so modules stay small without costing speed, and an unoptimized module still works.
``MATH_FUNCTIONS`` maps op names to emitters for table-driven lowering.

Special values follow C99 Annex F, as numpy does: NaN in gives NaN out (except
pow(x, 0) = pow(1, y) = 1), log(0) = -inf, log(x < 0) = NaN, exp overflows to inf and
underflows gradually through the subnormals to 0, tanh(+-inf) = +-1, sin/cos(+-inf) =
NaN, signed zeros are kept (sin, tanh, expm1, log1p and atan2 of -0 give -0), and pow
and atan2 implement every special case of the standard.

Accuracy: max error in ulps against the exact result, as enforced by
``tests/backends/test_vmath.py`` (ULP_BOUNDS below); in parentheses the largest error
measured, exhaustively over all float32 inputs for the unary functions and over a few
million stratified samples (every binade, subnormals, thresholds) otherwise:

    ==========  ============  ============  ==========================================
    function    float32       float64       notes
    ==========  ============  ============  ==========================================
    exp         <= 1 (0.88)   <= 1 (0.76)   subnormal results are rounded only once
    expm1       <= 1 (0.91)   <= 1.5 (1.09)
    log         <= 1 (0.94)   <= 1.5 (1.22)
    log1p       <= 1.5 (1.23) <= 2 (1.48)
    tanh        <= 1.5 (1.44) <= 2 (1.41)
    logistic    <= 1.5 (1.47) <= 2 (1.41)   1/(1+exp(-x)); no overflow for any x
    sin         <= 2 (1.62)   <= 2 (1.49)   every finite x, see below
    cos         <= 2 (1.60)   <= 2 (1.51)   every finite x
    pow         <= 1 (0.50)   <= 1.5 (1.06) relative error < 2^-23 (f32), < 2^-51.4 (f64)
    atan2       <= 2 (1.44)   <= 2 (1.44)
    ==========  ============  ============  ==========================================

sin/cos use a three-part Cody-Waite reduction by pi/2, which is accurate while the
quadrant count is exact: |x| < 2^24 for float (every input there was checked) and
|x| < 2^48 for double (sampled, including the floats nearest to multiples of pi/2). Lanes
with larger |x|, up to the largest float, take an exact Payne-Hanek reduction with 96
(f32) or 192 (f64) bits of 2/pi (vmath_trig_huge.py); tests/backends/test_vmath.py checks
the same bounds there (random magnitudes and bit patterns over every binade, the extremes,
numpy in float64 / long double as the reference). The exact reduction runs only when a
vector has a huge lane: on the CPU it is a vector variant of a call that the loop
vectorizer widens and that is inlined after it, a test and a branch per vector; np.sin of
a million float32 values in [-100, 100] takes 2-3% longer than without it, np.tan (both
sin and cos) 8-14%.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from .vmath_base import HELPER_PREFIX, call_helper
from .vmath_exp_log import (
    exp_kernel,
    expm1_kernel,
    log1p_kernel,
    log_kernel,
    logistic_kernel,
    pow_kernel,
    tanh_kernel,
)
from .vmath_trig import atan2_kernel, cos_kernel, sin_kernel

__all__ = [
    "HELPER_PREFIX",
    "MATH_FUNCTIONS",
    "TRIG_DOMAIN",
    "ULP_BOUNDS",
    "emit_atan2",
    "emit_cos",
    "emit_exp",
    "emit_expm1",
    "emit_log",
    "emit_log1p",
    "emit_logistic",
    "emit_pow",
    "emit_sin",
    "emit_tanh",
]

# Max error in ulps, (float32, float64): the table above, as data the tests enforce.
ULP_BOUNDS: dict[str, tuple[float, float]] = {
    "exp": (1.0, 1.0),
    "expm1": (1.0, 1.5),
    "log": (1.0, 1.5),
    "log1p": (1.5, 2.0),
    "tanh": (1.5, 2.0),
    "logistic": (1.5, 2.0),
    "sin": (2.0, 2.0),
    "cos": (2.0, 2.0),
    "pow": (1.0, 1.5),
    "atan2": (2.0, 2.0),
}
# The Cody-Waite domain of sin/cos, (float32, float64): past it the exact reduction.
TRIG_DOMAIN: tuple[float, float] = (2.0**24, 2.0**48)


def emit_exp(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x."""
    return call_helper(builder, "exp", [x], exp_kernel)


def emit_expm1(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x - 1, accurate for small |x| where exp(x) - 1 would cancel."""
    return call_helper(builder, "expm1", [x], expm1_kernel)


def emit_log(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Natural logarithm."""
    return call_helper(builder, "log", [x], log_kernel)


def emit_log1p(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """log(1 + x), accurate for small |x| where 1 + x would round."""
    return call_helper(builder, "log1p", [x], log1p_kernel)


def emit_tanh(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Hyperbolic tangent."""
    return call_helper(builder, "tanh", [x], tanh_kernel)


def emit_logistic(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + e**-x) (sigmoid), without overflow for large |x|."""
    return call_helper(builder, "logistic", [x], logistic_kernel)


def emit_sin(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Sine (radians); accurate in the domain stated in the module table."""
    return call_helper(builder, "sin", [x], sin_kernel)


def emit_cos(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Cosine (radians); accurate in the domain stated in the module table."""
    return call_helper(builder, "cos", [x], cos_kernel)


def emit_pow(builder: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """x**y with C99 special cases (x and y of the same type)."""
    return call_helper(builder, "pow", [x, y], pow_kernel)


def emit_atan2(builder: ir.IRBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
    """Angle of the point (x, y) in [-pi, pi]; note the (y, x) argument order."""
    return call_helper(builder, "atan2", [y, x], atan2_kernel)


UnaryEmitter = Callable[[ir.IRBuilder, ir.Value], ir.Value]
BinaryEmitter = Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]

MATH_FUNCTIONS: dict[str, UnaryEmitter | BinaryEmitter] = {
    "exp": emit_exp,
    "expm1": emit_expm1,
    "log": emit_log,
    "log1p": emit_log1p,
    "tanh": emit_tanh,
    "logistic": emit_logistic,
    "sin": emit_sin,
    "cos": emit_cos,
    "pow": emit_pow,
    "atan2": emit_atan2,
}
