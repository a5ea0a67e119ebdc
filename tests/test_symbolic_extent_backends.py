"""The `extent` op (a symbolic extent used as a number: `x.shape[0]`, the count of a mean) on
every backend that takes run-time extents, compiled once and called for many sizes."""

from __future__ import annotations

import numpy as np
import pytest

import jitc


def centered_share(x):
    return (x - x.mean(axis=0)) / x.shape[0] + x.var(axis=0)


@pytest.mark.parametrize("backend", ["cpu", "c", "interpreter", "cuda-sim"])
def test_extent_values_come_from_the_call(backend) -> None:
    f = jitc.jit(centered_share, backend=backend, dynamic={"x": {0: "n"}}, disk_cache=False)
    for n in (1, 2, 7, 33):
        x = np.random.default_rng(n).standard_normal((n, 5)).astype(np.float32)
        np.testing.assert_allclose(f(x), centered_share(x), rtol=2e-5, atol=2e-6)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]
