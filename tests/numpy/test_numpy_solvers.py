"""np.linalg.cholesky, solve, inv, det and slogdet against numpy.

The accuracy bound is the textbook one for a backward-stable factorization: a relative error
(in the 2-norm over the last two axes) of at most C * n * cond(a) * eps, here with C = 4, for
numpy's result and jitc's alike; the tests check the two are that close.
"""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit

import jitc
from jitc.tracing.errors import TraceError


def well_conditioned(shape: tuple[int, ...], seed: int = 0, dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = shape[-1]
    return (rng.standard_normal(shape) + n * np.eye(n) / 2).astype(dtype)


def positive_definite(shape: tuple[int, ...], seed: int = 0, dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = shape[-1]
    g = rng.standard_normal(shape)
    return (g @ np.swapaxes(g, -1, -2) + n * np.eye(n)).astype(dtype)


def hilbert(n: int) -> np.ndarray:
    return 1.0 / (np.arange(n)[:, None] + np.arange(n)[None, :] + 1.0)


def assert_within_condition(got: np.ndarray, want: np.ndarray, a: np.ndarray) -> None:
    """|got - want| / |want| <= 4 n cond(a) eps per matrix (cond in the 2-norm)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    n = a.shape[-1]
    eps = np.finfo(want.dtype).eps
    bound = 4 * n * np.linalg.cond(a.astype(np.float64)) * eps
    got2 = got.reshape(-1, *want.shape[-2:]) if want.ndim >= 2 else got.reshape(-1, 1, 1)
    want2 = want.reshape(got2.shape)
    error = np.linalg.norm(got2 - want2, axis=(-2, -1)) / np.linalg.norm(want2, axis=(-2, -1))
    assert np.all(error <= np.reshape(bound, -1)), f"relative errors {error}, bounds {bound}"


SHAPES = [(1, 1), (3, 3), (2, 4, 4), (2, 1, 3, 3)]
# The sweeps over shapes, dtypes and special matrices run the traced and optimized module on
# the interpreter (30x faster to compile than LLVM); the first test runs every backend, and
# the accuracy tests below run machine code.
SWEEP = "interpreter"


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_solver_on_every_backend(backend: str) -> None:
    a, b = well_conditioned((2, 4, 4)), np.random.default_rng(1).standard_normal((2, 4, 2))
    check_jit(np.linalg.solve, a, b, backend=backend)
    check_jit(np.linalg.inv, a, backend=backend)
    check_jit(np.linalg.det, a, backend=backend)
    check_jit(np.linalg.slogdet, a, backend=backend)
    check_jit(np.linalg.cholesky, positive_definite((2, 4, 4)), backend=backend)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_solve_inv_det_match_numpy(shape, dtype) -> None:
    a = well_conditioned(shape, dtype=dtype)
    b = np.random.default_rng(2).standard_normal(shape[:-1] + (3,)).astype(dtype)
    for fn, args in [(np.linalg.solve, (a, b)), (np.linalg.inv, (a,))]:
        got = jitc.jit(fn, backend=SWEEP)(*args)
        assert_within_condition(got, fn(*args), a)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    check_jit(np.linalg.det, a, backend=SWEEP, rtol=rtol, atol=0)
    check_jit(np.linalg.slogdet, a, backend=SWEEP, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_matches_numpy(shape, dtype) -> None:
    a = positive_definite(shape, dtype=dtype)
    got = jitc.jit(np.linalg.cholesky, backend=SWEEP)(a)
    assert_within_condition(got, np.linalg.cholesky(a), a)
    upper = jitc.jit(lambda a: np.linalg.cholesky(a, upper=True), backend=SWEEP)(a)
    assert_within_condition(upper, np.linalg.cholesky(a, upper=True), a)


def test_cholesky_reads_only_the_lower_triangle() -> None:
    a = positive_definite((4, 4))
    garbage = np.tril(a) + np.triu(np.full((4, 4), 1e3), 1)
    check_jit(np.linalg.cholesky, garbage, backend=SWEEP)


def test_solve_forms() -> None:
    a = well_conditioned((3, 3))
    check_jit(np.linalg.solve, a, np.arange(3.0), backend=SWEEP)            # b a vector
    check_jit(np.linalg.solve, well_conditioned((2, 3, 3)), np.ones((3, 2)),
              backend=SWEEP)                                                 # b broadcast
    check_jit(np.linalg.solve, a, np.ones((4, 3, 1)), backend=SWEEP)        # a broadcast
    ints = np.array([[2, 1], [1, 3]])
    check_jit(np.linalg.solve, ints, np.array([1, 2]), backend=SWEEP)       # ints: float64
    check_jit(np.linalg.inv, ints, backend=SWEEP)
    check_jit(np.linalg.det, ints, backend=SWEEP)


def test_pivoting_needed() -> None:
    # a zero leading entry: without row exchanges the first step divides by zero.
    a = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [4.0, -3.0, 8.0]])
    check_jit(np.linalg.solve, a, np.array([1.0, 2.0, 3.0]), backend=SWEEP)
    check_jit(np.linalg.inv, a, backend=SWEEP)
    check_jit(np.linalg.det, a, backend=SWEEP)
    check_jit(np.linalg.slogdet, a, backend=SWEEP)


@pytest.mark.parametrize("n", [8, 11])
def test_ill_conditioned_hilbert(n: int) -> None:
    """cond = 1.5e10 (n = 8) and 5e14 (n = 11): still within 4 n cond eps of numpy."""
    a, b = hilbert(n), np.ones((n, 1))
    for fn, args in [(np.linalg.solve, (a, b)), (np.linalg.inv, (a,))]:
        assert_within_condition(jitc.jit(fn, backend="cpu")(*args), fn(*args), a)
    det = jitc.jit(np.linalg.det, backend="cpu")(a)
    assert abs(det - np.linalg.det(a)) <= 4 * n * np.linalg.cond(a) * 2.2e-16 * abs(det)
    assert_within_condition(jitc.jit(np.linalg.cholesky, backend="cpu")(a),
                            np.linalg.cholesky(a), a)


def test_singular_matrices_det_slogdet_like_numpy() -> None:
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    zeros = np.zeros((3, 3))
    for a in (singular, zeros):
        check_jit(np.linalg.det, a, backend=SWEEP)
        check_jit(np.linalg.slogdet, a, backend=SWEEP)


def test_singular_solve_gives_nonfinite_values_where_numpy_raises() -> None:
    got = jitc.jit(np.linalg.inv, backend="cpu")(np.zeros((2, 2)))
    assert not np.all(np.isfinite(got))
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.inv(np.zeros((2, 2)))


def test_empty_matrices() -> None:
    for shape in [(0, 0), (2, 0, 0), (0, 3, 3)]:
        a = np.zeros(shape) if shape[-1] == 0 else well_conditioned(shape)
        check_jit(np.linalg.inv, a, backend=SWEEP)
        check_jit(np.linalg.det, a, backend=SWEEP)
        check_jit(np.linalg.slogdet, a, backend=SWEEP)
        check_jit(np.linalg.cholesky, a, backend=SWEEP)
        check_jit(np.linalg.solve, a, np.zeros(shape[:-1] + (2,)), backend=SWEEP)


def test_a_few_hundred_wide() -> None:
    n = 200
    a, b = well_conditioned((n, n), seed=3), np.random.default_rng(4).standard_normal((n, 2))
    assert_within_condition(jitc.jit(np.linalg.solve, backend="cpu")(a, b),
                            np.linalg.solve(a, b), a)
    spd = positive_definite((n, n))
    assert_within_condition(jitc.jit(np.linalg.cholesky, backend="cpu")(spd),
                            np.linalg.cholesky(spd), spd)


@pytest.mark.parametrize("fn", [np.linalg.inv, np.linalg.det, np.linalg.slogdet,
                                np.linalg.cholesky])
def test_errors_like_numpy(fn) -> None:
    for bad, error in [(np.ones(3), np.linalg.LinAlgError),
                       (np.ones((2, 3)), np.linalg.LinAlgError),
                       (np.eye(2, dtype=np.float16), TypeError)]:
        with pytest.raises(error):
            fn(bad)
        with pytest.raises(error, match=r"test_numpy_solvers\.py"):
            jitc.jit(fn, backend="interpreter")(bad)


def test_solve_shape_errors() -> None:
    with pytest.raises(ValueError, match="b must have 3 rows"):
        jitc.jit(np.linalg.solve, backend="interpreter")(np.eye(3), np.ones(2))
    with pytest.raises(TraceError, match=r"numpy\.linalg\.tensorinv is not supported"):
        jitc.jit(np.linalg.tensorinv, backend="interpreter")(np.eye(3))


@pytest.mark.parametrize("shape", [(9, 9), (2, 8, 8), (2, 1, 11, 11)], ids=str)
def test_blocked_factorizations(shape, monkeypatch) -> None:
    """Matrices wider than a panel (BLOCK, 4 here instead of 64) take the blocked Cholesky and
    LU: padded to whole panels, pivoting across panels, a singular matrix, garbage above the
    diagonal of Cholesky's input."""
    from jitc.numpy import blocked
    monkeypatch.setattr(blocked, "BLOCK", 4)
    a = well_conditioned(shape, seed=5)
    a[..., 0, :] *= 1e-3  # the first column's pivot is in a later panel's rows
    b = np.random.default_rng(6).standard_normal(shape[:-1] + (3,))
    for fn, args in [(np.linalg.solve, (a, b)), (np.linalg.inv, (a,))]:
        assert_within_condition(jitc.jit(fn, backend=SWEEP)(*args), fn(*args), a)
    check_jit(np.linalg.det, a, backend=SWEEP, rtol=1e-12, atol=0)
    check_jit(np.linalg.slogdet, a, backend=SWEEP, rtol=1e-12, atol=1e-12)
    spd = positive_definite(shape)
    garbage = np.tril(spd) + np.triu(np.full(shape, 1e3), 1)
    assert_within_condition(jitc.jit(np.linalg.cholesky, backend=SWEEP)(garbage),
                            np.linalg.cholesky(spd), spd)
    singular = np.ones(shape[-2:])
    check_jit(np.linalg.det, singular, backend=SWEEP)
    check_jit(np.linalg.slogdet, singular, backend=SWEEP)
    f32 = jitc.jit(np.linalg.solve, backend=SWEEP)(a.astype(np.float32), b.astype(np.float32))
    assert f32.dtype == np.float32


# cpu runs the blocked code at full size in test_a_few_hundred_wide.
@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "cpu"])
def test_blocked_factorizations_on_every_backend(backend: str, monkeypatch) -> None:
    from jitc.numpy import blocked
    monkeypatch.setattr(blocked, "BLOCK", 4)
    a, b = well_conditioned((6, 6)), np.random.default_rng(1).standard_normal((6, 2))
    check_jit(lambda a, b, spd: (np.linalg.solve(a, b), np.linalg.det(a),
                                 np.linalg.cholesky(spd)),
              a, b, positive_definite((6, 6)), backend=backend, rtol=1e-10, atol=1e-12)
