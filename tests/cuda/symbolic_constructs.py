"""Symbolic programs with sorts, convolutions and control flow, each with its numpy spelling,
that the cuda backend compiles once for every size (tests/cuda/test_cuda_symbolic_constructs.py
on the grid simulator and through the GPU runtime, tests/cuda/test_cuda_gpu.py on a GPU)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from jitc import lax

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


def sorted_steps(x):
    return lax.fori_loop(0, 4, lambda i, c: (np.sort(c, axis=-1) * 1.5 - i).astype(np.float32), x)


def sorted_steps_reference(x):
    for i in range(4):
        x = (np.sort(x, axis=-1) * 1.5 - i).astype(np.float32)
    return x


def doubled_until_large(x):  # the trip count depends on the data: a predicate per step
    return lax.while_loop(lambda c: (c[0].sum() < 1000) & (c[1] < 20),
                          lambda c: (c[0] * 2 + 1, c[1] + 1), (np.abs(x) + 1, 0))[0]


def doubled_until_large_reference(x):
    c, k = np.abs(x) + 1, 0
    while c.sum() < 1000 and k < 20:
        c, k = c * 2 + 1, k + 1
    return c


def branch_on_the_sum(x):
    return lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a - a.sum(axis=1, keepdims=True), x)


def branch_on_the_sum_reference(x):
    return x * 2.0 if x.sum() > 0 else x - x.sum(axis=1, keepdims=True)


def running_means(x):  # scan: each step's output written into the stacked result in place
    def step(c, row):
        c = c * 0.5 + row
        return c, c * 2.0
    return lax.scan(step, np.zeros(x.shape[1:], np.float32), x)[1]


def running_means_reference(x):
    c, outputs = np.zeros(x.shape[1:], np.float32), []
    for row in x:
        c = c * 0.5 + row
        outputs.append(c * 2.0)
    return np.stack(outputs)


def loop_in_a_branch(x):
    return lax.cond(x.sum() > 0, lambda a: lax.fori_loop(0, 3, lambda i, c: c * 2.0 + 1.0, a),
                    lambda a: a - 1.0, x)


def loop_in_a_branch_reference(x):
    if x.sum() <= 0:
        return x - 1.0
    for _ in range(3):
        x = x * 2.0 + 1.0
    return x


def signed(n: int, *shape: int) -> np.ndarray:
    """Floats whose sum is positive for odd `n`, else not, whatever rounding."""
    magnitude = np.abs(floats(*shape)) + 0.1
    return magnitude if n % 2 else -magnitude


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
    "counted loop whose body sorts, rows and their length symbolic": (
        sorted_steps, sorted_steps_reference, ("f32[B,S]",), {"x": {0: "B", 1: "S"}},
        lambda n: (ties(n, n % 6 + 1),)),
    "data-dependent while loop": (
        doubled_until_large, doubled_until_large_reference, ("i32[B,3]",), BATCH,
        lambda n: (RNG.integers(-3, 4, (n, 3)).astype(np.int32),)),
    "conditional": (branch_on_the_sum, branch_on_the_sum_reference, ("f32[B,3]",), BATCH,
                    lambda n: (signed(n, n, 3),)),
    "scan writing a block of its stacked output per step": (
        running_means, running_means_reference, ("f32[5,B,3]",), {"x": {1: "B"}},
        lambda n: (floats(5, n, 3),)),
    "loop inside a branch": (loop_in_a_branch, loop_in_a_branch_reference, ("f32[B,3]",), BATCH,
                             lambda n: (signed(n, n, 3),)),
}
