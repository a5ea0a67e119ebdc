"""The cpu backend with symbolic extents (docs/dynamic-shapes.md): a module with `Dim`
dimensions compiles once and runs for every size its constraints accept, agreeing with numpy
and with the interpreter; what the kernels cannot take symbolically is refused at compile time,
and `jit`'s policy then compiles exactly."""

from __future__ import annotations

import re

import numpy as np
import pytest
from symbolic_programs import B1, PROGRAMS, W1, W2, floats, mlp, softmax

import jitc
from jitc.backends.base import get_backend
from jitc.backends.cpu.plan import plan_buffers
from jitc.backends.llvm.extents import SymbolicExtentError
from jitc.ir.interpreter import ArgumentError
from jitc.ir.parser import parse_module
from jitc.ir.symbolic import is_static
from jitc.options import Options
from jitc.passes import KERNEL_PASSES
from jitc.passes.pipeline import Pipeline
from jitc.tracing.function import AbstractArray

SIZES = (0, 1, 2, 7, 33, 100)


def _compiled(program: str) -> tuple[jitc.api.Compiled, object]:
    fun, specs, _ = PROGRAMS[program]
    lowered = jitc.jit(fun).lower(*(AbstractArray(s) for s in specs))
    compiled = lowered.compile()
    return compiled, lowered.module


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_one_compilation_agrees_with_numpy_and_the_interpreter(program: str) -> None:
    fun, _, arguments = PROGRAMS[program]
    compiled, module = _compiled(program)
    for size in SIZES:
        args = arguments(size)
        try:
            expected = fun(*args)
        except ValueError:  # numpy's max of an empty axis: both refuse the call
            for run in (compiled, lambda *a: jitc.interpret(module, a)):
                with pytest.raises(TypeError, match=r"constraint S >= 1"):
                    run(*args)
            continue
        (reference,) = jitc.interpret(module, args)
        got = compiled(*args)
        assert got.shape == expected.shape == reference.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(got, reference, rtol=2e-5, atol=2e-5)


def _stats(f) -> list[tuple[str, bool]]:
    return [(s["signature"], s["symbolic"]) for s in f.compile_stats()]


def test_the_default_policy_serves_batches_1_to_512_with_two_compilations() -> None:
    f = jitc.jit(mlp)
    for batch in range(1, 513):
        x = floats(batch, 48)
        got = f(x, W1, B1, W2)
        if batch in (1, 2, 3, 64, 511):
            np.testing.assert_allclose(got, mlp(x, W1, B1, W2), rtol=2e-5, atol=2e-5)
    assert _stats(f) == [("f32[1,48], f32[48,32], f32[32], f32[32,10]", False),
                         ("f32[x_0,48], f32[48,32], f32[32], f32[32,10]", True)]


def test_dynamic_true_compiles_once_for_every_size_even_0_and_1() -> None:
    f = jitc.jit(softmax, dynamic=True)
    for batch, width in ((5, 10), (0, 3), (1, 7), (64, 33)):
        x = floats(batch, width)
        np.testing.assert_allclose(f(x), softmax(x), rtol=2e-5, atol=2e-6)
    assert _stats(f) == [("f32[x_0,x_1]", True)]


def test_a_call_that_breaks_a_constraint_names_it() -> None:
    compiled = jitc.jit(lambda x, y: x * y).lower(AbstractArray("f32[n]"),
                                                  AbstractArray("f32[m]")).compile()
    np.testing.assert_array_equal(compiled(np.ones(4, np.float32), np.full(4, 2, np.float32)),
                                  np.full(4, 2, np.float32))
    executable = compiled.executable
    with pytest.raises(ArgumentError, match=r"constraint m == n does not hold: m=3, n=5"):
        executable([np.ones(5, np.float32), np.ones(3, np.float32)])
    with pytest.raises(ArgumentError, match=r"expected f32\[n\], got float32\[2, 2\]"):
        executable([np.ones((2, 2), np.float32), np.ones(3, np.float32)])


def test_a_donated_argument_holds_the_result_of_a_symbolic_call() -> None:
    f = jitc.jit(lambda x: x * 2.0 + 1.0, donate_argnums=(0,), dynamic=True)
    for n in (3, 9):
        x = floats(n, 4)
        expected = x * 2.0 + 1.0
        got = f(x)
        np.testing.assert_array_equal(got, expected)
        assert got is x  # computed in place, as with static shapes
    assert _stats(f) == [("f32[x_0,x_1]", True)]


def test_an_unsupported_construct_is_refused_at_compile_time_and_compiled_exactly() -> None:
    def byte_product(a, b):
        return a.astype(np.int32) @ b.astype(np.int32)

    with pytest.raises(SymbolicExtentError, match=r"the cpu backend cannot compile "
                                                   r"byte_product with symbolic dimensions "
                                                   r"\(B\) yet"):
        jitc.jit(byte_product).lower(AbstractArray("i8[B,64]"), AbstractArray("i8[64,32]")
                                     ).compile()
    f = jitc.jit(byte_product)
    rng = np.random.default_rng(3)
    right = rng.integers(-128, 128, (64, 32)).astype(np.int8)
    for n in (3, 5, 8):
        left = rng.integers(-128, 128, (n, 64)).astype(np.int8)
        np.testing.assert_array_equal(f(left, right), byte_product(left, right))
    stats = f.compile_stats()
    assert [s["symbolic"] for s in stats] == [False, False, False]
    assert "the symbolic compilation is refused (SymbolicExtentError: the cpu backend " \
        "cannot compile byte_product with symbolic dimensions" in stats[1]["reason"]


def _write_rows(x, rows, at):
    return jitc.lax.dynamic_update_slice(x, rows, (at, 0)) * 2.0


def test_dynamic_update_slice_of_an_update_of_symbolic_size() -> None:
    f = jitc.jit(_write_rows, dynamic=True)
    for n, r, at in ((3, 2, 1), (5, 0, 2), (9, 4, 7), (1, 1, 0)):
        x, rows = floats(n, 3), floats(r, 3)
        start = min(max(at, 0), n - r)  # numpy's rule (lax.dynamic_update_slice clamps)
        expected = x.copy()
        expected[start:start + r] = rows
        np.testing.assert_array_equal(f(x, rows, at), expected * 2.0)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


def test_the_static_code_of_a_module_is_unchanged_by_symbol_support() -> None:
    # A static module has no symbol slot and passes no symbol values: one buffer per argument,
    # result and constant, and the workspace pointer (docs/backend-porting.md).
    lowered = jitc.jit(mlp).lower(floats(4, 48), W1, B1, W2)
    ir_text = lowered.compile().executable.as_text()
    assert "sym." not in ir_text
    symbolic_text = jitc.jit(mlp).lower(AbstractArray("f32[B,48]"), W1, B1,
                                        W2).compile().executable.as_text()
    assert "sym.B" in symbolic_text


SLICES = """
constraint n >= 2
constraint n % 4 == 0

func @slices {
  %x = parameter() index=0 : f32[n,6]{1,0}
  %0 = slice(%x) start=[1,0] limit=[n,6] : f32[n-1,6]{1,0}
  %1 = add(%0, %0) : f32[n-1,6]{1,0}
  %2 = reshape(%x) : f32[n//4,24]{1,0}
  %3 = slice(%x) start=[0,2] limit=[n-1,5] : f32[n-1,3]{1,0}
  %4 = slice(%1) start=[1,0] limit=[n-1,6] stride=[2,1] : f32[(n+1)//2-1,6]{1,0}
  %5 = slice(%x) start=[n-2,0] limit=[n,6] : f32[2,6]{1,0}
  %6 = mul(%5, %5) : f32[2,6]{1,0}
  return %1, %2, %3, %4, %6
}
"""


def test_slices_and_reshapes_of_symbolic_extents_from_ir_text() -> None:
    module = parse_module(SLICES)
    optimized = Pipeline("cpu", list(KERNEL_PASSES)).run(module)
    plan = plan_buffers(optimized.entry, frozenset(), optimized, views=True)
    assert any(not is_static(offset) for _, offset in plan.views.values())  # x[n-2:] is a view
    executable = get_backend("cpu").compile(optimized, Options())
    for n in (4, 8, 12, 100):
        x = floats(n, 6)
        got = executable([x])
        expected = [x[1:] * 2, x.reshape(n // 4, 24), x[:n - 1, 2:5], (x[1:] * 2)[1::2],
                    x[n - 2:] * x[n - 2:]]
        for g, r, e in zip(got, jitc.interpret(module, [x]), expected, strict=True):
            np.testing.assert_array_equal(g, e)
            np.testing.assert_array_equal(r, e)
    with pytest.raises(ArgumentError, match=r"constraint n % 4 == 0 does not hold: n=6"):
        executable([floats(6, 6)])


def test_threads_share_one_symbolic_compilation_with_workspaces_of_their_own() -> None:
    from concurrent.futures import ThreadPoolExecutor

    compiled = _compiled("mlp")[0]
    assert not is_static(compiled.executable.workspace_bytes)  # sized per call
    batches = [floats(n % 7 * 9 + 1, 48) for n in range(40)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda x: compiled(x, W1, B1, W2), batches))
    for x, got in zip(batches, results):
        np.testing.assert_allclose(got, mlp(x, W1, B1, W2), rtol=2e-5, atol=2e-5)


def test_calls_served_symbolically_take_a_fast_path_that_misses_what_it_cannot_serve(
        monkeypatch) -> None:
    from jitc import api

    general = [0]
    original = api.Jitted._call_once

    def counted(self, *args, **kwargs):
        general[0] += 1
        return original(self, *args, **kwargs)
    monkeypatch.setattr(api.Jitted, "_call_once", counted)
    f = jitc.jit(mlp)
    for batch in (3, 5, 7, 9, 64):  # 3 exactly, 5 symbolically, then the symbolic fast path
        x = floats(batch, 48)
        np.testing.assert_allclose(f(x, W1, B1, W2), mlp(x, W1, B1, W2), rtol=2e-5, atol=2e-5)
    assert general[0] == 2
    x = floats(1, 48)  # fails the guard x_0 >= 2: the general path compiles it exactly
    np.testing.assert_allclose(f(x, W1, B1, W2), mlp(x, W1, B1, W2), rtol=2e-5, atol=2e-5)
    strided = floats(12, 96)[:, ::2]  # not contiguous: the general path converts it
    np.testing.assert_allclose(f(strided, W1, B1, W2), mlp(strided, W1, B1, W2), rtol=2e-5,
                               atol=2e-5)
    assert general[0] == 4
    assert sorted(s["symbolic"] for s in f.compile_stats()) == [False, False, True]


def test_a_profile_times_the_kernels_of_a_symbolic_compilation(tmp_path) -> None:
    import json

    f = jitc.jit(mlp, dynamic={"x": {0: "B"}})
    path = tmp_path / "profile.json"
    with jitc.profile(str(path)):
        for n in (6, 70):
            x = floats(n, 48)
            np.testing.assert_allclose(f(x, W1, B1, W2), mlp(x, W1, B1, W2), rtol=2e-5,
                                       atol=2e-5)
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) >= 4  # each call's kernels; their figures are expressions
    assert any(isinstance(e["args"].get("bytes"), str) for e in kernels)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


STATE = np.zeros(4, np.float32)


def _accumulate(x):
    STATE[...] = STATE + x.sum(axis=0)
    return x * 2.0


def test_a_write_to_captured_state_is_replayed_on_every_symbolic_call() -> None:
    STATE[...] = 0.0
    f = jitc.jit(_accumulate, dynamic={"x": {0: "B"}})
    expected = np.zeros(4, np.float32)
    for n in (3, 5, 0, 2):  # the second call on takes the fast path
        x = floats(n, 4)
        expected += x.sum(axis=0)
        np.testing.assert_array_equal(f(x), x * 2.0)
        np.testing.assert_allclose(STATE, expected, rtol=1e-6, atol=1e-6)  # float32 sums
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


SORTS = {
    "sort axis 0": (lambda x: np.sort(x, axis=0), "f32[n,3]", np.float32),
    "argsort axis 0": (lambda x: np.argsort(x, axis=0, kind="stable"), "f32[n,3]", np.float32),
    "sort axis 1, float64": (lambda x: np.sort(x, axis=1), "f64[2,n]", np.float64),
    "argsort of int8": (lambda x: np.argsort(x, axis=0, kind="stable"), "i8[n,2]", np.int8),
    "sort of int64": (lambda x: np.sort(x, axis=0), "i64[n]", np.int64),
}


@pytest.mark.parametrize("name", sorted(SORTS))
def test_a_sort_along_a_symbolic_axis_compiles_once_for_every_length(name: str) -> None:
    # The radix sort's row length, scratch and passes come from the call (it was refused,
    # and each length compiled exactly); -0.0 and nan come back as numpy's stable sort has them.
    fun, spec, dtype = SORTS[name]
    compiled = jitc.jit(fun).lower(AbstractArray(spec)).compile()  # refused before
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 300, 20000):
        shape = [int(d) if d != "n" else n for d in spec[spec.index("[") + 1:-1].split(",")]
        if dtype == np.int8 or dtype == np.int64:
            x = rng.integers(-100, 100, shape).astype(dtype)
        else:
            x = rng.standard_normal(shape).astype(dtype)
            if x.size > 4:
                x.flat[1], x.flat[3] = -0.0, np.nan
        got, want = compiled(x), fun(x)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), n


def _chunks(f, x: np.ndarray, w: np.ndarray, tmp_path) -> list[str]:
    """The [begin:end] ranges the thread pool's chunks of the product kernel covered in a call
    of `f` (a profile's chunk spans)."""
    import json

    path = tmp_path / "chunks.json"
    with jitc.profile(str(path)):
        np.testing.assert_allclose(f(x, w), x @ w, rtol=2e-5, atol=2e-4)
    events = json.loads(path.read_text())["traceEvents"]
    return sorted(e["name"].split(" ")[-1] for e in events if e.get("cat") == "chunk")


def test_a_symbolic_row_count_splits_a_product_between_threads_as_the_exact_one_does(
        tmp_path) -> None:
    # 13 rows are two strips of 8 rows, split unevenly (8 + 5) between two threads: the
    # exact compilation splits the 512 columns instead, and so must the symbolic one's
    # variant for up to 128 rows (it used to split as for 16 rows, two even strips).
    w = floats(128, 512)
    x = floats(13, 128)
    exact = jitc.jit(lambda a, b: a @ b, num_threads=2, dynamic=False)
    symbolic = jitc.jit(lambda a, b: a @ b, num_threads=2, dynamic={"a": {0: "M"}})
    expected = _chunks(exact, x, w, tmp_path)
    assert len(expected) == 2 and expected != ["[0:1]", "[1:2]"]
    assert _chunks(symbolic, x, w, tmp_path) == expected
    assert [s["symbolic"] for s in symbolic.compile_stats()] == [True]


# Products with a symbolic extent. An exact compilation multiplies one row or column with the
# generic kernel, and so does the symbolic one; from CHOICE_SIZES[-1] on both take the GEMM.
# (In between, an exact compilation under 32K multiply-adds takes the generic kernel, the
# symbolic one the GEMM, which is faster there: see gemm.generic_tests. A depth of 0 or 1, as
# "K symbolic" has at those sizes, rounds the same in either kernel.)
W_WIDE = floats(256, 256)
CHOICE_SIZES = (0, 1, 2, 7, 13, 33)
# name: (program, its symbolic dimensions, the arguments for a size)
PRODUCTS = {
    "M symbolic": (lambda x, w: x @ w, {"x": {0: "n"}}, lambda n: (floats(n, 48), W1)),
    "M symbolic, with an epilogue": (
        lambda x, w: x @ w + 1.0, {"x": {0: "n"}}, lambda n: (floats(n, 256), W_WIDE)),
    "N symbolic": (
        lambda x, y: x @ y, {"y": {1: "n"}}, lambda n: (floats(6, 256), floats(256, n))),
    "K symbolic": (
        lambda x, y: x @ y, {"x": {1: "n"}, "y": {0: "n"}},
        lambda n: (floats(8, n), floats(n, 128))),
    "batched attention scores": (
        lambda q, k: np.tanh(q @ k.transpose(0, 2, 1)), {"q": {1: "n"}, "k": {1: "n"}},
        lambda n: (floats(12, n, 64), floats(12, n, 64))),
}


@pytest.mark.parametrize("product", sorted(PRODUCTS))
def test_a_symbolic_product_of_one_row_or_column_runs_the_generic_kernel(product: str) -> None:
    # The generic kernel and the GEMM round differently (the GEMM fuses each multiply and
    # add): bits equal to an exact compilation's show that the same kernel ran.
    fun, dims, arguments = PRODUCTS[product]
    symbolic = jitc.jit(fun, dynamic=dims)
    for size in CHOICE_SIZES:
        args = arguments(size)
        got = symbolic(*args)
        np.testing.assert_allclose(got, fun(*args), rtol=2e-5, atol=2e-4)
        if size in (0, 1, CHOICE_SIZES[-1]):
            np.testing.assert_array_equal(got, jitc.jit(fun, dynamic=False)(*args))
    assert [s["symbolic"] for s in symbolic.compile_stats()] == [True]


PRODUCTS_TEXT = """
constraint B >= 2

func @layers {
  %x = parameter() index=0 : f32[B,784]{1,0}
  %w1 = parameter() index=1 : f32[784,512]{1,0}
  %w2 = parameter() index=2 : f32[512,10]{1,0}
  %0 = dot_general(%x, %w1) lhs_contract=[1] rhs_contract=[0] : f32[B,512]{1,0}
  %1 = dot_general(%0, %w2) lhs_contract=[1] rhs_contract=[0] : f32[B,10]{1,0}
  return %1
}
"""


def test_the_generic_kernel_is_emitted_only_for_sizes_the_constraints_allow() -> None:
    from jitc.backends.cpu import gemm

    module = parse_module(PRODUCTS_TEXT)
    first, second = (inst for inst in module.entry.body if inst.op.name == "dot_general")
    for inst in (first, second):
        form = gemm.analyse(inst, *inst.operands)
        assert form is not None
        assert [(str(e), b) for e, b in gemm.generic_tests(form, ())] == [("B", 1)]
        # B >= 2 rules out one row: the GEMM alone, even where B x 512 x 10 is under 32K.
        assert gemm.generic_tests(form, module.constraints) == []
    executable = get_backend("cpu").compile(Pipeline("cpu", list(KERNEL_PASSES)).run(module),
                                            Options())
    w1, w2 = floats(784, 512) * 0.05, floats(512, 10)
    for n in (2, 6, 7, 40):
        x = floats(n, 784)
        (got,) = executable([x, w1, w2])
        np.testing.assert_allclose(got, x @ w1 @ w2, rtol=1e-4, atol=1e-3)


def test_a_softmax_row_of_symbolic_length_keeps_its_exp_in_one_copy_of_the_row_code() -> None:
    # The exp that the sum reduces and the division reads again is kept in a row buffer:
    # ROW_BUFFER_LIMIT elements on the stack for the rows that fit it (decided per call), a
    # heap block for longer ones, freed after the rows. Before the buffer, a row of symbolic
    # length always recomputed the exp (1.8x the time of the exact kernel for GPT-2's 256-long
    # attention rows); before the heap block, the kernel held a second, recomputing copy of
    # the row code, which doubled LLVM's time for it.
    from jitc.backends.cpu.codegen import lower_module
    from jitc.backends.cpu.fusions import ROW_BUFFER_LIMIT

    lowered = jitc.jit(softmax).lower(AbstractArray("f32[R,S]"))
    text = str(lower_module(lowered.optimize()).llvm_ir)
    assert f"alloca float, i64 {ROW_BUFFER_LIMIT}" in text
    assert text.count('call ptr @"malloc"') == 1 and text.count('call void @"free"') == 1
    # The exp only in the sum's block loop and remainder loop: the division reads it from
    # the buffer (7 calls before: a second copy of the rows, and a chunk loop of its own).
    assert len(re.findall(r'call .*@"jitc.vmath.exp', text)) == 2
    compiled = lowered.compile()
    for rows, n in ((2, 3), (2, ROW_BUFFER_LIMIT), (2, ROW_BUFFER_LIMIT + 1),
                    (7, 3 * ROW_BUFFER_LIMIT), (1, 1)):
        x = floats(rows, n) * 4.0
        np.testing.assert_allclose(compiled(x), softmax(x), rtol=2e-5, atol=1e-9)
