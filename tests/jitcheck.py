"""Run a plain numpy function eagerly and through `jitc.jit`, and compare the results.

The model and numpy-surface tests parametrize over `BACKENDS`; a backend joins every one of
those tests by being appended here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

import jitc
from jitc.tracing import pytree

BACKENDS = ["interpreter", "cpu", "c", "cuda-sim"]

# (rtol, atol) by dtype; results of other dtypes must match exactly.
TOLERANCES = {
    np.dtype(np.float16): (2e-3, 2e-3),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-12, 1e-13),
    np.dtype(np.complex64): (1e-5, 1e-6),
    np.dtype(np.complex128): (1e-12, 1e-13),
}


def _is_leaf(x: object) -> bool:
    return isinstance(x, (np.ndarray, np.generic, bool, int, float, complex))


def assert_trees_close(got: Any, want: Any, rtol: float | None = None,
                       atol: float | None = None, signed_zeros: bool = True) -> None:
    """Same pytree structure; per leaf the same shape and dtype, and close (or equal) values;
    zeros of the same sign, unless `signed_zeros` is False."""
    got_leaves, got_tree = pytree.flatten(got, _is_leaf)
    want_leaves, want_tree = pytree.flatten(want, _is_leaf)
    assert got_tree == want_tree, f"structure {got_tree} != {want_tree}"
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        # numpy's 0-d results are numpy scalars (`x.sum()`), its arrays stay arrays: jitc
        # must never give a scalar for an array; a 0-d array for a scalar is a known gap
        # (docs/jit.md: a few operations, such as a 1-d `a @ b`).
        if isinstance(want_leaves[i], np.ndarray):
            assert isinstance(got_leaves[i], np.ndarray), f"output {i} is {type(got_leaves[i])}"
        else:
            assert isinstance(got_leaves[i], (np.ndarray, np.generic)), \
                f"output {i} is {type(got_leaves[i])}"
        assert g.shape == w.shape, f"output {i}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype} != {w.dtype}"
        if w.dtype in TOLERANCES:
            default_rtol, default_atol = TOLERANCES[w.dtype]
            np.testing.assert_allclose(
                g, w, rtol=default_rtol if rtol is None else rtol,
                atol=default_atol if atol is None else atol, err_msg=f"output {i}")
            if signed_zeros:
                _assert_zero_signs(g, w, i)
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


def _assert_zero_signs(got: np.ndarray, want: np.ndarray, i: int) -> None:
    """Where both are exactly zero, the same sign (`1 / x` tells -0.0 from 0.0)."""
    parts = [(got.real, want.real), (got.imag, want.imag)] if want.dtype.kind == "c" else \
        [(got, want)]
    for g, w in parts:
        differ = (g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w))
        assert not differ.any(), (
            f"output {i}: zeros of the other sign at {np.argwhere(differ)[:5].tolist()} "
            f"(got {g[differ][:5].tolist()}, want {w[differ][:5].tolist()})")


def check_jit(fn: Callable, *args: Any, backend: str = "interpreter", rtol: float | None = None,
              atol: float | None = None, signed_zeros: bool = True, **jit_options: Any) -> Any:
    """`fn(*args)` on numpy, then traced and compiled by jitc (verifying after every pass);
    the two must agree, down to the sign of zeros unless `signed_zeros` is False. Returns the
    jitted result."""
    want = fn(*copy.deepcopy(args))
    jitted = jitc.jit(fn, backend=backend, verify=True, **jit_options)
    got = jitted(*copy.deepcopy(args))
    assert_trees_close(got, want, rtol, atol, signed_zeros)
    return got


def random(shape: tuple[int, ...], dtype: Any = np.float32, seed: int = 0, low: float = -3.0,
           high: float = 3.0) -> np.ndarray:
    """Deterministic test data: uniform floats, integers or booleans in [low, high] (for a
    complex dtype, each part)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape)
                ).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(int(low), int(info.min)), min(int(high), int(info.max))
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
    return rng.uniform(low, high, shape).astype(dtype)
