"""Byte products on the CUDA backend: dp4a in the PTX (assembled by ptxas), the same results
as numpy in the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from cudacheck import check_ptx, compile_for_gpu, require_ptxas

import jitc

BYTES = [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)]


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.int32) @ b.astype(np.int32)


def requantize(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.clip(np.round(matmul(a, b) * scale), -128, 127).astype(np.int8)


def _bytes(rng: np.random.Generator, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("dtypes", BYTES, ids=lambda d: f"{d[0].__name__}x{d[1].__name__}")
def test_dp4a_with_each_signedness_assembles(dtypes: tuple[type, type]) -> None:
    require_ptxas()
    rng = np.random.default_rng(0)
    a, b = _bytes(rng, dtypes[0], (20, 37)), _bytes(rng, dtypes[1], (37, 18))
    compiled = compile_for_gpu(matmul, a, b)
    signs = "".join("s" if d is np.int8 else "u" for d in dtypes)
    assert f"dp4a.{signs[0]}32.{signs[1]}32" in compiled.as_text()
    check_ptx(compiled)


@pytest.mark.parametrize("dtypes", BYTES, ids=lambda d: f"{d[0].__name__}x{d[1].__name__}")
def test_the_simulator_multiplies_packed_bytes_exactly(dtypes: tuple[type, type]) -> None:
    rng = np.random.default_rng(1)
    # Depths no multiple of 4 or of the 16-step tile; a batched product; an epilogue.
    for m, k, n in [(20, 37, 18), (3, 1, 5), (70, 50, 9)]:
        a, b = _bytes(rng, dtypes[0], (m, k)), _bytes(rng, dtypes[1], (k, n))
        np.testing.assert_array_equal(jitc.jit(matmul, backend="cuda-sim")(a, b), matmul(a, b))
    a, b = _bytes(rng, dtypes[0], (2, 6, 21)), _bytes(rng, dtypes[1], (2, 21, 7))
    np.testing.assert_array_equal(jitc.jit(matmul, backend="cuda-sim")(a, b), matmul(a, b))
    scale = (rng.random(7) * 0.01).astype(np.float32)
    np.testing.assert_array_equal(jitc.jit(requantize, backend="cuda-sim")(a, b, scale),
                                  requantize(a, b, scale))
