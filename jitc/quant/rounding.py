"""Error-compensating rounding of a weight: what calibration inputs tell about its rounding.

Rounding each weight to its nearest int8 level minimises each weight's error, not the product's.
For `y = x @ W` (W of shape K x C, one scale per column) the output error of column c over the
inputs x is `e^T H e` with `e` that column's rounding error and `H = E[x x^T]`. After a ReLU the
inputs have a mean mu, and `H = C + mu mu^T`: errors of the same sign add up through mu, which
nearest rounding does not see. `compensated_values` rounds the rows of W (the contracted
dimension) one at a time and moves each row's error onto the rows not yet rounded, so that the
product's error `(W - Wq)^T H (W - Wq)` is what is kept small (the optimal-brain-quantization
step, in the ordering and blocked form of GPTQ: Frantar et al. 2022).

`H` is estimated from the calibration inputs, often hardly more rows than K (4 x 256 rows for a
1024-wide layer). Its noise would then be fitted: on independent inputs (true H a multiple of the
identity, where nearest rounding is optimal) compensation with the sample `H` made the error on
other inputs a third larger. `InputStatistics.hessian` therefore keeps the mean's part as measured
and shrinks the covariance towards a multiple of the identity by the Ledoit-Wolf amount, which
the same samples estimate (about 1 for independent inputs, about 0.6 for the ReLU outputs of
bench/quant_speed.py's MLP).
"""

from __future__ import annotations

import numpy as np

# The largest int8 level of the symmetric quantizer (-127..127) and uint8's (0..255), for
# weights here and activations everywhere in jitc.quant.
INT8_MAX = 127
UINT8_MAX = 255
# Added to H's diagonal, as a fraction of its mean: keeps H invertible when some input never
# varied (a ReLU unit that calibration never woke).
DAMPING = 0.01
# Rows rounded between two updates of the remaining rows by one matrix product.
BLOCK = 64
# Triangular blocks at most this wide are inverted directly.
SMALL_INVERSE = 128


class InputStatistics:
    """Running sums over the rows of a product's activation (its contracted dimensions
    flattened to K): enough for the mean, the second moment and the Ledoit-Wolf shrinkage."""

    def __init__(self, width: int) -> None:
        self.rows = 0
        self.total = np.zeros(width)               # sum of x
        self.second = np.zeros((width, width))     # sum of x x^T
        self.norms = 0.0                           # sum of |x|^2
        self.norms_squared = 0.0                   # sum of |x|^4
        self.weighted = np.zeros(width)            # sum of |x|^2 x

    def update(self, rows: np.ndarray) -> None:
        x = np.asarray(rows, np.float64)
        norms = np.einsum("ij,ij->i", x, x)
        self.rows += x.shape[0]
        self.total += x.sum(axis=0)
        self.second += x.T @ x
        self.norms += float(norms.sum())
        self.norms_squared += float(norms @ norms)
        self.weighted += norms @ x

    def shrinkage(self) -> float:
        """The Ledoit-Wolf weight of the identity in the covariance's estimate: the expected
        squared error of the sample covariance over its squared distance from the identity's
        multiple (both from the samples)."""
        n, width = self.rows, self.total.size
        mean = self.total / n
        covariance = self.second / n - np.outer(mean, mean)
        level = np.trace(covariance) / width
        distance = np.sum(covariance ** 2) - 2 * level * np.trace(covariance) + \
            width * level ** 2
        # sum_i |x_i - mean|^4, expanded so that it needs only running sums
        m2 = float(mean @ mean)
        along = float(mean @ self.second @ mean)
        centred_fourth = (self.norms_squared + 4 * along - 4 * float(mean @ self.weighted)
                          + 2 * m2 * self.norms - 4 * m2 * float(mean @ self.total)
                          + n * m2 ** 2)
        spread = (centred_fourth / n - np.sum(covariance ** 2)) / n
        if distance <= 0:
            return 1.0
        return float(min(1.0, max(0.0, spread / distance)))

    def hessian(self) -> np.ndarray | None:
        """`mu mu^T` plus the shrunk covariance, damped; None when every input was 0 or one
        was not finite (then the weight is rounded to nearest)."""
        if self.rows == 0 or not np.all(np.isfinite(self.second)):
            return None
        n, width = self.rows, self.total.size
        mean = self.total / n
        covariance = self.second / n - np.outer(mean, mean)
        level = np.trace(covariance) / width
        weight = self.shrinkage()
        h = np.outer(mean, mean) + (1 - weight) * covariance
        h[np.diag_indices(width)] += weight * level
        peak = float(np.mean(np.diag(h)))
        if not peak > 0:
            return None
        h[np.diag_indices(width)] += DAMPING * peak
        return h


def inverse_factor(hessian: np.ndarray) -> np.ndarray:
    """The upper triangular U with H^-1 = U^T U, from one Cholesky factorisation and one
    triangular inverse (a third of the work of inverting H and factorising the inverse):
    with J the reversal of the rows, J H J = L L^T gives H = R R^T for the upper R = J L J,
    so H^-1 = R^-T R^-1 and U = R^-1 = J L^-1 J."""
    lower = np.linalg.cholesky(hessian[::-1, ::-1])
    return np.ascontiguousarray(_inverse_lower(lower)[::-1, ::-1])


def _inverse_lower(lower: np.ndarray) -> np.ndarray:
    """The inverse of a lower triangular matrix, by halves: [[A, 0], [B, C]]^-1 is
    [[A^-1, 0], [-C^-1 B A^-1, C^-1]]."""
    size = lower.shape[0]
    if size <= SMALL_INVERSE:
        return np.tril(np.linalg.inv(lower))
    half = size // 2
    first = _inverse_lower(lower[:half, :half])
    second = _inverse_lower(lower[half:, half:])
    inverse = np.zeros_like(lower)
    inverse[:half, :half] = first
    inverse[half:, half:] = second
    inverse[half:, :half] = -(second @ lower[half:, :half]) @ first
    return inverse


def nearest_values(weight: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(weight / scales), -INT8_MAX, INT8_MAX)


def compensated_values(weight: np.ndarray, scales: np.ndarray, hessian: np.ndarray
                       ) -> np.ndarray:
    """The int8 levels (as float64) of `weight` (K x C, `scales` of shape (C,)) rounded row
    by row, each row's error spread over the later rows so as to keep
    `(W - Wq)^T hessian (W - Wq)` small.

    With U the upper Cholesky factor of H^-1 (H^-1 = U^T U), rounding row k with error d_k
    and adding `-(d_k / U[k, k]) U[k, j]` to each later row j is the least-squares correction
    given the rows still free, and U's later rows are the factor of the next step's inverse
    (the Schur complement), so one factorisation serves all K steps. Within a block of rows
    the corrections are applied row by row; the rows after the block get them at once."""
    width = weight.shape[0]
    remaining = np.array(weight, np.float64)
    factor = inverse_factor(hessian)
    values = np.empty_like(remaining)
    for start in range(0, width, BLOCK):
        end = min(start + BLOCK, width)
        errors = np.empty((end - start, remaining.shape[1]))
        for k in range(start, end):
            values[k] = nearest_values(remaining[k], scales)
            errors[k - start] = (remaining[k] - values[k] * scales) / factor[k, k]
            remaining[k + 1:end] -= np.outer(factor[k, k + 1:end], errors[k - start])
        remaining[end:] -= factor[start:end, end:].T @ errors
    return values
