"""np.einsum against numpy over a table of subscripts: diagonals and traces (repeated
indices), ellipses, implicit outputs, broadcasting of size-1 indices, many operands, scalars,
the interleaved (operand, sublist) form and numpy's errors."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

import jitc

EINSUMS = [
    ("ii", [(4, 4)]),                                  # trace, implicit output
    ("ii->i", [(4, 4)]),                               # diagonal
    ("ii->", [(3, 3)]),
    ("iij->ji", [(3, 3, 2)]),                          # a diagonal with another index
    ("iji->j", [(3, 2, 3)]),                           # repeated indices not side by side
    ("iii->i", [(3, 3, 3)]),
    ("iijj->ij", [(2, 2, 3, 3)]),
    ("ij,jj->i", [(2, 3), (3, 3)]),                    # a diagonal inside a product
    ("ii,ii->", [(3, 3), (3, 3)]),
    ("ij", [(3, 4)]), ("ji", [(3, 4)]), ("Ba,Ab", [(2, 3), (4, 2)]),  # implicit order: ASCII
    ("i,i", [(5,), (5,)]), ("i,j", [(2,), (3,)]), ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk,kl,lm->im", [(2, 30), (30, 4), (4, 50), (50, 3)]),  # greedy order matters
    ("ab,bc,ca->", [(2, 3), (3, 4), (4, 2)]),          # a cycle
    ("i,i,i->i", [(4,), (4,), (4,)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bjk->", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),        # ellipses broadcast, implicit output
    ("...ii->...i", [(2, 3, 3)]),
    ("i...i", [(3, 2, 3)]),
    ("...,...", [(), (3,)]),
    ("...i,...i->...", [(2, 1, 3), (4, 3)]),
    ("i...,i...->...", [(3, 2, 4), (3, 2, 4)]),
    ("ij...->", [(2, 3)]),                             # an ellipsis of no axes
    ("ij,ij->ij", [(1, 3), (2, 3)]),                   # size-1 indices broadcast
    ("ij,jk->ik", [(2, 1), (3, 4)]),
    ("ij,jk->ik", [(2, 3), (1, 4)]),
    ("i,->i", [(3,), ()]),                             # a scalar operand
    (",->", [(), ()]),
    ("ij->", [(0, 3)]), ("ij,jk->ik", [(2, 0), (0, 3)]), ("ii->i", [(0, 0)]),  # empty
    ("i j , j k -> i k", [(2, 3), (3, 4)]),            # spaces
]


@pytest.mark.parametrize("spec,shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_matches_numpy(spec, shapes):
    args = [random(s, np.float64, seed=i) for i, s in enumerate(shapes)]
    check_jit(lambda *xs: np.einsum(spec, *xs), *args, backend="interpreter")


@pytest.mark.parametrize("backend", BACKENDS)
def test_einsum_on_every_backend(backend):
    args = [random((3, 3, 2), seed=1), random((2, 4), seed=2), random((4, 3), seed=3)]
    check_jit(lambda a, b, c: (np.einsum("iij,jk,ki->j", a, b, c), np.einsum("iij->", a),
                               np.einsum("...j,jk", a, b)), *args, backend=backend)


def test_einsum_dtypes_and_interleaved_form():
    ints = random((3, 3), np.int32)
    check_jit(lambda x: np.einsum("ii", x), ints, backend="interpreter")
    check_jit(lambda x: np.einsum("ij,jk", x, x.astype(np.float32)), ints,
              backend="interpreter")
    check_jit(lambda x: np.einsum("ij->i", x, dtype=np.float64), random((2, 3)),
              backend="interpreter")
    a, b = random((2, 3), np.float64), random((3, 4), np.float64, seed=1)
    check_jit(lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), a, b, backend="interpreter")
    check_jit(lambda a, b: np.einsum(a, [0, 1], b, [1, 2]), a, b, backend="interpreter")
    check_jit(lambda a: np.einsum(a, [Ellipsis, 1, 1]), random((2, 3, 3)),
              backend="interpreter")
    check_jit(lambda a, b: np.einsum("ij,jk", a, b, optimize=True), a, b,
              backend="interpreter")


@pytest.mark.parametrize("spec,shapes", [
    ("ii->", [(3, 2)]), ("i,i", [(3,), (4,)]), ("ij->ii", [(2, 2)]), ("ij->k", [(2, 2)]),
    ("i->i", [(2, 2)]), ("...ij->ij", [(2, 3, 4)]), ("ij,j", [(2, 3)]), ("i->->i", [(2,)]),
    ("i$->i", [(2, 2)]),
], ids=str)
def test_einsum_errors_like_numpy(spec, shapes):
    args = [np.ones(s) for s in shapes]
    with pytest.raises(ValueError):
        np.einsum(spec, *args)
    with pytest.raises(ValueError, match=r"test_numpy_einsum\.py"):
        jitc.jit(lambda *xs: np.einsum(spec, *xs), backend="interpreter")(*args)
