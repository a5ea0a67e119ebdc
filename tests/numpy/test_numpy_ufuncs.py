"""Every ufunc jitc traces, and the Python operators, against numpy on several dtypes."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc
from jitc.ir.dtypes import is_supported_numpy
from jitc.numpy.ufuncs import UFUNCS

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64, np.bool_]
# The other integer widths run on the interpreter only (test_ufunc_other_integer_widths): the
# tracing is the same on every backend, and the op table runs their ops on every backend.
OTHER_WIDTHS = [np.int16, np.uint16, np.uint32, np.uint64]

# Input ranges where numpy's result is defined (no nan from the domain, no negative integer
# powers, shift amounts below the bit width, nonzero divisors); one (low, high) per input.
FULL = (-3.0, 3.0)
DOMAINS = {
    np.arcsin: [(-0.99, 0.99)], np.arccos: [(-0.99, 0.99)], np.arctanh: [(-0.9, 0.9)],
    np.arccosh: [(1.0, 4.0)], np.log: [(0.1, 4.0)], np.log2: [(0.1, 4.0)],
    np.log10: [(0.1, 4.0)], np.log1p: [(-0.9, 4.0)], np.sqrt: [(0.0, 4.0)],
    np.reciprocal: [(1.0, 4.0)], np.power: [(0.5, 3.0), (0.0, 3.0)],
    np.left_shift: [FULL, (0.0, 5.0)], np.right_shift: [FULL, (0.0, 5.0)],
    np.true_divide: [FULL, (1.0, 3.0)], np.floor_divide: [FULL, (1.0, 3.0)],
    np.remainder: [FULL, (1.0, 3.0)], np.fmod: [FULL, (1.0, 3.0)],
}


def _loop_dtypes(ufunc: np.ufunc, dtype: type) -> tuple[np.dtype, ...] | None:
    """numpy's loop for `dtype` inputs, or None when numpy has none (or jitc lacks a dtype)."""
    try:
        loop = ufunc.resolve_dtypes((np.dtype(dtype),) * ufunc.nin + (None,) * ufunc.nout)
    except (TypeError, np.exceptions.DTypePromotionError):
        return None
    return loop if all(is_supported_numpy(d) for d in loop) else None


def _cases(dtypes=DTYPES):
    for ufunc in sorted(UFUNCS, key=lambda u: u.__name__):
        for dtype in dtypes:
            if _loop_dtypes(ufunc, dtype) is not None:
                yield pytest.param(ufunc, dtype, id=f"{ufunc.__name__}-{np.dtype(dtype)}")


def _inputs(ufunc: np.ufunc, dtype: type, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    domains = DOMAINS.get(ufunc, [FULL] * ufunc.nin)
    low_signed = np.dtype(dtype).kind == "u"
    args = []
    for i, (shape, (low, high)) in enumerate(zip(shapes, domains)):
        args.append(random(shape, dtype, seed=i, low=max(low, 0) if low_signed else low,
                           high=high))
    return args


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ufunc,dtype", list(_cases()))
def test_ufunc(ufunc, dtype, backend):
    shapes = [(3, 4), (4,)] if ufunc.nin == 2 else [(2, 3, 4)]
    args = _inputs(ufunc, dtype, shapes)
    with np.errstate(all="ignore"):
        check_jit(ufunc, *args, backend=backend)


@pytest.mark.parametrize("ufunc,dtype", list(_cases(OTHER_WIDTHS)))
def test_ufunc_other_integer_widths(ufunc, dtype):
    shapes = [(3, 4), (4,)] if ufunc.nin == 2 else [(2, 3, 4)]
    args = _inputs(ufunc, dtype, shapes)
    with np.errstate(all="ignore"):
        check_jit(ufunc, *args, backend="interpreter")


def test_every_ufunc_has_a_case():
    untested = [u.__name__ for u in UFUNCS if not any(_loop_dtypes(u, d) for d in DTYPES)]
    assert not untested


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum, np.minimum,
                                   np.logical_and, np.logical_or], ids=lambda u: u.__name__)
def test_ufunc_reduce(ufunc, backend):
    x = random((3, 4, 5), np.float32)
    check_jit(lambda x: ufunc.reduce(x), x, backend=backend)
    check_jit(lambda x: ufunc.reduce(x, axis=-1), x, backend=backend)
    check_jit(lambda x: ufunc.reduce(x, axis=(0, 2), keepdims=True), x, backend=backend)
    check_jit(lambda x: ufunc.reduce(x, axis=None), x, backend=backend)


SPECIAL = np.array([0.0, -0.0, 1.5, -1.5, 2.0, -2.0, np.inf, -np.inf, np.nan, 1e-30, -7.0, -1e9,
                    1e9])

# Ufuncs that jitc spells with several ops, where signed zeros, infinities and nan are easy to
# get wrong; every pair of special values for the binary ones.
SPECIAL_UFUNCS = [np.copysign, np.signbit, np.heaviside, np.isinf, np.isnan, np.isfinite,
                  np.fmax, np.fmin, np.maximum, np.minimum, np.floor_divide, np.remainder,
                  np.fmod, np.trunc, np.sign, np.absolute, np.logaddexp, np.logaddexp2,
                  np.hypot, np.cbrt, np.arctan, np.sinh, np.cosh, np.tanh, np.exp2, np.arccosh,
                  np.arcsinh]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ufunc", SPECIAL_UFUNCS, ids=lambda u: u.__name__)
def test_special_values(ufunc, dtype, backend):
    x = SPECIAL.astype(dtype)
    args = (x[:, None], x[None, :]) if ufunc.nin == 2 else (x,)
    with np.errstate(all="ignore"):
        check_jit(ufunc, *args, backend=backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_keep_the_sign_of_zero(dtype):
    """check_jit counts -0.0 equal to 0.0: the signs of zero results (sinh, cbrt, arcsinh of
    -0.0, floor_divide's zero quotients) are compared here."""
    x = SPECIAL.astype(dtype)
    for ufunc in SPECIAL_UFUNCS:
        args = (x[:, None], x[None, :]) if ufunc.nin == 2 else (x,)
        with np.errstate(all="ignore"):
            want = ufunc(*args)
            got = jitc.jit(ufunc)(*args)
        zeros = want == 0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                      err_msg=ufunc.__name__)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32])
def test_nan_to_num(dtype, backend):
    with np.errstate(all="ignore"):  # 1e9 is inf in float16
        x = SPECIAL.astype(dtype) if np.dtype(dtype).kind == "f" else random((5,), dtype)
        check_jit(np.nan_to_num, x, backend=backend)
        check_jit(lambda x: np.nan_to_num(x, nan=-1.0, posinf=9.0, neginf=-9.0), x,
                  backend=backend)


# -- operators ----------------------------------------------------------------------------------

ARITHMETIC = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
              operator.mod, operator.pow]
BITWISE = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]
COMPARISON = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


def _operand_pair(op, dtype):
    x = random((3, 4), dtype, seed=1, low=1 if op is operator.pow else -3)
    y = random((4,), dtype, seed=2, low=1, high=3)
    return x, y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
@pytest.mark.parametrize("op", ARITHMETIC + BITWISE + COMPARISON,
                         ids=lambda op: op.__name__)
def test_operator(op, dtype, backend):
    if op in BITWISE and np.dtype(dtype).kind == "f":
        pytest.skip("numpy has no bitwise operators on floats")
    x, y = _operand_pair(op, dtype)
    with np.errstate(all="ignore"):
        check_jit(op, x, y, backend=backend)
        check_jit(op, y, x, backend=backend)
        # A numpy array, a numpy scalar and a Python scalar on either side of a traced value.
        check_jit(lambda x: op(x, y), x, backend=backend)
        check_jit(lambda x: op(y, x), x, backend=backend)
        check_jit(lambda x: op(x, dtype(2)), x, backend=backend)
        check_jit(lambda x: op(dtype(2), x), x, backend=backend)
        check_jit(lambda x: op(x, 2), x, backend=backend)
        check_jit(lambda x: op(2, x), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [operator.neg, operator.pos, abs, operator.invert],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int64, np.bool_])
def test_unary_operator(fn, dtype, backend):
    x = random((2, 3), dtype)
    try:
        fn(x)
    except TypeError:
        pytest.skip(f"numpy has no {fn.__name__} for {np.dtype(dtype)}")
    check_jit(fn, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reflected_with_numpy_arrays_on_the_left(backend):
    x = random((2, 3), np.float32)
    check_jit(lambda x: 2.0 * x, x, backend=backend)
    check_jit(lambda x: 1 - x, x, backend=backend)
    check_jit(lambda x: 1.0 / x, x, backend=backend)
    check_jit(lambda x: np.ones(3) + x, x, backend=backend)
    check_jit(lambda x: np.ones((2, 1), np.float32) * x, x, backend=backend)
    check_jit(lambda x: np.arange(3) @ x.T, x, backend=backend)
    check_jit(lambda x: np.float32(2) ** x, x, backend=backend)
    check_jit(lambda x: 0.5 < x, x, backend=backend)
    check_jit(lambda x: np.zeros(3, np.float32) == x, x, backend=backend)


# -- NEP 50 promotion --------------------------------------------------------------------------

PROMOTIONS = [
    # (function, input dtype, result dtype numpy gives)
    ("x * 2.0", lambda x: x * 2.0, np.float32, np.float32),
    ("2.0 * x", lambda x: 2.0 * x, np.float16, np.float16),
    ("x + 1", lambda x: x + 1, np.float32, np.float32),
    ("x + 100 (int8)", lambda x: x + 100, np.int8, np.int8),
    ("x + 200 (uint8)", lambda x: x + 200, np.uint8, np.uint8),
    ("x / 2 (int32)", lambda x: x / 2, np.int32, np.float64),
    ("x * 2.5 (int32)", lambda x: x * 2.5, np.int32, np.float64),
    ("x // 2 (int8)", lambda x: x // 2, np.int8, np.int8),
    ("x + True", lambda x: x + True, np.int8, np.int8),
    ("x + 1 (bool)", lambda x: x + 1, np.bool_, np.int64),
    ("x * 1.5 (bool)", lambda x: x * 1.5, np.bool_, np.float64),
    ("x * np.int32(2) (int8)", lambda x: x * np.int32(2), np.int8, np.int32),
    ("x + np.float64(1) (f32)", lambda x: x + np.float64(1), np.float32, np.float64),
    ("x + np.ones(3) (f32)", lambda x: x + np.ones(3), np.float32, np.float64),
    ("x + np.ones(3, f32) (f16)", lambda x: x + np.ones(3, np.float32), np.float16, np.float32),
    ("x ** 2 (int8)", lambda x: x ** 2, np.int8, np.int8),
    ("x ** 0.5 (f32)", lambda x: abs(x) ** 0.5, np.float32, np.float32),
    ("x > 0.5 (int32)", lambda x: x > 0.5, np.int32, np.bool_),
    ("np.sqrt(x) (int8)", lambda x: np.sqrt(abs(x)), np.int8, np.float16),
    ("np.exp(x) (int32)", lambda x: np.exp(x), np.int32, np.float64),
    ("np.maximum(x, 0) (f32)", lambda x: np.maximum(x, 0), np.float32, np.float32),
    ("np.where(x > 0, x, 0.0) (f32)", lambda x: np.where(x > 0, x, 0.0), np.float32,
     np.float32),
    ("np.where(x > 0, 1, 0) (f32)", lambda x: np.where(x > 0, 1, 0), np.float32, np.int64),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,dtype,expected", [pytest.param(*p[1:], id=p[0])
                                               for p in PROMOTIONS])
def test_nep50_promotion(fn, dtype, expected, backend):
    x = random((3,), dtype)
    assert fn(x).dtype == expected
    assert check_jit(fn, x, backend=backend).dtype == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_int_out_of_range_raises_like_numpy(backend):
    import jitc
    x = random((3,), np.int8)
    with pytest.raises(OverflowError, match="300"):
        _ = x + 300
    with pytest.raises(OverflowError, match="300"):
        jitc.jit(lambda x: x + 300, backend=backend)(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_int_argument_out_of_range_raises_like_numpy(backend):
    import jitc
    x, u = np.arange(4, dtype=np.int8), np.arange(4, dtype=np.uint8)
    u16, u64 = np.arange(4, dtype=np.uint16), np.arange(4, dtype=np.uint64)
    scale = jitc.jit(lambda x, s: x * s, backend=backend)
    np.testing.assert_array_equal(scale(x, 100), x * 100)  # fits int8 (the product wraps)
    for array, value in [(x, 300), (x, -129), (u, -1), (u, 256), (u16, 65536), (u64, -1)]:
        with pytest.raises(OverflowError, match=f"{value} out of bounds for {array.dtype}"):
            _ = array * value
        with pytest.raises(OverflowError, match=rf"argument s: Python integer {value} out of "
                                                rf"bounds for {array.dtype}\n.*test_numpy_ufuncs"):
            scale(array, value)
    with pytest.raises(OverflowError, match=f"argument s: Python integer {2**70} out of bounds "
                                            "for int64"):
        scale(np.arange(4.0), 2**70)


@pytest.mark.parametrize("backend", BACKENDS)
def test_comparisons_with_python_ints_beyond_the_dtype_are_exact(backend):
    x = np.arange(-3, 3, dtype=np.int8)
    for value in (300, -1000, 2, 127):
        check_jit(lambda x, s: (x < s, x == s, s >= x), x, value, backend=backend)
    check_jit(lambda x: (x < 300, x != -1000, 200 > x), x, backend=backend)
    # Literals past int64 too, and negative ones against unsigned arrays.
    for dtype in (np.int8, np.uint16, np.int64, np.uint64):
        info = np.iinfo(dtype)
        x = np.array([info.min, 0, info.max], dtype)
        for value in (-1, 2**63, -(2**63) - 1, 2**64, -(2**70)):
            check_jit(_compared_with(value), x, backend=backend)


def _compared_with(value: int):
    return lambda x: (x < value, x == value, value >= x, x != value)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("signed", [np.int8, np.int16, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_uint64_compares_exactly_with_signed_integers(signed, backend):
    """numpy 2 compares uint64 with int64 by value, where arithmetic would go to float64."""
    info = np.iinfo(signed)
    s = np.array([info.min, -1, 0, 1, info.max, -1], signed)
    u = np.array([0, 2**64 - 1, 0, 2**63, 2**63 - 1, 1], np.uint64)
    check_jit(lambda s, u: (s < u, u <= s, s == u, u != s, s > u, u >= s), s, u,
              backend=backend)
    check_jit(lambda s, u: (s[:, None] < u, u[:, None] == s), s, u, backend=backend)
    for value in (-1, 5, 2**62):  # a Python int argument, its value known only at run time
        check_jit(lambda u, n: (u < n, n <= u, u == n), u, value, backend=backend)


INTEGER_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                  np.uint64]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [*INTEGER_DTYPES, np.float16, np.float32, np.float64,
                                   np.bool_], ids=lambda d: np.dtype(d).name)
def test_round_is_half_to_even(dtype, backend):
    """np.round at every dtype: floats and integers (negative decimals) round halves to even;
    bool rounds to float16, as numpy's loop does."""
    kind = np.dtype(dtype).kind
    if kind == "b":
        check_jit(np.round, np.array([True, False]), backend=backend)
        return
    halves = [0.5, 1.5, 2.5, -0.5, -2.5, 0.25, 0.35, 12.5] if kind == "f" else \
        [5, 15, 25, 35, 45, 120, 125, -5, -15, -25, -125]
    x = np.array([h for h in halves if h >= 0 or kind != "u"], dtype)
    check_jit(lambda x: (np.round(x), np.round(x, 1), np.round(x, -1)), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ufunc_dtype_keyword(backend):
    x = random((3,), np.int32)
    check_jit(lambda x: np.add(x, 1, dtype=np.float32), x, backend=backend)
    check_jit(lambda x: np.multiply(x, x, dtype=np.int64), x, backend=backend)
