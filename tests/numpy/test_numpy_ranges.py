"""linspace / logspace / geomspace with traced ends, and meshgrid, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("num,endpoint", [(0, True), (1, True), (1, False), (2, True), (7, True),
                                          (7, False)], ids=str)
def test_linspace_with_traced_ends(num, endpoint, backend):
    ends = np.array([-1.5, 2.25], np.float64)
    check_jit(lambda e: (np.linspace(e[0], e[1], num, endpoint=endpoint),
                         np.linspace(e[0], 3, num, endpoint=endpoint, retstep=True)[0],
                         np.linspace(0, e, num, endpoint=endpoint, axis=-1)), ends,
              backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_linspace_options(backend):
    a = random((2, 3), np.float32)
    i = np.array([3, -4], np.int32)
    f16 = np.array([0.5, 8.0], np.float16)
    check_jit(lambda a, i, h: (np.linspace(a[0], a[1], 5), np.linspace(a[:, 0], a[:, 1:], 4,
                                                                      axis=1),
                               np.linspace(i[0], i[1], 6), np.linspace(i[0], i[1], 6,
                                                                       dtype=np.int32),
                               np.linspace(a[0, 0], a[0, 0], 3),
                               np.linspace(h[0], h[1], 5),
                               np.linspace(a[0, 0], 10, 4, retstep=True)),
              a, i, f16, backend=backend)


def test_linspace_step_of_one_sample_is_nan():
    step = jitc.jit(lambda e: np.linspace(e, 2.0, 1, retstep=True)[1])(np.float64(1.0))
    assert np.isnan(step)


def test_linspace_inside_a_trace_stays_writable():
    def fill(x):
        grid = np.linspace(0.0, 1.0, 4)
        grid[1] = x
        return grid, np.linspace(0.0, 1.0, 3, retstep=True)
    check_jit(fill, np.float64(9.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_logspace_and_geomspace(backend):
    e = np.array([1.0, 3.0, -2.0], np.float64)
    check_jit(lambda e: (np.logspace(e[0], e[1], 5), np.logspace(e[0], e[1], 4, base=2.0,
                                                                 endpoint=False),
                         np.logspace(e[:2], e[1:], 3, axis=1),
                         np.logspace(0, e[1], 3, base=np.array([2.0, 3.0])),
                         np.logspace(e[0], 2, 3, dtype=np.float32),
                         np.geomspace(e[0], e[1], 5), np.geomspace(e[2], -8.0, 4),
                         np.geomspace(e[0], 1000, 4, endpoint=False),
                         np.geomspace(e[:2], 100.0, 3, axis=-1),
                         np.geomspace(e[1], e[0], 1), np.geomspace(e[1], e[0], 0)), e,
              backend=backend)
    f = np.array([1.0, 8.0], np.float32)
    check_jit(lambda f: (np.geomspace(f[0], f[1], 4), np.geomspace(f[0], f[1], 4,
                                                                     dtype=np.float32)),
              f, backend=backend)


def test_geomspace_of_a_constant_zero_raises_as_numpy():
    with pytest.raises(ValueError, match="cannot include zero"):
        jitc.jit(lambda e: np.geomspace(0.0, e, 3))(np.float64(2.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse, backend):
    x, y, z = random((3,), np.float32), random((4,), np.int32, seed=1), random((2,), np.float64)
    check_jit(lambda x, y, z: (np.meshgrid(x, y, indexing=indexing, sparse=sparse),
                               np.meshgrid(x, y, z, indexing=indexing, sparse=sparse),
                               np.meshgrid(x[::-1], indexing=indexing, sparse=sparse),
                               np.meshgrid(x[:0], y, indexing=indexing, sparse=sparse),
                               np.meshgrid(np.arange(2), x, indexing=indexing)),
              x, y, z, backend=backend)
