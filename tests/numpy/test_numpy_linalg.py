"""matmul, dot, einsum, tensordot, inner and outer against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc

MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4,)),
    ((4,), (2, 4, 3)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, backend):
    a, b = random(shapes[0], seed=1), random(shapes[1], seed=2)
    check_jit(np.matmul, a, b, backend=backend)
    check_jit(lambda a, b: a @ b, a, b, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtypes", [(np.float64, np.float64), (np.int32, np.int32),
                                    (np.float32, np.float64), (np.int8, np.float32)], ids=str)
def test_matmul_dtypes(dtypes, backend):
    a, b = random((3, 4), dtypes[0], seed=1), random((4, 2), dtypes[1], seed=2)
    check_jit(np.matmul, a, b, backend=backend)
    check_jit(lambda a: a @ np.ones((4, 2), np.float32), a, backend=backend)


DOT_SHAPES = [((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
              ((2, 3, 4), (5, 4, 6)), ((), (3,)), ((3, 4), ())]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shapes", DOT_SHAPES, ids=str)
def test_dot(shapes, backend):
    a, b = random(shapes[0], seed=1), random(shapes[1], seed=2)
    check_jit(np.dot, a, b, backend=backend)
    if a.ndim:
        check_jit(lambda a, b: a.dot(b), a, b, backend=backend)


EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),              # implicit output: sorted free indices
    ("ba,cb", [(4, 3), (5, 4)]),              # implicit output reorders to "ac"
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),  # batch
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk", [(2, 6, 3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("i...,i...->...", [(3, 2, 4), (3, 2, 4)]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("spec,shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(spec, shapes, backend):
    args = [random(s, seed=i) for i, s in enumerate(shapes)]
    check_jit(lambda *xs: np.einsum(spec, *xs), *args, backend=backend)


TENSORDOTS = [
    ((3, 4), (4, 5), 1), ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (2, 3), 2), ((3, 4), (5, 6), 0),
    ((2, 3, 4), (4, 3, 5), ([1, 2], [1, 0])), ((2, 3, 4), (3, 5), (1, 0)),
    ((2, 3, 4), (4, 3), ([-1], [0])),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("a,b,axes", TENSORDOTS, ids=str)
def test_tensordot(a, b, axes, backend):
    x, y = random(a, seed=1), random(b, seed=2)
    check_jit(lambda x, y: np.tensordot(x, y, axes=axes), x, y, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("a,b", [((4,), (4,)), ((3, 4), (4,)), ((3, 4), (5, 4)),
                                 ((2, 3, 4), (5, 4)), ((), (3,))], ids=str)
def test_inner(a, b, backend):
    check_jit(np.inner, random(a, seed=1), random(b, seed=2), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("a,b", [((3,), (4,)), ((2, 3), (4,)), ((), (4,))], ids=str)
def test_outer(a, b, backend):
    check_jit(np.outer, random(a, seed=1), random(b, seed=2), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vdot_and_products_with_constants(backend):
    x = random((3, 4))
    w = random((4, 2), seed=3)
    check_jit(lambda x: np.vdot(x, x), x, backend=backend)
    check_jit(lambda x: x @ w, x, backend=backend)
    check_jit(lambda x: w.T @ x.T, x, backend=backend)
    check_jit(lambda x: np.einsum("ij,jk->ik", x, w), x, backend=backend)


NORMS = [
    ((5,), None, None), ((5,), 2, None), ((5,), 1, None), ((5,), np.inf, None),
    ((5,), -np.inf, None), ((5,), 0, None), ((5,), 3, None), ((5,), 0.5, None),
    ((3, 4), None, None), ((3, 4), "fro", None), ((3, 4), 1, None), ((3, 4), -1, None),
    ((3, 4), np.inf, None), ((3, 4), -np.inf, None), ((2, 3, 4), None, -1),
    ((2, 3, 4), 2, 1), ((2, 3, 4), 1, (0, 2)), ((2, 3, 4), np.inf, (2, 1)),
    ((2, 3, 4), "fro", (-1, -2)), ((2, 3, 4), None, (0, 1)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape,ord,axis", NORMS, ids=str)
def test_norm(shape, ord, axis, keepdims, backend):
    x = random(shape)
    x.flat[1] = 0  # for ord=0
    check_jit(lambda x: np.linalg.norm(x, ord, axis, keepdims), x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_norm_of_integers_and_normalization(backend):
    check_jit(np.linalg.norm, random((3, 4), np.int32), backend=backend)
    embeddings = random((6, 8))
    check_jit(lambda e: e / np.linalg.norm(e, axis=-1, keepdims=True), embeddings,
              backend=backend)


def linalg_spellings(x, y, v):
    """numpy.linalg's array-API names of functions numpy also has."""
    return (np.linalg.diagonal(x, offset=1), np.linalg.trace(x), np.linalg.trace(x, offset=-1),
            np.linalg.matmul(x, y), np.linalg.tensordot(x, y[0], axes=1),
            np.linalg.outer(v, v), np.linalg.vecdot(x, y), np.linalg.vecdot(x, y, axis=0),
            np.linalg.matrix_norm(x), np.linalg.matrix_norm(x, ord=np.inf, keepdims=True),
            np.linalg.vector_norm(x), np.linalg.vector_norm(x, axis=(0, 2), keepdims=True),
            np.linalg.vector_norm(x, ord=1, axis=1), np.linalg.vector_norm(v, ord=np.inf))


@pytest.mark.parametrize("backend", BACKENDS)
def test_linalg_spellings(backend):
    check_jit(linalg_spellings, random((2, 3, 3)), random((2, 3, 3), seed=1),
              random((4,), seed=2), backend=backend)
    with pytest.raises(ValueError, match="one-dimensional"):
        jitc.jit(np.linalg.outer, backend="interpreter")(np.ones((2, 2)), np.ones(2))
