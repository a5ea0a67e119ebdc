"""Blocked Cholesky and LU for matrices wider than BLOCK: most of the work becomes matmul.

LAPACK's order (potrf, getrf): per panel of BLOCK columns, the unblocked factorization of the
panel, then the rows beside it by a triangular solve and the trailing matrix minus one matmul.
Every panel runs the same loop body (`fori_loop` over panels, each picking its panel with
dynamic_slice): shapes stay whole-matrix and fixed, so the compiled code is the same size for
any n (a Python loop over panels of shrinking size compiled some 3 loops per panel, 40 s of
LLVM at n = 1000). The price is arithmetic on blocks known to be zero: the trailing matmuls
cover the whole matrix, about 3 times (LU) and 6 times (Cholesky) LAPACK's flops.

The matrix is padded to a multiple of BLOCK with an identity block, whose factors are the
identity: partial pivoting never picks a padding row for a real column (its entries there are
zero, and on ties the first row wins, as in LAPACK's idamax).
"""

from __future__ import annotations

import numpy as np

from jitc.numpy._core import lift
from jitc.numpy.shapes import broadcast_to
from jitc.tracing.tracer import Tracer

BLOCK = 64  # panel width: wider panels spend more in the unblocked loops, narrower in matmuls


def _lax():
    from jitc import lax  # jitc.lax imports jitc.numpy
    return lax


def _matmul(a: Tracer, b: Tracer) -> Tracer:
    from jitc.numpy.linalg import matmul  # it imports jitc.numpy's other modules
    return matmul(a, b)


def _slice(x: Tracer, starts: list, sizes: tuple[int, ...]) -> Tracer:
    """x[..., r:r + sizes[0], c:c + sizes[1]] for run-time (r, c)."""
    batch = x.ndim - 2
    return _lax().dynamic_slice(x, [np.int64(0)] * batch + starts, x.shape[:batch] + sizes)


def _update(x: Tracer, block: Tracer, starts: list) -> Tracer:
    return _lax().dynamic_update_slice(x, block, [np.int64(0)] * (x.ndim - 2) + starts)


def _padded(x: Tracer, size: int, extra_columns: Tracer | None = None) -> Tracer:
    """[[x, 0], [0, I]] of size (size, size), then extra_columns (zero-padded) beside it."""
    n = x.shape[-1]
    pad = size - n
    eye = np.zeros((size, size), x.dtype)
    eye[n:, n:] = np.eye(pad, dtype=x.dtype)
    widths = [(0, 0)] * (x.ndim - 2)
    m = np.pad(x, widths + [(0, pad), (0, pad)]) + eye if pad else x
    if extra_columns is not None:
        extra = np.pad(extra_columns, widths + [(0, pad), (0, 0)]) if pad else extra_columns
        m = np.concatenate([m, extra], axis=-1)
    return m


def cholesky(x: Tracer, unblocked, upper_inverse) -> Tracer:
    """The lower Cholesky factor of x (..., n, n); `unblocked` factors one diagonal block and
    `upper_inverse` inverts an upper triangle (the solvers' loops)."""
    n = x.shape[-1]
    size = -(-n // BLOCK) * BLOCK
    rows = np.arange(size)[:, None]
    a = _padded(x, size)  # only its lower triangle is read, as LAPACK does

    def panel_step(p: Tracer, carry: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        a, factor = carry
        s = p * BLOCK
        diagonal = unblocked(_slice(a, [s, s], (BLOCK, BLOCK)))
        panel = _slice(a, [np.int64(0), s], (size, BLOCK))
        below = np.where(rows >= s + BLOCK, panel, 0)
        below = _matmul(below, upper_inverse(np.swapaxes(diagonal, -1, -2)))
        a = a - _matmul(below, np.swapaxes(below, -1, -2))
        return a, _update(factor, _update(below, diagonal, [s, np.int64(0)]),
                          [np.int64(0), s])

    _, factor = _lax().fori_loop(0, size // BLOCK, panel_step, (a, np.zeros_like(a)))
    return factor[..., :n, :n]


def _factor_panel(panel: Tracer, s: Tracer) -> tuple[Tracer, Tracer, Tracer]:
    """Partial-pivoting LU of the panel (..., size, BLOCK) whose diagonal starts at row s:
    (the panel with U on and above the diagonal and the multipliers below it, the new order of
    the rows (..., size), the sign of the permutation)."""
    size = panel.shape[-2]
    index = np.arange(size)
    rows, columns = index[:, None], np.arange(BLOCK)
    order = lift(broadcast_to(index, panel.shape[:-1]))
    sign = lift(np.ones(panel.shape[:-2], panel.dtype))

    def step(j: Tracer, carry: tuple[Tracer, Tracer, Tracer]) -> tuple[Tracer, Tracer, Tracer]:
        m, order, sign = carry
        c = s + j
        col = _slice(m, [np.int64(0), j], (size, 1))[..., 0]
        # The first largest magnitude at or below the diagonal, as LAPACK's idamax picks it.
        p = np.argmax(np.where(index >= c, np.abs(col), -1), axis=-1)
        p_rows = np.expand_dims(np.expand_dims(p, -1), -1)
        row_c = _slice(m, [c, np.int64(0)], (1, BLOCK))
        row_p = np.take_along_axis(m, p_rows, axis=-2)
        m = np.where(rows == c, row_p, np.where(rows == p_rows, row_c, m))
        at_c = np.sum(np.where(index == c, order, 0), axis=-1, keepdims=True)
        at_p = np.sum(np.where(index == p[..., None], order, 0), axis=-1, keepdims=True)
        order = np.where(index == c, at_p, np.where(index == p[..., None], at_c, order))
        sign = np.where(p == c, sign, -sign)
        col = _slice(m, [np.int64(0), j], (size, 1))[..., 0]
        pivot = np.sum(np.where(index == c, col, 0), axis=-1, keepdims=True)
        # A zero pivot (a singular matrix) leaves its column as it is, as getrf does.
        factors = np.where((index > c) & (pivot != 0), col / pivot, 0)
        updated = m - np.expand_dims(factors, -1) * np.where(columns > j, row_p, 0)
        return (np.where((columns == j) & (rows > c), np.expand_dims(factors, -1), updated),
                order, sign)

    return _lax().fori_loop(0, BLOCK, step, (panel, order, sign))


def lu(x: Tracer, rhs: Tracer | None, upper_inverse) -> tuple[Tracer, Tracer, Tracer]:
    """(U, L^-1 P rhs, the permutation's sign) of x (..., n, n) with rhs (..., n, k) or None;
    U is (..., size, size) and the rest (..., size, k), padded to size rows."""
    n = x.shape[-1]
    size = -(-n // BLOCK) * BLOCK
    m = _padded(x, size, rhs)
    width = m.shape[-1]
    rows, all_columns = np.arange(size)[:, None], np.arange(width)
    panel_columns = np.arange(BLOCK)
    sign = lift(np.ones(x.shape[:-2], x.dtype))

    def panel_step(p: Tracer, carry: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        m, sign = carry
        s = p * BLOCK
        packed, order, panel_sign = _factor_panel(_slice(m, [np.int64(0), s], (size, BLOCK)), s)
        m = np.take_along_axis(m, np.expand_dims(order, -1), axis=-2)
        below_diagonal = rows > s + panel_columns
        m = _update(m, np.where(below_diagonal, 0, packed), [np.int64(0), s])
        multipliers = np.where(below_diagonal, packed, 0)
        unit_lower = (_slice(multipliers, [s, np.int64(0)], (BLOCK, BLOCK))
                      + np.eye(BLOCK, dtype=x.dtype))
        row_block = _slice(m, [s, np.int64(0)], (BLOCK, width))
        right = all_columns >= s + BLOCK
        inverse = np.swapaxes(upper_inverse(np.swapaxes(unit_lower, -1, -2)), -1, -2)
        row_block = np.where(right, _matmul(inverse, row_block), row_block)
        m = _update(m, row_block, [s, np.int64(0)])
        trailing = _matmul(np.where(rows >= s + BLOCK, multipliers, 0),
                           np.where(right, row_block, 0))
        return m - trailing, sign * panel_sign

    m, sign = _lax().fori_loop(0, size // BLOCK, panel_step, (m, sign))
    return m[..., :size], m[..., size:], sign


def back_substitute(upper: Tracer, rhs: Tracer, unblocked) -> Tracer:
    """x with upper @ x = rhs, upper (..., size, size) triangular, size a multiple of BLOCK;
    `unblocked` solves one diagonal block."""
    size, k = rhs.shape[-2:]
    blocks = size // BLOCK

    def block_step(t: Tracer, x: Tracer) -> Tracer:
        s = (blocks - 1 - t) * BLOCK
        row_block = _slice(upper, [s, np.int64(0)], (BLOCK, size))
        # x is zero at and above this block: the product only subtracts the solved rows.
        block_rhs = _slice(rhs, [s, np.int64(0)], (BLOCK, k)) - _matmul(row_block, x)
        solved = unblocked(_slice(row_block, [np.int64(0), s], (BLOCK, BLOCK)), block_rhs)
        return _update(x, solved, [s, np.int64(0)])

    return _lax().fori_loop(0, blocks, block_step, np.zeros_like(rhs))
