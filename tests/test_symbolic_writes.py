"""In-place writes under symbolic dimensions (docs/dynamic-shapes.md): whole-array writes into
an array that nothing aliases (`x += 1` on an argument, `np.copyto`, `out=`, `a[...] = v`)
compile once and leave every argument as numpy leaves it; writes that a symbolic trace cannot
make exact (into a view, into an array after taking a view of it, indexed writes) are refused
at trace time, and the policy compiles those calls exactly, with numpy's results."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS
from symbolic_programs import agree_in_place, normalize_in_place

import jitc
from jitc.tracing.errors import TraceError
from jitc.tracing.function import AbstractArray

SIZES = (3, 5, 0, 1, 8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_array_writes_compile_once_for_every_size(backend: str) -> None:
    f = jitc.jit(normalize_in_place, backend=backend, dynamic=True, disk_cache=False)
    for n in SIZES:
        agree_in_place(f, n)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


def test_the_default_policy_serves_a_mutating_sweep_with_two_compilations() -> None:
    f = jitc.jit(normalize_in_place, disk_cache=False)
    for n in range(1, 12):
        agree_in_place(f, n)
    assert [s["symbolic"] for s in f.compile_stats()] == [False, True]


def transposed_then_written(x):
    t = x.T  # numpy's view: it sees the write below
    x += 1.0
    return t * 1.0


def sliced_then_written(x):
    tail = x[1:]
    tail += 1.0  # a write through numpy's view into x
    return x.sum(axis=1)


def indexed_write(x):
    x[0] = 7.0
    return x * 2.0


@pytest.mark.parametrize("fun,refusal", [
    (transposed_then_written, "has views taken of it"),
    (sliced_then_written, "is a view of another array"),
    (indexed_write, "an indexed write into f32"),
], ids=["view taken before the write", "write through a view", "indexed write"])
def test_unsafe_writes_are_refused_and_compiled_exactly(fun, refusal: str) -> None:
    with pytest.raises(TraceError, match=refusal):
        jitc.jit(fun).lower(AbstractArray("f32[n,3]"))
    f = jitc.jit(fun, dynamic=True, disk_cache=False)
    for n in (2, 4):
        want_x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        got_x = want_x.copy()
        np.testing.assert_array_equal(f(got_x), fun(want_x))
        np.testing.assert_array_equal(got_x, want_x)
    stats = f.compile_stats()
    assert [s["symbolic"] for s in stats] == [False, False] and refusal in stats[0]["reason"]
