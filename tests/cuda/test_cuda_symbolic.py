"""The cuda backend with symbolic extents (docs/dynamic-shapes.md), run by the grid simulator:
a module with `Dim` dimensions compiles once (kernels read the symbol values from a device
buffer, the host sizes grids and buffers per call) and agrees with numpy and the interpreter
for every size; code that needs a static extent is refused at compile time."""

from __future__ import annotations

import numpy as np
import pytest
from cudacheck import check_ptx, require_ptxas
from fakedriver import FakeDriver, compile_on_fake
from symbolic_cases import PROGRAMS, SIZES
from symbolic_programs import B1, W1, W2, floats, mlp

import jitc
from jitc.backends.cuda import backend
from jitc.backends.cuda import launch as launches
from jitc.backends.cuda.codegen import Lowering
from jitc.backends.llvm.extents import SymbolicExtentError
from jitc.ir.core import Module
from jitc.ir.interpreter import ArgumentError
from jitc.ir.symbolic import UnknownDimensionError, symbol
from jitc.tracing.function import AbstractArray


def _lowered(program: str, backend: str = "cuda-sim") -> jitc.stages.Lowered:
    fun, specs, _ = PROGRAMS[program]
    return jitc.jit(fun, backend=backend).lower(*(AbstractArray(s) for s in specs))


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_one_compilation_agrees_with_numpy_and_the_interpreter(program: str) -> None:
    fun, _, arguments = PROGRAMS[program]
    lowered = _lowered(program)
    compiled = lowered.compile()
    for size in SIZES:
        args = arguments(size)
        try:
            expected = fun(*args)
        except ValueError:  # numpy's max of an empty axis: both refuse the call
            for run in (compiled, lambda *a: jitc.interpret(lowered.module, a)):
                with pytest.raises(TypeError, match=r"constraint S >= 1"):
                    run(*args)
            continue
        (reference,) = jitc.interpret(lowered.module, args)
        got = compiled(*args)
        assert got.shape == expected.shape == reference.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(got, reference, rtol=2e-5, atol=2e-5)


def test_grids_are_sized_from_each_call(driver: FakeDriver) -> None:
    # The GPU runtime (here on the fake driver, which runs the simulator's kernels): one
    # compilation, launched with as many 256-thread blocks as each call's size needs.
    fun, specs, _ = PROGRAMS["elementwise with a broadcast column"]
    compiled = compile_on_fake(driver, fun, *(AbstractArray(s) for s in specs))
    for n in (1, 300, 2000):
        args = floats(n, 10), floats(10), floats(n, 1)
        driver.launches.clear()
        got = np.asarray(compiled(*args))
        np.testing.assert_allclose(got, PROGRAMS["elementwise with a broadcast column"][0](*args),
                                   rtol=2e-5, atol=2e-5)
        assert [(grid, block) for _, grid, block, _ in driver.launches] == \
            [((-(-n * 10 // 256), 1), (256, 1, 1))]


def test_a_call_with_no_work_launches_no_kernel(driver: FakeDriver) -> None:
    compiled = compile_on_fake(driver, mlp, AbstractArray("f32[B,48]"), W1, B1, W2)
    driver.launches.clear()
    got = np.asarray(compiled(floats(0, 48), W1, B1, W2))
    assert got.shape == (0, 10) and driver.launches == []
    x = floats(3, 48)
    np.testing.assert_allclose(np.asarray(compiled(x, W1, B1, W2)), mlp(x, W1, B1, W2),
                               rtol=2e-5, atol=2e-5)
    assert len(driver.launches) == 2  # two matrix products, their epilogues fused


def test_symbolic_block_counts_follow_the_call_within_the_grid_limits() -> None:
    n = symbol("n")
    elementwise = launches.symbolic_elementwise(n * 10)
    assert [elementwise.blocks({"n": v}) for v in (0, 1, 26, 10**6)] == [0, 1, 2, 4096]
    rows = launches.symbolic_row_reduction(n, 100).launch  # a block per row, not strided
    assert rows.blocks({"n": 5}) == 5 and rows.block == 128
    with pytest.raises(ValueError, match=r"a launch of 2147483648 blocks exceeds"):
        rows.blocks({"n": 2**31})
    short = launches.symbolic_row_reduction(n, 10)  # 16 lanes a row, 16 rows a block
    assert (short.group, short.rows_per_block, short.launch.blocks({"n": 33})) == (16, 16, 3)


def test_a_call_that_breaks_a_constraint_names_it() -> None:
    compiled = jitc.jit(lambda x, y: x * y, backend="cuda-sim").lower(
        AbstractArray("f32[n]"), AbstractArray("f32[m]")).compile()
    executable = compiled.executable
    with pytest.raises(ArgumentError, match=r"constraint m == n does not hold: m=3, n=5"):
        executable([np.ones(5, np.float32), np.ones(3, np.float32)])
    with pytest.raises(ArgumentError, match=r"expected f32\[n\], got float32\[2, 2\]"):
        executable([np.ones((2, 2), np.float32), np.ones(3, np.float32)])


PTX_PROGRAMS = ["elementwise with a broadcast column", "softmax along a symbolic axis",
                "softmax over a symbolic batch", "sum over a static major axis",
                "matmul, M, N and K symbolic", "mlp"]


@pytest.mark.parametrize("program", PTX_PROGRAMS)
def test_symbolic_ptx_assembles(program: str) -> None:
    require_ptxas()
    check_ptx(_lowered(program, "cuda").compile())


def test_the_symbol_values_are_the_last_kernel_parameter_of_symbolic_programs_only() -> None:
    symbolic = _lowered("elementwise with a broadcast column", "cuda").compile()
    lowering = symbolic.executable.lowering
    (spec,) = lowering.specs
    assert spec.launch.grid_extent is not None
    # The symbol values are one more kernel parameter after the three inputs and the
    # result, read through the non-coherent cache (read-only, no alias).
    assert spec.slots[-1] == lowering.plan.dims_slot and len(spec.slots) == 5
    assert symbolic.as_text().count(".param .u64") == 5
    static = jitc.jit(PROGRAMS["elementwise with a broadcast column"][0], backend="cuda").lower(
        floats(5, 10), floats(10), floats(5, 1)).compile()
    assert static.as_text().count(".param .u64") == 4


def test_the_default_policy_serves_batches_1_to_40_with_two_compilations() -> None:
    f = jitc.jit(mlp, backend="cuda-sim", dynamic=None, disk_cache=False)
    for batch in range(1, 41):
        x = floats(batch, 48)
        np.testing.assert_allclose(f(x, W1, B1, W2), mlp(x, W1, B1, W2), rtol=2e-5, atol=2e-5)
    assert [(s["signature"], s["symbolic"]) for s in f.compile_stats()] == [
        ("f32[1,48], f32[48,32], f32[32], f32[32,10]", False),
        ("f32[x_0,48], f32[48,32], f32[32], f32[32,10]", True)]


def doubled_thrice(x):
    return jitc.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x)


def test_code_needing_a_static_extent_is_refused_at_compile_time_and_compiled_exactly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Every construct compiles symbolically today: a code generator that needs a static
    # extent (UnknownDimensionError) stands in for the next one that does not.
    lower_module = backend.lower_module

    def static_only(module: Module) -> Lowering:
        if any(t.symbols for t in module.entry.parameter_types):
            raise UnknownDimensionError("how the symbolic dimension x_0 compares with 2048 is "
                                        "not known until the call")
        return lower_module(module)
    monkeypatch.setattr(backend, "lower_module", static_only)
    with pytest.raises(SymbolicExtentError, match=r"the cuda-sim backend cannot compile "
                       r"doubled_thrice with symbolic dimensions \(B\) yet: how the symbolic "
                       r"dimension x_0 compares with 2048"):
        jitc.jit(doubled_thrice, backend="cuda-sim").lower(AbstractArray("f32[B,8]")).compile()
    f = jitc.jit(doubled_thrice, backend="cuda-sim", dynamic=True, disk_cache=False)
    for n in (3, 5):
        x = floats(n, 8)
        np.testing.assert_array_equal(f(x), x * 8.0)
    stats = f.compile_stats()
    assert [s["symbolic"] for s in stats] == [False, False]
    assert "the symbolic compilation is refused (SymbolicExtentError: the cuda-sim backend " \
        "cannot compile doubled_thrice with symbolic dimensions" in stats[0]["reason"]
