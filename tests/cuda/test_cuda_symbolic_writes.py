"""Writes at positions along a symbolic axis (`x[1:] += 1`, `x[::2] = 0`, `x[-1] = row`,
tests/test_symbolic_positions.py runs them on the grid simulator) as PTX: one symbolic
compilation whose kernels ptxas assembles for the targets the backend supports."""

from __future__ import annotations

import numpy as np
import pytest
from cudacheck import check_ptx, require_ptxas

import jitc
from jitc.tracing.function import AbstractArray


def shift_up(x):
    x[1:] += 1.0
    return x * 1.0


def even_rows_and_last(x, row):
    x[::2] = 0.0
    x[-1] = row
    x[-2::-3, 1:] *= 2.0
    return x.sum(axis=1)


@pytest.mark.parametrize("fun,specs", [
    (shift_up, ("f32[n,3]",)),
    (even_rows_and_last, ("f32[n,3]", "f32[3]")),
], ids=["shift up", "even rows and the last"])
def test_symbolic_writes_assemble(fun, specs) -> None:
    require_ptxas()
    compiled = jitc.jit(fun, backend="cuda").lower(*(AbstractArray(s) for s in specs)).compile()
    check_ptx(compiled)
    # and the same compilation runs on the simulator for several sizes
    simulated = jitc.jit(fun, backend="cuda-sim").lower(
        *(AbstractArray(s) for s in specs)).compile()
    for n in (1, 4, 9):
        args = [np.arange(n * 3, dtype=np.float32).reshape(n, 3)]
        if len(specs) == 2:
            args.append(np.array([7.0, 8.0, 9.0], np.float32))
        want = fun(*[a.copy() for a in args])
        np.testing.assert_array_equal(simulated(*[a.copy() for a in args]), want)
