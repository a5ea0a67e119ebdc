"""np.linalg's orthogonal factorizations on static shapes: qr, eigh, eigvalsh, svd and svdvals.

qr is Householder's, with LAPACK's reflector convention (dgeqrf's dlarfg), so its Q and R match
numpy's up to rounding. eigh is the cyclic two-sided Jacobi method and svd the one-sided
(Hestenes) Jacobi method: both are accurate to a few eps times the norm of the matrix (Jacobi
is at least as accurate as LAPACK's QR-based drivers), and both have shapes that do not depend
on the values, which suits a tracing compiler.

A Jacobi sweep visits every pair of columns once, in n - 1 rounds of n / 2 disjoint pairs (the
round-robin "circle" schedule). Columns are kept in the order of the schedule, pairs side by
side, so that a round is elementwise work on two halves of the matrix followed by one fixed
permutation (a gather with constant indices): one loop body serves every round. Sweeps repeat
(a while loop) until no pair needed a rotation, or at most MAX_SWEEPS times.

Eigenvectors and singular vectors are unique only up to sign (and within repeated values, up to
rotation): jitc's can differ from LAPACK's there, as LAPACK's differ between its own drivers.
Eigenvalues come ascending and singular values descending, as numpy gives them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitc.numpy._core import implements, lift, unsupported
from jitc.numpy.shapes import broadcast_to, reshape
from jitc.numpy.solvers import LinAlgError, _column, _floating, _outer, _square_matrices, fori_loop
from jitc.tracing.errors import located
from jitc.tracing.tracer import Tracer

MAX_SWEEPS = 40  # Jacobi converges quadratically: 6 to 12 sweeps are typical in float64

QRResult = type(np.linalg.qr(np.eye(1)))
EighResult = type(np.linalg.eigh(np.eye(1)))
SVDResult = type(np.linalg.svd(np.eye(1)))


def _while_loop(cond: Any, body: Any, init: Any) -> Any:
    from jitc import lax  # jitc.lax imports jitc.numpy
    return lax.while_loop(cond, body, init)


def _matrices(a: object, what: str) -> Tracer:
    x = lift(a)
    if x.ndim < 2:
        raise LinAlgError(located(f"{x.ndim}-dimensional array given. Array must be at least "
                                  f"two-dimensional ({what})"))
    return _floating(x)


# -- Householder QR ----------------------------------------------------------------------------

def _householder(x: Tracer) -> tuple[Tracer, Tracer, Tracer]:
    """The reflectors of x (..., m, n): (x reduced to R in its upper triangle, the reflector
    vectors (..., m, k) with a unit first entry, their scalars tau (..., k)), k = min(m, n)."""
    m, n = x.shape[-2:]
    k = min(m, n)
    rows = np.arange(m)
    vectors = lift(np.zeros(x.shape[:-2] + (m, k), x.dtype))
    taus = lift(np.zeros(x.shape[:-2] + (k,), x.dtype))
    if k == 0:
        return x, vectors, taus
    column_index = np.arange(n)

    def step(j: Tracer, carry: tuple[Tracer, Tracer, Tracer]) -> tuple[Tracer, Tracer, Tracer]:
        r, vectors, taus = carry
        col = _column(r, j)
        alpha = np.sum(np.where(rows == j, col, 0), axis=-1, keepdims=True)
        below = np.where(rows > j, col, 0)
        # Scaled, as LAPACK's dnrm2: squares of 1e-200 or 1e200 would under- or overflow.
        largest = np.max(np.abs(below), axis=-1, keepdims=True)
        unit = np.where(largest > 0, largest, 1)
        below_norm = largest * np.sqrt(np.sum((below / unit) ** 2, axis=-1, keepdims=True))
        # dlarfg: beta = -sign(alpha) |(alpha, below)|; nothing to reflect leaves tau = 0.
        reflect = below_norm != 0
        beta = -np.copysign(np.hypot(alpha, below_norm), alpha)
        tau = np.where(reflect, (beta - alpha) / np.where(reflect, beta, 1), 0)
        scale = np.where(reflect, alpha - beta, 1)
        v = np.where(rows == j, 1, below / scale)
        w = np.sum(np.expand_dims(v, -1) * r, axis=-2)  # v^T r: (..., n)
        r = r - _outer(v * tau, w)
        diagonal = np.where(reflect, beta, alpha)
        here = column_index == j
        r = np.where(here & (rows[:, None] > j), 0,
                     np.where(here & (rows[:, None] == j), np.expand_dims(diagonal, -1), r))
        vectors = np.where(np.arange(k) == j, np.expand_dims(v, -1), vectors)
        taus = np.where(np.arange(k) == j, tau, taus)
        return r, vectors, taus

    return fori_loop(0, k, step, (x, vectors, taus))


def _form_q(vectors: Tracer, taus: Tracer, columns: int) -> Tracer:
    """The first `columns` columns of H_0 H_1 ... H_(k-1) (LAPACK's dorgqr)."""
    m, k = vectors.shape[-2:]
    q = lift(broadcast_to(np.eye(m, columns, dtype=vectors.dtype),
                          vectors.shape[:-2] + (m, columns)))
    if k == 0 or columns == 0:
        return q

    def step(t: Tracer, q: Tracer) -> Tracer:
        j = k - 1 - t
        v = _column(vectors, j)
        tau = np.sum(np.where(np.arange(k) == j, taus, 0), axis=-1, keepdims=True)
        w = np.sum(np.expand_dims(v, -1) * q, axis=-2)
        return q - _outer(v * tau, w)

    return fori_loop(0, k, step, q)


@implements(np.linalg.qr)
def qr(a, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        if mode in ("raw", "full", "economic"):
            raise unsupported(f"numpy.linalg.qr(mode={mode!r})",
                              "Use mode='reduced', 'complete' or 'r'.")
        raise ValueError(located(f"Unrecognized mode '{mode}'"))
    x = _matrices(a, "qr")
    m, n = x.shape[-2:]
    k = min(m, n)
    reduced, vectors, taus = _householder(x)
    r_rows = m if mode == "complete" else k
    r = np.triu(reduced[..., :r_rows, :])
    if mode == "r":
        return r
    return QRResult(_form_q(vectors, taus, m if mode == "complete" else k), r)


# -- ordering ----------------------------------------------------------------------------------

def _sorting_permutation(keys: Tracer) -> Tracer:
    """The indices that sort keys (..., n) ascending, ties in their first order (a stable
    argsort by ranks: O(n^2) comparisons, which the O(n^3) factorizations dwarf)."""
    n = keys.shape[-1]
    earlier = np.arange(n)[:, None] < np.arange(n)[None, :]  # [j, i]: j before i
    kj, ki = np.expand_dims(keys, -1), np.expand_dims(keys, -2)
    before = (kj < ki) | ((kj == ki) & earlier)
    rank = np.sum(before.astype(np.int64), axis=-2)  # rank of each i
    positions = np.arange(n)
    return np.sum(np.where(np.expand_dims(rank, -2) == positions[:, None], positions, 0),
                  axis=-1)


def _take_columns(x: Tracer, order: Tracer) -> Tracer:
    return np.take_along_axis(x, np.expand_dims(order, -2), axis=-1)


# -- the round-robin schedule ------------------------------------------------------------------

def _schedule(n: int) -> np.ndarray:
    """The gather that moves players (columns, pairs (2k, 2k+1)) to the next round's places:
    player 0 stays, the others go round the circle; n - 1 rounds pair everyone once."""
    top, bottom = list(range(0, n, 2)), list(range(1, n, 2))
    half = n // 2
    new_top = [top[0]] + ([bottom[0]] + top[1:half - 1] if half > 1 else [])
    new_bottom = bottom[1:] + [top[half - 1]] if half > 1 else bottom
    source = np.empty(n, np.int64)
    source[0::2], source[1::2] = new_top, new_bottom
    return source


def _rotation(app: Tracer, aqq: Tracer, apq: Tracer, rotate: Tracer) -> tuple[Tracer, Tracer]:
    """(c, s) of the Jacobi rotation that zeroes apq in [[app, apq], [apq, aqq]] (Golub and
    Van Loan's sym.schur2); (1, 0) where `rotate` is false."""
    safe_apq = np.where(rotate, apq, 1)
    tau = (aqq - app) / (2 * safe_apq)
    t = np.copysign(1, tau) / (np.abs(tau) + np.sqrt(1 + tau * tau))
    t = np.where(np.isfinite(tau), t, 0)  # tau ** 2 overflowed: the angle is below eps
    c = 1 / np.sqrt(1 + t * t)
    return np.where(rotate, c, 1), np.where(rotate, t * c, 0)


def _pairs(x: Tracer, axis: int) -> tuple[Tracer, Tracer]:
    """x's even and odd entries along axis (-1 or -2)."""
    if axis == -1:
        split = reshape(x, x.shape[:-1] + (x.shape[-1] // 2, 2))
        return split[..., 0], split[..., 1]
    split = reshape(x, x.shape[:-2] + (x.shape[-2] // 2, 2, x.shape[-1]))
    return split[..., 0, :], split[..., 1, :]


def _unpair(p: Tracer, q: Tracer, axis: int) -> Tracer:
    if axis == -1:
        joined = np.stack([p, q], axis=-1)
        return reshape(joined, joined.shape[:-2] + (joined.shape[-2] * 2,))
    joined = np.stack([p, q], axis=-2)
    return reshape(joined, joined.shape[:-3] + (joined.shape[-3] * 2, joined.shape[-1]))


def _rotate(x: Tracer, c: Tracer, s: Tracer, axis: int) -> Tracer:
    """x's pairs of columns (axis -1) or rows (axis -2) (p, q) -> (c p - s q, s p + c q)."""
    p, q = _pairs(x, axis)
    if axis == -2:
        c, s = np.expand_dims(c, -1), np.expand_dims(s, -1)
    else:
        c, s = np.expand_dims(c, -2), np.expand_dims(s, -2)
    return _unpair(c * p - s * q, s * p + c * q, axis)


def _sweeps(round_step: Any, state: tuple, n: int) -> tuple:
    """Sweeps of n - 1 rounds of round_step(state) -> (state, largest off-diagonal measure),
    until a whole sweep finds nothing above eps or MAX_SWEEPS."""
    worst0 = np.asarray(np.inf, state[0].dtype)

    def cond(carry: tuple) -> Tracer:
        sweep, worst, _ = carry
        return (sweep < MAX_SWEEPS) & (worst > 0)

    def sweep_body(carry: tuple) -> tuple:
        sweep, _, state = carry

        def one_round(_: Tracer, inner: tuple) -> tuple:
            state, worst = inner
            state, measure = round_step(state)
            return state, np.maximum(worst, measure)

        state, worst = fori_loop(0, n - 1, one_round, (state, lift(np.zeros((), worst0.dtype))))
        return sweep + 1, worst, state

    return _while_loop(cond, sweep_body, (np.int64(0), worst0, state))[2]


def _unit_scaled(a: Tracer) -> tuple[Tracer, Tracer]:
    """(a / max |a|, max |a| shaped (..., 1)): the Jacobi methods square entries, which
    under- or overflows for matrices of 1e-200 or 1e200 (a zero matrix stays zero)."""
    largest = np.max(np.abs(a), axis=(-2, -1), keepdims=True)
    largest = np.where(largest > 0, largest, 1)
    # A nan or inf entry makes the scale nan, hence every value and vector nan.
    largest = np.where(np.all(np.isfinite(a), axis=(-2, -1), keepdims=True), largest, np.nan)
    return a / largest, largest[..., 0]


def _nan_where_unscaled_is(vectors: Tracer, unscale: Tracer) -> Tracer:
    """nan vectors for a matrix holding nan or inf (its values are nan through the scale): no
    rotation compares above a nan, and the unit vectors left would look like an answer."""
    return np.where(np.expand_dims(np.isfinite(unscale), -1), vectors, np.nan)


def _padded_to_even(x: Tracer, axes: tuple[int, ...]) -> Tracer:
    pad = [(0, 0)] * x.ndim
    for axis in axes:
        pad[axis] = (0, 1)
    return np.pad(x, pad)


# -- symmetric eigenproblem --------------------------------------------------------------------

def _jacobi_eigen(a: Tracer, with_vectors: bool) -> tuple[Tracer, Tracer | None]:
    """(eigenvalues ascending, eigenvectors or None) of symmetric a (..., n, n), n >= 1."""
    n = a.shape[-1]
    odd = n % 2 == 1
    if odd:  # a zero row and column, decoupled: no rotation ever touches it
        a = _padded_to_even(a, (-2, -1))
    size = a.shape[-1]
    eps = np.finfo(a.dtype).eps
    source = _schedule(size)
    a, unscale = _unit_scaled(a)
    # Off-diagonal entries at or below eps |a|_F are left: each moves an eigenvalue by less
    # than the rounding of any backward-stable method. (A relative threshold never settles on
    # the eigenvalues below eps |a|, whose rotations only churn rounding noise.)
    frobenius = np.expand_dims(np.sqrt(np.sum(a * a, axis=(-2, -1))), -1)
    scale = np.where(frobenius > 0, frobenius, 1)
    # Where the padding is: it moves with the schedule's gathers.
    padding = lift(np.arange(size, dtype=a.dtype) == n)
    vectors = lift(broadcast_to(np.eye(size, dtype=a.dtype), a.shape)) if with_vectors \
        else None

    def round_step(state: tuple) -> tuple:
        a, v, padding = state
        diagonal = np.diagonal(a, axis1=-2, axis2=-1)
        app, aqq = _pairs(diagonal, -1)
        apq = np.diagonal(a, offset=1, axis1=-2, axis2=-1)[..., 0::2]
        measure = np.abs(apq) / scale
        rotate = measure > eps
        c, s = _rotation(app, aqq, apq, rotate)
        a = _rotate(_rotate(a, c, s, -2), c, s, -1)
        a = np.take(np.take(a, source, axis=-2), source, axis=-1)
        if v is not None:  # v^T, rotated by rows: contiguous, unlike v's columns
            v = np.take(_rotate(v, c, s, -2), source, axis=-2)
        return (a, v, np.take(padding, source)), np.max(np.where(rotate, measure, 0))

    a, vectors, padding = _sweeps(round_step, (a, vectors, padding), size)
    values = np.diagonal(a, axis1=-2, axis2=-1)
    # The padding's eigenvalue (0) goes last, to be dropped.
    order = _sorting_permutation(np.where(padding != 0, np.inf, values))[..., :n]
    values = np.take_along_axis(values, order, axis=-1) * unscale
    if vectors is not None:
        vectors = _take_columns(np.swapaxes(vectors, -1, -2), order)[..., :n, :]
        vectors = _nan_where_unscaled_is(vectors, unscale)
    return values, vectors


def _symmetric(a: object, uplo: str, what: str) -> Tracer:
    if uplo not in ("L", "U"):
        raise ValueError(located(f"UPLO argument must be 'L' or 'U', got {uplo!r}"))
    x = _square_matrices(a)
    x = _matrices(x, what)
    # Only the named triangle is read, as LAPACK's drivers do.
    half = np.tril(x) if uplo == "L" else np.triu(x)
    strict = np.tril(x, -1) if uplo == "L" else np.triu(x, 1)
    return half + np.swapaxes(strict, -1, -2)


def _eigh(a: object, uplo: str, what: str, with_vectors: bool) -> tuple[Tracer, Tracer]:
    x = _symmetric(a, uplo, what)
    n = x.shape[-1]
    if n == 0 or x.size == 0:
        return (lift(np.zeros(x.shape[:-1], x.dtype)), lift(np.zeros(x.shape, x.dtype)))
    return _jacobi_eigen(x, with_vectors)


@implements(np.linalg.eigh)
def eigh(a, UPLO="L"):
    return EighResult(*_eigh(a, UPLO, "eigh", True))


@implements(np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    return _eigh(a, UPLO, "eigvalsh", False)[0]


# -- singular value decomposition --------------------------------------------------------------

def _jacobi_svd(a: Tracer) -> tuple[Tracer, Tracer, Tracer, Tracer]:
    """(columns a V / scale, singular values / scale, V, scale) for a (..., m, n) with
    m >= n >= 1: the columns are orthogonal and sorted by descending norm."""
    n = a.shape[-1]
    odd = n % 2 == 1
    a, unscale = _unit_scaled(a)
    if odd:
        a = _padded_to_even(a, (-1,))
    size = a.shape[-1]
    eps = np.finfo(a.dtype).eps
    source = _schedule(size)
    vectors = lift(broadcast_to(np.eye(size, dtype=a.dtype), a.shape[:-2] + (size, size)))

    def round_step(state: tuple) -> tuple:
        a, v = state
        p, q = _pairs(a, -1)
        alpha, beta = np.sum(p * p, axis=-2), np.sum(q * q, axis=-2)
        gamma = np.sum(p * q, axis=-2)
        scale = np.sqrt(alpha) * np.sqrt(beta)
        measure = np.where(scale > 0, np.abs(gamma) / np.where(scale > 0, scale, 1), 0)
        rotate = measure > eps
        c, s = _rotation(alpha, beta, gamma, rotate)
        a, v = _rotate(a, c, s, -1), _rotate(v, c, s, -1)
        a, v = np.take(a, source, axis=-1), np.take(v, source, axis=-1)
        return (a, v), np.max(np.where(rotate, measure, 0))

    a, vectors = _sweeps(round_step, (a, vectors), size)
    values = np.sqrt(np.sum(a * a, axis=-2))
    keys = -values
    if odd:
        keys = np.where(vectors[..., -1, :] == 1, np.inf, keys)
    order = _sorting_permutation(keys)[..., :n]
    values = np.take_along_axis(values, order, axis=-1)
    return (_take_columns(a, order), values, _take_columns(vectors, order)[..., :n, :],
            unscale)


def _orthonormal_completion(columns: Tracer, values: Tracer, width: int) -> Tracer:
    """`width` orthonormal columns whose first ones are columns / values (descending values:
    the columns of zero singular values, which carry no direction, come last and are chosen
    orthogonal to the others, as are the ones past n)."""
    nonzero = values > 0
    unit = np.where(np.expand_dims(nonzero, -2),
                    columns / np.expand_dims(np.where(nonzero, values, 1), -2), 0)
    reduced, vectors, taus = _householder(unit)
    q = _form_q(vectors, taus, width)
    signs = np.where(np.diagonal(reduced, axis1=-2, axis2=-1) < 0, -1, 1).astype(q.dtype)
    k = signs.shape[-1]
    if width > k:
        signs = np.concatenate([signs, lift(np.ones(signs.shape[:-1] + (width - k,),
                                                    q.dtype))], axis=-1)
    return q * np.expand_dims(signs[..., :width], -2)


def _svd(x: Tracer, full_matrices: bool, compute_uv: bool) -> Any:
    m, n = x.shape[-2:]
    wide = m < n
    if wide:
        x = np.swapaxes(x, -1, -2)
        m, n = n, m
    batch = x.shape[:-2]
    if n == 0 or x.size == 0:
        values = lift(np.zeros(batch + (n,), x.dtype))
        left = lift(broadcast_to(np.eye(m, m if full_matrices else n, dtype=x.dtype),
                                 batch + (m, m if full_matrices else n)))
        right = lift(broadcast_to(np.eye(n, dtype=x.dtype), batch + (n, n)))
    else:
        columns, values, right, scale = _jacobi_svd(x)
        if not compute_uv:
            return values * scale
        left = _nan_where_unscaled_is(
            _orthonormal_completion(columns, values, m if full_matrices else n), scale)
        right = _nan_where_unscaled_is(right, scale)
        values = values * scale
    if not compute_uv:
        return values
    if wide:  # x was a^T = left diag(values) right^T
        return SVDResult(right, values, np.swapaxes(left, -1, -2))
    return SVDResult(left, values, np.swapaxes(right, -1, -2))


@implements(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    # hermitian only lets LAPACK take a faster path; any SVD of a symmetric matrix is one.
    return _svd(_matrices(a, "svd"), full_matrices, compute_uv)


def svdvals(x: object) -> Tracer:
    return _svd(_matrices(x, "svdvals"), False, False)


if hasattr(np.linalg, "svdvals"):
    svdvals = implements(np.linalg.svdvals)(svdvals)
