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
from symbolic_constructs import (
    CASES,
    SIZES,
    floats,
    running_means,
    running_means_reference,
    sort_rows,
    ties,
)

import jitc
from jitc import lax
from jitc.backends.cuda.control import WhileLoop
from jitc.tracing.function import AbstractArray


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
def test_the_gpu_runtime_runs_one_compilation_for_every_size(name: str,
                                                             driver: FakeDriver) -> None:
    # runtime.py's symbolic calls (results, workspace and `dims` on the device, control flow
    # driven from the host) on the fake driver, whose launches run the simulator's kernels.
    program, reference, specs, _, arguments = CASES[name]
    compiled = compile_on_fake(driver, program, *(AbstractArray(s) for s in specs))
    for n in SIZES:
        args = arguments(n)
        np.testing.assert_allclose(np.asarray(compiled(*args)), reference(*args), rtol=2e-5,
                                   atol=2e-5)


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
