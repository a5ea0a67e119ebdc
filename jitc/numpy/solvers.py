"""np.linalg's factorizations on static shapes: cholesky, solve, inv, det and slogdet.

Each is a loop over the columns (`jitc.lax.fori_loop`, one while op) whose step works on whole
matrices: the column and row a step needs are picked out with a mask and a sum, and the update
is an outer product. A step costs O(n * width) elementwise work, the loop n steps, so the
O(n^3) of the textbook algorithm with no data-dependent shapes; batches (..., n, n) run every
matrix in the same step, each with its own pivots. Past blocked.BLOCK columns the same loops
factor panels, and matmul does the rest (blocked.py).

numpy raises LinAlgError for a singular matrix (solve, inv) or one that is not positive
definite (cholesky) once it sees the values; a compiled function cannot, and gives inf or nan
there instead (det and slogdet are defined for singular matrices and match numpy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jitc.numpy import blocked
from jitc.numpy._core import convert, implements, lift, result_type, unsupported
from jitc.numpy.shapes import broadcast_to, reshape
from jitc.tracing.errors import located
from jitc.tracing.tracer import Tracer

LinAlgError = np.linalg.LinAlgError
SlogdetResult = type(np.linalg.slogdet(np.eye(1)))


def _floating(x: Tracer, *others: Tracer) -> Tracer:
    """x in the dtype numpy's linalg computes in: float32 or float64 (integers and bools are
    computed in float64; numpy refuses float16)."""
    dtype = result_type(x, *others)
    if dtype.kind == "c":
        raise unsupported(f"numpy.linalg's solvers and decompositions of complex matrices "
                          f"({dtype})", "They are computed for real matrices only; "
                          "docs/dtypes.md lists what is traced for complex values.")
    if dtype == np.float16:
        raise TypeError(located("array type float16 is unsupported in linalg"))
    return convert(x, dtype if dtype.kind == "f" else np.float64)


def fori_loop(lower: int, upper: int, body: Callable, init: Any) -> Any:
    from jitc import lax  # jitc.lax imports jitc.numpy: it is read when a solver runs
    return lax.fori_loop(lower, upper, body, init)


def _square_matrices(a: object) -> Tracer:
    x = lift(a)
    if x.ndim < 2:
        raise LinAlgError(located(f"{x.ndim}-dimensional array given. Array must be at least "
                                  "two-dimensional"))
    if x.shape[-1] != x.shape[-2]:
        raise LinAlgError(located("Last 2 dimensions of the array must be square"))
    return x


def _column(m: Tracer, j: Tracer) -> Tracer:
    """m[..., :, j] for a traced j: (..., rows)."""
    cols = np.arange(m.shape[-1])
    return np.sum(np.where(cols == j, m, 0), axis=-1)


def _row(m: Tracer, i: Tracer) -> Tracer:
    """m[..., i, :] for a traced i, which may hold one index per matrix (shape (...,))."""
    rows = np.arange(m.shape[-2])[:, None]
    i = np.expand_dims(np.expand_dims(i, -1), -1) if isinstance(i, Tracer) and i.ndim else i
    return np.sum(np.where(rows == i, m, 0), axis=-2)


def _outer(column: Tracer, row: Tracer) -> Tracer:
    return np.expand_dims(column, -1) * np.expand_dims(row, -2)


# -- cholesky --------------------------------------------------------------------------------

def _cholesky_unblocked(x: Tracer) -> Tracer:
    n = x.shape[-1]
    index = np.arange(n)

    def step(j: Tracer, carry: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        # Right-looking: column j of the factor from what earlier steps left of a, then a
        # minus its outer product. Only the lower triangle of `a` is read, as LAPACK does.
        rest, factor = carry
        col = _column(rest, j)
        pivot = np.sqrt(np.sum(np.where(index == j, col, 0), axis=-1, keepdims=True))
        low = np.where(index > j, col / pivot, np.where(index == j, pivot, 0))
        rest = rest - _outer(low, low)
        return rest, np.where(index == j, np.expand_dims(low, -1), factor)

    _, factor = fori_loop(0, n, step, (x, np.zeros_like(x)))
    return factor


def _upper_inverse(upper: Tracer) -> Tracer:
    n = upper.shape[-1]
    return _back_substitute(upper, lift(broadcast_to(np.eye(n, dtype=upper.dtype),
                                                     upper.shape)))


@implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    x = _square_matrices(a)
    x = _floating(x)
    n = x.shape[-1]
    factor = (_cholesky_unblocked(x) if n <= blocked.BLOCK or x.size == 0
              else blocked.cholesky(x, _cholesky_unblocked, _upper_inverse))
    return np.swapaxes(factor, -1, -2) if upper else factor


# -- LU with partial pivoting ----------------------------------------------------------------

def _eliminate(m: Tracer, n: int) -> tuple[Tracer, Tracer]:
    """Gaussian elimination with partial pivoting (LAPACK's getrf order) of the first n columns
    of m (..., n, width), applied to all its columns: (the upper triangle U in the first n
    columns and L^-1 P b in the others, the sign of the row permutation)."""
    index = np.arange(n)
    rows = index[:, None]
    sign = lift(np.ones(m.shape[:-2], m.dtype))

    def step(j: Tracer, carry: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        m, sign = carry
        col = _column(m, j)
        # The first largest magnitude at or below the diagonal, as LAPACK's idamax picks it.
        pivot_row = np.argmax(np.where(index >= j, np.abs(col), -1), axis=-1)
        row_j, row_p = _row(m, j), _row(m, pivot_row)
        p = np.expand_dims(np.expand_dims(pivot_row, -1), -1)
        m = np.where(rows == j, np.expand_dims(row_p, -2), np.where(rows == p,
                                                                    np.expand_dims(row_j, -2), m))
        sign = np.where(pivot_row == j, sign, -sign)
        col = _column(m, j)
        pivot = np.sum(np.where(index == j, col, 0), axis=-1, keepdims=True)
        # A zero pivot (a singular matrix) leaves its column as it is, as getrf does.
        factors = np.where((index > j) & (pivot != 0), col / pivot, 0)
        return m - _outer(factors, row_p), sign

    if n == 0:  # no column to pick a pivot in (argmax of nothing is an error)
        return m, sign
    return fori_loop(0, n, step, (m, sign))


def _back_substitute(upper: Tracer, rhs: Tracer) -> Tracer:
    """x with upper @ x = rhs for upper triangular (..., n, n) and rhs (..., n, k)."""
    n = upper.shape[-1]
    rows = np.arange(n)[:, None]

    def step(t: Tracer, rhs: Tracer) -> Tracer:
        j = n - 1 - t
        u_col = _column(upper, j)
        x_j = _row(rhs, j) / np.sum(np.where(rows[:, 0] == j, u_col, 0), axis=-1,
                                    keepdims=True)
        above = np.where(rows[:, 0] < j, u_col, 0)
        return np.where(rows == j, np.expand_dims(x_j, -2), rhs - _outer(above, x_j))

    return fori_loop(0, n, step, rhs)


def _solve_matrices(x: Tracer, y: Tracer) -> Tracer:
    n = x.shape[-1]
    if x.size == 0 or y.size == 0:  # no elements to compute (and none for the loop to index)
        return np.zeros_like(y)
    if n > blocked.BLOCK:
        upper, transformed, _ = blocked.lu(x, y, _upper_inverse)
        return blocked.back_substitute(upper, transformed, _back_substitute)[..., :n, :]
    eliminated, _ = _eliminate(np.concatenate([x, y], axis=-1), n)
    return _back_substitute(eliminated[..., :n], eliminated[..., n:])


@implements(np.linalg.solve)
def solve(a, b):
    x, y = _square_matrices(a), lift(b)
    x, y = _floating(x, y), _floating(y, x)
    vector = y.ndim == 1
    if vector:
        y = reshape(y, (y.shape[0], 1))
    n = x.shape[-1]
    if y.shape[-2] != n:
        raise ValueError(located(f"solve: {x.aval.short()} and {y.aval.short()}: b must have "
                                 f"{n} rows, one per row of a"))
    try:
        batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    except ValueError:
        raise ValueError(located(f"solve: the batch dimensions {x.shape[:-2]} and "
                                 f"{y.shape[:-2]} do not broadcast")) from None
    x = broadcast_to(x, batch + x.shape[-2:])
    y = broadcast_to(y, batch + y.shape[-2:])
    result = _solve_matrices(x, y)
    return reshape(result, result.shape[:-1]) if vector else result


@implements(np.linalg.inv)
def inv(a):
    x = _floating(_square_matrices(a))
    n = x.shape[-1]
    return _solve_matrices(x, broadcast_to(np.eye(n, dtype=x.dtype), x.shape))


def _factored_diagonal(a: object) -> tuple[Tracer, Tracer]:
    x = _floating(_square_matrices(a))
    n = x.shape[-1]
    if n > blocked.BLOCK and x.size:
        upper, _, sign = blocked.lu(x, None, _upper_inverse)
        return np.diagonal(upper, axis1=-2, axis2=-1)[..., :n], sign
    eliminated, sign = _eliminate(x, n)
    return np.diagonal(eliminated, axis1=-2, axis2=-1), sign


def _singular_as_zero(diagonal, value):
    """numpy's det and slogdet sign of a singular matrix (a zero pivot) are +0.0, never the
    -0.0 that a negative permutation sign times a zero pivot gives."""
    return np.where(np.any(diagonal == 0, axis=-1), np.zeros_like(value), value)


@implements(np.linalg.det)
def det(a):
    diagonal, sign = _factored_diagonal(a)
    return _singular_as_zero(diagonal, sign * np.prod(diagonal, axis=-1))


@implements(np.linalg.slogdet)
def slogdet(a):
    diagonal, sign = _factored_diagonal(a)
    sign = _singular_as_zero(diagonal, sign * np.prod(np.sign(diagonal), axis=-1))
    return SlogdetResult(sign, np.sum(np.log(np.abs(diagonal)), axis=-1))
