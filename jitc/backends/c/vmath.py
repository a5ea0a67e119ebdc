"""exp and tanh for the C backend: the CPU backend's vectorizable kernels
(jitc/backends/llvm/vmath_exp_log.py), written out as C.

libm's `expf` and `tanhf` are calls the C compiler never vectorizes (a GPT-2 layer's GELU,
64 x 3072 tanhf, took 4.9 ms on one core; numpy 0.15). The kernels of the CPU backend are
straight-line code over a `MathBuilder`; `CMath` offers the same vocabulary and writes each
step as one C statement of a `static inline` helper function, which the compiler inlines into the
kernel's loop and vectorizes. Every step is an IEEE operation of the dtype (fma explicit),
so the results are the CPU backend's, bit for bit, and the same on every target, with the
accuracy stated there (exp <= 1 ulp, tanh <= 1.5 ulp in float32; <= 1 and 2 in float64).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jitc.backends.llvm.vmath_exp_log import exp_kernel, tanh_kernel
from jitc.ir import dtypes
from jitc.ir.dtypes import DType

from .cgen import float_literal, float_name, float_suffix, register_type

# The comparisons of the MathBuilder vocabulary, which C writes the same way.
_COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})


class CMath:
    """The `MathBuilder` vocabulary for one C float type: each method appends a statement
    defining a fresh `const` variable and returns its name."""

    def __init__(self, dtype: DType) -> None:
        self.dtype = dtype
        self.ctype = register_type(dtype)
        self.is_f64 = dtype.bits == 64
        self.bits = 64 if self.is_f64 else 32
        self.mant_bits = 52 if self.is_f64 else 23
        self.exp_bias = 1023 if self.is_f64 else 127
        self.itype = "int64_t" if self.is_f64 else "int32_t"
        self.utype = "uint64_t" if self.is_f64 else "uint32_t"
        self.suffix = float_suffix(dtype)
        self.lines: list[str] = []
        self._count = 0

    def _let(self, ctype: str, expression: str) -> str:
        name = f"v{self._count}"
        self._count += 1
        self.lines.append(f"    const {ctype} {name} = {expression};")
        return name

    def _float(self, expression: str) -> str:
        return self._let(self.ctype, expression)

    def _bool(self, expression: str) -> str:
        return self._let("int", expression)

    # -- constants --------------------------------------------------------------------

    def const(self, value: float) -> str:
        import numpy as np
        return float_literal(self.dtype, np.array(value, self.dtype.numpy))

    def pick(self, f32_value: float, f64_value: float) -> str:
        return self.const(f64_value if self.is_f64 else f32_value)

    # -- intrinsics -------------------------------------------------------------------

    def intrinsic(self, name: str, a: str, b: str) -> str:
        """minnum/maxnum of `a` and a `b` that is never nan (a constant): a selection, which
        the compiler vectorizes, where it calls fminf/fmaxf one element at a time."""
        operator = {"minnum": "<", "maxnum": ">"}[name]
        return self._float(f"{a} {operator} {b} ? {a} : {b}")

    def fma(self, a: str, b: str, c: str) -> str:
        return self._float(f"fma{self.suffix}({a}, {b}, {c})")

    def fabs(self, x: str) -> str:
        return self._float(f"fabs{self.suffix}({x})")

    def floor(self, x: str) -> str:
        return self._float(f"floor{self.suffix}({x})")

    def rint(self, x: str) -> str:
        return self._float(f"rint{self.suffix}({x})")

    def copysign(self, magnitude: str, sign: str) -> str:
        """Through the bits: the compiler calls copysignf one element at a time."""
        top = f"({self.utype})1 << {self.bits - 1}"
        bits = self._let(self.utype, f"({self._bits(magnitude)} & ~({top})) | "
                                     f"({self._bits(sign)} & ({top}))")
        return self._from_bits(bits)

    def _bits(self, x: str) -> str:
        bits = self._mutable(self.utype)
        self.lines.append(f"    memcpy(&{bits}, &{x}, sizeof {bits});")
        return bits

    def _from_bits(self, bits: str) -> str:
        value = self._mutable(self.ctype)
        self.lines.append(f"    memcpy(&{value}, &{bits}, sizeof {value});")
        return value

    def _mutable(self, ctype: str) -> str:
        """A variable memcpy fills (a `const` cannot be)."""
        name = f"v{self._count}"
        self._count += 1
        self.lines.append(f"    {ctype} {name};")
        return name

    def clamp(self, x: str, lo: float, hi: float) -> str:
        """Ordered compares and selects, as MathBuilder's: nan goes to `lo`."""
        low, high = self.const(lo), self.const(hi)
        x = self._float(f"{x} > {low} ? {x} : {low}")
        return self._float(f"{x} < {high} ? {x} : {high}")

    # -- arithmetic and comparisons ---------------------------------------------------

    def add(self, a: str, b: str) -> str:
        return self._float(f"{a} + {b}")

    def sub(self, a: str, b: str) -> str:
        return self._float(f"{a} - {b}")

    def mul(self, a: str, b: str) -> str:
        return self._float(f"{a} * {b}")

    def div(self, a: str, b: str) -> str:
        return self._float(f"{a} / {b}")

    def neg(self, a: str) -> str:
        return self._float(f"-{a}")

    def cmp(self, op: str, a: str, b: str) -> str:
        """Ordered: false when an operand is nan, as C's comparisons are."""
        if op not in _COMPARISONS:
            raise ValueError(f"no comparison {op!r}")
        return self._bool(f"{a} {op} {b}")

    def isnan(self, x: str) -> str:
        return self._bool(f"{x} != {x}")

    def select(self, condition: str, a: str, b: str) -> str:
        return self._float(f"{condition} ? {a} : {b}")

    def poly(self, x: str, coefficients: Sequence[float]) -> str:
        """Horner's rule, one fma per step (MathBuilder.poly)."""
        acc = self.const(coefficients[-1])
        for c in reversed(coefficients[:-1]):
            acc = self.fma(acc, x, self.const(c))
        return acc

    # -- bit views and scaling by powers of two ---------------------------------------

    def to_i32(self, x: str) -> str:
        return self._let("int32_t", f"(int32_t){x}")

    def pow2(self, n: str) -> str:
        """2**n for an `n` in the normal exponent range, built from its bits."""
        bits = self._let(self.utype, f"({self.utype})({n} + {self.exp_bias}) << "
                                     f"{self.mant_bits}")
        return self._from_bits(bits)

    def scale(self, p: str, n: str) -> str:
        """p * 2**n in two exact halves, so a subnormal result is rounded once."""
        half = self._let("int32_t", f"{n} >> 1")
        rest = self._let("int32_t", f"{n} - {half}")
        return self.mul(self.mul(p, self.pow2(half)), self.pow2(rest))

    def fast_two_sum(self, a: str, b: str) -> tuple[str, str]:
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))


KERNELS: dict[str, Callable] = {"exp": exp_kernel, "tanh": tanh_kernel}


def helper_name(function: str, dtype: DType) -> str:
    """The C helper computing `function` in `dtype`'s register type (float16 in float)."""
    return f"jitc_v{function}_{float_name(dtype)}"


def helper_source(function: str, dtype: DType) -> str:
    m = CMath(dtype)
    result = KERNELS[function](m, "x")
    # inline: GCC inlines a helper this long into one call site only, and a loop that
    # still calls it (softmax's exp, in two loops) is not vectorized.
    return "\n".join([f"static inline {m.ctype} {helper_name(function, dtype)}({m.ctype} x) {{",
                      *m.lines, f"    return {result};", "}"])


HELPER_SOURCES = {helper_name(function, dtype): helper_source(function, dtype)
                  for function in KERNELS for dtype in (dtypes.float32, dtypes.float64)}
