"""In-place writes under symbolic dimensions (docs/dynamic-shapes.md): whole-array writes
(`x += 1` on an argument, `np.copyto`, `out=`, `a[...] = v`) and writes at ints and slices of
the static dimensions that take every symbolic one whole (`x[:, 0] = v`), also through views
taken by basic indexing and transposes, compile once and leave every argument as numpy leaves
it; so do writes at ints and slices of a symbolic axis (tests/test_symbolic_positions.py).
Writes that a symbolic trace cannot make exact (`ufunc.at`, after a reshape's view) are
refused at trace time, and the policy compiles those calls exactly, with numpy's results."""

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


def column_writes(x, v):
    x[:, 0] = 0.0
    x[..., 1:3] += v  # slices of the static axis, every row
    x[:, ::-2] *= -1.0
    last = x[:, -1]  # numpy's view: it sees the writes below
    x.T[1] = 9.0  # through a transposed view
    x[:, 3] += last  # the update aliases the target
    t = x.T
    x += 1.0
    return last * 1.0, t.sum(axis=1)


def column_arguments(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return (rng.standard_normal((n, 4)).astype(np.float32),
            rng.standard_normal(2).astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_that_take_the_symbolic_axes_whole_compile_once(backend: str) -> None:
    f = jitc.jit(column_writes, backend=backend, dynamic={"x": {0: "rows"}}, disk_cache=False)
    for n in SIZES:
        want_args, got_args = column_arguments(n), column_arguments(n)
        want, got = column_writes(*want_args), f(*got_args)
        for g, w in zip([*got, *got_args], [*want, *want_args], strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
            assert g.shape == w.shape and g.dtype == w.dtype
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


def reshaped_then_written(x):
    flat = x.reshape(-1)  # a view or a copy, as x's strides say: unknown for a symbolic x
    x += 1.0
    return flat * 1.0


def added_at(x):
    np.add.at(x, [0, 0], 1.0)  # ufunc.at accumulates at positions of the symbolic axis
    return x * 2.0


@pytest.mark.parametrize("fun,refusal", [
    (reshaped_then_written, "has views taken of it"),
    (added_at, "numpy.add.at into f32"),
], ids=["reshape taken before the write", "ufunc.at on a symbolic axis"])
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


def whole_views_then_written(x):
    whole = x[:]  # numpy's views whatever the strides: a reshape to the same shape on the way
    same = x.reshape(x.shape)
    x += 1.0
    same[0] = 5.0
    return whole * 1.0


def _masked_scores(x):
    scores = x @ x.T
    scores[~np.tri(x.shape[0], dtype=bool)] = -np.inf  # a causal mask over a symbolic axis
    return np.exp(scores - scores.max(axis=1, keepdims=True))


def _clamped(x):
    y = x.copy()
    y[y < 0] = -1.0
    return y


def _rows_by_mask(x):
    y = x.copy()
    y[y[:, 0] > 0] = np.arange(3.0)  # a value per column, not per selected element
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fun", [_masked_scores, _clamped, _rows_by_mask])
def test_a_write_through_a_traced_mask_compiles_once_for_every_size(fun, backend: str
                                                                    ) -> None:
    # A select at the mask's positions, which no extent decides (it was refused over a
    # symbolic axis, and each size compiled exactly).
    f = jitc.jit(fun, backend=backend, disk_cache=False, dynamic={"x": {0: "n"}})
    rng = np.random.default_rng(2)
    for n in (1, 2, 5, 9):
        x = rng.standard_normal((n, 3))
        np.testing.assert_allclose(f(x), fun(x), rtol=1e-12)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


def test_a_whole_slice_and_a_same_shape_reshape_are_views_under_symbolic_dimensions() -> None:
    f = jitc.jit(whole_views_then_written, dynamic=True, disk_cache=False)
    for n in (1, 3, 6):
        want_x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
        got_x = want_x.copy()
        np.testing.assert_array_equal(f(got_x), whole_views_then_written(want_x))
        np.testing.assert_array_equal(got_x, want_x)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]
