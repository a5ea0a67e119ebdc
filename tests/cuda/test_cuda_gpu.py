"""On a real GPU (pycuda and a CUDA device present; run with `-m gpu`): every op case and
every model on the cuda backend matches numpy, and device arrays stay on the device. Skipped
with the reason otherwise."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from cudacheck import model_tests, nested, op_case_params
from jitcheck import assert_trees_close
from ops.cases import OpCase, Variant
from ops.checks import assert_all_match, eager, leaves
from symbolic_cases import PROGRAMS, SIZES
from symbolic_constructs import CASES as CONSTRUCTS
from symbolic_constructs import SIZES as CONSTRUCT_SIZES
from symbolic_programs import B1, W1, W2, agree_in_place, floats, mlp, normalize_in_place

import jitc
from jitc import lax
from jitc.backends.cuda.device import DeviceArray
from jitc.tracing import pytree
from jitc.tracing.function import AbstractArray

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu() -> None:
    from jitc.backends.cuda.runtime import runtime_unavailable_reason
    reason = runtime_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def _host(tree: Any) -> Any:
    def is_leaf(x: object) -> bool:
        return isinstance(x, (DeviceArray, np.ndarray, np.generic))
    flat, treedef = pytree.flatten(tree, is_leaf)
    return pytree.unflatten(treedef, [np.asarray(x) for x in flat])


@pytest.mark.parametrize("case,variant,dtype", op_case_params())
def test_op_case_on_the_gpu(case: OpCase, variant: Variant, dtype: np.dtype) -> None:
    args = variant.build(dtype, f"{case.name}/{variant.label}/{dtype}")
    want = eager(case.expected or case.fn, args)
    got = [np.asarray(x) for x in leaves(jitc.jit(case.fn, backend="cuda")(*args))]
    assert_all_match(got, want, case.tol, "cuda vs numpy", signed_zeros=case.signed_zeros,
                     bitwise=case.bitwise)


def _gpu_check_jit(fn: Callable, *args: Any, backend: str = "", rtol: float | None = None,
                   atol: float | None = None, **jit_options: Any) -> Any:
    want = fn(*copy.deepcopy(args))
    got = _host(jitc.jit(fn, backend="cuda", **jit_options)(*copy.deepcopy(args)))
    assert_trees_close(got, want, rtol, atol)
    return got


@pytest.mark.parametrize("module,test,kwargs", model_tests())
def test_model_on_the_gpu(module: Any, test: Callable, kwargs: dict[str, Any],
                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "check_jit", _gpu_check_jit)
    test(**kwargs, backend="cuda")


def test_device_arrays_stay_on_the_device() -> None:
    x = np.random.default_rng(0).standard_normal((256, 128)).astype(np.float32)
    device = jitc.device_put(x)
    y = jitc.jit(lambda x: np.tanh(x) @ x.T, backend="cuda")(device)
    assert isinstance(y, DeviceArray) and y.shape == (256, 256)
    z = jitc.jit(lambda y: y.sum(axis=0) * 2, backend="cuda")(y)  # a result as an argument
    assert isinstance(z, DeviceArray)
    np.testing.assert_allclose(np.asarray(y), np.tanh(x) @ x.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(z), (np.tanh(x) @ x.T).sum(axis=0) * 2, rtol=1e-4,
                               atol=1e-3)


def _scan(h, xs, w):
    return lax.scan(lambda h, x: (np.tanh(x + h @ w),) * 2, h, xs)


def _until_large(x):
    return lax.while_loop(lambda c: c[0].sum() < 1000, lambda c: (c[0] * 3, c[1] + 1),
                          (x, np.int32(0)))


@pytest.mark.parametrize("fn,args", [
    (_scan, (np.ones((4, 8), np.float32), np.linspace(-1, 1, 6 * 32, dtype=np.float32).reshape(
        6, 4, 8), np.eye(8, dtype=np.float32) * 0.5)),
    (_until_large, (np.linspace(0.5, 2, 32, dtype=np.float32),)),
    (nested, (np.array([0.5, 1.25, 2.0], np.float32), np.int64(4))),
], ids=["scan", "while", "nested"])
def test_control_flow_on_the_gpu(fn: Callable, args: tuple) -> None:
    want = jitc.jit(fn, backend="interpreter")(*args)
    assert_trees_close(_host(jitc.jit(fn, backend="cuda")(*args)), want, 1e-5, 1e-5)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_symbolic_program_on_the_gpu(program: str) -> None:
    # One compilation with symbolic extents, called with every size (0 and 1 included):
    # the kernels read the symbol values from the device, the host sizes grids per call.
    fun, specs, arguments = PROGRAMS[program]
    compiled = jitc.jit(fun, backend="cuda").lower(*(AbstractArray(s) for s in specs)).compile()
    for size in SIZES:
        args = arguments(size)
        try:
            expected = fun(*args)
        except ValueError:  # numpy's max of an empty axis: the compiled call refuses it too
            with pytest.raises(TypeError, match=r"constraint S >= 1"):
                compiled(*args)
            continue
        got = np.asarray(compiled(*args))
        assert got.shape == expected.shape and got.dtype == expected.dtype, (size, got.shape)
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5, err_msg=f"size {size}")


@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_symbolic_sort_convolution_or_control_flow_on_the_gpu(name: str) -> None:
    program, reference, _, dynamic, arguments = CONSTRUCTS[name]
    f = jitc.jit(program, backend="cuda", dynamic=dynamic, disk_cache=False)
    for size in CONSTRUCT_SIZES:
        args = arguments(size)
        got, expected = np.asarray(f(*args)), reference(*args)
        assert got.shape == expected.shape and got.dtype == expected.dtype, (size, got.shape)
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5, err_msg=f"size {size}")
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


def test_a_batch_sweep_on_the_gpu_compiles_twice_and_keeps_results_on_the_device() -> None:
    f = jitc.jit(mlp, backend="cuda", disk_cache=False)
    weights = [jitc.device_put(w) for w in (W1, B1, W2)]
    for batch in (*range(1, 41), 300, 0):
        x = floats(batch, 48)
        got = f(jitc.device_put(x), *weights)
        assert isinstance(got, DeviceArray) and got.shape == (batch, 10)
        np.testing.assert_allclose(np.asarray(got), mlp(x, W1, B1, W2), rtol=2e-5, atol=2e-5)
    # Batch 0 is outside the symbolic compilation's guard (x_0 >= 2): compiled exactly.
    stats = f.compile_stats()
    assert [s["symbolic"] for s in stats] == [False, True, False]
    assert stats[2]["reason"] == "constraint x_0 >= 2 failed (x_0=0): exact compilation"


def test_whole_array_writes_under_symbolic_dimensions_on_the_gpu() -> None:
    # One symbolic compilation writes back into the caller's arrays for every size.
    f = jitc.jit(normalize_in_place, backend="cuda", dynamic=True, disk_cache=False)
    for n in (3, 5, 1, 8):
        agree_in_place(f, n)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]
