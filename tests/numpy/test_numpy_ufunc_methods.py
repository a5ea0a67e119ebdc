"""ufunc.outer / .reduce / .accumulate, np.cumsum / np.cumprod and reductions with where=,
against numpy: 0-size, size-1, odd and non-contiguous shapes, several dtypes, every backend."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc

DTYPES = [np.float32, np.float64, np.int32, np.int8, np.uint16, np.bool_]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.subtract, np.greater, np.maximum,
                                   np.true_divide, np.bitwise_and], ids=lambda u: u.__name__)
def test_outer(ufunc, backend):
    a = random((3,), np.int32, low=1, high=5)
    b = random((2, 4), np.int32, seed=1, low=1, high=5)
    check_jit(lambda a, b: ufunc.outer(a, b), a, b, backend=backend)
    check_jit(lambda a, b: ufunc.outer(a[::-2], b.T), a, b, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_outer_shapes_and_dtypes(backend):
    x = random((4,), np.float32)
    i = random((3,), np.int8)
    check_jit(lambda x, i: np.add.outer(x, i), x, i, backend=backend)
    check_jit(lambda x: np.multiply.outer(x, 2.0), x, backend=backend)
    check_jit(lambda x: np.subtract.outer(x[:0], x), x, backend=backend)
    check_jit(lambda x: np.add.outer(x[:1], np.arange(3)), x, backend=backend)
    check_jit(lambda x: np.add.outer(x, x, dtype=np.float64), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum_cumprod(axis, dtype, backend):
    x = random((3, 17), dtype, low=-2, high=2)  # 17: a scan step that does not fit evenly
    check_jit(lambda x: (np.cumsum(x, axis=axis), np.cumprod(x, axis=axis)), x,
              backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0,), (1,), (5,), (0, 3), (3, 1), (2, 3, 4)], ids=str)
def test_cumsum_axis_none_and_shapes(shape, backend):
    x = random(shape, np.float64)
    check_jit(lambda x: (np.cumsum(x), np.cumprod(x), x.cumsum(), x.cumprod()), x,
              backend=backend)
    if len(shape) > 1:
        check_jit(lambda x: np.cumsum(x, axis=1), x, backend=backend)
        check_jit(lambda x: np.cumsum(x.T, axis=0), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cumsum_dtypes_follow_numpy(backend):
    i = random((6,), np.int8, low=100, high=127)  # int8 would overflow: numpy uses int64
    b = random((6,), np.bool_)
    x = random((2, 3), np.float32)
    check_jit(lambda i, b: (np.cumsum(i), np.cumsum(b), np.cumprod(b), np.cumsum(i[::2])),
              i, b, backend=backend)
    check_jit(lambda i, x: (np.cumsum(i, dtype=np.float32), np.cumsum(x, dtype=np.float64),
                            np.cumprod(x, axis=0, dtype=np.int32)), i, x, backend=backend)
    check_jit(lambda x: np.cumsum(x.astype(np.float16), axis=1), x, backend=backend)
    check_jit(lambda x: np.cumsum(np.float32(2.0) * x[0, 0]), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unsigned_cumsum_accumulates_in_uint64(backend):
    x = np.array([250, 255, 7], np.uint8)
    check_jit(lambda x: (np.cumsum(x), np.cumprod(x), np.add.accumulate(x)), x,
              backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum, np.minimum, np.fmax,
                                   np.logical_and, np.logical_or, np.bitwise_xor,
                                   np.bitwise_or], ids=lambda u: u.__name__)
def test_accumulate(ufunc, backend):
    dtypes = [np.int32, np.int8, np.bool_]
    if ufunc not in (np.bitwise_xor, np.bitwise_or):
        dtypes.append(np.float32)
    xs = [random((4, 9), dtype, low=-2, high=2) for dtype in dtypes]

    def accumulations(*xs):
        return [(ufunc.accumulate(x), ufunc.accumulate(x, axis=1),
                 ufunc.accumulate(x[:, ::-3], axis=-1)) for x in xs]
    check_jit(accumulations, *xs, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_accumulate_keeps_nan_like_numpy(backend):
    x = np.array([[1.0, np.nan, 3.0, -1.0, 5.0]], np.float32)
    check_jit(lambda x: (np.maximum.accumulate(x, axis=1), np.fmin.accumulate(x, axis=1),
                         np.cumsum(x, axis=1)), x, backend=backend)


def test_accumulate_of_a_non_associative_ufunc_names_it():
    with pytest.raises(jitc.TraceError, match=r"numpy.subtract.accumulate is not supported"):
        jitc.jit(np.subtract.accumulate)(np.ones(3))
    with pytest.raises(jitc.TraceError, match=r"numpy.power.reduce is not supported"):
        jitc.jit(np.power.reduce)(np.ones(3))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("ufunc", [np.bitwise_or, np.bitwise_xor, np.bitwise_and,
                                   np.logical_xor, np.fmax, np.fmin],
                         ids=lambda u: u.__name__)
def test_reduce_of_other_associative_ufuncs(ufunc, backend):
    dtype = np.float32 if ufunc in (np.fmax, np.fmin) else np.int32
    x = random((2, 5, 3), dtype, low=-9, high=9)

    def reductions(x):
        return [(ufunc.reduce(x, axis=axis), ufunc.reduce(x, axis=axis, keepdims=True))
                for axis in (None, 0, 1, (0, 2), ())]
    check_jit(reductions, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_options(backend):
    x = random((3, 4), np.float32)
    i = random((3, 4), np.int32, low=0, high=64)
    check_jit(lambda x: (np.add.reduce(x, axis=0, where=x > 0),
                         np.add.reduce(x, axis=None, initial=5.0, where=x < 1),
                         np.multiply.reduce(x, axis=1, where=[True, False, True, True]),
                         np.maximum.reduce(x, axis=1, initial=-1.0, where=x < 2),
                         np.minimum.reduce(x, axis=(0, 1), initial=0.5),
                         np.add.reduce(x, axis=1, dtype=np.float64, keepdims=True)),
              x, backend=backend)
    check_jit(lambda i: (np.bitwise_or.reduce(i, axis=0, where=i > 20),
                         np.bitwise_xor.reduce(i, axis=1, initial=7),
                         np.fmax.reduce(i[:, :0], axis=1, initial=3),
                         np.bitwise_and.reduce(i[:0], axis=0),
                         np.logical_or.reduce(i > 60, axis=0, initial=True),
                         np.logical_and.reduce(i > 1, initial=False)), i, backend=backend)


def test_reduce_without_identity_needs_initial():
    x = np.ones((2, 0), np.float32)
    with pytest.raises(ValueError, match="no identity"):
        jitc.jit(lambda x: np.fmax.reduce(x, axis=1))(x)
    with pytest.raises(ValueError, match="initial"):
        jitc.jit(lambda x: np.fmin.reduce(x, axis=0, where=x > 0))(np.ones((2, 2)))
    with pytest.raises(ValueError, match="initial"):
        jitc.jit(lambda x: np.max(x, where=x > 0))(np.ones((2, 2)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_with_where(backend):
    x = random((3, 5), np.float32)
    mask = random((3, 5), np.bool_, seed=3)
    check_jit(lambda x, m: (np.sum(x, where=m), np.sum(x, axis=0, where=m),
                            np.prod(x, axis=1, where=m[0]), np.mean(x, axis=1, where=m),
                            np.max(x, axis=0, where=m, initial=-10.0),
                            np.min(x, where=m, initial=10.0), np.any(x > 1, where=m, axis=1),
                            np.all(x > -2, where=m), x.sum(axis=1, where=m, keepdims=True)),
              x, mask, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float32, np.float64])
def test_reduceat_with_constant_indices(dtype, backend):
    x = random((3, 7), dtype, low=-4, high=4)
    if np.dtype(dtype).kind == "f":
        x[1, 2] = np.nan
    check_jit(lambda x: (np.add.reduceat(x, [0, 2, 2, 6], axis=1),
                         np.multiply.reduceat(x[:, ::2], [3, 1], axis=-1),
                         np.maximum.reduceat(x.T, [0, 4, 1]), np.minimum.reduceat(x, [2]),
                         np.fmax.reduceat(x, np.array([0, 1]), axis=0),
                         np.add.reduceat(x[0], [5], dtype=np.float32)), x, backend=backend)
    if np.dtype(dtype).kind == "i":
        check_jit(lambda x: (np.bitwise_xor.reduceat(x, [0, 3], axis=1),
                             np.logical_or.reduceat(x, [1, 0], axis=0)), x, backend=backend)


def test_reduceat_refusals_and_numpy_errors():
    with pytest.raises(IndexError, match="out-of-bounds"):
        jitc.jit(lambda x: np.add.reduceat(x, [0, 5]))(np.ones(3))
    with pytest.raises(jitc.TraceError, match="traced indices"):
        jitc.jit(np.add.reduceat)(np.ones(3), np.array([0, 1]))
    with pytest.raises(jitc.TraceError, match="subtract"):
        jitc.jit(lambda x: np.subtract.reduceat(x, [0, 1]))(np.ones(3))
