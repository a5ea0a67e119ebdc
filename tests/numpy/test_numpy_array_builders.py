"""atleast_3d, dstack, resize, delete, ediff1d, diagflat, vander, tril/triu_indices_from,
fill_diagonal, isposinf/isneginf, iscomplex/isreal(obj), select, sinc, nancumsum and
nancumprod against numpy: 0-size and 1-size shapes, every integer width, numpy's errors."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc
from jitc.tracing.errors import TraceError

INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
DTYPES = [np.float64, np.float32, np.bool_] + INTS


def _special(x: np.ndarray) -> np.ndarray:
    """x with zeros, infinities of both signs and a nan where it can hold them."""
    x = x.copy()
    if x.dtype.kind == "f" and x.size >= 4:
        flat = x.reshape(-1)
        flat[:4] = [0.0, np.inf, -np.inf, np.nan]
    return x


def _shapes_and_stacks(x):
    return (np.atleast_3d(x), np.atleast_3d(x[0]), np.atleast_3d(x[0, 0]),
            np.atleast_3d(x, x[:1]), np.atleast_3d(np.zeros((2, 1, 3, 1))),
            np.dstack([x, x]), np.dstack((x[0], x[1])), np.dstack([x[0, 0], x[1, 1]]),
            np.resize(x, (3, 5)), np.resize(x, 7), np.resize(x, 0), np.resize(x[:0], (2, 2)),
            np.resize(x[:1, :1], (1,)),
            np.delete(x, 1), np.delete(x, [0, 2], axis=1), np.delete(x, -1, axis=0),
            np.delete(x, slice(None, None, 2), axis=0), np.delete(x, []),
            np.delete(x, np.array([True, False, True, False]), axis=1),
            np.diagflat(x), np.diagflat(x[0], k=-1), np.diagflat(x[0, :0], 2),
            np.diagflat(x[:1, :1], 1),
            np.tril_indices_from(x), np.triu_indices_from(x, k=1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_shapes_and_stacks(dtype, backend):
    if backend != "interpreter" and dtype not in (np.float32, np.int8, np.uint64):
        pytest.skip("the other backends run these reshapes and gathers for three dtypes; the "
                    "interpreter covers every dtype")
    check_jit(_shapes_and_stacks, random((3, 4), dtype), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.uint8, np.int64,
                                   np.uint64])
def test_ediff1d_and_vander(dtype, backend):
    def f(x):
        return (np.ediff1d(x), np.ediff1d(x, to_begin=x[0, :2], to_end=x[1, 1]), np.ediff1d(x[:0]),
                np.ediff1d(x[:1], to_end=x[0, 0]), np.ediff1d(x[:, :1], to_begin=x[0]),
                np.vander(x[0]), np.vander(x[1], 2, increasing=True), np.vander(x[0], 0),
                np.vander(x[0, :0]), np.vander(x[0, :1], 3))
    check_jit(f, random((3, 4), dtype, low=-4, high=4), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("columns", [6, 40])  # 40: past the unrolled powers, a loop
def test_vander_rounds_as_numpy(columns, backend):
    x = random((30,), np.float64)
    got = jitc.jit(lambda x: np.vander(x, columns), backend=backend)(x)
    np.testing.assert_array_equal(got, np.vander(x, columns))


def test_ediff1d_refuses_what_numpy_refuses():
    x = np.arange(5, dtype=np.uint16)
    with pytest.raises(TypeError, match="same_kind"):
        np.ediff1d(x, to_begin=[-1.5])
    with pytest.raises(TypeError, match="same_kind"):
        jitc.jit(lambda x: np.ediff1d(x, to_begin=np.float64(1.5)))(x)


def test_delete_and_vander_errors():
    x = np.arange(6.0)
    with pytest.raises(IndexError):
        jitc.jit(lambda x: np.delete(x, 6))(x)
    with pytest.raises(TraceError, match="static_argnums"):
        jitc.jit(lambda x, i: np.delete(x, i))(x, np.array([1]))
    with pytest.raises(ValueError, match="one-dimensional"):
        jitc.jit(lambda x: np.vander(x.reshape(2, 3)))(x)
    with pytest.raises(ValueError, match="2-d"):
        jitc.jit(lambda x: np.tril_indices_from(x))(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape, wrap", [((3, 3), False), ((5, 3), False), ((5, 3), True),
                                         ((2, 4), False), ((3, 3, 3), False), ((0, 0), False),
                                         ((1, 1), False)])
def test_fill_diagonal_writes_in_place(shape, wrap, backend):
    def f(a, v):
        np.fill_diagonal(a, v, wrap=wrap)
        np.fill_diagonal(a[:0, :0] if a.ndim == 2 else a, 2.7)  # a cast to a's dtype
        return a
    a = random(shape, np.int16)
    check_jit(f, a, np.array([5, -6], np.int16), backend=backend)
    # The argument itself changes, as numpy's does.
    mine, theirs = a.copy(), a.copy()
    jitc.jit(lambda a: np.fill_diagonal(a, 9))(mine)
    np.fill_diagonal(theirs, 9)
    np.testing.assert_array_equal(mine, theirs)


def test_fill_diagonal_errors():
    with pytest.raises(ValueError, match="at least 2-d"):
        jitc.jit(lambda a: np.fill_diagonal(a, 1))(np.zeros(3))
    with pytest.raises(ValueError, match="equal length"):
        jitc.jit(lambda a: np.fill_diagonal(a, 1))(np.zeros((2, 2, 3)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int8, np.uint32,
                                   np.bool_])
def test_value_and_type_predicates(dtype, backend):
    def f(x):
        return (np.isposinf(x), np.isneginf(x), np.iscomplex(x), np.isreal(x),
                np.iscomplexobj(x), np.isrealobj(x), np.isposinf(x[0, 0]),
                np.iscomplex(x[:0]))
    check_jit(f, _special(random((3, 4), dtype)), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.uint8])
def test_select(dtype, backend):
    def f(x, y):
        return (np.select([x > 1, x < 0], [x, y]),
                np.select([x > 1], [3], default=1.5),
                np.select([x > 2, y > 0], [x, y[0]], default=y[1]),
                np.select([x[:0] > 0], [x[:0]]),
                np.select([np.array(True)], [x[0, :1]], default=np.int8(4)),
                np.select([x > 0, x > 1], [1, 2]))
    check_jit(f, random((3, 4), dtype), random((3, 4), dtype, seed=1), backend=backend)


def test_select_errors():
    x = np.arange(4.0)
    with pytest.raises(ValueError, match="same length"):
        jitc.jit(lambda x: np.select([x > 1], [x, x]))(x)
    with pytest.raises(ValueError, match="empty condition list"):
        jitc.jit(lambda x: np.select([], []))(x)
    with pytest.raises(TypeError, match="invalid entry 0"):
        jitc.jit(lambda x: np.select([x], [x]))(x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.uint8])
def test_sinc(dtype, backend):
    x = random((5, 3), dtype)
    x.reshape(-1)[0] = 0
    check_jit(lambda x: (np.sinc(x), np.sinc(x[0, 0]), np.sinc(x[:0])), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.uint16])
def test_nancumsum_and_nancumprod(dtype, backend):
    x = random((3, 4), dtype, low=-2, high=2)
    if x.dtype.kind == "f":
        x[0, 1] = x[2, 3] = np.nan
        x[1] = np.nan
    check_jit(lambda x: (np.nancumsum(x), np.nancumsum(x, axis=1), np.nancumprod(x, axis=0),
                         np.nancumprod(x[:0], axis=0), np.nancumsum(x[0, 0]),
                         np.nancumsum(x, axis=0, dtype=np.float64)), x, backend=backend)


@pytest.mark.parametrize("fn, why, instead", [
    (np.argwhere, "depends on the values", "np.where(mask, x, fill)"),
    (np.flatnonzero, "depends on the values", "np.where(mask, x, fill)"),
    (np.nonzero, "depends on the values", "np.count_nonzero"),
    (lambda x: np.extract(x > 0, x), "depends on the values", "np.where(mask, x, fill)"),
    (np.trim_zeros, "depends on the values", "np.where(mask, x, fill)"),
    (lambda x: np.intersect1d(x, x), "depends on the values", "np.where(mask, x, fill)"),
    (lambda x: np.union1d(x, x), "depends on the values", "np.where(mask, x, fill)"),
    (np.unique, "number of distinct values", "np.sort(x)"),
    (np.roots, "complex in general", "on the jitted function's result"),
    (lambda x: np.linalg.eig(x.reshape(2, 2)), "dtype depends on the values", "np.linalg.eigh"),
    (lambda x: np.linalg.eigvals(x.reshape(2, 2)), "dtype depends on the values",
     "np.linalg.eigvalsh"),
])
def test_refusals_say_why_and_what_instead(fn, why, instead):
    with pytest.raises(TraceError) as info:
        jitc.jit(fn)(np.array([0.0, 1.0, 2.0, 0.0]))
    assert why in str(info.value) and instead in str(info.value)
