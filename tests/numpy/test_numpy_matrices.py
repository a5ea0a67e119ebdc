"""diagonal, trace, diag, rot90 and np.repeat with per-element counts, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (1, 1), (0, 3), (2, 3, 5)], ids=str)
def test_diagonal_and_trace(shape, backend):
    x = random(shape, np.float32)
    offsets = (-3, -1, 0, 1, 2, 7)
    check_jit(lambda x: [(np.diagonal(x, k), np.trace(x, k), x.diagonal(k)) for k in offsets]
              + [np.diagonal(x.T, 1), np.trace(x[..., ::-1])], x, backend=backend)
    if len(shape) == 3:
        check_jit(lambda x: (np.diagonal(x, 1, axis1=2, axis2=0), np.trace(x, -1, 1, 2),
                             np.diagonal(x, 0, -1, -2)), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_trace_dtypes(backend):
    i = random((3, 3), np.int8, low=100, high=127)  # numpy sums int8 in int64
    b = random((4, 4), np.bool_)
    check_jit(lambda i, b: (np.trace(i), np.trace(b), np.trace(i, dtype=np.float32)), i, b,
              backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_diag(backend):
    v = random((4,), np.int32)
    m = random((3, 5), np.float64)
    check_jit(lambda v, m: [np.diag(v, k) for k in (-2, 0, 3)] + [np.diag(m, k) for k in (-1, 2)]
              + [np.diag(v[:0]), np.diag(v[::-2], 1)], v, m, backend=backend)


def test_diagonal_errors_as_numpy():
    with pytest.raises(ValueError, match="at least two dimensions"):
        jitc.jit(np.diagonal)(np.ones(3))
    with pytest.raises(ValueError, match="cannot be the same"):
        jitc.jit(lambda x: np.diagonal(x, 0, 1, -1))(np.ones((2, 2)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_rot90(backend):
    x = random((2, 3, 4), np.float32)
    check_jit(lambda x: [np.rot90(x, k) for k in (-1, 0, 1, 2, 3, 5)]
              + [np.rot90(x, 1, axes=(2, 0)), np.rot90(x, 3, axes=(-1, 1)),
                 np.rot90(x[:, :0], 1)], x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeat_with_per_element_counts(backend):
    x = random((3, 2), np.float32)
    check_jit(lambda x: (np.repeat(x, [2, 0, 1], axis=0), np.repeat(x, (3, 1), axis=-1),
                         np.repeat(x, [2], axis=0), np.repeat(x, np.array([1, 0, 2, 1, 1, 0])),
                         x.repeat([0, 0, 0], axis=0), np.repeat(x, 0, axis=1)), x,
              backend=backend)


def test_repeat_counts_must_match_the_axis():
    with pytest.raises(ValueError, match="2 repeat counts for axis 0"):
        jitc.jit(lambda x: np.repeat(x, [1, 2], axis=0))(np.ones((3, 2)))
    with pytest.raises(jitc.TraceError, match="traced repeat counts"):
        jitc.jit(lambda x, r: np.repeat(x, r))(np.ones(3), np.array([1, 2, 0]))
