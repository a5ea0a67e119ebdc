"""Complex numbers in numpy programs: promotion, the parts of a value, numpy's formulas for
abs and division at extreme parts, conversions with ComplexWarning, and clear refusals.

The op table (tests/ops/cases.py) runs each complex op on every backend; these tests are the
programs and the rules around them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from jitcheck import BACKENDS, check_jit, random

import jitc
from jitc.tracing.errors import TraceError

COMPILED = [b for b in BACKENDS if b != "interpreter"]


def greens_function(energies, hamiltonian_diagonal, eta):
    """The retarded Green's function of a diagonal Hamiltonian, traced over energies."""
    z = energies[:, None] + 1j * eta
    g = 1.0 / (z - hamiltonian_diagonal[None, :])
    return -np.imag(g.sum(axis=1)) / np.pi, np.abs(g).max(), g.mean(axis=0)


def contour_integral(radius, samples):
    """The integral of exp(z) / z around a circle: 2*pi*i (exp(0) = 1)."""
    theta = np.arange(samples) * (2 * np.pi / samples)
    z = radius * np.exp(1j * theta)
    dz = 1j * z * (2 * np.pi / samples)
    return np.sum(np.exp(z) / z * dz)


@pytest.mark.parametrize("backend", BACKENDS)
def test_greens_function(backend):
    energies = np.linspace(-2, 2, 17)
    check_jit(greens_function, energies, random((5,), np.float64, seed=3), 0.05,
              backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_contour_integral(backend):
    got = check_jit(contour_integral, np.float64(0.5), 64, backend=backend,
                    static_argnums=(1,))
    assert abs(got - 2j * np.pi) < 1e-9


@pytest.mark.parametrize("backend", BACKENDS)
def test_complex_matmul_einsum_and_creation(backend):
    a = random((6, 5), np.complex128, seed=1)
    b = random((5, 3), np.complex128, seed=2)

    def fn(a, b):
        c = a @ b + np.einsum("ij,jk->ik", a, b.conj())
        z = np.zeros((2, 3), np.complex64) + np.ones(3, dtype=np.complex64) * (1 + 2j)
        f = np.full((2,), 3 - 1j)
        return c, z, f, np.where(c.real > 0, c, -c), np.prod(a[:3], axis=0)
    check_jit(fn, a, b, backend=backend)


# numpy's promotion (NEP 50): a Python complex is weak, a complex64 with a float64 is
# complex128, integers with 1j are complex128.
PROMOTIONS = [
    (lambda x, c: x + c, np.float32, np.complex64),
    (lambda x, c: x * c, np.float64, np.complex64),
    (lambda x, c: x + 1j, np.float32, np.complex64),
    (lambda x, c: x * 2j, np.int32, np.complex64),
    (lambda x, c: c / x, np.int8, np.complex64),
    (lambda x, c: c * np.float16(2) + x, np.float16, np.complex128),
    # The other integer widths: int16/uint16 fit complex64's floats, uint32/uint64 need
    # complex128's (numpy's promotion through float64).
    (lambda x, c: x + c, np.int16, np.complex64),
    (lambda x, c: c * x, np.uint16, np.complex64),
    (lambda x, c: x - c, np.uint32, np.complex64),
    (lambda x, c: c / x, np.uint64, np.complex64),
    (lambda x, c: x * 2j + c, np.uint64, np.complex128),
]


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("case", range(len(PROMOTIONS)))
def test_promotion_follows_numpy(case, backend):
    fn, x_dtype, c_dtype = PROMOTIONS[case]
    check_jit(fn, random((4,), x_dtype, seed=1, low=1), random((4,), c_dtype, seed=2),
              backend=backend)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_python_complex_argument_is_weak(backend):
    got = check_jit(lambda x, c: x * c, random((3,), np.complex64), 2 - 1j, backend=backend)
    assert got.dtype == np.complex64


def test_astype_to_real_warns_at_the_users_line():
    def fn(z):
        return z.astype(np.float32)  # the line the warning names
    z = random((3,), np.complex64)
    with pytest.warns(np.exceptions.ComplexWarning) as caught:
        got = jitc.jit(fn, backend="cpu")(z)
    np.testing.assert_array_equal(got, z.real)
    assert caught[0].filename == __file__
    assert caught[0].lineno == fn.__code__.co_firstlineno + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jitc.jit(lambda z: z.astype(np.complex128).real, backend="cpu")(z)  # no warning


def test_refuses_ufuncs_without_complex_formula():
    def fn(z):
        return np.maximum(z, z)
    with pytest.raises(TraceError, match=r"numpy\.maximum of complex values.*") as info:
        jitc.jit(fn)(random((3,), np.complex64))
    assert f"{__file__}:{fn.__code__.co_firstlineno + 1}" in str(info.value)
    with pytest.raises(TraceError, match=r"numpy\.arctan of complex"):
        jitc.jit(np.arctan)(random((3,), np.complex64))
    with pytest.raises(TraceError, match=r"numpy\.power of complex values"):
        jitc.jit(lambda z, p: z ** p)(random((3,), np.complex64), 2.5)


def test_complex_in_control_flow_is_refused_by_compiled_backends():
    def fn(z):
        return jitc.lax.fori_loop(0, 3, lambda i, v: v * 1j, z)
    z = random((3,), np.complex128)
    np.testing.assert_allclose(jitc.jit(fn, backend="interpreter")(z), z * 1j ** 3)
    with pytest.raises(TraceError, match=r"not compiled for complex values") as info:
        jitc.jit(fn, backend="cpu")(z)
    assert __file__ in str(info.value)


_ABS_AND_DIVIDE = {backend: jitc.jit(lambda x, y: (np.abs(x), x / y), backend=backend)
                   for backend in COMPILED}
EXTREME = settings(max_examples=60, deadline=None, derandomize=True)


def _complex_arrays(dtype: type) -> st.SearchStrategy:
    width = 64 if dtype is np.complex64 else 128
    parts = st.floats(width=width // 2, allow_nan=True, allow_infinity=True,
                      allow_subnormal=True)
    # One shape: the function compiles once, hypothesis varies the values only.
    return hnp.arrays(dtype, 8, elements=st.builds(complex, parts, parts))


@pytest.mark.parametrize("backend", COMPILED)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@EXTREME
@given(data=st.data())
def test_abs_and_division_at_extreme_parts(data, dtype, backend):
    """hypot's abs and numpy's Smith division with inf, nan, subnormal and huge parts."""
    x, y = data.draw(_complex_arrays(dtype)), data.draw(_complex_arrays(dtype))
    got_abs, got_div = _ABS_AND_DIVIDE[backend](x, y)
    with np.errstate(all="ignore"):
        want_abs, want_div = np.abs(x), x / y
    rtol = 4 * np.finfo(want_abs.dtype).eps
    np.testing.assert_allclose(got_abs, want_abs, rtol=rtol, atol=0)
    # Same formula as numpy, so the same specials; finite parts within a few roundings.
    for got, want in ((got_div.real, want_div.real), (got_div.imag, want_div.imag)):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(got.dtype).eps,
                                   atol=4 * np.finfo(got.dtype).smallest_subnormal)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_predicates_and_parts_of_real_arrays(backend):
    z = np.array([1, 1j, 2 + 0j, -0.0j, complex(np.nan, 0)], np.complex64)
    r = np.arange(3, dtype=np.int32)

    def fn(z, r):
        return (np.iscomplex(z), np.isreal(z), np.iscomplex(r), np.isreal(r), np.imag(r),
                np.real(r), np.conj(r), np.angle(r), np.angle(z, deg=True), np.round(z * 2.6))
    check_jit(fn, z, r, backend=backend)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_functions_with_a_complex_meaning_of_their_own(backend):
    """var is of |x - mean|^2 (real), vdot and cov conjugate, nan_to_num works on each part."""
    z = random((2, 5), np.complex128, seed=4)
    z[0, 0] = complex(np.nan, np.inf)
    w = z[:, 1:]

    def fn(z, w):
        return (np.var(w, axis=1), np.std(w), np.vdot(w, w[::-1]), np.cov(w),
                np.nan_to_num(z), np.cumprod(w, axis=1), np.mean(w, where=w.real > 0))
    check_jit(fn, z, w, backend=backend)


@pytest.mark.parametrize("call", [
    lambda z: np.linalg.norm(z), lambda z: np.linalg.solve(z[:, :2], z[:, 2]),
    lambda z: np.sum(z, dtype=np.float64), lambda z: np.corrcoef(z), lambda z: z < z,
    lambda z: np.sign(z)])
def test_what_would_drop_the_imaginary_part_is_refused(call):
    with pytest.raises((TraceError, jitc.ShapeError)):
        jitc.jit(call)(random((2, 3), np.complex128))


@pytest.mark.parametrize("backend", COMPILED)
def test_repeated_calls_in_place_writes_and_views(backend):
    """Later calls take the backend's fast path (on cpu the C dispatcher, handed the complex
    arrays as their float pairs): in-place writes, strided views, Python complex scalars and
    0-d results stay right on every call."""
    @jitc.jit(backend=backend)
    def scale(z, c):
        z *= c
        return z.sum(), z[::2] * 2

    z = random((6,), np.complex64)
    want = z.copy()
    strided = random((4, 6), np.complex128)[:, ::2]
    view = jitc.jit(lambda w: w.conj() * 1j, backend=backend)
    for _ in range(3):
        total, every_other = scale(z, 1j)
        want *= np.complex64(1j)
        np.testing.assert_allclose(z, want, rtol=1e-6)
        np.testing.assert_allclose(total, want.sum(), rtol=1e-5)
        assert np.asarray(total).dtype == np.complex64
        np.testing.assert_allclose(every_other, want[::2] * 2, rtol=1e-6)
        np.testing.assert_allclose(view(strided), strided.conj() * 1j, rtol=1e-12)


# The nan-ignoring extrema of complex values (their sorts and extrema are traced:
# test_numpy_complex_sorting.py) refuse by name at the user's line.
UNORDERED = {
    "nanmax": np.nanmax, "nanmin": np.nanmin, "nanargmax": np.nanargmax,
    "nanargmin": np.nanargmin, "nanmedian": np.nanmedian}


@pytest.mark.parametrize("name", sorted(UNORDERED))
def test_orders_of_complex_values_are_refused_by_name(name):
    z = random((2, 3), np.complex64)
    UNORDERED[name](z)  # numpy has an answer: jitc must not give another one
    with pytest.raises(TraceError, match=rf"numpy\.{name} of complex values \(complex64\)"
                       ) as info:
        jitc.jit(UNORDERED[name])(z)
    assert str(info.value).startswith(__file__)  # the user's line, in this file


@pytest.mark.parametrize("call", [lambda z: np.quantile(z, 0.5), lambda z: np.percentile(z, 50),
                                  lambda z: np.nanquantile(z, 0.5),
                                  lambda z: np.nanpercentile(z, [10, 90])])
def test_quantiles_of_complex_values_raise_numpys_type_error(call):
    z = random((4,), np.complex128)
    with pytest.raises(TypeError, match="a must be an array of real numbers"):
        call(z)
    with pytest.raises(TypeError, match="a must be an array of real numbers"):
        jitc.jit(call)(z)


@pytest.mark.parametrize("call", [np.linalg.inv, np.linalg.det, np.linalg.cholesky,
                                  np.linalg.qr, np.linalg.eigvalsh, np.linalg.svd,
                                  np.linalg.pinv, lambda z: np.linalg.lstsq(z, z[:, 0])])
def test_linalg_solvers_refuse_complex_matrices_by_name(call):
    z = random((3, 3), np.complex128) + 4 * np.eye(3)
    with pytest.raises(TraceError, match="solvers and decompositions of complex matrices"):
        jitc.jit(call)(z)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_correlations_and_vecdot_conjugate_as_numpy(backend):
    """numpy.correlate and numpy.linalg.vecdot conjugate their complex argument (the first
    for vecdot, the second for correlate); convolve does not."""
    a, v = random((6,), np.complex128, seed=5), random((4,), np.complex64, seed=6)
    x = random((3,), np.float64, seed=7)

    def fn(a, v, x):
        return (np.correlate(a, v, "full"), np.correlate(v, a, "same"), np.convolve(a, v),
                np.convolve(v, a, "valid"), np.correlate(x, v), np.linalg.vecdot(a[:4], v),
                np.linalg.vecdot(v, a[2:]))
    check_jit(fn, a, v, x, backend=backend)
