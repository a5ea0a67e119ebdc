"""IR-building toolkit shared by the vectorizable math kernels (public face: ``vmath``).

Every kernel is written once against :class:`MathBuilder`, which binds an ``ir.IRBuilder``
to one floating-point type (``float``/``double`` or a vector of either) and hands out
constants, the integer type of the same width, the few intrinsics that lower to plain
instructions on every target we care about, and error-free transformations for the
double-word steps that keep the results rounded essentially once. Writing kernels
against types instead of hard-coding ``float`` is what lets one source serve f32 and
f64, and vectors for free.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Callable, Sequence

from llvmlite import ir

from jitc.backends.llvm.types import declare

Value = ir.Value
KernelBody = Callable[..., Value]

# Helpers get a reserved-looking prefix so they cannot collide with user kernels.
HELPER_PREFIX = "jitc.vmath."


def _scalar_of(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def check_float_type(ty: ir.Type) -> None:
    """Reject types the kernels have no coefficients for, with a hint for half."""
    scalar = _scalar_of(ty)
    if isinstance(scalar, (ir.FloatType, ir.DoubleType)):
        return
    if isinstance(scalar, ir.HalfType):
        raise TypeError("vmath has no half kernels: fpext to float, call, then fptrunc")
    raise TypeError(f"vmath kernels need float or double (or vectors of them), got {ty}")


def type_tag(ty: ir.Type) -> str:
    """Name fragment in LLVM's overloaded-intrinsic spelling: ``f32``, ``v8f64``..."""
    scalar = "f64" if isinstance(_scalar_of(ty), ir.DoubleType) else "f32"
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{scalar}"
    return scalar


def round_to(value: float, is_f64: bool) -> float:
    """Round a Python float to the nearest float32 when building f32 constants."""
    if is_f64:
        return float(value)
    return struct.unpack("<f", struct.pack("<f", value))[0]


# Modules compiled for a target whose vectors scale by powers of two in one instruction
# (AVX-512's vscalef): there `scale` is llvm.ldexp. Elsewhere LLVM would expand a vector ldexp
# into calls of libm's ldexpf, so the portable form stays the default.
_NATIVE_LDEXP: weakref.WeakSet[ir.Module] = weakref.WeakSet()


def scale_with_ldexp(module: ir.Module) -> None:
    """Let the math emitted into `module` scale with llvm.ldexp (see _NATIVE_LDEXP)."""
    _NATIVE_LDEXP.add(module)


class MathBuilder:
    """An ``ir.IRBuilder`` bound to one float type, with the vocabulary kernels need.

    The wrapper exists so kernel code reads like the math (``m.fma(x, c, d)``) while
    constants are splatted for vector types, and integer views of the float bits get
    the matching lane count without every kernel re-deriving them.
    """

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type) -> None:
        check_float_type(ty)
        self.b = builder
        self.ty = ty
        self.is_f64 = isinstance(_scalar_of(ty), ir.DoubleType)
        self.lanes = ty.count if isinstance(ty, ir.VectorType) else 0
        self.bits = 64 if self.is_f64 else 32
        self.mant_bits = 52 if self.is_f64 else 23
        self.exp_bias = 1023 if self.is_f64 else 127
        self.ity = self.shaped(ir.IntType(self.bits))
        # Exponent arithmetic is done in i32 even for doubles: f64 -> i32 conversion
        # vectorizes on every x86 level, f64 -> i64 needs AVX-512DQ.
        self.i32 = self.shaped(ir.IntType(32))
        self.native_ldexp = builder.module in _NATIVE_LDEXP

    # -- types and constants -------------------------------------------------------

    def shaped(self, scalar: ir.Type) -> ir.Type:
        """``scalar`` with this builder's lane count."""
        return ir.VectorType(scalar, self.lanes) if self.lanes else scalar

    def like(self, ty: ir.Type) -> MathBuilder:
        """A builder for another float type with the same lane count (f32 pow uses f64)."""
        return MathBuilder(self.b, self.shaped(_scalar_of(ty)))

    def const(self, value: float) -> ir.Constant:
        return ir.Constant(self.ty, round_to(value, self.is_f64))

    def pick(self, f32_value: float, f64_value: float) -> ir.Constant:
        """A constant whose value depends on the precision (thresholds, split constants)."""
        return self.const(f64_value if self.is_f64 else f32_value)

    def iconst(self, value: int, ty: ir.Type | None = None) -> ir.Constant:
        return ir.Constant(ty or self.ity, value)

    # -- intrinsics ------------------------------------------------------------------

    def intrinsic(self, name: str, *args: Value) -> Value:
        """Call ``llvm.<name>`` overloaded on this float type.

        Declared by hand because llvmlite's ``declare_intrinsic`` cannot mangle vector
        types.
        """
        fn = declare(self.b.module, f"llvm.{name}.{type_tag(self.ty)}",
                     ir.FunctionType(self.ty, [self.ty] * len(args)))
        return self.b.call(fn, list(args))

    def fma(self, a: Value, b: Value, c: Value) -> Value:
        return self.intrinsic("fma", a, b, c)

    def fabs(self, x: Value) -> Value:
        return self.intrinsic("fabs", x)

    def floor(self, x: Value) -> Value:
        return self.intrinsic("floor", x)

    def rint(self, x: Value) -> Value:
        return self.intrinsic("rint", x)

    def copysign(self, mag: Value, sign: Value) -> Value:
        return self.intrinsic("copysign", mag, sign)

    def clamp(self, x: Value, lo: float, hi: float) -> Value:
        """Clamp with minnum/maxnum, which also map NaN into range.

        Kernels clamp before ``fptosi`` so that NaN or huge inputs cannot create poison;
        the NaN itself is restored by a final select.
        """
        # Ordered compares and selects, not maxnum/minnum: NaN goes to `lo` either way, but
        # these are one vmaxps/vminps each on x86, where maxnum costs three instructions.
        low, high = self.const(lo), self.const(hi)
        x = self.b.select(self.b.fcmp_ordered(">", x, low), x, low)
        return self.b.select(self.b.fcmp_ordered("<", x, high), x, high)

    # -- arithmetic and comparisons ---------------------------------------------------

    def add(self, a: Value, b: Value) -> Value:
        return self.b.fadd(a, b)

    def sub(self, a: Value, b: Value) -> Value:
        return self.b.fsub(a, b)

    def mul(self, a: Value, b: Value) -> Value:
        return self.b.fmul(a, b)

    def div(self, a: Value, b: Value) -> Value:
        return self.b.fdiv(a, b)

    def neg(self, a: Value) -> Value:
        return self.b.fneg(a)

    def cmp(self, op: str, a: Value, b: Value) -> Value:
        """Ordered comparison: false whenever an operand is NaN."""
        return self.b.fcmp_ordered(op, a, b)

    def ucmp(self, op: str, a: Value, b: Value) -> Value:
        """Unordered comparison: true whenever an operand is NaN."""
        return self.b.fcmp_unordered(op, a, b)

    def isnan(self, x: Value) -> Value:
        return self.b.fcmp_unordered("uno", x, x)

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        return self.b.select(cond, a, b)

    def or_(self, a: Value, b: Value) -> Value:
        return self.b.or_(a, b)

    def and_(self, a: Value, b: Value) -> Value:
        return self.b.and_(a, b)

    def not_(self, a: Value) -> Value:
        return self.b.not_(a)

    def poly(self, x: Value, coeffs: Sequence[float]) -> Value:
        """Horner evaluation of ``coeffs[0] + coeffs[1]*x + ...`` with one fma per step."""
        acc: Value = self.const(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.const(c))
        return acc

    # -- bit views and scaling by powers of two ---------------------------------------

    def to_bits(self, x: Value) -> Value:
        return self.b.bitcast(x, self.ity)

    def from_bits(self, i: Value) -> Value:
        return self.b.bitcast(i, self.ty)

    def to_i32(self, x: Value) -> Value:
        """fptosi to i32; callers guarantee the value is an in-range integer."""
        return self.b.fptosi(x, self.i32)

    def from_i32(self, n: Value) -> Value:
        return self.b.sitofp(n, self.ty)

    def widen(self, n: Value) -> Value:
        """Sign-extend an i32 lane value to the float-width integer type."""
        return self.b.sext(n, self.ity) if self.is_f64 else n

    def narrow(self, i: Value) -> Value:
        """Truncate a float-width integer to i32 (exponent fields always fit)."""
        return self.b.trunc(i, self.i32) if self.is_f64 else i

    def pow2(self, n: Value) -> Value:
        """2**n for an i32 ``n`` inside the normal exponent range, built from bits."""
        biased = self.b.add(n, self.iconst(self.exp_bias, self.i32))
        return self.from_bits(self.b.shl(self.widen(biased), self.iconst(self.mant_bits)))

    def scale(self, p: Value, n: Value) -> Value:
        """p * 2**n for i32 ``n`` spanning the whole exponent range, subnormals included.

        Two half-size factors keep each power of two representable, and because
        ``p * 2**(n//2)`` is exact, results that land in the subnormal range are rounded
        only once.
        """
        if self.native_ldexp:
            # One rounding of the exact p * 2**n, as below: the same bits, one instruction.
            exponent = f"v{self.lanes}i32" if self.lanes else "i32"
            name = f"llvm.ldexp.{type_tag(self.ty)}.{exponent}"
            fn = declare(self.b.module, name, ir.FunctionType(self.ty, [self.ty, self.i32]))
            return self.b.call(fn, [p, n])
        half = self.b.ashr(n, self.iconst(1, self.i32))
        rest = self.b.sub(n, half)
        return self.mul(self.mul(p, self.pow2(half)), self.pow2(rest))

    # -- error-free transformations (double-word arithmetic) --------------------------

    def two_sum(self, a: Value, b: Value) -> tuple[Value, Value]:
        """s + e == a + b exactly, for any ordering of magnitudes (Knuth)."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        e = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, e

    def fast_two_sum(self, a: Value, b: Value) -> tuple[Value, Value]:
        """s + e == a + b exactly when |a| >= |b| (or a == 0) (Dekker)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_prod(self, a: Value, b: Value) -> tuple[Value, Value]:
        """p + e == a * b exactly; the fma recovers the rounding error of the product."""
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))


def call_helper(
    builder: ir.IRBuilder, name: str, args: Sequence[Value], body: KernelBody
) -> Value:
    """Call ``body`` through an internal always-inline function defined once per module.

    A helper keeps a kernel's ~50 instructions out of every call site, which keeps
    modules small and compile times down, while ``alwaysinline`` means the optimizer
    still sees straight-line code inside the caller's loop, so the loop vectorizer
    widens it exactly as if it had been emitted inline. Unoptimized modules simply keep
    the call, which is still correct.
    """
    ty = args[0].type
    check_float_type(ty)
    if any(a.type != ty for a in args):
        raise TypeError(f"vmath.{name}: operands must share one type, got "
                        f"{', '.join(str(a.type) for a in args)}")
    module = builder.module
    fname = f"{HELPER_PREFIX}{name}.{type_tag(ty)}"
    fn = module.globals.get(fname)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ty, [a.type for a in args]), fname)
        fn.linkage = "internal"
        for attr in ("alwaysinline", "nounwind", "readnone"):
            fn.attributes.add(attr)
        inner = ir.IRBuilder(fn.append_basic_block("entry"))
        inner.ret(body(MathBuilder(inner, ty), *fn.args))
    return builder.call(fn, list(args))
