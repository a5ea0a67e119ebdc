"""np.linalg.qr, eigh, eigvalsh, svd and the functions built on them against numpy.

Accuracy, as docs/numpy_coverage.md's linalg notes state it: with eps the dtype's machine
epsilon, n the larger matrix dimension and |a| the 2-norm,
- eigenvalues and singular values within 8 n eps |a| of numpy's (absolute: both are backward
  stable, so each is that close to the exact ones, whatever the condition number);
- vectors are checked by invariants, since their signs (and, for repeated values, their
  directions) are not unique: |a v - v diag(w)| and |a - u diag(s) vh| within 8 n eps |a|,
  v, u and vh orthonormal within 8 n eps;
- qr follows LAPACK's reflector convention, so Q and R equal numpy's within 8 n cond(a) eps
  relative to their norms (a Householder QR's forward error), and Q R = a within 8 n eps |a|.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jitcheck import BACKENDS, assert_trees_close, check_jit

import jitc

SWEEP = "interpreter"  # the sweeps over shapes; machine code in the backend and accuracy tests


def rand(shape: tuple[int, ...], seed: int = 0, dtype=np.float64) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def symmetric(shape: tuple[int, ...], seed: int = 0, dtype=np.float64) -> np.ndarray:
    a = rand(shape, seed)
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(dtype)


def hilbert(n: int) -> np.ndarray:
    return 1.0 / (np.arange(n)[:, None] + np.arange(n)[None, :] + 1.0)


def _bound(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """8 n eps |a|_2 per matrix, shape (..., 1)."""
    n = max(a.shape[-2:], default=1)
    norm2 = np.linalg.norm(a.astype(np.float64), 2, axis=(-2, -1)) if a.size else \
        np.zeros(a.shape[:-2])
    return 8 * max(n, 1) * np.finfo(dtype).eps * np.expand_dims(norm2, -1) + 1e-300


def _orthonormal(q: np.ndarray, dtype: np.dtype) -> None:
    k = q.shape[-1]
    gram = np.swapaxes(q, -1, -2) @ q
    assert np.abs(gram - np.eye(k)).max(initial=0) <= 8 * max(q.shape[-2:]) * np.finfo(dtype).eps


def verify_eigh(a: np.ndarray, got, uplo: str = "L") -> None:
    want = np.linalg.eigh(a, UPLO=uplo)
    w, v = got
    assert (w.shape, w.dtype, v.shape, v.dtype) == \
        (want[0].shape, want[0].dtype, want[1].shape, want[1].dtype)
    symmetric_a = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2) \
        if uplo == "L" else np.triu(a) + np.swapaxes(np.triu(a, 1), -1, -2)
    bound = _bound(symmetric_a, w.dtype)
    assert np.all(np.abs(w - want[0]) <= bound), (w, want[0])
    assert np.all(np.diff(w, axis=-1) >= 0)
    residual = symmetric_a @ v - v * np.expand_dims(w, -2)
    assert np.all(np.max(np.abs(residual), axis=-2, initial=0) <= bound)
    _orthonormal(v, w.dtype)


def check_eigh(a: np.ndarray, backend: str = SWEEP, uplo: str = "L") -> None:
    verify_eigh(a, jitc.jit(lambda a: np.linalg.eigh(a, UPLO=uplo), backend=backend)(a), uplo)


def verify_svd(a: np.ndarray, got, full_matrices: bool = True) -> None:
    want = np.linalg.svd(a, full_matrices=full_matrices)
    u, s, vh = got
    for g, w in zip((u, s, vh), want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
    bound = _bound(a, s.dtype)
    assert np.all(np.abs(s - want[1]) <= bound), (s, want[1])
    assert np.all(np.diff(s, axis=-1) <= 0)
    k = s.shape[-1]
    rebuilt = (u[..., :k] * np.expand_dims(s, -2)) @ vh[..., :k, :]
    assert np.all(np.max(np.abs(rebuilt - a), axis=-1, initial=0) <= bound)
    _orthonormal(u, s.dtype)
    _orthonormal(np.swapaxes(vh, -1, -2), s.dtype)


def check_svd(a: np.ndarray, backend: str = SWEEP, full_matrices: bool = True) -> None:
    both = jitc.jit(lambda a: (np.linalg.svd(a, full_matrices=full_matrices),
                               np.linalg.svd(a, compute_uv=False)), backend=backend)(a)
    verify_svd(a, both[0], full_matrices)
    want = np.linalg.svd(a, compute_uv=False)
    assert both[1].shape == want.shape
    assert np.all(np.abs(both[1] - want) <= _bound(a, want.dtype))


def verify_qr(a: np.ndarray, got, mode: str = "reduced") -> None:
    want = np.linalg.qr(a, mode=mode)
    if mode == "r":
        want, got = (want,), (got,)
    dtype = want[-1].dtype
    eps = np.finfo(dtype).eps
    n = max(a.shape[-2:], default=1)
    cond = np.linalg.cond(a.astype(np.float64)) if a.size and min(a.shape[-2:]) else 1.0
    for g, w in zip(got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        scale = np.abs(w).max(initial=0)
        assert np.abs(g - w).max(initial=0) <= 8 * n * np.max(cond) * eps * max(scale, 1e-300)
    if mode != "r":
        q, r = got
        assert np.all(np.max(np.abs(q @ r - a), axis=-1, initial=0) <= _bound(a, dtype))


def check_qr(a: np.ndarray, mode: str = "reduced", backend: str = SWEEP) -> None:
    verify_qr(a, jitc.jit(lambda a: np.linalg.qr(a, mode=mode), backend=backend)(a), mode)


SQUARE = [(1, 1), (2, 2), (3, 3), (6, 6), (2, 5, 5), (2, 1, 4, 4)]
RECTANGULAR = [(5, 3), (3, 5), (2, 6, 4), (1, 7), (7, 1)]
EMPTY = [(0, 0), (3, 0), (0, 3), (2, 0, 0), (0, 3, 3)]


def everything(a, s, b, chain):
    """Every function once, in one compiled function (one compile per backend)."""
    return (np.linalg.qr(a), np.linalg.eigh(s), np.linalg.svd(a), np.linalg.lstsq(a[0], b),
            np.linalg.pinv(a), np.linalg.matrix_rank(a), np.linalg.cond(s),
            np.linalg.norm(s, 2, axis=(-2, -1)), np.linalg.matrix_power(s, 5),
            np.linalg.multi_dot(chain), np.linalg.eigvalsh(s))


def kernels(a, s, b, chain):
    return np.linalg.qr(a), np.linalg.eigh(s), np.linalg.svd(a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_decomposition_on_every_backend(backend: str) -> None:
    args = (rand((2, 5, 3)), symmetric((2, 5, 5)), rand((5, 2), seed=1),
            [rand((4,)), rand((4, 6)), rand((6, 2)), rand((2, 3))])
    # LLVM takes some 12 s over `everything`: cpu compiles the three kernels the other
    # functions are made of (-m slow runs everything on c and cuda-sim).
    fn = kernels if backend == "cpu" else everything
    got, want = jitc.jit(fn, backend=backend)(*args), fn(*args)
    verify_qr(args[0], got[0])
    verify_eigh(args[1], got[1])
    verify_svd(args[0], got[2])
    assert_trees_close(got[3:], want[3:], rtol=1e-10, atol=1e-12)


# float32 runs the same code at another eps: a few shapes suffice.
@pytest.mark.parametrize("shape,dtype",
                         [(s, np.float64) for s in SQUARE + RECTANGULAR + EMPTY]
                         + [(s, np.float32) for s in [(3, 3), (2, 6, 4), (3, 5), (0, 3)]],
                         ids=str)
def test_qr_and_svd_match_numpy(shape, dtype) -> None:
    a = rand(shape, dtype=dtype)
    for mode in ("reduced", "complete", "r"):
        check_qr(a, mode)
    check_svd(a)
    check_svd(a, full_matrices=False)


@pytest.mark.parametrize("shape,dtype",
                         [(s, np.float64) for s in SQUARE + [(0, 0), (2, 0, 0), (0, 3, 3)]]
                         + [(s, np.float32) for s in [(3, 3), (2, 5, 5)]], ids=str)
def test_eigh_matches_numpy(shape, dtype) -> None:
    a = symmetric(shape, dtype=dtype)
    check_eigh(a)
    check_jit(np.linalg.eigvalsh, a, backend=SWEEP, rtol=0,
              atol=float(np.max(_bound(a, np.dtype(dtype)), initial=0)))


def test_eigh_reads_one_triangle_and_takes_integers() -> None:
    a = symmetric((4, 4))
    check_eigh(np.tril(a) + np.triu(np.full((4, 4), 1e3), 1))
    check_eigh(np.triu(a) + np.tril(np.full((4, 4), -7.0), -1), uplo="U")
    check_eigh(np.array([[2, 1], [1, 3]]))
    check_qr(np.array([[2, 1], [1, 3], [0, 4]]))
    with pytest.raises(ValueError, match="UPLO"):
        jitc.jit(lambda a: np.linalg.eigh(a, UPLO="X"), backend=SWEEP)(a)


def test_repeated_and_zero_spectra() -> None:
    """Repeated eigenvalues and rank-deficient matrices: the vectors of a repeated or zero
    value are any orthonormal basis of their space, and must still be orthonormal."""
    for a in (np.eye(5), np.zeros((4, 4)), np.diag([3.0, 1.0, 3.0, -2.0, 1.0]),
              np.ones((5, 5))):
        check_eigh(a)
        check_svd(a)
    low_rank = rand((6, 2)) @ rand((2, 5), seed=1)  # rank 2: three zero singular values
    check_svd(low_rank)
    check_svd(low_rank.T, full_matrices=False)
    check_jit(np.linalg.matrix_rank, low_rank, backend=SWEEP)
    check_jit(np.linalg.pinv, low_rank, backend=SWEEP, rtol=1e-10, atol=1e-12)


def eigh_svd_qr(symmetric_a, a):
    return np.linalg.eigh(symmetric_a), np.linalg.svd(a), np.linalg.qr(a)


@pytest.mark.parametrize("n", [8, 12])
def test_ill_conditioned(n: int) -> None:
    """Hilbert matrices (cond = 1.5e10 for n = 8, 1.7e16 for n = 12: singular in float64) and
    graded ones (entries from 1 to 1e-22): eigenvalues and singular values still within 8 n eps
    |a| of numpy's, vectors orthonormal."""
    a = hilbert(n)
    graded = np.diag(10.0 ** -np.arange(n)) @ rand((n, n)) @ np.diag(10.0 ** -np.arange(n))
    f = jitc.jit(eigh_svd_qr, backend=SWEEP)
    for symmetric_a, general in [(a, a), (symmetric((n, n)) * 10.0 ** np.arange(n), graded)]:
        eigen, singular, qr = f(symmetric_a, general)
        verify_eigh(symmetric_a, eigen)
        verify_svd(general, singular)
        verify_qr(general, qr)


def test_a_hundred_wide_on_machine_code() -> None:
    """Random and ill-conditioned (Hilbert, cond > 1e19; graded rows) at n = 100."""
    f = jitc.jit(eigh_svd_qr, backend="cpu")
    graded = np.diag(0.7 ** np.arange(120)) @ rand((120, 90), seed=7)
    for s, a in [(symmetric((100, 100), seed=5), rand((120, 90), seed=6)),
                 (hilbert(100), graded)]:
        eigen, singular, qr = f(s, a)
        verify_eigh(s, eigen)
        verify_svd(a, singular)
        verify_qr(a, qr)


def test_lstsq_forms() -> None:
    tall, wide = rand((6, 3)), rand((3, 6))
    deficient = rand((6, 2)) @ rand((2, 4), seed=1)
    for a in (tall, wide, deficient):
        for b in (rand((a.shape[0],), seed=2), rand((a.shape[0], 2), seed=3)):
            got = jitc.jit(np.linalg.lstsq, backend=SWEEP)(a, b)
            want = np.linalg.lstsq(a, b)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-12)
            assert got[2] == want[2] and got[2].dtype == want[2].dtype
            np.testing.assert_allclose(got[3], want[3], rtol=1e-12, atol=1e-13)
            if want[1].size:
                np.testing.assert_allclose(got[1], want[1], rtol=1e-10)
            elif a is deficient:  # numpy leaves them out because the rank is below n
                assert got[1].shape == (b.shape[1] if b.ndim == 2 else 1,)
                assert np.all(np.isnan(got[1]))
            else:
                assert got[1].shape == (0,)
    f = jitc.jit(lambda a, b: np.linalg.lstsq(a, b, rcond=0.5)[0], backend=SWEEP)
    np.testing.assert_allclose(f(tall, np.ones(6)), np.linalg.lstsq(tall, np.ones(6), 0.5)[0])


def test_pinv_rank_cond_options() -> None:
    a = rand((3, 5, 4))
    check_jit(lambda a: np.linalg.pinv(a, rcond=0.3), a, backend=SWEEP)
    check_jit(lambda a: np.linalg.pinv(a, rtol=None), a, backend=SWEEP)
    check_jit(lambda a: np.linalg.pinv(a, hermitian=True), symmetric((4, 4)), backend=SWEEP)
    check_jit(lambda a: np.linalg.pinv(a), np.zeros((0, 3)), backend=SWEEP)
    check_jit(lambda a: np.linalg.matrix_rank(a, tol=1.0), a, backend=SWEEP)
    check_jit(lambda a: np.linalg.matrix_rank(a, rtol=0.5), a, backend=SWEEP)
    check_jit(np.linalg.matrix_rank, np.array([0.0, 0.0]), backend=SWEEP)
    square = rand((2, 4, 4))
    for p in (None, 1, -1, 2, -2, np.inf, -np.inf, "fro", "nuc"):
        check_jit(lambda a, p=p: np.linalg.cond(a, p), square, backend=SWEEP, rtol=1e-10)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    check_jit(lambda a: np.linalg.cond(a, 1), singular, backend=SWEEP)
    with pytest.raises(np.linalg.LinAlgError):
        jitc.jit(np.linalg.cond, backend=SWEEP)(np.zeros((0, 0)))


@pytest.mark.parametrize("shape,axis", [((3, 4), None), ((2, 3, 4), (2, 0)),
                                        ((2, 3, 4), (1, 2)), ((4, 3), (-1, -2))], ids=str)
@pytest.mark.parametrize("ord", [2, -2, "nuc"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_spectral_and_nuclear_norms(shape, axis, ord, keepdims) -> None:
    check_jit(lambda a: np.linalg.norm(a, ord, axis, keepdims), rand(shape), backend=SWEEP,
              rtol=1e-12)


def test_matrix_power() -> None:
    ints = np.array([[1, 2], [3, -1]], dtype=np.int32)
    a = rand((2, 3, 3))
    for n in (0, 1, 2, 3, 6, 13):
        check_jit(lambda x, n=n: np.linalg.matrix_power(x, n), ints, backend=SWEEP)
        check_jit(lambda x, n=n: np.linalg.matrix_power(x, n), a, backend=SWEEP)
    check_jit(lambda x: np.linalg.matrix_power(x, -3), a + 3 * np.eye(3), backend=SWEEP,
              rtol=1e-10)
    with pytest.raises(TypeError, match="integer"):
        jitc.jit(lambda x: np.linalg.matrix_power(x, 1.5), backend=SWEEP)(a)
    with pytest.raises(np.linalg.LinAlgError):
        jitc.jit(lambda x: np.linalg.matrix_power(x, 2), backend=SWEEP)(rand((2, 3)))


@pytest.mark.parametrize("shapes", [
    [(3, 4), (4, 5), (5, 2)], [(30, 2), (2, 40), (40, 3)], [(4,), (4, 5), (5,)],
    [(4,), (4, 6), (6, 2), (2, 3)], [(3, 4), (4, 6), (6, 2), (2,)],
    [(10, 30), (30, 5), (5, 60), (60, 2), (2, 7)], [(3, 4), (4,)]], ids=str)
def test_multi_dot(shapes) -> None:
    check_jit(lambda *xs: np.linalg.multi_dot(xs), *[rand(s, seed=i) for i, s in
                                                     enumerate(shapes)], backend=SWEEP)


def test_nan_and_inf_give_nan_not_unit_vectors() -> None:
    """numpy returns nan (eigh) or raises (svd); no rotation compares above a nan, so without
    care the untouched unit vectors would come back as if they were the answer."""
    for bad in (np.array([[1.0, np.nan], [np.nan, 2.0]]), np.array([[1.0, np.inf], [np.inf, 0]])):
        w, v = jitc.jit(np.linalg.eigh, backend=SWEEP)(bad)
        u, s, vh = jitc.jit(np.linalg.svd, backend=SWEEP)(bad)
        assert all(np.all(np.isnan(x)) for x in (w, v, u, s, vh))
    batch = np.stack([np.eye(2), np.array([[1.0, np.nan], [np.nan, 2.0]])])
    w, v = jitc.jit(np.linalg.eigh, backend=SWEEP)(batch)
    np.testing.assert_array_equal(w[0], [1.0, 1.0])
    assert np.all(np.isnan(v[1])) and not np.any(np.isnan(v[0]))


def test_refusals_and_errors() -> None:
    with pytest.raises(jitc.TraceError, match=r"mode='raw'.*\n.*'reduced'"):
        jitc.jit(lambda a: np.linalg.qr(a, mode="raw"), backend=SWEEP)(np.eye(2))
    with pytest.raises(jitc.TraceError, match=r"numpy\.linalg\.eig is not supported(.|\n)*"
                       "complex"):
        jitc.jit(np.linalg.eig, backend=SWEEP)(np.eye(2))
    for fn in (np.linalg.eigh, np.linalg.eigvalsh):
        with pytest.raises(np.linalg.LinAlgError, match=r"test_numpy_decompositions\.py"):
            jitc.jit(fn, backend=SWEEP)(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError):
        jitc.jit(np.linalg.svd, backend=SWEEP)(np.ones(3))
    with pytest.raises(TypeError):
        jitc.jit(np.linalg.svd, backend=SWEEP)(np.eye(2, dtype=np.float16))


@st.composite
def _spectra(draw) -> tuple[np.ndarray, np.ndarray]:
    """A 6x4 matrix and a 5x5 symmetric one with chosen spectra: condition numbers up to
    1e15, repeated values, exact zeros."""
    seed = draw(st.integers(0, 2**32 - 1))
    exponent = draw(st.floats(0, 15))
    rng = np.random.default_rng(seed)
    values = np.logspace(0, -exponent, 5) * draw(st.sampled_from([1e-200, 1.0, 1e200]))
    if draw(st.booleans()):
        values[draw(st.integers(0, 4))] = values[0]  # a repeated value
    if draw(st.booleans()):
        values[-draw(st.integers(1, 3)):] = 0  # rank deficient
    q5, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    q6, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    q4, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    signs = rng.choice([-1.0, 1.0], 5)
    general = q6[:, :4] * values[:4] @ q4.T
    return general, (q5 * (signs * values)) @ q5.T


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_spectra())
def test_chosen_spectra(case) -> None:
    general, symmetric_a = case
    eigen, singular, qr = jitc.jit(eigh_svd_qr, backend=SWEEP)(symmetric_a, general)
    verify_eigh(symmetric_a, eigen)
    verify_svd(general, singular)
    q, r = qr
    _orthonormal(q, q.dtype)
    assert np.all(np.abs(q @ r - general) <= _bound(general, q.dtype))
