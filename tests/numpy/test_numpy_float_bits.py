"""fabs, ldexp, frexp, modf, nextafter, spacing, gcd and lcm against numpy, bit for bit:
zeros of both signs, subnormals, the largest floats, infinities and nans, every float width
and every integer width."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS

import jitc

FLOATS = [np.float16, np.float32, np.float64]
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def edge_floats(dtype, count: int = 64, seed: int = 0) -> np.ndarray:
    """Every kind of float of `dtype`: specials, subnormals, extremes, and random values
    over the whole exponent range."""
    info = np.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.0, 3.0, -0.75,
               info.tiny, -info.tiny, info.smallest_subnormal, -info.smallest_subnormal,
               info.tiny / 3, info.max, -info.max, info.eps, 1 - info.epsneg]
    rng = np.random.default_rng(seed)
    exponents = rng.uniform(info.minexp - info.nmant, info.maxexp, count)
    spread = rng.choice([-1.0, 1.0], count) * rng.uniform(1, 2, count) * 2.0 ** exponents
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(special, dtype), spread.astype(dtype)])


def assert_same_bits(got, want) -> None:
    got_leaves = got if isinstance(got, tuple) else (got,)
    want_leaves = want if isinstance(want, tuple) else (want,)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        if w.dtype.kind == "f":
            nan = np.isnan(w)
            np.testing.assert_array_equal(np.isnan(g), nan)
            bits = np.dtype(f"u{w.dtype.itemsize}")
            np.testing.assert_array_equal(g[~nan].view(bits), w[~nan].view(bits))
        else:
            np.testing.assert_array_equal(g, w)


def check_bits(fn, *args, backend: str) -> None:
    with np.errstate(all="ignore"):
        want = fn(*args)
    assert_same_bits(jitc.jit(fn, backend=backend)(*args), want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_one_float_argument(dtype, backend):
    x = edge_floats(dtype)
    check_bits(lambda x: (np.fabs(x), np.frexp(x), np.modf(x), np.spacing(x), np.frexp(x[:0]),
                          np.modf(x[0]), np.spacing(x[:1])), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_nextafter(dtype, backend):
    x = edge_floats(dtype)
    y = np.concatenate([x[1:], x[:1]])
    towards = np.array([np.inf, -np.inf, 0.0, -0.0, np.nan], dtype)
    check_bits(lambda x, y, t: (np.nextafter(x, y), np.nextafter(x, x),
                                np.nextafter(x[:, None], t[None, :]),
                                np.nextafter(x[:0], y[:0])), x, y, towards, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype, exponent_dtype", [(np.float64, np.int32),
                                                   (np.float64, np.int64),
                                                   (np.float32, np.int32),
                                                   (np.float16, np.int64)])
def test_ldexp(dtype, exponent_dtype, backend):
    x = edge_floats(dtype, count=24)
    info = np.iinfo(exponent_dtype)
    n = np.array([0, 1, -1, 5, -5, 60, -60, 127, -126, -149, -150, 1023, -1022, -1074, -1075,
                  1100, -1100, 2000, -2100, 4000, -4000, info.max, info.min], exponent_dtype)
    check_bits(lambda x, n: (np.ldexp(x[:, None], n[None, :]), np.ldexp(x, 3),
                             np.ldexp(x[:0], n[:0])), x, n, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_integer_arguments_take_numpys_float_loops(dtype, backend):
    x = np.arange(-4, 5).astype(dtype)
    check_bits(lambda x: (np.fabs(x), np.spacing(x), np.frexp(x), np.modf(x),
                          np.nextafter(x, 0), np.ldexp(x, x)), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", INTS)
def test_gcd_and_lcm(dtype, backend):
    if backend != "interpreter" and dtype not in (np.int8, np.uint32, np.int64):
        pytest.skip("compiled backends run the loop for three widths; the interpreter covers "
                    "every width")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(1)
    a = rng.integers(max(info.min, -60), min(info.max, 60), 40, endpoint=True).astype(dtype)
    b = rng.integers(max(info.min, -60), min(info.max, 60), 40, endpoint=True).astype(dtype)
    edges = np.array([0, 0, 1, info.max, info.min, info.max, 12, 0], dtype)
    partners = np.array([0, 7, info.max, info.max, 6, 0, info.min, info.min], dtype)
    a, b = np.concatenate([a, edges]), np.concatenate([b, partners])
    check_bits(lambda a, b: (np.gcd(a, b), np.lcm(a[:40], b[:40]), np.gcd(a[:, None], b[:3]),
                             np.gcd(a[:0], b[:0]), np.lcm(a[0], b[0]), np.gcd(a, 4)),
               a, b, backend=backend)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_lcm_wraps_as_numpy_over_the_whole_range(dtype, backend):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    a, b = (rng.integers(info.min, info.max, 300, dtype=dtype, endpoint=True) for _ in "ab")
    check_bits(lambda a, b: (np.gcd(a, b), np.lcm(a, b)), a, b, backend=backend)


def test_gcd_mixed_widths_and_bools():
    a = np.array([True, False, True])
    b = np.array([12, -18, 0], np.int16)
    check_bits(lambda a, b: (np.lcm(a, b), np.gcd(b, np.int64(30)), np.gcd(b, 4)), a, b,
               backend="interpreter")
    with pytest.raises(TypeError, match="gcd"):  # numpy has no bool loop
        jitc.jit(lambda a: np.gcd(a, a))(a)


def test_gcd_and_lcm_of_every_int8_pair():
    values = np.arange(-128, 128).astype(np.int8)
    a, b = (v.reshape(-1) for v in np.meshgrid(values, values))
    check_bits(lambda a, b: (np.gcd(a, b), np.lcm(a, b)), a, b, backend="interpreter")
