"""Module-level functions for the Dask tests (tests/test_dask.py): Dask's workers unpickle
them by reference, importing this module (tests/ is on their path: spawned processes start
with their parent's sys.path)."""

from __future__ import annotations

import numpy as np

import jitc

# (function name, block shape) per trace in this process: tracing runs the Python body once
# per compiled signature, so this counts compilations (a persistent-cache hit traces too).
# The jitted models compile each block shape exactly (dynamic=False), which the tests count.
TRACES: list[tuple[str, tuple[int, ...]]] = []


@jitc.jit(dynamic=False)
def gelu_rows(x):
    """A block-wise model: each row of a block is scaled by its own norm."""
    TRACES.append(("gelu_rows", x.shape))
    y = 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))
    return y / (np.sqrt((y * y).sum(axis=-1, keepdims=True)) + 1.0)


def gelu_rows_numpy(x: np.ndarray) -> np.ndarray:
    y = 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))
    return y / (np.sqrt((y * y).sum(axis=-1, keepdims=True)) + 1.0)


@jitc.jit(dynamic=False)
def scaled_add(x, y):
    TRACES.append(("scaled_add", x.shape))
    return x * 2.0 + y


@jitc.export("f32[64,16]")
def exported_norm(x):
    TRACES.append(("exported_norm", x.shape))
    return x / (np.abs(x).sum(axis=-1, keepdims=True) + 1.0)


def affine(x, scale):
    TRACES.append(("affine", x.shape))
    return x * scale + 1.0


def traces() -> list[tuple[str, tuple[int, ...]]]:
    return list(TRACES)


def forget_compiled() -> None:
    """Start counting compiles afresh: no traces, no compiled signatures."""
    TRACES.clear()
    for jitted in (gelu_rows, scaled_add, exported_norm):
        jitted.clear_cache()
