"""In-place writes under symbolic dimensions (docs/dynamic-shapes.md): whole-array writes into
an array that nothing aliases (`x += 1` on an argument, `np.copyto`, `out=`, `a[...] = v`)
compile once and leave every argument as numpy leaves it; writes that a symbolic trace cannot
make exact (into a view, into an array after taking a view of it, indexed writes) are refused
at trace time, and the policy compiles those calls exactly, with numpy's results."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS

import jitc
from jitc.tracing.errors import TraceError
from jitc.tracing.function import AbstractArray

SIZES = (3, 5, 0, 1, 8)


def normalize_in_place(x, gain, out):
    x -= x.mean(axis=0)
    x *= gain
    np.copyto(out, x * 2.0)
    np.add(out, 1.0, out=out)
    scratch = np.zeros_like(x)
    scratch[...] = x
    scratch += 0.5
    return scratch.sum(axis=1)


def _arguments(n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(n)
    return (rng.standard_normal((n, 4)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32), np.zeros((n, 4), np.float32))


def _agree(f, n: int) -> None:
    want_args, got_args = _arguments(n), _arguments(n)
    with np.errstate(invalid="ignore"), pytest.warns() if n == 0 else _nothing():
        want = normalize_in_place(*want_args)
    with np.errstate(invalid="ignore"):
        got = f(*got_args)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    for g, w in zip(got_args, want_args, strict=True):  # the side effects on every argument
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_array_writes_compile_once_for_every_size(backend: str) -> None:
    f = jitc.jit(normalize_in_place, backend=backend, dynamic=True, disk_cache=False)
    for n in SIZES:
        _agree(f, n)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


def test_the_default_policy_serves_a_mutating_sweep_with_two_compilations() -> None:
    f = jitc.jit(normalize_in_place, disk_cache=False)
    for n in range(1, 12):
        _agree(f, n)
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
