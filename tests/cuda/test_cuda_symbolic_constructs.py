"""Sorts, convolutions and control flow in symbolic programs on the cuda backend
(docs/cuda.md, "Symbolic dimensions"): one compilation, its extents read from the call's
symbol values, serves every size, 0 and 1 included, and agrees with numpy and the interpreter
on cuda-sim; the PTX of each program assembles with ptxas."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from cudacheck import check_ptx, require_ptxas
from numpy.lib.stride_tricks import sliding_window_view

import jitc
from jitc import lax
from jitc.tracing.function import AbstractArray

RNG = np.random.default_rng(11)
# 0 and 1, odd sizes, and more elements (or rows) than one 256-thread block takes.
SIZES = (0, 1, 7, 300)


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def ties(*shape: int) -> np.ndarray:
    """Few distinct values, so that a stable argsort's tie order is checked."""
    return RNG.integers(-3, 4, shape).astype(np.float32)


def conv_reference(x: np.ndarray, w: np.ndarray, strides=(1, 1), padding=((0, 0), (0, 0)),
                   lhs_dilation=(1, 1), rhs_dilation=(1, 1), groups: int = 1) -> np.ndarray:
    """lax.conv_general_dilated in numpy for NCHW input and OIHW kernels."""
    batch, channels, height, width = x.shape
    dilated = np.zeros((batch, channels, (height - 1) * lhs_dilation[0] + 1 if height else 0,
                        (width - 1) * lhs_dilation[1] + 1 if width else 0), x.dtype)
    dilated[:, :, ::lhs_dilation[0], ::lhs_dilation[1]] = x
    padded = np.pad(dilated, ((0, 0), (0, 0), *padding))
    kh, kw = w.shape[2:]
    span = ((kh - 1) * rhs_dilation[0] + 1, (kw - 1) * rhs_dilation[1] + 1)
    windows = sliding_window_view(padded, span, axis=(2, 3))
    windows = windows[:, :, ::strides[0], ::strides[1], ::rhs_dilation[0], ::rhs_dilation[1]]
    oy, ox = windows.shape[2:4]
    grouped = windows.reshape(batch, groups, channels // groups, oy, ox, kh, kw)
    kernels = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])
    out = np.einsum("bgcyxhw,gochw->bgoyx", grouped.astype(np.float64), kernels)
    return out.reshape(batch, w.shape[0], oy, ox).astype(x.dtype)


KERNEL = floats(4, 3, 3, 3)
GROUPED = floats(6, 2, 3, 2)       # 2 groups of 2 input features, 3 outputs each
HWIO = floats(3, 3, 3, 5)
INTEGER_KERNEL = RNG.integers(-9, 10, (4, 3, 3, 3)).astype(np.int32)


def sort_rows(x):
    return np.sort(x, axis=-1) * 2.0 + np.argsort(x, axis=-1, kind="stable")


def sort_columns(x):
    return np.argsort(x, axis=0, kind="stable") - np.sort(x, axis=0)


def conv_relu(x, w):
    return np.maximum(lax.conv_general_dilated(x, w) * 2.0 + 1.0, 0.0)


def conv_relu_reference(x, w):
    return np.maximum(conv_reference(x, w) * 2.0 + 1.0, 0.0)


def conv_strided(x, w):
    return lax.conv_general_dilated(x, w, (2, 1), [(1, 2), (0, 1)], (1, 2), (2, 1),
                                    feature_group_count=2)


def conv_strided_reference(x, w):
    return conv_reference(x, w, (2, 1), ((1, 2), (0, 1)), (1, 2), (2, 1), groups=2)


def conv_channels_last(x, w):
    return lax.conv_general_dilated(x, w, padding=[(1, 1), (1, 1)],
                                    dimension_numbers="b01f_01io->b01f").sum(axis=(1, 2))


def conv_channels_last_reference(x, w):
    nchw = conv_reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1),
                          padding=((1, 1), (1, 1)))
    return nchw.sum(axis=(2, 3))


def conv_integers(x, w):
    return lax.conv_general_dilated(x, w)


def conv_integers_reference(x, w):
    return np.einsum("bcyxhw,ochw->boyx", sliding_window_view(x, (3, 3), axis=(2, 3)), w)


# name: (program, numpy's spelling of it, argument specs, the symbolic dimensions (jit's
# `dynamic`), the arguments for a size)
Case = tuple[Callable, Callable, tuple[str, ...], dict, Callable[[int], tuple]]
BATCH = {"x": {0: "B"}}
CASES: dict[str, Case] = {
    "sort rows of a static length (the network), rows symbolic": (
        sort_rows, sort_rows, ("f32[B,16]",), BATCH, lambda n: (ties(n, 16),)),
    "sort rows of a symbolic length (by rank)": (
        sort_rows, sort_rows, ("f32[3,S]",), {"x": {1: "S"}}, lambda n: (ties(3, n),)),
    "sort along a static major axis, columns symbolic": (
        sort_columns, sort_columns, ("f32[5,S]",), {"x": {1: "S"}}, lambda n: (ties(5, n),)),
    "sort along a symbolic major axis": (
        sort_columns, sort_columns, ("f32[S,4]",), {"x": {0: "S"}}, lambda n: (ties(n, 4),)),
    "convolution with a fused epilogue, batch symbolic": (
        conv_relu, conv_relu_reference, ("f32[B,3,9,9]", "f32[4,3,3,3]"), BATCH,
        lambda n: (floats(n, 3, 9, 9), KERNEL)),
    "convolution with strides, padding, dilations and groups": (
        conv_strided, conv_strided_reference, ("f32[B,4,7,6]", "f32[6,2,3,2]"), BATCH,
        lambda n: (floats(n, 4, 7, 6), GROUPED)),
    "channels-last convolution and a reduction": (
        conv_channels_last, conv_channels_last_reference, ("f32[B,6,5,3]", "f32[3,3,3,5]"),
        BATCH, lambda n: (floats(n, 6, 5, 3), HWIO)),
    "integer convolution": (
        conv_integers, conv_integers_reference, ("i32[B,3,5,5]", "i32[4,3,3,3]"), BATCH,
        lambda n: (RNG.integers(-50, 50, (n, 3, 5, 5)).astype(np.int32), INTEGER_KERNEL)),
}


def _lowered(name: str, backend: str) -> jitc.stages.Lowered:
    program, _, specs, _, _ = CASES[name]
    return jitc.jit(program, backend=backend).lower(*(AbstractArray(s) for s in specs))


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_compilation_serves_every_size(name: str) -> None:
    program, reference, _, dynamic, arguments = CASES[name]
    f = jitc.jit(program, backend="cuda-sim", dynamic=dynamic, disk_cache=False)
    module = _lowered(name, "cuda-sim").module
    for n in SIZES:
        args = arguments(n)
        got, expected = f(*args), reference(*args)
        (interpreted,) = jitc.interpret(module, args)
        assert got.shape == expected.shape == interpreted.shape
        assert got.dtype == expected.dtype == interpreted.dtype
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(got, interpreted, rtol=2e-5, atol=2e-5)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


def test_a_sort_longer_than_the_network_takes_sorts_by_rank() -> None:
    f = jitc.jit(sort_rows, backend="cuda-sim", dynamic={"x": {1: "S"}}, disk_cache=False)
    for n in (2047, 2049, 3000):
        x = ties(2, n)
        np.testing.assert_array_equal(f(x), sort_rows(x))
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_ptx_assembles(name: str) -> None:
    require_ptxas()
    compiled = _lowered(name, "cuda").compile()
    assert compiled.executable.lowering.plan.dims_slot is not None
    check_ptx(compiled)
