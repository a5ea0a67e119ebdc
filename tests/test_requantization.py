"""Requantization fused into a byte product's epilogue: int32 sums scaled (per tensor or per
output channel), biased, rounded half to even, offset by a zero point, clipped and converted
to int8/uint8, equal to numpy bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import jitc
from jitc.ir.printer import print_module


def requantize(x: np.ndarray, w: np.ndarray, scale, bias: np.ndarray, zero_point: int):
    acc = x.astype(np.int32) @ w.astype(np.int32)
    y = np.round((acc + bias) * scale) + zero_point
    return np.clip(y, -128, 127).astype(np.int8)


def requantize_unsigned(x: np.ndarray, w: np.ndarray, scale, bias: np.ndarray,
                        zero_point: int):
    acc = x.astype(np.int32) @ w.astype(np.int32)
    return np.clip(np.round(acc * scale + bias) + zero_point, 0, 255).astype(np.uint8)


def _case(m: int, k: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (m, k)).astype(np.int8)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    bias = rng.integers(-2000, 2000, n).astype(np.int32)
    return rng, x, w, bias


def _check(fn, args, backend: str = "cpu", fused: bool = True) -> None:
    jitted = jitc.jit(fn, backend=backend)
    result, expected = jitted(*args), fn(*args)
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
    if fused:
        text = print_module(jitted.lower(*args).compile().optimized_module)
        assert "kind=dot" in text and "result=i32" in text


# (64, 200, 96) runs the VNNI kernel where the host has it; (3, 5, 7) is below the blocked
# kernel's size and (8, 4100, 40) deeper than its fused epilogue takes: the generic kernel
# finishes each sum in a register.
SHAPES = [(64, 200, 96), (3, 5, 7), (8, 4100, 40)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_per_tensor_and_per_channel_scales(shape: tuple[int, int, int]) -> None:
    rng, x, w, bias = _case(*shape)
    n = shape[2]
    for scale in (np.float32(0.0007), (rng.random(n) * 0.002).astype(np.float32), 1 / 4096):
        _check(requantize, (x, w, scale, bias, 3))
        _check(requantize_unsigned, (x, w, scale, bias, 128))


def test_ties_round_half_to_even() -> None:
    # Scale 1/2 puts every odd sum exactly halfway between two integers.
    _, x, w, bias = _case(64, 64, 64, seed=1)
    x, w = x // 16, w // 16
    result = jitc.jit(requantize)(x, w, 0.5, bias * 0, 0)
    np.testing.assert_array_equal(result, requantize(x, w, 0.5, bias * 0, 0))
    halves = (x.astype(np.int32) @ w.astype(np.int32)) % 2 == 1
    assert halves.any()


@pytest.mark.parametrize("backend", ["interpreter", "c", "cuda-sim"])
def test_other_backends_agree(backend: str) -> None:
    rng, x, w, bias = _case(9, 13, 11)
    scale = (rng.random(11) * 0.01).astype(np.float32)
    _check(requantize, (x, w, scale, bias, -5), backend, fused=False)
