"""Exact floating-point remainder (C's fmod) in integer arithmetic.

NVPTX lowers LLVM's `frem` to `x - trunc(x / y) * y`, which loses every bit once x / y is
large (fmod(1e10, 3) comes out as 0 or worse); numpy's fmod is exact. The remainder is
always representable, so long division on the significands gives it exactly: shift the
dividend's significand left one bit per exponent step, subtracting the divisor's whenever
it fits (as musl's fmod does). One loop step per binade between x and y: at most 277 steps
for float32 and 2098 for float64, and usually a handful.
"""

from __future__ import annotations

from llvmlite import ir

from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.types import FLOAT, HALF, I64, declare

_FORMATS = {32: (23, 8), 64: (52, 11)}  # bits: (significand bits, exponent bits)


def emit_fmod(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """fmod(x, y) for half, float or double scalars (half is exact through float)."""
    if x.type == HALF:
        wide = emit_fmod(b, b.fpext(x, FLOAT), b.fpext(y, FLOAT))
        return b.fptrunc(wide, HALF)
    width = 32 if x.type == FLOAT else 64
    name = f"jitc.fmod.f{width}"
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(x.type, [x.type, x.type]), name)
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        _define(fn, width)
    return b.call(fn, [x, y])


def _define(fn: ir.Function, width: int) -> None:
    significand, exponent_bits = _FORMATS[width]
    t = ir.IntType(width)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    x, y = fn.args

    def c(v: int) -> ir.Constant:
        return ir.Constant(t, v)

    sign_bit = c(1 << (width - 1))
    implicit = 1 << significand
    infinity = ((1 << exponent_bits) - 1) << significand
    ux, uy = b.bitcast(x, t), b.bitcast(y, t)
    sign = b.and_(ux, sign_bit)
    ax, ay = b.and_(ux, c(~(1 << (width - 1)))), b.and_(uy, c(~(1 << (width - 1))))
    # y == 0, y nan, x inf or nan: the result is nan.
    invalid = b.or_(b.icmp_unsigned("==", ay, c(0)),
                    b.or_(b.icmp_unsigned(">", ay, c(infinity)),
                          b.icmp_unsigned(">=", ax, c(infinity))))
    # Declared by hand: llvmlite's declare_intrinsic gives ctlz one parameter, not two.
    ctlz = declare(b.module, f"llvm.ctlz.i{width}", ir.FunctionType(t, [t, ir.IntType(1)]))

    def normalized(a: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(significand with its leading one at bit `significand`, unbiased-by-one exponent);
        subnormals are shifted up and get exponents below 1."""
        exponent = b.lshr(a, c(significand))
        is_normal = b.icmp_unsigned("!=", exponent, c(0))
        normal = b.or_(b.and_(a, c(implicit - 1)), c(implicit))
        shift = b.sub(b.call(ctlz, [a, ir.Constant(ir.IntType(1), 1)]), c(exponent_bits))
        return (b.select(is_normal, normal, b.shl(a, shift)),
                b.select(is_normal, exponent, b.sub(c(1), shift)))

    safe_ay = b.select(b.icmp_unsigned("==", ay, c(0)), c(1), ay)
    mx0, ex = normalized(b.select(b.icmp_unsigned("==", ax, c(0)), c(1), ax))
    my, ey = normalized(safe_ay)
    steps = b.select(b.icmp_signed(">", ex, ey), b.sub(ex, ey), c(0))
    steps = b.select(invalid, c(0), steps)
    count = steps if width == 64 else b.zext(steps, I64)

    with b.goto_entry_block():
        slot = b.alloca(t, name="mx")
    b.store(mx0, slot)
    with for_range(b, 0, count, name="bit"):
        mx = b.load(slot)
        difference = b.sub(mx, my)
        fits = b.icmp_signed(">=", difference, c(0))
        b.store(b.shl(b.select(fits, difference, mx), c(1)), slot)
    mx = b.load(slot)
    difference = b.sub(mx, my)
    mx = b.select(b.icmp_signed(">=", difference, c(0)), difference, mx)
    is_zero = b.icmp_unsigned("==", mx, c(0))
    shift = b.sub(b.call(ctlz, [b.select(is_zero, c(1), mx), ir.Constant(ir.IntType(1), 1)]),
                  c(exponent_bits))
    mx = b.shl(mx, shift)
    er = b.sub(b.select(b.icmp_signed(">", ex, ey), ey, ex), shift)
    normal = b.or_(b.sub(mx, c(implicit)), b.shl(er, c(significand)))
    # Subnormal results: shift right by 1 - er (at most the significand width here).
    subnormal = b.lshr(mx, b.select(b.icmp_signed("<", er, c(1)), b.sub(c(1), er), c(0)))
    bits = b.select(b.icmp_signed(">", er, c(0)), normal, subnormal)
    bits = b.select(is_zero, c(0), bits)
    result = b.bitcast(b.or_(bits, sign), x.type)
    nan = ir.Constant(x.type, float("nan"))
    smaller = b.icmp_unsigned("<", ax, ay)
    b.ret(b.select(invalid, nan, b.select(smaller, x, result)))
