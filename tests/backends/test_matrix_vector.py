"""Products with one output row or column (x @ W, A @ x, a batch of q . k) have loops of
their own on the cpu and c backends: a column's elements sum in lanes, a row's columns
split over threads in blocks of vector registers (jitc/backends/cpu/dots.py,
jitc/backends/c/kernels.py). Checked against numpy on depths and widths around the lane
counts, size 0, epilogues, integer and float64 products, and views."""

from __future__ import annotations

import numpy as np
import pytest

import jitc

RNG = np.random.default_rng(5)
BACKENDS = ("cpu", "c")


def _check(fn, *args, backend: str, rtol: float = 2e-5) -> None:
    got = jitc.jit(fn, backend=backend, disk_cache=False)(*args)
    want = fn(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def _floats(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows,depth", [(1, 1), (3, 0), (5, 63), (7, 64), (9, 65),
                                        (130, 200), (0, 5)])
def test_a_matrix_times_a_vector(backend: str, rows: int, depth: int) -> None:
    _check(lambda a, x: a @ x, _floats(rows, depth), _floats(depth), backend=backend)
    _check(lambda a, x: np.tanh(a @ x[:, None] + 1.0), _floats(rows, depth), _floats(depth),
           backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("depth,columns", [(1, 1), (0, 5), (63, 7), (64, 64), (65, 129),
                                           (200, 300)])
def test_a_vector_times_a_matrix(backend: str, depth: int, columns: int) -> None:
    _check(lambda x, w: x @ w, _floats(1, depth), _floats(depth, columns), backend=backend)
    _check(lambda x, w, b: np.maximum(x @ w + b, 0.0), _floats(depth), _floats(depth, columns),
           _floats(columns), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_products_of_one_column_and_of_one_row(backend: str) -> None:
    q, k = _floats(12, 1, 65), _floats(12, 65, 70)
    _check(lambda q, k: q @ k, q, k, backend=backend)
    _check(lambda k, q: k.transpose(0, 2, 1) @ q.transpose(0, 2, 1), k, q, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_views_integers_and_float64(backend: str) -> None:
    w = _floats(300, 70)
    _check(lambda w, x: w.T @ x, w, _floats(300), backend=backend)  # a transposed matrix
    _check(lambda x, w: x @ w[::2], _floats(150), w, backend=backend)  # strided rows
    a = RNG.integers(-50, 50, (40, 77)).astype(np.int32)
    v = RNG.integers(-50, 50, 77).astype(np.int32)
    _check(lambda a, v: a @ v, a, v, backend=backend, rtol=0)
    _check(lambda v, a: v @ a.T, v, a, backend=backend, rtol=0)
    _check(lambda a, x: a @ x, _floats(33, 129, dtype=np.float64), _floats(129, dtype=np.float64),
           backend=backend, rtol=1e-12)


def test_one_row_gives_the_bits_of_the_row_kernel_on_every_thread_count() -> None:
    # Each element of a one-row product adds its products in order from zero, as the row
    # kernel did: the bits do not depend on how threads split the columns.
    x, w = _floats(1, 257), _floats(257, 1000)
    results = [jitc.jit(lambda x, w: x @ w, num_threads=t, disk_cache=False)(x, w)
               for t in (1, 2, 3)]
    expected = np.zeros((1, 1000), np.float32)
    for k in range(257):
        expected = (expected + x[:, k:k + 1] * w[k]).astype(np.float32)
    for got in results:
        np.testing.assert_array_equal(got, expected)
