"""The reference semantics of every op, on edge cases, against hand-computed expectations."""

from __future__ import annotations

import itertools
import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from helpers import CASES, FunctionBuilder, module, tt
from hypothesis import given, settings
from hypothesis import strategies as st

from jitc.ir import dtypes, ops
from jitc.ir.interpreter import ArgumentError, interpret
from jitc.ir.opdef import OpDef
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.types import TensorType

FAST = settings(max_examples=40, deadline=None)


def run(op: OpDef, *args: np.ndarray, result: TensorType | None = None,
        **attrs: object) -> np.ndarray:
    """Interpret one instruction of `op` on `args`; the first result."""
    return run_multi(op, *args, result=result, **attrs)[0]


def run_multi(op: OpDef, *args: np.ndarray, result: TensorType | None = None,
              **attrs: object) -> list[np.ndarray]:
    arrays = [np.asarray(a) for a in args]
    fb = FunctionBuilder()
    params = [fb.param(tt(dtypes.from_numpy(a.dtype), a.shape)) for a in arrays]
    values = fb.builder.emit_multi(op, params, attrs, None if result is None else [result])
    return interpret(module(fb.done(*values)), arrays)


def assert_same(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal values, shape and dtype; nan equals any nan and the sign of zero counts."""
    expected = np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_array_equal(got, expected)
    if got.dtype.kind == "f":
        numbers = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(expected[numbers]))


# --- every op runs ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_every_case_runs_and_survives_printing(case: str, arguments) -> None:
    m = CASES[case]()
    args = arguments(m, 0)
    reparsed = parse_module(print_module(m))
    for got, expected in zip(interpret(reparsed, args), interpret(m, args), strict=True):
        assert_same(got, expected)


def test_arguments_are_checked() -> None:
    m = CASES["two-functions"]()
    with pytest.raises(ArgumentError, match="@main takes 1 argument"):
        interpret(m, [])
    expected = r"argument 0: expected f32\[2,2\], got float64\[2, 2\]"
    with pytest.raises(ArgumentError, match=expected):
        interpret(m, [np.zeros((2, 2))])


# --- integer arithmetic -----------------------------------------------------------------------

def _wrap(value: int, dtype: np.dtype) -> int:
    bits = dtype.itemsize * 8
    value %= 1 << bits
    if dtype.kind == "i" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _truncating_div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_integer_div_rem_exhaustive(dtype: type) -> None:
    values = np.arange(np.iinfo(dtype).min, int(np.iinfo(dtype).max) + 1)
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    x, y = a.astype(dtype), b.astype(dtype)
    div, rem = run(ops.DIV, x, y), run(ops.REM, x, y)
    expected_div = [_wrap(_truncating_div(int(p), int(q)), np.dtype(dtype)) for p, q in zip(a, b)]
    expected_rem = [0 if q == 0 else _wrap(int(p) - int(q) * _truncating_div(int(p), int(q)),
                                           np.dtype(dtype)) for p, q in zip(a, b)]
    assert_same(div, np.array(expected_div, dtype))
    assert_same(rem, np.array(expected_rem, dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_div_rem_extremes(dtype: type) -> None:
    info = np.iinfo(dtype)
    special = [int(info.min), int(info.min) + 1, -3, -2, -1, 0, 1, 2, 3, int(info.max)]
    a, b = zip(*itertools.product(special, special))
    div = run(ops.DIV, np.array(a, dtype), np.array(b, dtype))
    rem = run(ops.REM, np.array(a, dtype), np.array(b, dtype))
    for p, q, d, r in zip(a, b, div, rem):
        assert int(d) == _wrap(_truncating_div(p, q), np.dtype(dtype)), (p, q)
        assert int(r) == (0 if q == 0 else _wrap(p - q * _truncating_div(p, q), np.dtype(dtype)))
    # The named edge cases, spelled out.
    assert run(ops.DIV, np.array(info.min, dtype), np.array(-1, dtype)) == info.min
    assert run(ops.REM, np.array(info.min, dtype), np.array(-1, dtype)) == 0
    assert run(ops.DIV, np.array(7, dtype), np.array(0, dtype)) == 0
    assert run(ops.REM, np.array(-7, dtype), np.array(0, dtype)) == 0
    assert run(ops.DIV, np.array(-7, dtype), np.array(2, dtype)) == -3
    assert run(ops.REM, np.array(-7, dtype), np.array(2, dtype)) == -1
    assert run(ops.REM, np.array(7, dtype), np.array(-2, dtype)) == 1


def test_float_div_rem() -> None:
    x = np.array([-5.5, 5.5, 5.0, 1.0, -1.0, 0.0, np.inf], np.float32)
    y = np.array([2.0, -2.0, -3.0, 0.0, 0.0, 0.0, 2.0], np.float32)
    assert_same(run(ops.DIV, x, y),
                np.array([-2.75, -2.75, -5 / 3, np.inf, -np.inf, np.nan, np.inf], np.float32))
    assert_same(run(ops.REM, x, y),
                np.array([-1.5, 1.5, 2.0, np.nan, np.nan, np.nan, np.nan], np.float32))


def test_integer_wraparound() -> None:
    x = np.array([127, -128, 100], np.int8)
    assert_same(run(ops.ADD, x, np.array([1, -1, 100], np.int8)), np.array([-128, 127, -56],
                                                                              np.int8))
    assert_same(run(ops.MUL, x, np.array([2, 2, 3], np.int8)), np.array([-2, 0, 44], np.int8))
    assert_same(run(ops.NEG, x), np.array([-127, -128, -100], np.int8))
    assert_same(run(ops.ABS, x), np.array([127, -128, 100], np.int8))
    assert_same(run(ops.SUB, np.array([0], np.uint8), np.array([1], np.uint8)),
                np.array([255], np.uint8))


def test_integer_pow() -> None:
    x = np.array([2, 2, 1, -1, -1, 0, 0, 3, -2, 2], np.int8)
    y = np.array([-1, 7, -5, -3, -2, -1, 0, 0, 3, 10], np.int8)
    assert_same(run(ops.POW, x, y), np.array([0, -128, 1, -1, 1, 0, 1, 1, -8, 0], np.int8))
    assert_same(run(ops.POW, np.array([2, 3], np.uint8), np.array([8, 5], np.uint8)),
                np.array([0, 243], np.uint8))


def test_float_pow() -> None:
    x = np.array([-8.0, 2.0, 0.0, -2.0, np.nan, 1.0], np.float64)
    y = np.array([1 / 3, -1.0, -1.0, 3.0, 0.0, np.nan], np.float64)
    assert_same(run(ops.POW, x, y), np.array([np.nan, 0.5, np.inf, -8.0, 1.0, 1.0]))


def _expected_shift(kind: str, x: int, y: int, dtype: np.dtype) -> int:
    bits = dtype.itemsize * 8
    if not 0 <= y < bits:
        return -1 if kind == "arithmetic" and x < 0 else 0
    if kind == "left":
        return _wrap(x << y, dtype)
    if kind == "logical":
        return _wrap((x % (1 << bits)) >> y, dtype)
    return x >> y  # Python's >> on a negative int fills with the sign


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64])
def test_shifts(dtype: type) -> None:
    info = np.iinfo(dtype)
    bits = np.dtype(dtype).itemsize * 8
    xs = [v for v in sorted({int(info.min), int(info.min) + 1, -77, -1, 0, 1, 77, int(info.max)})
          if info.min <= v <= info.max]
    ys = [v for v in sorted({0, 1, 3, bits - 1, bits, bits + 1, 100, -1, -bits})
          if info.min <= v <= info.max]
    a, b = zip(*itertools.product(xs, ys))
    x, y = np.array(a, dtype), np.array(b, dtype)
    for op, kind in [(ops.SHIFT_LEFT, "left"), (ops.SHIFT_RIGHT_LOGICAL, "logical"),
                     (ops.SHIFT_RIGHT_ARITHMETIC, "arithmetic")]:
        expected = np.array([_expected_shift(kind, p, q, np.dtype(dtype)) for p, q in zip(a, b)],
                            dtype)
        assert_same(run(op, x, y), expected)


def test_shift_examples() -> None:
    x = np.array([-16, -16, -16, 1, 1], np.int8)
    y = np.array([2, 8, -1, 7, 8], np.int8)
    assert_same(run(ops.SHIFT_RIGHT_ARITHMETIC, x, y), np.array([-4, -1, -1, 0, 0], np.int8))
    assert_same(run(ops.SHIFT_RIGHT_LOGICAL, x, y), np.array([60, 0, 0, 0, 0], np.int8))
    assert_same(run(ops.SHIFT_LEFT, x, y), np.array([-64, 0, 0, -128, 0], np.int8))


def test_bitwise_and_not() -> None:
    a = np.array([0b1100, -1, 0], np.int8)
    b = np.array([0b1010, 5, -1], np.int8)
    assert_same(run(ops.AND, a, b), np.array([0b1000, 5, 0], np.int8))
    assert_same(run(ops.OR, a, b), np.array([0b1110, -1, -1], np.int8))
    assert_same(run(ops.XOR, a, b), np.array([0b0110, -6, -1], np.int8))
    assert_same(run(ops.NOT, a), np.array([-13, 0, -1], np.int8))
    assert_same(run(ops.NOT, np.array([0, 255], np.uint8)), np.array([255, 0], np.uint8))
    assert_same(run(ops.NOT, np.array([True, False])), np.array([False, True]))
    assert_same(run(ops.XOR, np.array([True, True]), np.array([True, False])),
                np.array([False, True]))


# --- float elementwise ------------------------------------------------------------------------

def test_float_unary_edges() -> None:
    x = np.array([-1000.0, -0.0, 0.0, 1000.0, np.nan], np.float32)
    assert_same(run(ops.LOGISTIC, x), np.array([0.0, 0.5, 0.5, 1.0, np.nan], np.float32))
    assert_same(run(ops.SIGN, x), np.array([-1.0, 0.0, 0.0, 1.0, np.nan], np.float32))
    roots = np.array([-1.0, -0.0, 0.0, 0.25, 4.0, np.inf], np.float32)
    assert_same(run(ops.RSQRT, roots), np.array([np.nan, -np.inf, np.inf, 2.0, 0.5, 0.0],
                                                np.float32))
    assert_same(run(ops.SQRT, roots), np.array([np.nan, -0.0, 0.0, 0.5, 2.0, np.inf],
                                               np.float32))
    assert_same(run(ops.IS_FINITE, np.array([1.0, np.inf, -np.inf, np.nan], np.float16)),
                np.array([True, False, False, False]))
    halves = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999], np.float64)
    assert_same(run(ops.ROUND, halves), np.array([0.0, 2.0, 2.0, -0.0, -2.0, 2.0]))
    assert_same(run(ops.FLOOR, halves), np.array([0.0, 1.0, 2.0, -1.0, -2.0, 2.0]))
    assert_same(run(ops.CEIL, halves), np.array([1.0, 2.0, 3.0, -0.0, -1.0, 3.0]))
    assert_same(run(ops.SIGN, np.array([-5, 0, 7], np.int32)), np.array([-1, 0, 1], np.int32))
    tiny = np.array([1e-10], np.float64)
    assert run(ops.EXPM1, tiny)[0] == pytest.approx(1e-10, rel=1e-12)
    assert run(ops.LOG1P, tiny)[0] == pytest.approx(1e-10, rel=1e-12)
    assert_same(run(ops.LOG, np.array([0.0, -1.0], np.float32)),
                np.array([-np.inf, np.nan], np.float32))


def test_max_min_propagate_nan() -> None:
    x = np.array([1.0, np.nan, 3.0, -0.0], np.float32)
    y = np.array([np.nan, 2.0, 1.0, 5.0], np.float32)
    assert_same(run(ops.MAX, x, y), np.array([np.nan, np.nan, 3.0, 5.0], np.float32))
    assert_same(run(ops.MIN, x, y), np.array([np.nan, np.nan, 1.0, -0.0], np.float32))
    assert_same(run(ops.MAX, np.array([True, False]), np.array([False, False])),
                np.array([True, False]))


def test_atan2_takes_y_first() -> None:
    y = np.array([1.0, 1.0, -1.0, 0.0], np.float64)
    x = np.array([1.0, -1.0, -1.0, -1.0], np.float64)
    assert_same(run(ops.ATAN2, y, x),
                np.array([math.pi / 4, 3 * math.pi / 4, -3 * math.pi / 4, math.pi]))


def test_compare() -> None:
    x = np.array([1.0, np.nan, 2.0, -0.0], np.float32)
    y = np.array([1.0, np.nan, 1.0, 0.0], np.float32)
    expected = {"eq": [True, False, False, True], "ne": [False, True, True, False],
                "lt": [False, False, False, False], "le": [True, False, False, True],
                "gt": [False, False, True, False], "ge": [True, False, True, True]}
    for direction, values in expected.items():
        assert_same(run(ops.COMPARE, x, y, direction=direction), np.array(values))
    assert_same(run(ops.COMPARE, np.array([False, True]), np.array([True, True]),
                    direction="lt"), np.array([True, False]))
    assert_same(run(ops.COMPARE, np.array([255], np.uint8), np.array([0], np.uint8),
                    direction="gt"), np.array([True]))


def test_clamp() -> None:
    x = np.array([-5.0, 0.5, 5.0, np.nan], np.float32)
    lo, hi = np.array(0.0, np.float32), np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    assert_same(run(ops.CLAMP, lo, x, hi), np.array([0.0, 0.5, 1.0, np.nan], np.float32))
    # lo above hi gives hi.
    assert_same(run(ops.CLAMP, np.array(3, np.int32), np.array([1, 5], np.int32),
                    np.array(2, np.int32)), np.array([2, 2], np.int32))


def test_select_broadcasts_all_operands() -> None:
    pred = np.array([[True], [False], [True]])
    on_true = np.arange(4, dtype=np.int64).reshape(1, 4)
    on_false = np.array(-1, np.int64)
    assert_same(run(ops.SELECT, pred, on_true, on_false),
                np.array([[0, 1, 2, 3], [-1, -1, -1, -1], [0, 1, 2, 3]]))


BROADCASTING_BINARY = [(ops.ADD, np.add), (ops.SUB, np.subtract), (ops.MUL, np.multiply),
                       (ops.MAX, np.maximum), (ops.MIN, np.minimum), (ops.ATAN2, np.arctan2)]


@FAST
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3),
       which=st.integers(0, len(BROADCASTING_BINARY) - 1), seed=st.integers(0, 2**16))
def test_binary_ops_broadcast_like_numpy(shapes, which: int, seed: int) -> None:
    op, fn = BROADCASTING_BINARY[which]
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(s).astype(np.float32) for s in shapes.input_shapes)
    assert_same(run(op, x, y), fn(x, y).astype(np.float32))


@FAST
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4, max_side=3),
       seed=st.integers(0, 2**16))
def test_select_and_clamp_broadcast_like_numpy(shapes, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b, c = shapes.input_shapes
    pred = rng.random(a) < 0.5
    x, y = rng.integers(-9, 9, b, dtype=np.int32), rng.integers(-9, 9, c, dtype=np.int32)
    assert_same(run(ops.SELECT, pred, x, y), np.where(pred, x, y))
    lo = rng.integers(-9, 0, a, dtype=np.int32)
    assert_same(run(ops.CLAMP, lo, x, y), np.minimum(np.maximum(x, lo), y))


# --- conversions ------------------------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 2.9, -2.9, -0.5, 127.5, 128.0, -129.0,
                    255.9, 256.0], np.float32)


@pytest.mark.parametrize(("dtype", "expected"), [
    (np.int8, [0, 127, -128, 127, -128, 2, -2, 0, 127, 127, -128, 127, 127]),
    (np.uint8, [0, 255, 0, 255, 0, 2, 0, 0, 127, 128, 0, 255, 255]),
    (np.int32, [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2, -2, 0, 127, 128, -129, 255, 256]),
    (np.int64, [0, 2**63 - 1, -2**63, 10**10, -10**10, 2, -2, 0, 127, 128, -129, 255, 256]),
])
def test_float_to_int_saturates(dtype: type, expected: list[int]) -> None:
    result = tt(dtypes.from_numpy(dtype), SPECIAL.shape)
    assert_same(run(ops.CONVERT, SPECIAL, result=result), np.array(expected, dtype))


def test_float64_to_int64_edges() -> None:
    x = np.array([2.0**63, -2.0**63, 9.2e18, -9.3e18, 2.0**62], np.float64)
    assert_same(run(ops.CONVERT, x, result=tt(dtypes.int64, (5,))),
                np.array([2**63 - 1, -2**63, 9200000000000000000, -2**63, 2**62], np.int64))


def test_other_conversions() -> None:
    def convert(x: np.ndarray, dtype: dtypes.DType) -> np.ndarray:
        return run(ops.CONVERT, x, result=tt(dtype, x.shape))
    floats = np.array([np.nan, 0.0, -0.0, 0.25], np.float32)
    assert_same(convert(floats, dtypes.bool_), np.array([True, False, False, True]))
    assert_same(convert(np.array([0, -3, 256], np.int32), dtypes.bool_),
                np.array([False, True, True]))
    assert_same(convert(np.array([300, -129, 255], np.int32), dtypes.int8),
                np.array([44, 127, -1], np.int8))
    assert_same(convert(np.array([-1, 100], np.int8), dtypes.uint8),
                np.array([255, 100], np.uint8))
    assert_same(convert(np.array([True, False]), dtypes.float32),
                np.array([1.0, 0.0], np.float32))
    assert_same(convert(np.array([1e5, -1e5, 1.00048828125], np.float64), dtypes.float16),
                np.array([np.inf, -np.inf, 1.0], np.float16))
    assert_same(convert(np.array([2**53 + 1], np.int64), dtypes.float64),
                np.array([2.0**53]))


def test_bitcast_convert() -> None:
    def bitcast(x: np.ndarray, dtype: dtypes.DType) -> np.ndarray:
        return run(ops.BITCAST_CONVERT, x, result=tt(dtype, x.shape))
    assert_same(bitcast(np.array([1.0, -0.0], np.float32), dtypes.int32),
                np.array([0x3F800000, -2**31], np.int32))
    assert_same(bitcast(np.array(-0.0), dtypes.int64), np.array(-2**63, np.int64))
    assert_same(bitcast(np.array([255, 128], np.uint8), dtypes.int8),
                np.array([-1, -128], np.int8))
    assert_same(bitcast(np.array([0x7FF0000000000000], np.int64), dtypes.float64),
                np.array([np.inf]))
    transposed = np.arange(6, dtype=np.int32).reshape(2, 3).T  # not C-contiguous
    assert_same(bitcast(transposed, dtypes.float32), transposed.copy().view(np.float32))


# --- leaves -----------------------------------------------------------------------------------

def test_iota() -> None:
    fb = FunctionBuilder()
    a = fb.emit(ops.IOTA, result=tt(dtypes.int32, (2, 3), (0, 1)), dimension=1)
    b = fb.emit(ops.IOTA, result=tt(dtypes.float32, (2, 3)), dimension=0)
    c = fb.emit(ops.IOTA, result=tt(dtypes.int8, (130,)), dimension=0)
    got_a, got_b, got_c = interpret(module(fb.done(a, b, c)), [])
    assert_same(got_a, np.array([[0, 1, 2], [0, 1, 2]], np.int32))
    assert_same(got_b, np.array([[0, 0, 0], [1, 1, 1]], np.float32))
    assert got_c[127] == 127 and got_c[128] == -128  # wraps like an integer convert


def test_constant_is_its_literal() -> None:
    fb = FunctionBuilder()
    value = np.array([[1, 2], [3, 4]], np.uint8)
    (got,) = interpret(module(fb.done(fb.const(value))), [])
    assert_same(got, value)
    got[0, 0] = 9  # results are fresh arrays: the literal stays intact
    (again,) = interpret(module(fb.done(fb.const(value))), [])
    assert again[0, 0] == 1


# --- data movement ----------------------------------------------------------------------------

def test_broadcast_in_dim_expands_size_one() -> None:
    x = np.array([[1.0], [2.0], [3.0]], np.float32)
    got = run(ops.BROADCAST_IN_DIM, x, result=tt(dtypes.float32, (3, 4, 5)), dims=[0, 2])
    assert_same(got, np.broadcast_to(x[:, None, :], (3, 4, 5)))
    scalar = run(ops.BROADCAST_IN_DIM, np.array(7, np.int8), result=tt(dtypes.int8, (2,)),
                 dims=[])
    assert_same(scalar, np.array([7, 7], np.int8))


def test_reshape_transpose_reverse_concatenate() -> None:
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    assert_same(run(ops.RESHAPE, x, result=tt(dtypes.int32, (4, 6))), x.reshape(4, 6))
    moved = run(ops.TRANSPOSE, x, permutation=[2, 0, 1])
    assert moved.shape == (4, 2, 3) and moved[3, 1, 2] == x[1, 2, 3]
    assert_same(run(ops.REVERSE, x, dims=[0, 2]), x[::-1, :, ::-1])
    assert_same(run(ops.REVERSE, x, dims=[]), x)
    y = -np.arange(6, dtype=np.int32).reshape(2, 3, 1)
    assert_same(run(ops.CONCATENATE, x, y, x, dimension=2), np.concatenate([x, y, x], axis=2))


@FAST
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6))
def test_slice_matches_numpy(data: st.DataObject, shape: tuple[int, ...]) -> None:
    x = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    start, limit, stride = [], [], []
    for size in shape:
        lo = data.draw(st.integers(0, size))
        start.append(lo)
        limit.append(data.draw(st.integers(lo, size)))
        stride.append(data.draw(st.integers(1, 3)))
    expected = x[tuple(slice(a, b, c) for a, b, c in zip(start, limit, stride))]
    assert_same(run(ops.SLICE, x, start=start, limit=limit, stride=stride), expected)


def _pad_loops(x: np.ndarray, value: object, low: list[int], high: list[int],
               interior: list[int]) -> np.ndarray:
    """Output position o of a dimension reads operand element (o - low) / (interior + 1)
    when that is a whole number in range, and the padding value otherwise."""
    shape = [lo + hi + s + max(s - 1, 0) * i for lo, hi, s, i in zip(low, high, x.shape, interior)]
    out = np.full(shape, value, x.dtype)
    for position in itertools.product(*(range(n) for n in shape)):
        source = []
        for o, lo, i, size in zip(position, low, interior, x.shape):
            step, rest = divmod(o - lo, i + 1)
            if rest or not 0 <= step < size:
                break
            source.append(step)
        else:
            out[position] = x[tuple(source)]
    return out


def test_pad_examples() -> None:
    x = np.array([1, 2, 3], np.int32)
    zero = np.array(0, np.int32)
    assert_same(run(ops.PAD, x, zero, low=[2], high=[1], interior=[1]),
                np.array([0, 0, 1, 0, 2, 0, 3, 0], np.int32))
    assert_same(run(ops.PAD, x, zero, low=[-1], high=[-1], interior=[2]),
                np.array([0, 0, 2, 0, 0], np.int32))
    assert_same(run(ops.PAD, x, np.array(9, np.int32), low=[-5], high=[3]),
                np.array([9], np.int32))
    assert_same(run(ops.PAD, x, zero, low=[-3], high=[0]), np.zeros(0, np.int32))
    m = np.arange(4, dtype=np.float32).reshape(2, 2)
    assert_same(run(ops.PAD, m, np.array(-1, np.float32), low=[1, -1], high=[0, 1],
                    interior=[0, 1]),
                np.array([[-1, -1, -1], [-1, 1, -1], [0, 3, -1]], np.float32)
                [:, :] if False else np.array([[-1, -1, -1], [-1, 1, -1], [-1, 3, -1]],
                                              np.float32))


@FAST
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4))
def test_pad_matches_direct_loops(data: st.DataObject, shape: tuple[int, ...]) -> None:
    x = np.arange(1, math.prod(shape) + 1, dtype=np.int32).reshape(shape)
    interior = [data.draw(st.integers(0, 2)) for _ in shape]
    low, high = [], []
    for size, i in zip(shape, interior):
        spread = size + max(size - 1, 0) * i
        lo = data.draw(st.integers(-spread - 1, 3))
        low.append(lo)
        high.append(data.draw(st.integers(max(-spread - lo, -spread - 1), 3)))
    value = np.array(-7, np.int32)
    got = run(ops.PAD, x, value, low=low, high=high, interior=interior)
    assert_same(got, _pad_loops(x, -7, low, high, interior))


def test_dynamic_slice_clamps_starts() -> None:
    x = np.arange(30, dtype=np.int32).reshape(5, 6)

    def block(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return run(ops.DYNAMIC_SLICE, x, i, j, sizes=[2, 4])
    assert_same(block(np.array(1, np.int32), np.array(1, np.int64)), x[1:3, 1:5])
    assert_same(block(np.array(-3, np.int8), np.array(200, np.uint8)), x[0:2, 2:6])
    assert_same(block(np.array(4, np.int64), np.array(2**40, np.int64)), x[3:5, 2:6])
    assert_same(run(ops.DYNAMIC_SLICE, x, np.array(9, np.int32), np.array(9, np.int32),
                    sizes=[0, 6]), np.zeros((0, 6), np.int32))


def test_dynamic_update_slice_clamps_starts() -> None:
    x = np.zeros((4, 5), np.float32)
    update = np.ones((2, 3), np.float32)
    got = run(ops.DYNAMIC_UPDATE_SLICE, x, update, np.array(3, np.int32),
              np.array(-1, np.int8))
    expected = x.copy()
    expected[2:4, 0:3] = 1
    assert_same(got, expected)
    got = run(ops.DYNAMIC_UPDATE_SLICE, x, update, np.array(1, np.uint8), np.array(1, np.uint8))
    expected = x.copy()
    expected[1:3, 1:4] = 1
    assert_same(got, expected)


def test_gather_clamps_indices() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([[-1, 7], [2, 0]], np.int32)
    got = run(ops.GATHER, x, indices, axis=1)
    assert got.shape == (3, 2, 2)
    assert_same(got, x[:, np.array([[0, 3], [2, 0]])])
    assert_same(run(ops.GATHER, x, np.array([5, -5, 1], np.int8), axis=0), x[[2, 0, 1]])
    assert_same(run(ops.GATHER, x, np.zeros((0,), np.int64), axis=0),
                np.zeros((0, 4), np.float32))
    empty = np.zeros((2, 0), np.float32)
    assert_same(run(ops.GATHER, empty, np.zeros((0, 3), np.int32), axis=1),
                np.zeros((2, 0, 3), np.float32))


# --- reductions -------------------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "dtype", "identity"), [
    ("sum", np.float32, 0.0), ("sum", np.int8, 0), ("prod", np.float64, 1.0),
    ("prod", np.uint8, 1), ("max", np.float32, -np.inf), ("min", np.float16, np.inf),
    ("max", np.int8, -128), ("min", np.int8, 127), ("max", np.uint8, 0), ("min", np.uint8, 255),
    ("max", np.int64, -2**63), ("min", np.int32, 2**31 - 1), ("max", np.bool_, False),
    ("min", np.bool_, True), ("and", np.bool_, True), ("or", np.bool_, False),
])
def test_empty_reductions_give_the_identity(kind: str, dtype: type, identity: object) -> None:
    x = np.zeros((3, 0, 2), dtype)
    assert_same(run(ops.REDUCE, x, dims=[1], kind=kind), np.full((3, 2), identity, dtype))
    assert_same(run(ops.REDUCE, x, dims=[0, 1, 2], kind=kind), np.array(identity, dtype))


def test_reduce_over_no_dims_is_a_copy() -> None:
    x = np.array([[1, 2], [3, 4]], np.int32)
    assert_same(run(ops.REDUCE, x, dims=[], kind="prod"), x)


def test_multi_operand_reduce() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = np.arange(24, dtype=np.int32).reshape(2, 3, 4) - 12
    total, count = run_multi(ops.REDUCE, x, y, dims=[0, 2], kind="max")
    assert_same(total, x.max(axis=(0, 2)))
    assert_same(count, y.max(axis=(0, 2)))


def test_reduce_values() -> None:
    big = np.array([1e8, 1.0, -1e8], np.float32)
    # Accumulation is exact enough that the 1.0 survives, unlike a float32 running sum.
    assert_same(run(ops.REDUCE, big, dims=[0], kind="sum"), np.array(1.0, np.float32))
    assert_same(run(ops.REDUCE, np.array([100, 100, 100], np.int8), dims=[0], kind="sum"),
                np.array(44, np.int8))
    assert_same(run(ops.REDUCE, np.array([1.0, np.nan, 3.0], np.float32), dims=[0], kind="max"),
                np.array(np.nan, np.float32))
    assert_same(run(ops.REDUCE, np.array([[True, False], [True, True]]), dims=[1], kind="and"),
                np.array([False, True]))
    assert_same(run(ops.REDUCE, np.array([[True, False], [False, False]]), dims=[0], kind="or"),
                np.array([True, False]))


def test_argmax_argmin() -> None:
    def arg(op: OpDef, values: list[float], dtype: type = np.float32, **attrs: object) -> int:
        return int(run(op, np.array(values, dtype), axis=0, **attrs))
    assert arg(ops.ARGMAX, [1, 3, 3, 2]) == 1  # ties: the first
    assert arg(ops.ARGMIN, [2, 1, 3, 1]) == 1
    assert arg(ops.ARGMAX, [1, np.nan, 5, np.nan]) == 1  # nan counts as the maximum
    assert arg(ops.ARGMIN, [1, -np.inf, np.nan]) == 2  # ... and as the minimum
    assert arg(ops.ARGMAX, [-np.inf, -np.inf]) == 0
    assert arg(ops.ARGMAX, [False, True, True], np.bool_) == 1
    assert arg(ops.ARGMIN, [255, 0, 0], np.uint8) == 1
    x = np.array([[1, 9, 9], [9, 2, 9]], np.int8)
    assert_same(run(ops.ARGMAX, x, axis=1), np.array([1, 0], np.int64))
    assert_same(run(ops.ARGMIN, x, axis=0, index_dtype="i32"), np.array([0, 1, 0], np.int32))


# --- contractions -----------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "lhs_shape", "rhs_shape", "attrs"), [
    ("ij,jk->ik", (3, 4), (4, 5), {"lhs_contract": [1], "rhs_contract": [0]}),
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5),
     {"lhs_batch": [0], "rhs_batch": [0], "lhs_contract": [2], "rhs_contract": [1]}),
    ("ibj,jkb->bik", (3, 2, 4), (4, 5, 2),
     {"lhs_batch": [1], "rhs_batch": [2], "lhs_contract": [2], "rhs_contract": [0]}),
    ("abk,bak->ba", (2, 3, 4), (3, 2, 4),
     {"lhs_batch": [1, 0], "rhs_batch": [0, 1], "lhs_contract": [2], "rhs_contract": [2]}),
    ("ijk,kjl->il", (2, 3, 4), (4, 3, 5), {"lhs_contract": [1, 2], "rhs_contract": [1, 0]}),
    ("ji,kj->ik", (4, 3), (5, 4), {"lhs_contract": [0], "rhs_contract": [1]}),
    ("i,j->ij", (3,), (4,), {"lhs_contract": [], "rhs_contract": []}),
    ("i,i->", (4,), (4,), {"lhs_contract": [0], "rhs_contract": [0]}),
])
def test_dot_general_matches_einsum(spec: str, lhs_shape: tuple[int, ...],
                                    rhs_shape: tuple[int, ...], attrs: dict) -> None:
    rng = np.random.default_rng(1)
    lhs = rng.standard_normal(lhs_shape)
    rhs = rng.standard_normal(rhs_shape)
    got = run(ops.DOT_GENERAL, lhs, rhs, **attrs)
    expected = np.einsum(spec, lhs, rhs)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_integer_dot_wraps() -> None:
    lhs = np.full((1, 200), 100, np.int8)
    rhs = np.full((200, 1), 100, np.int8)
    got = run(ops.DOT_GENERAL, lhs, rhs, lhs_contract=[1], rhs_contract=[0])
    assert_same(got, np.array([[_wrap(200 * 100 * 100, np.dtype(np.int8))]], np.int8))


def _conv_loops(x: np.ndarray, w: np.ndarray, strides: list[int],
                padding: list[tuple[int, int]], lhs_dilation: list[int],
                rhs_dilation: list[int], groups: int) -> np.ndarray:
    """Convolution by its definition, in canonical layouts: x is (N, C, spatial...) and w is
    (O, I, spatial...). Output position p and kernel tap k read input position
    (p * stride + k * rhs_dilation - low) / lhs_dilation, when that is a whole number in range."""
    n, _ = x.shape[:2]
    o, i = w.shape[:2]
    out_spatial = []
    for size, k, s, (lo, hi), ld, rd in zip(x.shape[2:], w.shape[2:], strides, padding,
                                            lhs_dilation, rhs_dilation):
        dilated = (size - 1) * ld + 1 if size else 0
        window = (k - 1) * rd + 1
        out_spatial.append(max(0, (dilated + lo + hi - window) // s + 1))
    out = np.zeros((n, o, *out_spatial), np.float64)
    per_group = o // groups
    for b, f in itertools.product(range(n), range(o)):
        group = f // per_group
        for p in itertools.product(*(range(d) for d in out_spatial)):
            total = 0.0
            for c in range(i):
                for k in itertools.product(*(range(d) for d in w.shape[2:])):
                    source = []
                    for pd, kd, s, (lo, _), ld, rd, size in zip(
                            p, k, strides, padding, lhs_dilation, rhs_dilation, x.shape[2:]):
                        position, rest = divmod(pd * s + kd * rd - lo, ld)
                        if rest or not 0 <= position < size:
                            break
                        source.append(position)
                    else:
                        total += x[(b, group * i + c, *source)] * w[(f, c, *k)]
            out[(b, f, *p)] = total
    return out


def _to_labels(canonical: np.ndarray, labels: str, roles: str) -> np.ndarray:
    """`canonical` has its dimensions in the order of `roles` ("bf01"); reorder to `labels`."""
    return np.transpose(canonical, [roles.index(ch) for ch in labels])


def _from_labels(array: np.ndarray, labels: str, roles: str) -> np.ndarray:
    return np.transpose(array, [labels.index(ch) for ch in roles])


CONV_CASES = [
    # dim_labels, strides, padding, lhs_dilation, rhs_dilation, groups
    ("bf01_oi01->bf01", [1, 1], [(0, 0), (0, 0)], [1, 1], [1, 1], 1),
    ("b01f_01io->b01f", [1, 1], [(0, 0), (0, 0)], [1, 1], [1, 1], 1),
    ("bf01_oi01->bf01", [2, 3], [(1, 2), (2, 0)], [1, 1], [1, 1], 1),
    ("b01f_01io->b01f", [2, 3], [(1, 2), (2, 0)], [1, 1], [1, 1], 1),
    ("b01f_01io->bf01", [1, 2], [(-1, 1), (0, -2)], [2, 1], [1, 2], 2),
    ("f0b1_1o0i->01fb", [1, 1], [(1, 1), (1, 1)], [1, 3], [2, 1], 4),
    ("bf01_oi01->bf01", [1, 1], [(0, 0), (0, 0)], [1, 1], [3, 3], 1),
]


@pytest.mark.parametrize(("labels", "strides", "padding", "lhs_dil", "rhs_dil", "groups"),
                         CONV_CASES)
def test_convolution_matches_loops(labels: str, strides: list[int],
                                   padding: list[tuple[int, int]], lhs_dil: list[int],
                                   rhs_dil: list[int], groups: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6, 5))
    w = rng.standard_normal((4, 4 // groups, 3, 2))
    lhs_labels, rest = labels.split("_")
    rhs_labels, out_labels = rest.split("->")
    got = run(ops.CONVOLUTION, _to_labels(x, lhs_labels, "bf01"),
              _to_labels(w, rhs_labels, "oi01"), dim_labels=labels, strides=strides,
              padding=padding, lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
              feature_group_count=groups)
    expected = _conv_loops(x, w, strides, padding, lhs_dil, rhs_dil, groups)
    np.testing.assert_allclose(_from_labels(got, out_labels, "bf01"), expected, atol=1e-12)


def test_convolution_nchw_equals_nhwc() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    attrs = {"strides": [2, 2], "padding": [(1, 1), (1, 1)]}
    nchw = run(ops.CONVOLUTION, x, w, dim_labels="bf01_oi01->bf01", **attrs)
    nhwc = run(ops.CONVOLUTION, x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0),
               dim_labels="b01f_01io->b01f", **attrs)
    assert nchw.shape == (1, 2, 3, 3) and nhwc.shape == (1, 3, 3, 2)
    np.testing.assert_allclose(nhwc.transpose(0, 3, 1, 2), nchw, rtol=1e-6)


def test_convolution_padding_and_holes_contribute_nothing_to_an_infinite_tap() -> None:
    """Padding and the zeros lhs_dilation inserts are not input: an inf kernel tap over them
    adds nothing (numpy's correlate skips them too), where 0 * inf would be nan."""
    x = np.array([[[1.0, 2.0, 3.0]]], np.float32)
    w = np.array([[[np.inf, 1.0]]], np.float32)
    got = run(ops.CONVOLUTION, x, w, dim_labels="bf0_oi0->bf0", padding=[(1, 1)],
              lhs_dilation=[2])
    assert_same(got, np.array([[[1.0, np.inf, 2.0, np.inf, 3.0, np.inf]]], np.float32))
    padded_only = run(ops.CONVOLUTION, x, w[:, :, ::-1], dim_labels="bf0_oi0->bf0",
                      padding=[(1, 1)])
    assert_same(padded_only[0, 0], np.correlate(x[0, 0], w[0, 0, ::-1], "full"))


@FAST
@given(data=st.data(), spatial=st.integers(1, 2), groups=st.sampled_from([1, 2]))
def test_random_convolutions_match_loops(data: st.DataObject, spatial: int, groups: int) -> None:
    draw = data.draw
    sizes = [draw(st.integers(0, 5)) for _ in range(spatial)]
    kernel = [draw(st.integers(1, 3)) for _ in range(spatial)]
    strides = [draw(st.integers(1, 3)) for _ in range(spatial)]
    lhs_dil = [draw(st.integers(1, 2)) for _ in range(spatial)]
    rhs_dil = [draw(st.integers(1, 2)) for _ in range(spatial)]
    padding = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(spatial)]
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.integers(-3, 4, (1, 2 * groups, *sizes)).astype(np.int32)
    w = rng.integers(-3, 4, (2 * groups, 2, *kernel)).astype(np.int32)
    digits = "".join(str(d) for d in range(spatial))
    labels = f"bf{digits}_oi{digits}->bf{digits}"
    expected = _conv_loops(x, w, strides, padding, lhs_dil, rhs_dil, groups)
    got = run(ops.CONVOLUTION, x, w, dim_labels=labels, strides=strides, padding=padding,
              lhs_dilation=lhs_dil, rhs_dilation=rhs_dil, feature_group_count=groups)
    assert_same(got, expected.astype(np.int32))


def test_convolution_output_size_formula() -> None:
    # size 10, kernel 3 dilated by 2 (window 5), padding (1, 2), stride 3: (10 + 3 - 5) // 3 + 1
    fb = FunctionBuilder()
    x, w = fb.param(tt(dtypes.float32, (1, 1, 10))), fb.param(tt(dtypes.float32, (1, 1, 3)))
    y = fb.emit(ops.CONVOLUTION, x, w, dim_labels="bf0_oi0->bf0", strides=[3],
                padding=[(1, 2)], rhs_dilation=[2])
    assert y.type.shape == (1, 1, 3)
    too_small = fb.emit(ops.CONVOLUTION, x, w, dim_labels="bf0_oi0->bf0",
                        padding=[(-4, -4)])
    assert too_small.type.shape == (1, 1, 0)
