"""The pycuda runtime, driven by a stand-in for pycuda.driver whose "device memory" is host
memory and whose kernel launches run the kernels' simulator builds. That checks what the
runtime does (argument upload, device arrays in and out, constants, workspace offsets, the
launch configurations, kernel order) on a machine without a GPU; tests/cuda/test_cuda_gpu.py
runs the same path on real hardware."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from fakedriver import FakeDriver, compile_on_fake

import jitc
from jitc.backends.cuda import runtime
from jitc.backends.cuda.device import DeviceArray
from jitc.backends.cuda.simulator import SimulatedKernels


def layer(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.tanh(x @ w + np.arange(w.shape[1], dtype=x.dtype))
    return h / h.sum(axis=-1, keepdims=True), h.max(axis=0)


def test_a_program_runs_kernel_by_kernel_with_the_planned_launches(driver: FakeDriver) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((20, 30)).astype(np.float32), rng.standard_normal(
        (30, 50)).astype(np.float32)
    compiled = compile_on_fake(driver, layer, x, w)
    got = compiled(x, w)
    assert all(isinstance(g, DeviceArray) for g in got)
    for g, want in zip(got, layer(x, w)):
        assert (g.shape, g.dtype) == (want.shape, want.dtype)
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-6)
    specs = compiled.executable.lowering.specs
    assert [(name, grid, block) for name, grid, block, _ in driver.launches] == [
        (s.name, (s.launch.grid, 1), (s.launch.block, 1, 1)) for s in specs]
    # The two arguments and, once per loaded program, the array constants.
    constants = len(compiled.executable.lowering.plan.constants)
    assert constants and driver.uploads == 2 + constants
    compiled(x, w)
    assert driver.uploads == 4 + constants


def test_device_arrays_go_in_without_a_copy_and_come_back_with_asarray(
        driver: FakeDriver) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    device = jitc.device_put(x)
    assert isinstance(device, DeviceArray) and device.shape == (3, 4) and device.nbytes == 48
    assert driver.uploads == 1
    np.testing.assert_array_equal(np.asarray(device), x)
    f = jitc.jit(lambda x: x * 2 + 1, backend="cuda")
    compiled = f.lower(x).compile()
    driver.programs[compiled.as_text()] = SimulatedKernels(compiled.executable.lowering)
    once = f(device)
    uploads = driver.uploads  # the argument was on the device: only constants went up
    assert uploads == 1 + len(compiled.executable.lowering.plan.constants)
    twice = f(once)  # a result feeds the next call where it is
    assert driver.uploads == uploads
    np.testing.assert_array_equal(np.asarray(twice), (x * 2 + 1) * 2 + 1)
    assert f.cache_size == 1, "a device array has the signature of its shape and dtype"


def test_constants_and_temporaries_live_on_the_device(driver: FakeDriver) -> None:
    def f(x):
        table = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)  # a constant
        y = np.sin(x @ table)
        return (y @ table).sum(axis=0)
    x = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    compiled = compile_on_fake(driver, f, x)
    assert compiled.executable.lowering.plan.constants, "the table is an array constant"
    assert compiled.executable.lowering.plan.workspace_bytes > 0
    np.testing.assert_allclose(np.asarray(compiled(x)), f(x), rtol=1e-5, atol=1e-5)


def test_a_wrong_argument_shape_is_reported(driver: FakeDriver) -> None:
    x = np.ones((2, 3), np.float32)
    compiled = compile_on_fake(driver, np.exp, x)
    with pytest.raises(TypeError, match="compiled for"):
        compiled.executable([jitc.device_put(np.ones((3, 2), np.float32))])


def test_without_pycuda_the_error_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    runtime.get_runtime.cache_clear()
    try:
        reason = runtime.runtime_unavailable_reason()
        assert reason is not None and "pycuda" in reason and "cuda-sim" in reason
        from jitc.backends import get_backend
        assert get_backend("cuda").unavailable_reason() == reason  # type: ignore[attr-defined]
    finally:
        runtime.get_runtime.cache_clear()


def test_without_a_driver_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDriver()

    def no_driver() -> None:
        raise OSError("libcuda.so.1: cannot open shared object file")
    fake.init = no_driver  # type: ignore[method-assign]
    package = types.ModuleType("pycuda")
    package.driver = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake)
    runtime.get_runtime.cache_clear()
    try:
        with pytest.raises(runtime.CudaUnavailable, match="driver could not be initialised"):
            jitc.device_put(np.ones(3))
    finally:
        runtime.get_runtime.cache_clear()


def test_what_numpy_returns_as_a_scalar_comes_back_as_one(driver: FakeDriver) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for fn, want in ((lambda x: x.sum(), x.sum()), (lambda x: x[1, 2] * 2, x[1, 2] * 2),
                     (lambda x: x.max(axis=(0, 1), keepdims=False), x.max())):
        f = jitc.jit(fn, backend="cuda")
        compiled = f.lower(x).compile()
        driver.programs[compiled.as_text()] = SimulatedKernels(compiled.executable.lowering)
        got = f(x)
        assert type(got) is type(want) and got == want
        got = f(x)  # the fast path after the first call too
        assert type(got) is type(want) and got == want
    zero_d = jitc.jit(lambda x: np.asarray(x.sum()), backend="cuda")
    compiled = zero_d.lower(x).compile()
    driver.programs[compiled.as_text()] = SimulatedKernels(compiled.executable.lowering)
    result = zero_d(x)
    assert isinstance(result, DeviceArray) and result.shape == ()
    with pytest.raises(TypeError, match="not indexed on the host"):
        jitc.device_put(x)[0]
