"""Reductions and np.where against numpy: every axis form, keepdims, several dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

REDUCTIONS = [np.sum, np.mean, np.max, np.min, np.prod, np.var, np.std, np.any, np.all]
AXES = [None, 0, 1, -1, -2, (0, 2), (-1, 0), ()]
# uint16 sums in uint64 and int16 in int64, as numpy's platform integers.
DTYPES = [np.float32, np.float64, np.int32, np.int8, np.int16, np.uint16, np.bool_]


def _data(dtype):
    # prod of many values overflows integers and loses float32 precision; keep them small.
    return random((2, 3, 4), dtype, low=-2, high=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("fn", REDUCTIONS, ids=lambda f: f.__name__)
def test_reduction_axes(fn, axis, keepdims, backend):
    x = _data(np.float32)
    check_jit(lambda x: fn(x, axis=axis, keepdims=keepdims), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("fn", REDUCTIONS, ids=lambda f: f.__name__)
def test_reduction_dtypes(fn, dtype, backend):
    x = _data(dtype)
    check_jit(fn, x, backend=backend)
    check_jit(lambda x: fn(x, axis=1), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", ["sum", "mean", "max", "min", "prod", "var", "std", "any",
                                    "all", "argmax", "argmin"])
def test_reduction_methods(method, backend):
    x = _data(np.float32)
    check_jit(lambda x: getattr(x, method)(), x, backend=backend)
    check_jit(lambda x: getattr(x, method)(axis=0), x, backend=backend)
    check_jit(lambda x: getattr(x, method)(axis=-1, keepdims=True), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("fn", [np.argmax, np.argmin], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_argmax_argmin(fn, dtype, keepdims, axis, backend):
    x = random((3, 5, 4), dtype, low=-2, high=2)  # ties: the first index wins, as in numpy
    check_jit(lambda x: fn(x, axis=axis, keepdims=keepdims), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduction_options(backend):
    x = _data(np.float32)
    i = _data(np.int8)
    check_jit(lambda x: np.sum(x, dtype=np.float64), x, backend=backend)
    check_jit(lambda x: np.sum(x, axis=0, initial=10.0), x, backend=backend)
    check_jit(lambda x: np.max(x, axis=1, initial=1.0), x, backend=backend)
    check_jit(lambda x: np.mean(x, axis=(0, 1), dtype=np.float64), x, backend=backend)
    check_jit(lambda x: np.var(x, axis=-1, ddof=1), x, backend=backend)
    check_jit(lambda x: np.std(x, ddof=1, keepdims=True), x, backend=backend)
    check_jit(lambda i: np.sum(i), i, backend=backend)  # int8 accumulates in int64
    check_jit(lambda i: np.prod(i, axis=0), i, backend=backend)
    check_jit(lambda i: np.mean(i, axis=1), i, backend=backend)  # integers average in f64
    check_jit(lambda x: np.amax(x, axis=0) - np.amin(x, axis=0), x, backend=backend)
    check_jit(lambda x: np.add.reduce(x, axis=1, dtype=np.float64), x, backend=backend)
    check_jit(lambda x: np.maximum.reduce(x, axis=-1, keepdims=True), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_count_nonzero(dtype, axis, backend):
    x = _data(dtype)
    check_jit(lambda x: np.count_nonzero(x, axis=axis), x, backend=backend)
    check_jit(lambda x: np.count_nonzero(x, axis=axis, keepdims=True), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_of_float16_accumulate_like_numpy(backend):
    x = random((64,), np.float16, low=0, high=4)
    check_jit(np.mean, x, backend=backend)
    check_jit(np.var, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shapes", [[(3, 4), (3, 4), (3, 4)], [(3, 1), (4,), ()],
                                    [(2, 3, 4), (3, 1), (1, 4)]], ids=str)
@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.int32, np.float32),
                                    (np.int8, np.int32)], ids=str)
def test_where(shapes, dtypes, backend):
    cond = random(shapes[0], np.bool_)
    x, y = random(shapes[1], dtypes[0], seed=1), random(shapes[2], dtypes[1], seed=2)
    check_jit(np.where, cond, x, y, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_where_with_scalars_and_non_bool_condition(backend):
    x = random((3, 4), np.float32)
    check_jit(lambda x: np.where(x > 0, x, 0.0), x, backend=backend)
    check_jit(lambda x: np.where(x > 0, 1.0, -1.0), x, backend=backend)
    check_jit(lambda x: np.where(x > 0, x, -1e10), x, backend=backend)
    check_jit(lambda x: np.where(x, x, 2), x, backend=backend)  # nonzero counts as true
    check_jit(lambda x: np.where(x > 0, x, np.float64(1)), x, backend=backend)
