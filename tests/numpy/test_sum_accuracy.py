"""Long float sums are pairwise, as numpy's are: the error grows with log2(n), not with n.

Summing n copies of 0.1 one element after another (per vector lane) loses about n/lanes
roundings: 1.5e-4 relative for a million float32 values where numpy's pairwise sum has 6e-8.
Each case sums about a million elements of 0.1 through one code path of the backend (one
long row, several rows, many short rows, a split full reduction, and the sums inside mean,
var and softmax) and asserts the relative error of a pairwise sum.
"""

from __future__ import annotations

import numpy as np
import pytest

import jitc

N = 1 << 20
BACKENDS = ["cpu", "c", "cuda-sim"]

# name: (shape, function, the exact result in units of the element 0.1 as stored)
CASES = {
    "full 1-D": ((N,), lambda x: x.sum(), N),
    "rows": ((4, N // 4), lambda x: x.sum(axis=-1), N // 4),
    "short rows, full": ((N // 6, 6), lambda x: x.sum(), N // 6 * 6),
    "split full 2-D": ((1024, N // 1024), lambda x: x.sum(), N),
    "mean": ((2, N // 2), lambda x: x.mean(axis=1), 1),
    "softmax": ((2, N // 2), lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True), None),
}


def bound(dtype: type) -> float:
    """Relative error of a pairwise sum of N terms: ~log2(N) plus a sequential block of
    roundings; sequential lanes on these sizes are 20 to 200 times over it."""
    return 64 * float(np.finfo(dtype).eps)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", list(CASES))
def test_long_sums_are_pairwise(case, dtype, backend):
    shape, fn, units = CASES[case]
    x = np.full(shape, 0.1, dtype)
    # softmax of equal values is 1 / row length (its exp rounds the same way everywhere).
    exact = 2.0 / N if units is None else float(dtype(0.1)) * units
    got = np.asarray(jitc.jit(fn, backend=backend)(x), np.float64)
    error = np.max(np.abs(got - exact)) / exact
    numpy_error = np.max(np.abs(np.asarray(fn(x), np.float64) - exact)) / exact
    assert error <= bound(dtype), f"relative error {error:.2e}, numpy's {numpy_error:.2e}"
