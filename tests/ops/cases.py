"""The op-case table: every op of the IR, reached from numpy code (or `jitc.lax` where numpy
has no spelling) and checked against numpy.

Each `OpCase` names the IR ops its traced function must contain, the function, the expected
result as plain numpy (by default the function itself run on numpy arrays: plain numpy code is
its own oracle), the argument variants (shapes, layouts, value sets), the dtypes it supports
and a tolerance per floating-point dtype (other dtypes compare exactly).

Where the IR deliberately defines what numpy leaves undefined or rejects (saturating float to
integer conversion, integer division by zero, out-of-range shift amounts and dynamic slice
starts, negative integer powers), the expected function spells out the IR's documented
semantics in numpy instead, and says so.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from jitc import lax
from jitc.ir.ops import convert_array

from .checks import APPROX, EXACT, Tolerance
from .values import (
    ANY,
    ANY_SHIFT,
    EXPONENT,
    FACTORS,
    FINITE,
    MODERATE,
    NEGATIVE_EXPONENT,
    NONZERO,
    POW_BASE,
    SHIFT,
    SMALL,
    SMALL_SPECIAL,
    Arg,
    Values,
    in_range_of,
    indices,
    integers,
)

# The integer widths whose element sizes other dtypes already have (f16, i32/f32, i64/f64)
# come last: a case's further variants take its dtypes in turn, and reach them only after
# every other dtype; their first variants mostly run under `-m slow` (see `slow_param`).
OTHER_WIDTHS = ("int16", "uint16", "uint32", "uint64")
INTS = ("int8", "uint8", "int32", "int64") + OTHER_WIDTHS
SIGNED = ("int8", "int32", "int64", "int16")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
FLOATS = ("float16", "float32", "float64")
ALL = ("bool", "int8", "uint8", "int32", "int64") + FLOATS + OTHER_WIDTHS
NUMERIC = ALL[1:]
LOGICAL = ("bool",) + INTS
COMPLEX = ("complex64", "complex128")
# Data movement and selection: every dtype, complex included.
MOVABLE = ALL + COMPLEX


@dataclass(frozen=True)
class Variant:
    label: str
    args: tuple[Arg, ...]

    def build(self, dtype: np.dtype, seed_text: str) -> list[object]:
        rng = np.random.default_rng(zlib.crc32(seed_text.encode()))
        return [arg.build(dtype, rng) for arg in self.args]


def variant(label: str, *args: Arg) -> Variant:
    return Variant(label, args)


@dataclass(frozen=True)
class OpCase:
    """One row of the table. The first variant runs on every dtype; each further variant runs
    on one dtype, taking the dtypes in turn."""

    name: str
    ops: tuple[str, ...]
    fn: Callable
    variants: tuple[Variant, ...]
    dtypes: tuple[str, ...]
    expected: Callable | None = None
    tol: Tolerance = field(default_factory=lambda: APPROX)
    signed_zeros: bool = False  # zero results must also have the expected sign
    bitwise: bool = False       # float results must have the expected bit patterns

    def params(self) -> list[tuple[Variant, np.dtype]]:
        first, *others = self.variants
        chosen = [(first, np.dtype(d)) for d in self.dtypes]
        for i, v in enumerate(others):
            chosen.append((v, np.dtype(self.dtypes[i % len(self.dtypes)])))
        return chosen


def slow_param(case: OpCase, variant: Variant, dtype: np.dtype) -> bool:
    """Whether an op-case param runs only under `-m slow`: the first variant (the one run on
    every dtype) on the other integer widths, except in the integer-only cases (division,
    remainder, shifts, powers), where the width is the semantics. The default run covers the
    rest with the hypothesis tests of test_op_properties.py (integer wrap-around and casts at
    every width, binary ufuncs over every dtype pair, reductions), the fuzzers (every dtype,
    every backend) and the further variants, which take every dtype in turn."""
    return (str(dtype) in OTHER_WIDTHS and variant is case.variants[0]
            and not set(case.dtypes) <= set(INTS))


# -- argument variants shared by many cases ------------------------------------------------------

def unary(values: Values = ANY) -> tuple[Variant, ...]:
    def a(shape: tuple[int, ...], layout: str = "C") -> Arg:
        return Arg(shape, values, layout)
    return (variant("4x5", a((4, 5))), variant("0d", a(())),
            variant("negstrides", a((3, 5), "N")), variant("1x2x0", a((1, 2, 0))),
            variant("strided", a((3, 4), "S")), variant("transposed", a((4, 3), "T")),
            variant("fortran", a((2, 3, 4), "F")))


def binary(x: Values = ANY, y: Values = ANY) -> tuple[Variant, ...]:
    """Every pair of edge values first (a column against a row), then shapes, layouts and a
    Python scalar."""
    return (variant("edge_pairs", Arg((-1, 1), x), Arg((-1,), y)),
            variant("0d", Arg((), x), Arg((), y)),
            variant("bcast_3x1x5_4x1", Arg((3, 1, 5), x), Arg((4, 1), y)),
            variant("0d_with_2x3", Arg((), x), Arg((2, 3), y)),
            variant("empty_bcast", Arg((0, 3), x), Arg((1, 3), y)),
            variant("strided_transposed", Arg((3, 4), x, "S"), Arg((3, 4), y, "T")),
            variant("negstrides_fortran", Arg((2, 3, 4), x, "N"), Arg((2, 3, 4), y, "F")),
            variant("python_scalar_rhs", Arg((2, 3), x), Arg(values=y, python=True)))


def shaped(*shapes: tuple[int, ...], values: Values = ANY, layouts: str = "TN"
           ) -> tuple[Variant, ...]:
    """One-argument variants with the given shapes; the last shape also in `layouts`."""
    out = [variant("x".join(map(str, s)) or "0d", Arg(s, values)) for s in shapes]
    name = "x".join(map(str, shapes[-1]))
    out += [variant(f"{name}_{layout}", Arg(shapes[-1], values, layout)) for layout in layouts]
    return tuple(out)


# -- expected results for the IR's own semantics, in plain numpy ---------------------------------

def _wrap(value: int, dtype: np.dtype) -> int:
    """A Python integer wrapped into an integer dtype (two's complement)."""
    width = dtype.itemsize * 8
    value &= (1 << width) - 1
    if dtype.kind == "i" and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def _integer_division(remainder: bool) -> Callable:
    """The IR's integer div/rem: truncation toward zero, x / 0 = 0 and x rem 0 = 0, and
    MIN / -1 wraps to MIN (numpy warns on these and C leaves them undefined)."""
    def expected(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = np.broadcast_arrays(x, y)
        out = np.zeros(x.shape, x.dtype)
        for index in np.ndindex(*x.shape):
            a, b = int(x[index]), int(y[index])
            q = 0 if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            out[index] = _wrap((a - b * q) if remainder and b else (0 if remainder else q),
                               x.dtype)
        return out
    return expected


def _negative_integer_power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The IR's integer pow (numpy rejects negative integer exponents): x ** -n is 1 / x ** n
    truncated toward zero, so 1 for x = 1, ±1 for x = -1, and 0 otherwise (x = 0 included)."""
    x, y = np.broadcast_arrays(x, y)
    powers = np.power(x, np.where(y < 0, 0, y).astype(y.dtype))
    odd = (y % 2) != 0
    reciprocal = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0))
    return np.where(y < 0, reciprocal, powers).astype(x.dtype)


def _shift_right_logical(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # numpy defines shifts by amounts outside [0, bits) as the IR does (0, or the sign fill
    # for arithmetic shifts); a logical shift of a signed integer is one of its unsigned view.
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    amount = np.asarray(y).astype(x.dtype).view(unsigned)
    return np.right_shift(x.view(unsigned), amount).view(x.dtype)


def _clamped_starts(shape: Sequence[int], starts: Sequence[object], sizes: Sequence[int]
                    ) -> list[int]:
    """Dynamic slice starts as the IR clamps them: the block always fits in the operand."""
    return [min(max(int(s), 0), n - k) for s, n, k in zip(starts, shape, sizes)]


def _dynamic_slice(sizes: Sequence[int]) -> Callable:
    def expected(x: np.ndarray, *starts: object) -> np.ndarray:
        at = _clamped_starts(x.shape, starts, sizes)
        return x[tuple(slice(s, s + k) for s, k in zip(at, sizes))]
    return expected


def _dynamic_update_slice(x: np.ndarray, update: np.ndarray, *starts: object) -> np.ndarray:
    at = _clamped_starts(x.shape, starts, update.shape)
    out = x.copy()
    out[tuple(slice(s, s + k) for s, k in zip(at, update.shape))] = update
    return out


def _pad(low: Sequence[int], high: Sequence[int], interior: Sequence[int]) -> Callable:
    """lax.pad: `interior` copies of the value between elements, then low/high edges (negative
    ones crop)."""
    def expected(x: np.ndarray, value: np.ndarray) -> np.ndarray:
        spread = np.full([n + max(n - 1, 0) * i for n, i in zip(x.shape, interior)], value,
                         x.dtype)
        spread[tuple(slice(None, None, i + 1) for i in interior)] = x
        grown = np.pad(spread, [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high)],
                       constant_values=value)
        return grown[tuple(slice(-min(lo, 0), grown.shape[a] + min(hi, 0))
                           for a, (lo, hi) in enumerate(zip(low, high)))]
    return expected


def _identity(kind: str, dtype: np.dtype) -> object:
    """What a max/min reduction of nothing gives in the IR (numpy needs `initial=`)."""
    if dtype.kind == "b":
        return kind == "min"
    if dtype.kind == "f":
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if kind == "max" else info.max


def _conv(labels: str = "bf01_oi01->bf01", strides: Sequence[int] = (),
          padding: Sequence[tuple[int, int]] = (), lhs_dilation: Sequence[int] = (),
          rhs_dilation: Sequence[int] = (), groups: int = 1) -> tuple[Callable, Callable]:
    """A lax convolution and its expected result: a direct loop over output positions."""
    def traced(x: object, w: object) -> object:
        return lax.conv_general_dilated(x, w, strides, padding, lhs_dilation, rhs_dilation,
                                        labels, groups)

    def expected(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        in_spec, rest = labels.split("_")
        kernel_spec, out_spec = rest.split("->")
        n_spatial = len(in_spec) - 2
        digits = [str(i) for i in range(n_spatial)]
        ones = (1,) * n_spatial
        stride, lhs_dil = strides or ones, lhs_dilation or ones
        rhs_dil, pads = rhs_dilation or ones, padding or ((0, 0),) * n_spatial
        wide = np.float64 if lhs.dtype.kind == "f" else np.int64
        x = np.transpose(lhs, [in_spec.index(c) for c in ["b", "f", *digits]]).astype(wide)
        w = np.transpose(rhs, [kernel_spec.index(c) for c in ["o", "i", *digits]]).astype(wide)
        # Dilate the input, then pad it (negative padding crops).
        sizes = [(s - 1) * d + 1 if s else 0 for s, d in zip(x.shape[2:], lhs_dil)]
        dilated = np.zeros(x.shape[:2] + tuple(sizes), wide)
        dilated[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dil)] = x
        padded = np.pad(dilated, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0))
                                                     for lo, hi in pads])
        padded = padded[(slice(None), slice(None)) + tuple(
            slice(-min(lo, 0), padded.shape[2 + i] + min(hi, 0))
            for i, (lo, hi) in enumerate(pads))]
        windows = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], rhs_dil)]
        out_sizes = [(p - k) // s + 1 if p >= k else 0
                     for p, k, s in zip(padded.shape[2:], windows, stride)]
        out_features, per_group = w.shape[0], w.shape[1]
        out = np.zeros((x.shape[0], out_features, *out_sizes), wide)
        for position in itertools.product(*(range(s) for s in out_sizes)):
            window = tuple(slice(p * s, p * s + k, d)
                           for p, s, k, d in zip(position, stride, windows, rhs_dil))
            for o in range(out_features):
                g = o // (out_features // groups)
                patch = padded[(slice(None), slice(g * per_group, (g + 1) * per_group))
                               + window]
                out[(slice(None), o) + position] = np.sum(
                    patch * w[o], axis=tuple(range(1, patch.ndim)))
        canonical = {"b": 0, "f": 1, **{d: 2 + i for i, d in enumerate(digits)}}
        return np.transpose(out, [canonical[c] for c in out_spec]).astype(lhs.dtype)

    return traced, expected


# -- traced functions that do not fit in a lambda -----------------------------------------------

def _set_block(x):
    x = x.copy()
    x[1:3, ::2] = 0
    return x


def _set_rows(x):
    x = x.copy()
    x[1:3] = 0
    return x


def _set_reversed_column(x, y):
    x = x.copy()
    x[::-1, 1] = y
    return x


BITCAST_PARTNER = {np.dtype(a): np.dtype(b) for a, b in [
    ("int8", "uint8"), ("uint8", "int8"), ("int16", "float16"), ("float16", "uint16"),
    ("uint16", "int16"), ("int32", "float32"), ("float32", "uint32"), ("uint32", "int32"),
    ("int64", "float64"), ("float64", "uint64"), ("uint64", "int64")]}


def _astype(target: str) -> Callable:
    return lambda x: x.astype(target)


def _convert(target: str) -> Callable:
    return lambda x: lax.convert_element_type(x, target)


def _saturating(target: str) -> Callable:
    return lambda x: convert_array(x, np.dtype(target))


def _bitcast(x):
    return lax.bitcast_convert_type(x, BITCAST_PARTNER[np.dtype(x.dtype)])


def _rsqrt_expected(x: np.ndarray) -> np.ndarray:
    return (1 / np.sqrt(x.astype(np.float64))).astype(x.dtype)


def _logistic_expected(x: np.ndarray) -> np.ndarray:
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype)


# -- the table --------------------------------------------------------------------------------

def _unary_cases() -> list[OpCase]:
    float_ops = [("exp", np.exp, ANY), ("expm1", np.expm1, ANY), ("log", np.log, ANY),
                 ("log1p", np.log1p, ANY), ("tanh", np.tanh, ANY), ("sin", np.sin, MODERATE),
                 ("cos", np.cos, MODERATE)]
    cases = [OpCase(f"np.{ufunc.__name__}", (op,), ufunc, unary(values), FLOATS)
             for op, ufunc, values in float_ops]
    # Square roots and rounding keep the sign of zero; rounding is exact.
    rounding = [("sqrt", np.sqrt, APPROX), ("floor", np.floor, EXACT),
                ("ceil", np.ceil, EXACT), ("round", np.rint, EXACT)]
    cases += [OpCase(f"np.{ufunc.__name__}", (op,), ufunc, unary(), FLOATS, tol=tol,
                     signed_zeros=True) for op, ufunc, tol in rounding]
    # Complex arguments with finite parts: numpy's special-value rules for infinite parts
    # (C99 Annex G) are not reproduced by these (docs/dtypes.md).
    cases += [OpCase(f"np.{ufunc.__name__}_complex", (op,), ufunc, unary(FINITE), COMPLEX)
              for op, ufunc in [("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt),
                                ("sin", np.sin), ("cos", np.cos), ("tanh", np.tanh)]]
    return cases + [
        OpCase("negative", ("neg",), lambda x: -x, unary(), NUMERIC + COMPLEX, tol=EXACT,
               signed_zeros=True),
        OpCase("np.abs", ("abs",), np.abs, unary(), NUMERIC, tol=EXACT, signed_zeros=True),
        # |complex| over infinities, nan, huge and subnormal parts: no overflow nor underflow.
        OpCase("np.abs_complex", ("abs",), np.abs, unary(), COMPLEX),
        OpCase("np.conjugate", ("imag", "neg", "complex"), np.conjugate, unary(), COMPLEX,
               tol=EXACT),
        OpCase("real_imag", ("real", "imag"), lambda x: (x.real, np.imag(x)), unary(), COMPLEX,
               tol=EXACT, signed_zeros=True),
        OpCase("np.angle", ("atan2",), np.angle, unary(), COMPLEX),
        OpCase("power_complex_int", ("mul", "div"), lambda x: (x ** 3, x ** -2, x ** 0),
               unary(FINITE), COMPLEX),
        OpCase("np.sign", ("sign",), np.sign, unary(), NUMERIC, tol=EXACT),
        OpCase("np.isfinite", ("is_finite",), np.isfinite, unary(), FLOATS),
        OpCase("invert", ("not",), lambda x: ~x, unary(), LOGICAL),
        OpCase("np.logical_not", ("not",), np.logical_not, unary()[:4], ALL),
        OpCase("lax.rsqrt", ("rsqrt",), lax.rsqrt, unary(), FLOATS, _rsqrt_expected),
        OpCase("lax.logistic", ("logistic",), lax.logistic, unary(), FLOATS,
               _logistic_expected),
    ]


def _binary_cases() -> list[OpCase]:
    def case(name: str, ops: tuple[str, ...], fn: Callable, dtypes: tuple[str, ...],
             x: Values = ANY, y: Values = ANY, **kw: object) -> OpCase:
        return OpCase(name, ops, fn, binary(x, y), dtypes, **kw)

    cases = [
        case("add", ("add",), lambda x, y: x + y, NUMERIC + COMPLEX),
        case("add_bool", ("or",), np.add, ("bool",)),
        case("subtract", ("sub",), lambda x, y: x - y, NUMERIC + COMPLEX),
        case("multiply", ("mul",), lambda x, y: x * y, NUMERIC + COMPLEX, signed_zeros=True),
        case("multiply_bool", ("and",), np.multiply, ("bool",)),
        case("true_divide", ("div",), lambda x, y: x / y, FLOATS, signed_zeros=True),
        # numpy's complex division (Smith's, with its branches) over every pair of edge parts.
        case("true_divide_complex", ("div",), lambda x, y: x / y, COMPLEX),
        # Integers divide as float64 (numpy's loop): zero divisors give inf and nan.
        case("true_divide_int", ("convert", "div"), np.true_divide, ("bool",) + INTS),
        case("np.fmod", ("rem",), np.fmod, FLOATS, tol=EXACT, signed_zeros=True),
        case("np.fmod_int", ("rem",), np.fmod, INTS, y=NONZERO),
        case("floor_divide", ("div", "rem", "round", "select"), lambda x, y: x // y, FLOATS),
        case("floor_divide_int", ("div",), lambda x, y: x // y, INTS, y=NONZERO),
        case("remainder", ("rem", "select"), lambda x, y: x % y, FLOATS),
        case("remainder_int", ("rem",), lambda x, y: x % y, INTS, y=NONZERO),
        case("power", ("pow",), np.power, FLOATS),
        case("power_int", ("pow",), lambda x, y: x ** y, INTS, x=POW_BASE, y=EXPONENT),
        # numpy raises on negative integer powers; the IR defines them.
        case("power_int_negative", ("pow",), np.power, SIGNED, x=POW_BASE,
             y=NEGATIVE_EXPONENT, expected=_negative_integer_power),
        case("np.maximum", ("max",), np.maximum, ALL, tol=EXACT),
        case("np.minimum", ("min",), np.minimum, ALL, tol=EXACT),
        case("np.arctan2", ("atan2",), np.arctan2, FLOATS),
        case("bitwise_and", ("and",), lambda x, y: x & y, LOGICAL),
        case("bitwise_or", ("or",), lambda x, y: x | y, LOGICAL),
        case("bitwise_xor", ("xor",), lambda x, y: x ^ y, LOGICAL),
        OpCase("np.logical_and", ("and",), np.logical_and, binary()[:4], ALL),
        OpCase("np.logical_or", ("or",), np.logical_or, binary()[:4], ALL),
        OpCase("np.logical_xor", ("xor",), np.logical_xor, binary()[:4], ALL),
        case("left_shift", ("shift_left",), lambda x, y: x << y, INTS, y=SHIFT),
        case("right_shift", ("shift_right_arithmetic",), lambda x, y: x >> y, SIGNED, y=SHIFT),
        case("right_shift_unsigned", ("shift_right_logical",), lambda x, y: x >> y,
             UNSIGNED, y=SHIFT),
        # The IR defines every shift amount: 0 (or the sign fill) past the bit width or below
        # zero, as numpy does.
        case("lax.shift_left", ("shift_left",), lax.shift_left, INTS, y=ANY_SHIFT,
             expected=np.left_shift),
        case("lax.shift_right_arithmetic", ("shift_right_arithmetic",),
             lax.shift_right_arithmetic, INTS, y=ANY_SHIFT, expected=np.right_shift),
        case("lax.shift_right_logical", ("shift_right_logical",), lax.shift_right_logical,
             INTS, y=ANY_SHIFT, expected=_shift_right_logical),
        case("lax.div_int", ("div",), lax.div, INTS, expected=_integer_division(False)),
        case("lax.rem_int", ("rem",), lax.rem, INTS, expected=_integer_division(True)),
    ]
    for fn in [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]:
        kinds = ALL + COMPLEX if fn in (np.equal, np.not_equal) else ALL
        cases.append(OpCase(f"np.{fn.__name__}", ("compare",), fn, binary()[:4], kinds))
    return cases


def _ternary_cases() -> list[OpCase]:
    def cond(shape: tuple[int, ...], layout: str = "C") -> Arg:
        return Arg(shape, ANY, layout, dtype="bool")

    where = (variant("3x4", cond((3, 4)), Arg((3, 4)), Arg((3, 4))),
             variant("bcast", cond((3, 1)), Arg((4,)), Arg((1, 1))),
             variant("0d", cond(()), Arg(()), Arg(())),
             variant("0d_cond", cond(()), Arg((2, 3)), Arg((2, 3))),
             variant("python_scalar", cond((2, 3)), Arg((2, 3)), Arg(python=True)),
             variant("empty", cond((0, 2)), Arg((0, 2)), Arg((2,))),
             variant("layouts", cond((3, 4), "T"), Arg((3, 4), layout="N"),
                     Arg((3, 4), layout="F")),
             variant("strided", cond((3, 4), "S"), Arg((3, 4), layout="S"), Arg(())))
    clamp = (variant("0d_bounds", Arg(()), Arg((4, 5)), Arg(())),
             variant("edge_values", Arg((-1, 1, 1)), Arg((1, -1, 1)), Arg((1, 1, -1))),
             variant("arrays", Arg((3, 4)), Arg((3, 4)), Arg((3, 4))),
             variant("bcast", Arg((4, 1)), Arg((3, 1, 5)), Arg((5,))),
             variant("0d", Arg(()), Arg(()), Arg(())),
             variant("python_bounds", Arg(python=True), Arg((2, 3)), Arg(python=True)),
             variant("layouts", Arg((3, 4), layout="F"), Arg((3, 4), layout="N"),
                     Arg((3, 4), layout="S")))
    return [
        OpCase("np.where", ("select",), np.where, where, MOVABLE, tol=EXACT,
               signed_zeros=True),
        OpCase("lax.clamp", ("clamp",), lax.clamp, clamp, NUMERIC, tol=EXACT,
               expected=lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi)),
    ]


def _conversion_cases() -> list[OpCase]:
    cases = []
    for target in MOVABLE:
        values = in_range_of(target) if target in INTS else ANY
        sources = tuple(d for d in MOVABLE if d != target)
        cases.append(OpCase(f"astype_{target}", ("convert",), _astype(target),
                            unary(values)[:4], sources, signed_zeros=target in FLOATS))
    for target in INTS:
        # numpy's out-of-range float to integer conversion is undefined; the IR saturates
        # and turns nan into 0 (jitc.ir.ops.convert_array is its documented definition).
        cases.append(OpCase(f"lax.convert_saturating_{target}", ("convert",),
                            _convert(target), unary()[:4], FLOATS,
                            expected=_saturating(target)))
    cases.append(OpCase("lax.bitcast_convert", ("bitcast_convert",), _bitcast, unary(),
                        tuple(str(d) for d in BITCAST_PARTNER),
                        expected=lambda x: x.view(BITCAST_PARTNER[x.dtype]), bitwise=True))
    return cases


def _leaf_cases() -> list[OpCase]:
    def iota_expected(dimension: int) -> Callable:
        def expected(x: np.ndarray) -> np.ndarray:
            axis = dimension % x.ndim
            line = np.arange(x.shape[axis]).astype(x.dtype)
            view = [1] * x.ndim
            view[axis] = x.shape[axis]
            return np.broadcast_to(line.reshape(view), x.shape).copy()
        return expected

    shapes = shaped((5,), (0,), (3, 4), (2, 0, 3), (2, 3, 4), layouts="")
    return [
        OpCase("lax.iota_last", ("iota",), lambda x: lax.iota(x.dtype, x.shape, x.ndim - 1),
               shapes, NUMERIC, iota_expected(-1)),
        OpCase("lax.iota_first", ("iota",), lambda x: lax.iota(x.dtype, x.shape, 0),
               shapes, NUMERIC, iota_expected(0)),
        # A Python scalar in the code becomes a constant of the argument's dtype.
        OpCase("constant_operand", ("constant", "mul"), lambda x: x * 3, unary(SMALL)[:4],
               NUMERIC),
    ]


def _shape_cases() -> list[OpCase]:
    exact = {"tol": EXACT, "signed_zeros": True}
    cube = shaped((2, 3, 4), (1, 1, 1), (0, 2, 3), (3, 1, 2))

    def pair(label: str, x: tuple[int, ...], y: tuple[int, ...], layout: str = "C"
             ) -> Variant:
        return variant(label, Arg(x, layout=layout), Arg(y, layout=layout))

    concat = (pair("2x3_2x1", (2, 3), (2, 1)), pair("2x0_2x2", (2, 0), (2, 2)),
              pair("1x1_1x4", (1, 1), (1, 4)), pair("3x2_3x3_F", (3, 2), (3, 3), "F"),
              pair("2x2_2x3_N", (2, 2), (2, 3), "N"), pair("4x1_4x2_T", (4, 1), (4, 2), "T"))
    stack = (pair("3_3", (3,), (3,)), pair("0d", (), ()), pair("2x0", (2, 0), (2, 0)),
             pair("2x3_S", (2, 3), (2, 3), "S"))
    return [
        OpCase("np.broadcast_to", ("broadcast_in_dim",), lambda x: np.broadcast_to(x, (3, 4)),
               shaped((), (4,), (1, 4), (3, 1), (1, 1)), MOVABLE, **exact),
        OpCase("np.broadcast_to_leading", ("broadcast_in_dim",),
               lambda x: np.broadcast_to(x, (2, *x.shape)), shaped((), (0,), (3, 1), (2, 3)),
               MOVABLE, **exact),
        OpCase("reshape_flat", ("reshape",), lambda x: x.reshape(-1), cube, MOVABLE, **exact),
        OpCase("reshape_split", ("reshape",), lambda x: np.reshape(x, (2, -1, 3)),
               shaped((6,), (12,), (0,), (3, 4), (2, 3, 2)), MOVABLE, **exact),
        OpCase("reshape_to_0d", ("reshape",), lambda x: x.reshape(()),
               shaped((1,), (1, 1), (1, 1, 1)), MOVABLE, **exact),
        OpCase("transpose_T", ("transpose",), lambda x: x.T,
               shaped((0, 2), (1, 4), (2, 3), (0, 2, 3), (1, 1, 1), (3, 1, 2)), MOVABLE,
               **exact),
        OpCase("np.transpose_axes", ("transpose",), lambda x: np.transpose(x, (1, 2, 0)),
               cube, MOVABLE, **exact),
        OpCase("np.moveaxis", ("transpose",), lambda x: np.moveaxis(x, 0, -1), cube, MOVABLE,
               **exact),
        OpCase("index_slices_newaxis", ("slice", "reshape"), lambda x: x[::2, None, 1:],
               shaped((5, 4), (3, 1), (0, 3), (2, 5, 3)), MOVABLE, **exact),
        OpCase("index_int_ellipsis", ("slice", "reshape"), lambda x: x[-1, ..., 1:3],
               shaped((2, 4), (1, 1), (3, 0, 5), (2, 3, 4)), MOVABLE, **exact),
        OpCase("index_negative_steps", ("reverse",), lambda x: x[::-1, ::-2],
               shaped((5, 4), (1, 3), (0, 3), (4, 5, 2)), MOVABLE, **exact),
        OpCase("np.flip", ("reverse",), lambda x: np.flip(x, axis=(0, 2)), cube, MOVABLE,
               **exact),
        OpCase("np.pad", ("pad",), lambda x: np.pad(x, ((1, 2), (0, 3))),
               shaped((2, 3), (0, 2), (1, 1), (3, 4)), MOVABLE, **exact),
        OpCase("np.pad_value", ("pad",), lambda x: np.pad(x, 2, constant_values=1),
               shaped((3,), (0,), (2, 2, 1)), MOVABLE, **exact),
        OpCase("lax.pad_interior_negative", ("pad",),
               lambda x, v: lax.pad(x, v, (1, -2), (-1, 2), (2, 1)),
               tuple(variant(v.label, v.args[0], Arg(())) for v in
                     shaped((3, 4), (1, 3), (4, 2), (2, 5))), MOVABLE,
               expected=_pad((1, -2), (-1, 2), (2, 1)), **exact),
        OpCase("np.concatenate", ("concatenate",), lambda x, y: np.concatenate([x, y, x], 1),
               concat, MOVABLE, **exact),
        OpCase("np.stack", ("concatenate", "reshape"), lambda x, y: np.stack([x, y], -1),
               stack, MOVABLE, **exact),
        # A strided block is padded into place and selected; a contiguous one is written at
        # constant starts (dynamic_update_slice), which the simplifier can join.
        OpCase("setitem_block", ("pad", "select"), _set_block,
               shaped((4, 5), (3, 6)), MOVABLE, **exact),
        OpCase("setitem_rows", ("dynamic_update_slice",), _set_rows,
               shaped((4, 5), (3, 1), (5, 0)), MOVABLE, **exact),
        OpCase("setitem_reversed_column", ("dynamic_update_slice", "reverse"),
               _set_reversed_column,
               (pair("4x3_4", (4, 3), (4,)), pair("1x2_1", (1, 2), (1,)),
                pair("0x2_0", (0, 2), (0,)), pair("3x3_3_N", (3, 3), (3,), "N"),
                variant("python_scalar", Arg((2, 2)), Arg(python=True))), MOVABLE, **exact),
    ]


def _dynamic_cases() -> list[OpCase]:
    starts = integers(-3, 7)

    def start(dtype: str = "int32", python: bool = False) -> Arg:
        return Arg((), starts, dtype=dtype, python=python)

    def block(shape: tuple[int, ...], layout: str = "C") -> Arg:
        return Arg(shape, ANY, layout)

    sizes = (2, 3)
    slices = (variant("4x5", block((4, 5)), start(), start()),
              variant("exact_fit", block((2, 3)), start(), start("int64")),
              variant("python_starts", block((3, 5)), start(python=True), start(python=True)),
              variant("uint8_starts", block((5, 4)), start("uint8"), start("int8")),
              variant("fortran", block((4, 6), "F"), start(), start()),
              variant("negstrides", block((3, 3), "N"), start("int64"), start()))
    updates = tuple(variant(v.label, v.args[0], block((2, 3)), *v.args[1:]) for v in slices)
    gathers = (variant("i64_4", Arg((5, 3)), Arg((4,), indices(5), dtype="int64")),
               variant("0d_index", Arg((5, 3)), Arg((), indices(5), dtype="int32")),
               variant("2x3_index", Arg((5, 2)), Arg((2, 3), indices(5), dtype="int64")),
               variant("empty_index", Arg((5, 3)), Arg((0,), indices(5), dtype="int64")),
               variant("u8_index", Arg((5,)), Arg((6,), indices(5), dtype="uint8")),
               variant("transposed", Arg((5, 3), layout="T"),
                       Arg((4,), indices(5), dtype="int64", layout="N")))
    return [
        OpCase("lax.dynamic_slice", ("dynamic_slice",),
               lambda x, i, j: lax.dynamic_slice(x, [i, j], sizes), slices, MOVABLE,
               expected=_dynamic_slice(sizes), tol=EXACT),
        OpCase("lax.dynamic_slice_empty", ("dynamic_slice",),
               lambda x, i, j: lax.dynamic_slice(x, [i, j], (0, 1)), slices[:2], MOVABLE,
               expected=_dynamic_slice((0, 1)), tol=EXACT),
        OpCase("lax.dynamic_update_slice", ("dynamic_update_slice",),
               lambda x, u, i, j: lax.dynamic_update_slice(x, u, [i, j]), updates, MOVABLE,
               expected=_dynamic_update_slice, tol=EXACT, signed_zeros=True),
        OpCase("index_array_traced", ("gather",), lambda x, i: x[i], gathers, MOVABLE,
               tol=EXACT, signed_zeros=True),
        OpCase("np.take_axis1", ("gather",), lambda x, i: np.take(x, i, axis=1),
               (variant("3x5", Arg((3, 5)), Arg((2, 2), indices(5), dtype="int64")),
                variant("1x5_F", Arg((1, 5), layout="F"),
                        Arg((3,), indices(5), dtype="int32"))), MOVABLE, tol=EXACT),
        OpCase("index_array_constant", ("gather",), lambda x: x[[0, -1, 2, 2]],
               shaped((3,), (5, 0), (4, 2)), MOVABLE, tol=EXACT),
        OpCase("index_two_arrays", ("gather",), lambda x, i, j: x[i, :, j],
               (variant("4x3x5", Arg((4, 3, 5)), Arg((2,), indices(4), dtype="int64"),
                        Arg((2,), indices(5), dtype="int64")),
                variant("bcast_index", Arg((4, 2, 5), layout="F"),
                        Arg((3, 1), indices(4), dtype="int32"),
                        Arg((2,), indices(5), dtype="int64"))), MOVABLE, tol=EXACT),
        # The IR clamps gather indices into range (numpy raises on them).
        OpCase("lax.gather_clamped", ("gather",), lambda x, i: lax.gather(x, i, 1),
               (variant("3x4", Arg((3, 4)), Arg((5,), integers(-6, 9), dtype="int64")),
                variant("2x3x2", Arg((2, 3, 2)), Arg((2, 2), integers(-2, 5), dtype="int32"))),
               MOVABLE, tol=EXACT,
               expected=lambda x, i: np.take(x, np.clip(i, 0, x.shape[1] - 1), axis=1)),
    ]


def _reduction_cases() -> list[OpCase]:
    cube = (variant("3x4x5", Arg((3, 4, 5), SMALL)),
            variant("2x0x3", Arg((2, 0, 3), SMALL)),
            variant("1x1x1", Arg((1, 1, 1), SMALL)),
            variant("4x1x3_F", Arg((4, 1, 3), SMALL, "F")),
            variant("specials", Arg((2, 3, 4), SMALL_SPECIAL)),
            variant("2x3x4_T", Arg((2, 3, 4), SMALL, "T")),
            variant("3x2x4_N", Arg((3, 2, 4), SMALL, "N")))
    flat = (variant("4x5", Arg((4, 5), SMALL)), variant("empty", Arg((0,), SMALL)),
            variant("1", Arg((1,), SMALL)), variant("specials", Arg((3, 5), SMALL_SPECIAL)),
            variant("3x4_S", Arg((3, 4), SMALL, "S")))
    extremes = (variant("4x5x3", Arg((4, 5, 3))), variant("1x2x1", Arg((1, 2, 1))),
                variant("2x3x0", Arg((2, 3, 0))), variant("3x4x2_F", Arg((3, 4, 2), layout="F")),
                variant("2x5x2_S", Arg((2, 5, 2), layout="S")),
                variant("small", Arg((5, 2, 3), SMALL)))
    products = (variant("3x4x2", Arg((3, 4, 2), FACTORS)),
                variant("2x0x2", Arg((2, 0, 2), FACTORS)),
                variant("1x7x1", Arg((1, 7, 1), FACTORS)),
                variant("3x4x2_N", Arg((3, 4, 2), FACTORS, "N")))

    def multi(kind: str) -> Callable:
        return lambda x, y: lax.reduce([x, y], (1,), kind)

    def multi_expected(kind: str) -> Callable:
        def expected(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            if kind == "sum":
                return np.sum(x, axis=1, dtype=x.dtype), np.sum(y, axis=1, dtype=y.dtype)
            fn = np.max if kind == "max" else np.min
            return (fn(x, axis=1, initial=_identity(kind, x.dtype)),
                    fn(y, axis=1, initial=_identity(kind, y.dtype)))
        return expected

    def second(shape: tuple[int, ...], values: Values, layout: str = "C") -> Variant:
        return variant("x".join(map(str, shape)) + ("" if layout == "C" else f"_{layout}"),
                       Arg(shape, values, layout), Arg(shape, values, layout, dtype="int32"))

    def multi_variants(values: Values) -> tuple[Variant, ...]:
        return (second((3, 4), values), second((2, 0), values), second((0, 3), values),
                second((4, 3, 2), values, "T"), second((3, 5), values, "S"))

    exact = {"tol": EXACT}
    return [
        OpCase("np.sum_axes_keepdims", ("reduce",),
               lambda x: np.sum(x, axis=(0, 2), keepdims=True), cube, ALL + COMPLEX),
        OpCase("np.sum_all", ("reduce",), np.sum, flat, ALL + COMPLEX),
        OpCase("np.sum_dtype_int64", ("convert", "reduce"),
               lambda x: np.sum(x, axis=-1, dtype=np.int64), flat[:2] + flat[3:],
               ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32")),
        OpCase("np.sum_dtype_bool", ("reduce",), lambda x: x.sum(axis=0, dtype=bool),
               cube[:4], ALL),
        OpCase("np.prod_axis1", ("reduce",), lambda x: np.prod(x, axis=1), products,
               tuple(d for d in ALL if d != "float16") + COMPLEX),
        # numpy rounds a float16 product along an outer axis after every step
        # (jitc/numpy/float16_order.py): float32 multiplies, each converted back (none for an
        # empty axis).
        OpCase("np.prod_axis1_float16", ("convert",), lambda x: np.prod(x, axis=1),
               products, ("float16",)),
        OpCase("np.prod_dtype_float64", ("reduce",),
               lambda x: np.prod(x, axis=(0, 1), dtype=np.float64), products, ALL),
        OpCase("np.max_axis0", ("reduce",), lambda x: np.max(x, axis=0), extremes, ALL,
               **exact),
        OpCase("np.min_axes", ("reduce",), lambda x: x.min(axis=(1, 2)),
               extremes[:2] + extremes[3:], ALL, **exact),
        OpCase("np.max_initial", ("reduce", "max"), lambda x: np.max(x, axis=2, initial=0),
               extremes, ALL, **exact),
        OpCase("np.any", ("reduce",), lambda x: np.any(x, axis=1), extremes, ALL),
        OpCase("np.all_keepdims", ("reduce",), lambda x: np.all(x, axis=(0, 2), keepdims=True),
               extremes, ALL),
        OpCase("np.argmax", ("argmax",), lambda x: np.argmax(x, axis=1), extremes, ALL),
        OpCase("np.argmin_flat", ("argmin",), np.argmin, extremes[:2] + extremes[3:], ALL),
        # stable, nan last: numpy's kind="stable" exactly, ties (SMALL) and nan (ANY) included
        OpCase("np.sort_axis1", ("sort",), lambda x: np.sort(x, axis=1, kind="stable"),
               extremes, ALL, **exact),
        OpCase("np.argsort_axis1", ("sort",), lambda x: np.argsort(x, axis=1, kind="stable"),
               extremes, ALL),
        OpCase("np.mean", ("reduce", "div"), lambda x: np.mean(x, axis=1), cube,
               ALL + COMPLEX),
        OpCase("lax.reduce_sum_two", ("reduce",), multi("sum"), multi_variants(SMALL),
               NUMERIC, multi_expected("sum")),
        OpCase("lax.reduce_max_two", ("reduce",), multi("max"), multi_variants(ANY), ALL,
               multi_expected("max"), **exact),
        OpCase("lax.reduce_min_two", ("reduce",), multi("min"), multi_variants(ANY), ALL,
               multi_expected("min"), **exact),
        OpCase("lax.reduce_and_or", ("reduce",),
               lambda x, y: (*lax.reduce([x, y], (0,), "and"), *lax.reduce([y], (0, 1), "or")),
               tuple(variant(v.label, v.args[0], v.args[0]) for v in multi_variants(ANY)),
               ("bool",),
               lambda x, y: (np.all(x, axis=0), np.all(y, axis=0), np.any(y, axis=(0, 1)))),
    ]


def _contraction_cases() -> list[OpCase]:
    def pair(label: str, x: tuple[int, ...], y: tuple[int, ...], layouts: str = "CC"
             ) -> Variant:
        return variant(label, Arg(x, SMALL, layouts[0]), Arg(y, SMALL, layouts[1]))

    matmul = (pair("3x4_4x5", (3, 4), (4, 5)), pair("4_4x5", (4,), (4, 5)),
              pair("3x4_4", (3, 4), (4,)), pair("4_4", (4,), (4,)),
              pair("batch_2x3x4_4x2", (2, 3, 4), (4, 2)),
              pair("bcast_2x1x3x4_3x4x2", (2, 1, 3, 4), (3, 4, 2)),
              pair("empty_k", (3, 0), (0, 2)), pair("empty_m", (0, 4), (4, 2)),
              pair("1x1_1x1", (1, 1), (1, 1)), pair("F_T", (3, 4), (4, 5), "FT"),
              pair("N_S", (2, 3, 4), (2, 4, 3), "NS"))
    convolutions = [
        ("nchw", _conv(),
         (pair("2x3x5x6", (2, 3, 5, 6), (4, 3, 3, 2)),
          pair("1x1x3x3", (1, 1, 3, 3), (2, 1, 3, 3)),
          pair("F_N", (2, 3, 4, 4), (2, 3, 2, 2), "FN"))),
        ("strided_padded_rhs_dilated",
         _conv(strides=(2, 1), padding=((1, 2), (0, 1)), rhs_dilation=(1, 2)),
         (pair("2x3x7x6", (2, 3, 7, 6), (4, 3, 3, 2)),
          pair("1x2x4x5_T", (1, 2, 4, 5), (3, 2, 2, 2), "TC"))),
        ("nhwc_lhs_dilated_cropped",
         _conv("b01f_01io->b01f", padding=((-1, 0), (1, 1)), lhs_dilation=(2, 1)),
         (pair("2x5x6x3", (2, 5, 6, 3), (3, 2, 3, 4)),
          pair("1x4x4x2_S", (1, 4, 4, 2), (2, 2, 2, 3), "SC"))),
        ("feature_groups", _conv(padding=((1, 1), (1, 1)), groups=2),
         (pair("1x4x5x5", (1, 4, 5, 5), (6, 2, 3, 3)),
          pair("2x4x3x4_F", (2, 4, 3, 4), (4, 2, 2, 2), "FF"))),
        ("depthwise_nhwc",
         _conv("b01f_01io->b01f", strides=(2, 2), padding=((1, 1), (1, 1)), groups=3),
         (pair("2x5x5x3", (2, 5, 5, 3), (3, 3, 1, 3)),)),
        ("1d", _conv("bf0_oi0->bf0", strides=(2,), padding=((2, 1),), lhs_dilation=(2,),
                     rhs_dilation=(2,)),
         (pair("2x3x9", (2, 3, 9), (4, 3, 3)), pair("1x1x2", (1, 1, 2), (1, 1, 3)))),
        ("3d", _conv("bf012_oi012->bf012", padding=((0, 1), (1, 0), (0, 0))),
         (pair("1x2x4x3x5", (1, 2, 4, 3, 5), (3, 2, 2, 2, 3)),)),
        ("empty_output", _conv(), (pair("1x2x2x2", (1, 2, 2, 2), (3, 2, 3, 3)),)),
    ]
    cases = [
        OpCase("matmul", ("dot_general",), lambda x, y: x @ y, matmul, NUMERIC + COMPLEX),
        OpCase("np.einsum_batch", ("dot_general",),
               lambda x, y: np.einsum("bij,bjk->bik", x, y),
               (pair("2x3x4_2x4x5", (2, 3, 4), (2, 4, 5)),
                pair("1x0x2_1x2x3", (1, 0, 2), (1, 2, 3)),
                pair("3x2x2_3x2x1_F", (3, 2, 2), (3, 2, 1), "FN")), NUMERIC + COMPLEX),
        OpCase("np.einsum_outer", ("dot_general",), lambda x, y: np.einsum("i,j->ij", x, y),
               (pair("3_4", (3,), (4,)), pair("0_2", (0,), (2,))), NUMERIC + COMPLEX),
        OpCase("np.tensordot", ("dot_general",),
               lambda x, y: np.tensordot(x, y, axes=([1, 0], [0, 2])),
               (pair("3x4x2_4x5x3", (3, 4, 2), (4, 5, 3)),
                pair("1x2x3_2x2x1_T", (1, 2, 3), (2, 2, 1), "TF")), NUMERIC + COMPLEX),
        OpCase("np.dot_nd", ("dot_general",), np.dot,
               (pair("2x3x4_5x4x2", (2, 3, 4), (5, 4, 2)),
                pair("3x2_2x2x1_S", (3, 2), (2, 2, 1), "SN")), NUMERIC + COMPLEX),
        OpCase("lax.dot_general_batch", ("dot_general",),
               lambda x, y: lax.dot_general(x, y, ([2], [0]), ([1], [1])),
               (pair("3x2x4_4x2x5", (3, 2, 4), (4, 2, 5)),
                pair("1x3x0_0x3x2", (1, 3, 0), (0, 3, 2)),
                pair("2x2x3_3x2x2_FT", (2, 2, 3), (3, 2, 2), "FT")), NUMERIC + COMPLEX,
               lambda x, y: np.einsum("abc,cbd->bad", x, y)),
    ]
    for name, (traced, expected), variants in convolutions:
        cases.append(OpCase(f"lax.conv_{name}", ("convolution",), traced, variants, NUMERIC,
                            expected))
    return cases


def _control_cases() -> list[OpCase]:
    """Control flow: the expected values are the same functions run eagerly (a Python loop or
    `if`), which jitc.lax does outside a trace."""
    def tripled_twice(x):
        return lax.fori_loop(0, 2, lambda i, v: v + v + v, x)

    def sign_branch(x):
        return lax.cond((x > 0).any(), lambda v: v | v if v.dtype == bool else v + v,
                        lambda v: -v if v.dtype != bool else ~v, x)
    return [OpCase("lax.fori_loop", ("while",), tripled_twice, unary(), NUMERIC, tol=EXACT),
            OpCase("lax.cond", ("conditional",), sign_branch, unary(), ALL, tol=EXACT)]


CASES: list[OpCase] = (_unary_cases() + _binary_cases() + _ternary_cases()
                       + _conversion_cases() + _leaf_cases() + _shape_cases()
                       + _dynamic_cases() + _reduction_cases() + _contraction_cases()
                       + _control_cases())

_names = [c.name for c in CASES]
assert len(set(_names)) == len(_names), "op case names must be unique"
