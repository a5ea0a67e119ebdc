"""Sorts, convolutions and control flow in symbolic programs on the cuda backend
(docs/cuda.md, "Symbolic dimensions"): one compilation, its extents read from the call's
symbol values, serves every size, 0 and 1 included, and agrees with numpy and the interpreter
on cuda-sim, reading no byte past its arguments; the PTX of each program assembles with
ptxas."""

from __future__ import annotations

import ctypes
import mmap
import sys
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from cudacheck import check_ptx, require_ptxas
from fakedriver import FakeDriver, compile_on_fake
from numpy.lib.stride_tricks import sliding_window_view

import jitc
from jitc import lax
from jitc.backends.cuda.control import WhileLoop
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


def _lowered(name: str, backend: str) -> jitc.stages.Lowered:
    program, _, specs, _, _ = CASES[name]
    return jitc.jit(program, backend=backend).lower(*(AbstractArray(s) for s in specs))


Guarded = Callable[[np.ndarray], np.ndarray]


@pytest.fixture
def guarded() -> Iterator[Guarded]:
    """A copy of an array ending where an inaccessible page begins: a kernel that reads past
    the array (a row beyond the call's last, an element of an empty one) faults."""
    if sys.platform != "linux":
        pytest.skip("guard pages are set with Linux's mprotect")
    mprotect = ctypes.CDLL(None, use_errno=True).mprotect
    mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    maps: list[mmap.mmap] = []

    def copy(array: np.ndarray) -> np.ndarray:
        pages = -(-max(array.nbytes, 1) // mmap.PAGESIZE)
        memory = mmap.mmap(-1, (pages + 1) * mmap.PAGESIZE)
        maps.append(memory)
        base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
        assert mprotect(base + pages * mmap.PAGESIZE, mmap.PAGESIZE, 0) == 0  # PROT_NONE
        start = pages * mmap.PAGESIZE - array.nbytes
        placed = np.frombuffer(memory, np.uint8, array.nbytes, start).view(array.dtype)
        placed = placed.reshape(array.shape)
        placed[...] = array
        return placed
    yield copy
    maps.clear()  # the arrays on them are gone with the test


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_compilation_serves_every_size(name: str, guarded: Guarded) -> None:
    program, reference, _, dynamic, arguments = CASES[name]
    f = jitc.jit(program, backend="cuda-sim", dynamic=dynamic, disk_cache=False)
    module = _lowered(name, "cuda-sim").module
    for n in SIZES:
        args = tuple(guarded(a) for a in arguments(n))
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


def test_a_scan_over_a_symbolic_batch_sizes_its_block_writes_per_call(driver: FakeDriver) -> None:
    # Through the GPU runtime (the fake driver runs the simulator's kernels): the kernel that
    # writes a step's block of the stacked output takes ceil(3 * B / 256) blocks, and none is
    # launched for an empty batch.
    compiled = compile_on_fake(driver, running_means, AbstractArray("f32[5,B,3]"))
    for n, blocks in ((0, None), (1, 1), (300, 4)):
        x = floats(5, n, 3)
        driver.launches.clear()
        np.testing.assert_allclose(np.asarray(compiled(x)), running_means_reference(x),
                                   rtol=2e-5, atol=2e-5)
        writes = [grid for name, grid, _, _ in driver.launches if "_write" in name]
        assert writes == ([] if blocks is None else [(blocks, 1)] * 5)


def decayed_rows(x):
    return lax.fori_loop(0, x.shape[0], lambda i, c: c * 0.5 + x[i],
                         np.zeros(x.shape[1:], np.float32))


def test_a_loop_over_a_symbolic_extent_is_counted_from_the_symbols(driver: FakeDriver) -> None:
    # range(x.shape[0]) over a symbolic axis: the host computes the trip count from the
    # call's symbol values, so no predicate (nor bound) is read back from the device.
    compiled = compile_on_fake(driver, decayed_rows, AbstractArray("f32[T,3]"))
    (loop,) = [s for s in compiled.executable.lowering.program.steps if isinstance(s, WhileLoop)]
    body_kernels = len(loop.body.steps)
    for n in (1, 7, 300):
        x = floats(n, 3)
        driver.launches.clear()
        driver.readbacks.clear()
        (result,) = compiled.executable([x])
        # The body's kernels n times and nothing else: the condition never runs (a body
        # kernel may share the code, and so the name, of an equal condition kernel).
        assert driver.readbacks == [] and len(driver.launches) == n * body_kernels
        want = np.zeros(3, np.float32)
        for row in x:
            want = want * np.float32(0.5) + row
        np.testing.assert_allclose(np.asarray(result), want, rtol=2e-5, atol=2e-5)
