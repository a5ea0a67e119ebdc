"""float16 results bit for bit against numpy: numpy computes each float16 operation in float32
and rounds its result to float16, so a fused chain must round after every op, a sum along an
outer axis or a running sum after every step (jitc/numpy/float16_order.py), and a matmul
accumulates in float32 once per output."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from jitcheck import BACKENDS

import jitc

ALL_FLOAT16 = np.arange(2**16, dtype=np.uint16).view(np.float16)
NUMBERS = ALL_FLOAT16[~np.isnan(ALL_FLOAT16)]


def _values(shape, seed, scale=30.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float16)


def assert_same_bits(got, want):
    """Equal dtype, shape and bits (any nan matches any nan: numpy's payloads vary by loop)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    differ = (got.view(np.uint16) != want.view(np.uint16)) & ~(np.isnan(got) & np.isnan(want))
    assert not differ.any(), (f"{np.count_nonzero(differ)} of {got.size} differ, e.g. "
                              f"{got[differ][:4]} != {want[differ][:4]}")


def _check_bits(f, *args, backend):
    with np.errstate(all="ignore"):
        want = f(*args)
        got = jitc.jit(f, backend=backend)(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        assert_same_bits(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fused_chains_round_after_every_op(backend):
    a, b, c, d = (_values(20_000, seed, scale) for seed, scale in enumerate((100, 100, 3, 900)))
    _check_bits(lambda a, b, c, d: ((a + b) * c - d, (a - d) / c + b * b, np.sqrt(np.abs(a)) * c,
                                    np.maximum(a, b) * np.float16(1.5) - c),
                a, b, c, d, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sums_and_products_along_every_axis(backend):
    x = _values((6, 5, 23), 1)
    near_one = (1 + _values((20, 3, 7), 2, 0.05)).astype(np.float16)
    every_axes = [None] + [axes for r in (1, 2) for axes in itertools.combinations(range(3), r)]

    def f(x, near_one):
        return tuple([x.sum(axis=axes) for axes in every_axes]
                     + [near_one.prod(axis=axes) for axes in every_axes]
                     + [x[:, :1].sum(axis=0), x.sum(axis=0, keepdims=True),
                        np.add.reduce(x, axis=1, initial=np.float16(7.5)), np.nansum(x, axis=0),
                        np.nanmean(x, axis=0)])
    _check_bits(f, x, near_one, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_outer_reductions_loop(backend):
    """More outer steps than float16_order unrolls: a loop of float16 additions."""
    x = _values((300, 40), 3)
    _check_bits(lambda x: (x.sum(axis=0), x.reshape(30, 10, 40).sum(axis=(0, 1)),
                           np.cumsum(x, axis=0), np.cumsum(x[:, 0])), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_running_sums_and_products_round_each_step(backend):
    x = _values((9, 4, 6), 4)
    near_one = (1 + _values((9, 12), 5, 0.05)).astype(np.float16)
    _check_bits(lambda x, p: (np.cumsum(x), np.cumsum(x, axis=1), np.add.accumulate(x, axis=2),
                              np.cumprod(p, axis=0), np.multiply.accumulate(p, axis=1),
                              np.nancumsum(x, axis=0)), x, near_one, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_var_and_std_are_computed_in_float16(backend):
    """Unlike its mean (float32), numpy's var of float16 values sums, centres and squares in
    float16."""
    x = _values((8, 9, 10), 6)
    _check_bits(lambda x: (x.var(), x.var(axis=0), x.std(axis=(1, 2)), np.std(x, axis=2, ddof=1),
                           x.mean(axis=0), x.mean()), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_products_accumulate_in_float32_and_round_once(backend):
    rng = np.random.default_rng(7)
    shapes = [((3, 5), (5, 7)), ((33, 200), (200, 17)), ((4, 16, 24), (4, 24, 12))]
    pairs = [(rng.standard_normal(s).astype(np.float16), rng.standard_normal(t).astype(np.float16))
             for s, t in shapes]
    _check_bits(lambda p, q, r, s, u, v: (p @ q, r @ s, u @ v, np.dot(r[0], s[:, 0]),
                                          np.matmul(u, v[0])),
                *(m for pair in pairs for m in pair), backend=backend)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_floor_divide_gives_a_zero_quotient_the_sign_of_the_ratio(dtype):
    a = np.array([-5.227, -0.5, 0.5, 5.0, -0.0, 0.0, 1.0, -3.0, 3.0], dtype)
    b = np.array([-5.586, 3.0, -3.0, 7.0, 2.0, -2.0, 1e4, np.inf, -np.inf], dtype)
    with np.errstate(all="ignore"):
        want = np.floor_divide(a, b), np.remainder(a, b)
    for got, expected in zip(jitc.jit(lambda a, b: (a // b, a % b))(a, b), want, strict=True):
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


CORRECTLY_ROUNDED = [np.sqrt, np.square, np.reciprocal, np.negative, np.absolute, np.rint,
                     np.floor, np.ceil, np.trunc, np.sign, np.exp2, np.log2, np.arccosh, np.cbrt]


@pytest.mark.parametrize("ufunc", CORRECTLY_ROUNDED, ids=lambda u: u.__name__)
def test_every_float16_value_through_exact_unary_functions(ufunc):
    _check_bits(ufunc, NUMBERS, backend="cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_hypot_rounds_through_float32_as_numpy(backend):
    """numpy's float16 hypot rounds libm's hypotf, itself a rounded float64 hypotenuse."""
    a, b = _values(50_000, 8, 10), _values(50_000, 9, 3)
    a[:6], b[:6] = [np.inf, -np.inf, np.nan, 0, -0.0, 65504], [np.nan, 1, np.inf, -0.0, 0, 65504]
    _check_bits(np.hypot, a, b, backend=backend)


# numpy's own float16 transcendental loops are not one scheme: SVML's reduced-precision kernels
# for exp, sin and cos on AVX-512 hosts, libm's float32 functions for others, so no float32
# evaluation reproduces every bit. jitc rounds its own float32 result (1-2 ulp in float32); they
# differ where that result and numpy's fall on two sides of a float16 midpoint, by one float16
# ulp, in at most these many of the 63,488 non-nan inputs (docs/dtypes.md).
MIDPOINT_DIFFERENCES = {np.exp: 8, np.expm1: 4, np.log: 4, np.log10: 4, np.log1p: 4,
                        np.sin: 4, np.cos: 4, np.tan: 8, np.arctan: 4, np.sinh: 4,
                        np.cosh: 4, np.tanh: 4, np.arcsinh: 8, np.arcsin: 4, np.arccos: 4,
                        np.arctanh: 4}


@pytest.mark.parametrize("ufunc", sorted(MIDPOINT_DIFFERENCES, key=lambda u: u.__name__),
                         ids=lambda u: u.__name__)
def test_transcendental_functions_differ_only_at_float16_midpoints(ufunc):
    with np.errstate(all="ignore"):
        want = ufunc(NUMBERS)
        got = jitc.jit(ufunc)(NUMBERS)
    differ = (got.view(np.uint16) != want.view(np.uint16)) & ~(np.isnan(got) & np.isnan(want))
    assert np.count_nonzero(differ) <= MIDPOINT_DIFFERENCES[ufunc]
    ulps = np.abs(got[differ].view(np.int16).astype(np.int32)
                  - want[differ].view(np.int16).astype(np.int32))
    assert (ulps == 1).all()


@pytest.mark.parametrize("lhs,rhs", [((0, 3), (3, 4)), ((2, 3), (3, 0)), ((2, 0), (0, 4)),
                                     ((0, 2, 3), (0, 3, 4))])
def test_float16_products_with_an_empty_axis(lhs, rhs) -> None:
    """The reference's float16 product writes its sizes out: reshape cannot infer -1 beside
    a 0 (the fuzzer's empty float16 dot_general raised there)."""
    a, b = np.ones(lhs, np.float16), np.ones(rhs, np.float16)
    traced = jitc.jit(lambda a, b: a @ b).lower(a, b).module  # not optimized: the op itself
    (got,) = jitc.interpret(traced, [a, b])
    assert got.dtype == np.float16 and got.shape == (a @ b).shape
    np.testing.assert_array_equal(got, a @ b)
