"""Elementwise ops: unary, binary, compare, select, clamp and element type conversions.

Before broadcasting legalization their operands may have any numpy-broadcastable shapes (the
BROADCASTS trait); afterwards all operands have the result's shape. Operand dtypes are always
equal: dtype promotion happens at trace time, as explicit `convert`s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from jitc.ir.dtypes import DType, Kind, real_part
from jitc.ir.opdef import Attr, AttrKind, IRTypeError, OpDef, Trait, register
from jitc.ir.ops.rules import (
    ANY,
    ARITHMETIC,
    BOOL,
    FLOAT,
    INEXACT,
    INTEGER,
    LOGICAL,
    NUMERIC,
    broadcast_shapes,
    check_kind,
    declared_one,
    same_dtype,
    tensor,
)
from jitc.ir.types import TensorType

ELEMENTWISE = frozenset({Trait.ELEMENTWISE, Trait.BROADCASTS})
Kinds = frozenset[Kind]


def _elementwise_rule(name: str, kinds: Kinds, result_dtype: DType | None):
    def rule(types: Sequence[TensorType], attrs: Mapping[str, object],
             declared: Sequence[TensorType] | None) -> list[TensorType]:
        dtype = same_dtype(name, types)
        check_kind(name, dtype, kinds)
        return [tensor(result_dtype or dtype, broadcast_shapes([t.shape for t in types]))]
    return rule


def _abs_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
              declared: Sequence[TensorType] | None) -> list[TensorType]:
    (operand,) = types
    check_kind("abs", operand.dtype, ARITHMETIC)
    return [tensor(real_part(operand.dtype), operand.shape)]  # |complex| is real


def _compare_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                  declared: Sequence[TensorType] | None) -> list[TensorType]:
    if types[0].dtype.is_complex and attrs["direction"] not in ("eq", "ne"):
        raise IRTypeError(f"compare direction={attrs['direction']} is not defined for "
                          f"{types[0].dtype.name}; only eq and ne are")
    return _elementwise_rule("compare", ANY, BOOL)(types, attrs, declared)


def _reference(fn: Callable[..., np.ndarray]):
    def reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                  results: Sequence[TensorType]) -> list[np.ndarray]:
        out = fn(*args, **attrs) if attrs else fn(*args)
        return [np.asarray(out).astype(results[0].dtype.numpy, copy=False)]
    return reference


def _define(name: str, arity: int, fn: Callable[..., np.ndarray], kinds: Kinds, summary: str,
            *, result_dtype: DType | None = None, traits: frozenset[Trait] = frozenset(),
            attrs: tuple[Attr, ...] = ()) -> OpDef:
    rule = _elementwise_rule(name, kinds, result_dtype)
    return register(OpDef(name, arity, rule, _reference(fn), summary, attrs,
                          ELEMENTWISE | traits))


# --- reference semantics that numpy does not provide directly --------------------------------

def _logistic(x: np.ndarray) -> np.ndarray:
    # Evaluate on the side where exp cannot overflow, as an accurate implementation must.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1 / np.sqrt(x)


def _not(x: np.ndarray) -> np.ndarray:
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def _int_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Division truncating toward zero; x / 0 is 0 and MIN / -1 wraps to MIN."""
    safe = np.where(y == 0, 1, y)
    if x.dtype.kind == "i":
        # MIN / -1 overflows; dividing by 1 instead gives its wrapped result, MIN.
        safe = np.where((x == np.iinfo(x.dtype).min) & (safe == -1), 1, safe)
    # fmod truncates toward zero, so x - fmod(x, y) is an exact multiple of y: the floor
    # division is exact and no step overflows, even when x or y is the most negative integer.
    q = (x - np.fmod(x, safe)) // safe
    return np.where(y == 0, 0, q)


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.true_divide(x, y) if x.dtype.kind in "fc" else _int_divide(x, y)


def _rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return np.fmod(x, y)
    q = _int_divide(x, y)
    return np.where(y == 0, 0, (x - q * y).astype(x.dtype))


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "fc":
        return np.power(x, y)
    # Integer powers wrap on overflow; a negative exponent gives 1/x**-y truncated toward zero.
    x, y = np.broadcast_arrays(x, y)
    non_negative = np.power(x, np.maximum(y, 0).astype(y.dtype))
    odd = (y % 2) == 1
    reciprocal = np.where(x == 1, 1, np.where(x == -1, np.where(odd, -1, 1), 0)) \
        if x.dtype.kind == "i" else np.where(x == 1, 1, 0)
    # In x's dtype: mixing int64 with uint64 in np.where would round through float64.
    return np.where(y < 0, reciprocal.astype(x.dtype), non_negative)


def _shift_amount_ok(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bits = x.dtype.itemsize * 8
    in_range = (y >= 0) & (y < bits)
    return in_range, np.where(in_range, y, 0).astype(x.dtype)


def _shift_left(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    ok, amount = _shift_amount_ok(x, y)
    return np.where(ok, np.left_shift(x, amount), 0)


def _shift_right_logical(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    ok, amount = _shift_amount_ok(x, y)
    unsigned = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    shifted = np.right_shift(unsigned, amount.view(unsigned.dtype)).view(x.dtype)
    return np.where(ok, shifted, 0)


def _shift_right_arithmetic(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    ok, amount = _shift_amount_ok(x, y)
    if x.dtype.kind == "u":
        return np.where(ok, np.right_shift(x, amount), 0)
    return np.where(ok, np.right_shift(x, amount), np.where(x < 0, -1, 0))


COMPARE_FUNCTIONS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                     "gt": np.greater, "ge": np.greater_equal}


def _compare(x: np.ndarray, y: np.ndarray, direction: str) -> np.ndarray:
    return COMPARE_FUNCTIONS[direction](x, y)


def _clamp(lo: np.ndarray, x: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x, lo), hi)


# --- unary ------------------------------------------------------------------------------------

T = Trait.TRANSCENDENTAL
NEG = _define("neg", 1, np.negative, ARITHMETIC, "-x (integers wrap)")
ABS = register(OpDef("abs", 1, _abs_rule, _reference(np.abs),
                     "|x| (abs of the most negative integer wraps; of a complex, its real "
                     "magnitude)", traits=ELEMENTWISE))
SIGN = _define("sign", 1, np.sign, NUMERIC, "-1, 0 or 1 by the sign of x; nan for nan")
EXP = _define("exp", 1, np.exp, INEXACT, "e**x", traits=frozenset({T}))
EXPM1 = _define("expm1", 1, np.expm1, FLOAT, "e**x - 1, accurate near 0", traits=frozenset({T}))
LOG = _define("log", 1, np.log, INEXACT, "natural logarithm", traits=frozenset({T}))
LOG1P = _define("log1p", 1, np.log1p, FLOAT, "log(1 + x), accurate near 0",
                traits=frozenset({T}))
SQRT = _define("sqrt", 1, np.sqrt, INEXACT, "square root")
RSQRT = _define("rsqrt", 1, _rsqrt, FLOAT, "1 / sqrt(x)")
TANH = _define("tanh", 1, np.tanh, INEXACT, "hyperbolic tangent", traits=frozenset({T}))
LOGISTIC = _define("logistic", 1, _logistic, FLOAT, "1 / (1 + e**-x)", traits=frozenset({T}))
SIN = _define("sin", 1, np.sin, INEXACT, "sine (radians)", traits=frozenset({T}))
COS = _define("cos", 1, np.cos, INEXACT, "cosine (radians)", traits=frozenset({T}))
FLOOR = _define("floor", 1, np.floor, FLOAT, "largest integer value not above x")
CEIL = _define("ceil", 1, np.ceil, FLOAT, "smallest integer value not below x")
ROUND = _define("round", 1, np.rint, FLOAT, "nearest integer value, ties to even (np.rint)")
NOT = _define("not", 1, _not, LOGICAL, "logical not for bool, bitwise not for integers")
IS_FINITE = _define("is_finite", 1, np.isfinite, FLOAT, "true where x is neither inf nor nan",
                    result_dtype=BOOL)

# --- binary -----------------------------------------------------------------------------------

C = Trait.COMMUTATIVE
ADD = _define("add", 2, np.add, ARITHMETIC, "x + y (integers wrap)", traits=frozenset({C}))
SUB = _define("sub", 2, np.subtract, ARITHMETIC, "x - y (integers wrap)")
MUL = _define("mul", 2, np.multiply, ARITHMETIC, "x * y (integers wrap)", traits=frozenset({C}))
DIV = _define("div", 2, _div, ARITHMETIC,
              "x / y; integers truncate toward zero, x / 0 is 0 and MIN / -1 is MIN")
REM = _define("rem", 2, _rem, NUMERIC,
              "remainder of div, with the sign of x (C fmod); integer x rem 0 is 0")
POW = _define("pow", 2, _pow, ARITHMETIC, "x ** y (C pow for floats)", traits=frozenset({T}))
MAX = _define("max", 2, np.maximum, NUMERIC | {Kind.BOOL}, "larger of x and y; nan if either is",
              traits=frozenset({C}))
MIN = _define("min", 2, np.minimum, NUMERIC | {Kind.BOOL}, "smaller of x and y; nan if either is",
              traits=frozenset({C}))
ATAN2 = _define("atan2", 2, np.arctan2, FLOAT, "angle of the point (x=rhs, y=lhs)",
                traits=frozenset({T}))
AND = _define("and", 2, np.bitwise_and, LOGICAL, "logical/bitwise and", traits=frozenset({C}))
OR = _define("or", 2, np.bitwise_or, LOGICAL, "logical/bitwise or", traits=frozenset({C}))
XOR = _define("xor", 2, np.bitwise_xor, LOGICAL, "logical/bitwise xor", traits=frozenset({C}))
SHIFT_LEFT = _define("shift_left", 2, _shift_left, INTEGER,
                     "x << y; 0 when y is negative or not below the bit width")
SHIFT_RIGHT_ARITHMETIC = _define(
    "shift_right_arithmetic", 2, _shift_right_arithmetic, INTEGER,
    "x >> y filling with the sign bit; 0 or -1 when y is out of range")
SHIFT_RIGHT_LOGICAL = _define(
    "shift_right_logical", 2, _shift_right_logical, INTEGER,
    "x >> y filling with zeros; 0 when y is out of range")
COMPARE = register(OpDef(
    "compare", 2, _compare_rule, _reference(_compare),
    "x <direction> y as bool; nan compares unequal (complex: eq and ne only)",
    (Attr("direction", AttrKind.ENUM, choices=tuple(COMPARE_FUNCTIONS)),), ELEMENTWISE))


# --- select and clamp -------------------------------------------------------------------------

def _select_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                 declared: Sequence[TensorType] | None) -> list[TensorType]:
    pred, on_true, on_false = types
    if pred.dtype is not BOOL:
        raise IRTypeError(f"select: the predicate must be bool, got {pred.short()}")
    dtype = same_dtype("select", [on_true, on_false])
    return [tensor(dtype, broadcast_shapes([t.shape for t in types]))]


def _clamp_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                declared: Sequence[TensorType] | None) -> list[TensorType]:
    dtype = same_dtype("clamp", types)
    check_kind("clamp", dtype, NUMERIC)
    return [tensor(dtype, broadcast_shapes([t.shape for t in types]))]


SELECT = register(OpDef("select", 3, _select_rule, _reference(np.where),
                        "pred ? on_true : on_false, elementwise", traits=ELEMENTWISE))
CLAMP = register(OpDef("clamp", 3, _clamp_rule, _reference(_clamp),
                       "min(max(x, lo), hi) for operands (lo, x, hi)", traits=ELEMENTWISE))


# --- conversions ------------------------------------------------------------------------------

def _convert_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                  declared: Sequence[TensorType] | None) -> list[TensorType]:
    result = declared_one("convert", declared)
    if result.shape != types[0].shape:
        raise IRTypeError(f"convert keeps the shape: {types[0].short()} -> {result.short()}")
    return [tensor(result.dtype, result.shape)]


def convert_array(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Element type conversion with defined results for every input.

    Float to integer truncates toward zero and saturates at the integer range; nan becomes 0.
    Anything to bool is `x != 0`. Integer to integer wraps, as numpy's astype does. Complex to
    a real dtype converts the real part (numpy's astype, without its ComplexWarning: tracing
    gives that warning where the user's code converts).
    """
    if x.dtype.kind == "c" and dtype.kind not in "cb":
        x = x.real
    if x.dtype.kind == "f" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        wide = np.trunc(x.astype(np.float64))
        wide = np.where(np.isnan(wide), 0, np.clip(wide, info.min, info.max))
        # float64 cannot hold 2**63 - 1 exactly; saturate that edge explicitly.
        result = wide.astype(np.int64 if dtype.kind == "i" else np.uint64)
        if dtype.itemsize == 8:
            result = np.where(wide >= 2.0 ** (63 if dtype.kind == "i" else 64), info.max, result)
        return result.astype(dtype)
    if dtype == np.bool_:
        return x != 0
    return x.astype(dtype)


def _convert_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                       results: Sequence[TensorType]) -> list[np.ndarray]:
    return [convert_array(args[0], results[0].dtype.numpy)]


def _bitcast_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                  declared: Sequence[TensorType] | None) -> list[TensorType]:
    (operand,) = types
    result = declared_one("bitcast_convert", declared)
    if result.shape != operand.shape or result.dtype.bits != operand.dtype.bits:
        raise IRTypeError(f"bitcast_convert needs the same shape and bit width: "
                          f"{operand.short()} -> {result.short()}")
    if result.dtype.is_bool or operand.dtype.is_bool:
        raise IRTypeError("bitcast_convert does not apply to bool")
    if result.dtype.is_complex or operand.dtype.is_complex:
        raise IRTypeError("bitcast_convert does not apply to complex dtypes")
    return [tensor(result.dtype, result.shape)]


def _bitcast_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                       results: Sequence[TensorType]) -> list[np.ndarray]:
    # np.ascontiguousarray would turn a 0-d array into a 1-d one.
    return [np.asarray(args[0], order="C").view(results[0].dtype.numpy)]


CONVERT = register(OpDef("convert", 1, _convert_rule, _convert_reference,
                         "element type conversion (saturating float to integer, nan to 0)",
                         traits=frozenset({Trait.ELEMENTWISE, Trait.TYPED_RESULT})))
BITCAST_CONVERT = register(OpDef("bitcast_convert", 1, _bitcast_rule, _bitcast_reference,
                                 "reinterpret the bits of each element as another dtype of the "
                                 "same width",
                                 traits=frozenset({Trait.ELEMENTWISE, Trait.TYPED_RESULT})))

__all__ = [
    "NEG", "ABS", "SIGN", "EXP", "EXPM1", "LOG", "LOG1P", "SQRT", "RSQRT", "TANH", "LOGISTIC",
    "SIN", "COS", "FLOOR", "CEIL", "ROUND", "NOT", "IS_FINITE", "ADD", "SUB", "MUL", "DIV", "REM",
    "POW", "MAX", "MIN", "ATAN2", "AND", "OR", "XOR", "SHIFT_LEFT", "SHIFT_RIGHT_ARITHMETIC",
    "SHIFT_RIGHT_LOGICAL", "COMPARE", "SELECT", "CLAMP", "CONVERT", "BITCAST_CONVERT",
    "COMPARE_FUNCTIONS", "convert_array",
]
