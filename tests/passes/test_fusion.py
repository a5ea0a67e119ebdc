"""Fusion, layout assignment and buffer assignment: IR text in and out, kernel counts of the
standard workloads on the CPU backend, and random programs that must compute the same after
the whole kernel pipeline."""

from __future__ import annotations

import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pipeline_properties import Program, assert_close
from test_simplify import special_array

import jitc
from jitc.ir import ops
from jitc.ir.interpreter import interpret
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.passes import KERNEL_PASSES, Pipeline, dce, fusion, run_passes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# -- IR text in, IR text out -------------------------------------------------------------------

def test_elementwise_chain_becomes_one_loop_fusion(assert_same_results) -> None:
    before = parse_module(ir("""
        func @f {
          %x = parameter() index=0 : f32[4,8]{1,0}
          %b = parameter() index=1 : f32[8]
          %0 = broadcast_in_dim(%b) dims=[1] : f32[4,8]{1,0}
          %1 = add(%x, %0) : f32[4,8]{1,0}
          %2 = tanh(%1) : f32[4,8]{1,0}
          return %2
        }
        """))
    after = run_passes(before, [fusion])
    assert print_module(after) == ir("""
        func @f {
          %x = parameter() index=0 : f32[4,8]{1,0}
          %b = parameter() index=1 : f32[8]
          %0 = fusion(%b, %x) kind=loop calls=@fused_loop_0 : f32[4,8]{1,0}
          return %0
        }

        func @fused_loop_0 {
          %b = parameter() index=0 : f32[8]
          %x = parameter() index=1 : f32[4,8]{1,0}
          %0 = broadcast_in_dim(%b) dims=[1] : f32[4,8]{1,0}
          %1 = add(%x, %0) : f32[4,8]{1,0}
          %2 = tanh(%1) : f32[4,8]{1,0}
          return %2
        }
        """)
    assert parse_module(print_module(after)) == after
    assert_same_results(before, after)


def test_expensive_producer_with_two_consumers_is_not_duplicated(assert_same_results) -> None:
    before = parse_module(ir("""
        func @f {
          %x = parameter() index=0 : f32[16]
          %0 = exp(%x) : f32[16]
          %1 = reduce(%0) dims=[0] kind=sum : f32[]
          %2 = reduce(%0) dims=[0] kind=max : f32[]
          return %1, %2
        }
        """))
    after = run_passes(before, [fusion])
    # exp feeds two reductions of different groups: it stays materialised, computed once.
    assert sum(1 for i in after.entry.body if i.op is ops.EXP) == 1
    assert all(i.op is not ops.EXP for name, fn in after.functions.items()
               if name != "f" for i in fn.body)
    assert_same_results(before, after)


def test_cheap_producer_is_duplicated_into_each_consumer(assert_same_results) -> None:
    before = parse_module(ir("""
        func @f {
          %x = parameter() index=0 : f32[4,8]{1,0}
          %0 = transpose(%x) permutation=[1,0] : f32[8,4]{1,0}
          %1 = neg(%0) : f32[8,4]{1,0}
          %2 = abs(%0) : f32[8,4]{1,0}
          %3 = exp(%1) : f32[8,4]{1,0}
          %4 = sqrt(%2) : f32[8,4]{1,0}
          return %3, %4
        }
        """))
    after = run_passes(before, [fusion, dce])
    # Both kernels read %x: they become one two-output loop, the transpose computed in it.
    (kernel,) = [i for i in after.entry.body if i.op is ops.FUSION]
    assert kernel.attrs["kind"] == "loop" and len(kernel.results) == 2
    assert not any(i.op is ops.TRANSPOSE for i in after.entry.body)
    assert_same_results(before, after)


def test_sibling_reductions_of_one_input_become_one_kernel(assert_same_results) -> None:
    before = parse_module(ir("""
        func @f {
          %x = parameter() index=0 : f32[4,8]{1,0}
          %0 = reduce(%x) dims=[1] kind=sum : f32[4]
          %1 = mul(%x, %x) : f32[4,8]{1,0}
          %2 = reduce(%1) dims=[1] kind=sum : f32[4]
          return %0, %2
        }
        """))
    after = run_passes(before, [fusion, dce])
    assert print_module(after).split("\n\n")[0] == ir("""
        func @f {
          %x = parameter() index=0 : f32[4,8]{1,0}
          %0, %1 = fusion(%x) kind=row calls=@fused_row_0 : f32[4], f32[4]
          return %0, %1
        }
        """).rstrip("\n")
    assert_same_results(before, after)


def test_dot_with_epilogue_is_output_fused(assert_same_results) -> None:
    before = parse_module(ir("""
        func @f {
          %x = parameter() index=0 : f32[4,8]{1,0}
          %w = parameter() index=1 : f32[8,3]{1,0}
          %b = parameter() index=2 : f32[3]
          %0 = dot_general(%x, %w) lhs_contract=[1] rhs_contract=[0] : f32[4,3]{1,0}
          %1 = broadcast_in_dim(%b) dims=[1] : f32[4,3]{1,0}
          %2 = add(%0, %1) : f32[4,3]{1,0}
          %3 = constant() value=0.0 : f32[]
          %4 = broadcast_in_dim(%3) dims=[] : f32[4,3]{1,0}
          %5 = max(%2, %4) : f32[4,3]{1,0}
          return %5
        }
        """))
    after = run_passes(before, [fusion])
    (kernel,) = [i for i in after.entry.body if i.op is ops.FUSION]
    assert kernel.attrs["kind"] == "dot"
    assert [i.op for i in after.entry.body if i.op not in (ops.PARAMETER, ops.CONSTANT)] == \
        [ops.FUSION]
    assert_same_results(before, after)


# -- kernel counts of the standard workloads (CPU backend) -----------------------------------

def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def dense_relu(x, w, b):
    return np.maximum(x @ w + b, 0)


def kernel_count(fn, *args) -> int:
    compiled = jitc.jit(fn, backend="cpu").lower(*args).compile()
    np.testing.assert_allclose(compiled(*args), fn(*args), rtol=2e-5, atol=1e-5)
    return compiled.cost_analysis()["kernels"]


RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 96)).astype(np.float32)


def test_gelu_is_one_kernel() -> None:
    assert kernel_count(gelu, X) == 1


def test_softmax_is_one_kernel() -> None:
    assert kernel_count(softmax, X) == 1  # target: at most 2


def test_layernorm_is_one_kernel() -> None:
    g, b = RNG.standard_normal(96).astype(np.float32), RNG.standard_normal(96).astype(np.float32)
    assert kernel_count(layernorm, X, g, b) == 1  # target: at most 2


def test_dense_relu_is_one_dot_kernel_with_its_epilogue() -> None:
    w, b = RNG.standard_normal((96, 32)).astype(np.float32), np.ones(32, np.float32)
    assert kernel_count(dense_relu, X, w, b) == 1
    optimized = jitc.jit(dense_relu).lower(X, w, b).optimize()
    (kernel,) = [i for i in optimized.entry.body if i.op is ops.FUSION]
    assert kernel.attrs["kind"] == "dot"


def test_xla_cse_example_multiplies_once() -> None:
    def f(b, c, e, g):
        return b * c + g, b * c * e
    args = [RNG.standard_normal(16).astype(np.float32) for _ in range(4)]
    optimized = jitc.jit(f).lower(*args).optimize()
    multiplies = [i for fn in optimized.functions.values() for i in fn.body if i.op is ops.MUL]
    assert len([m for m in multiplies if {v.name_hint for v in m.operands} == {"b", "c"}]) == 1


def test_transposed_operands_need_no_copy() -> None:
    x, w = RNG.standard_normal((32, 16)).astype(np.float32), X[:32, :8].copy()
    assert kernel_count(lambda x, w: x.T @ w, x, w) == 1
    assert kernel_count(lambda x: np.sum(x.T, axis=1), x) == 1


def test_gpt2_block_temporaries_are_far_below_the_sum_of_intermediates() -> None:
    import test_model_gpt2 as gpt2
    params = gpt2.block_params(np.random.default_rng(0), np.float32, 64)
    x = np.random.default_rng(1).standard_normal((2, 16, 64)).astype(np.float32)
    f = jitc.jit(gpt2.transformer_block, static_argnums=2)
    compiled = f.lower(x, params, 4).compile()
    memory, costs = compiled.memory_analysis(), compiled.cost_analysis()
    unfused = jitc.jit(gpt2.transformer_block, static_argnums=2, backend="interpreter")
    traced = unfused.lower(x, params, 4).compile().cost_analysis()
    assert costs["kernels"] * 4 < traced["kernels"]
    assert costs["kernels"] <= 15  # 5 contractions with epilogues, 3 row kernels, loops
    assert memory["temp_bytes"] * 2 < memory["intermediate_bytes"]
    np.testing.assert_allclose(compiled(x, params, 4), gpt2.transformer_block(x, params, 4),
                               rtol=1e-4, atol=1e-4)


# -- random programs through the whole kernel pipeline -----------------------------------------

@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_kernel_pipeline_preserves_results(data: st.DataObject, arguments) -> None:
    module = Program(data).build()
    args = [arguments(module, 0), [special_array(t) for t in module.entry.parameter_types]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        optimized = Pipeline("kernel", KERNEL_PASSES, verify=True).run(module)
    assert parse_module(print_module(optimized)) == optimized
    for values in args:
        assert_close(interpret(module, values), interpret(optimized, values))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cpu_code_for_random_programs_matches_the_interpreter(data: st.DataObject,
                                                              arguments) -> None:
    from jitc.backends import get_backend
    from jitc.options import Options
    module = Program(data).build()
    args = [arguments(module, 0), [special_array(t) for t in module.entry.parameter_types]]
    optimized = Pipeline("kernel", KERNEL_PASSES, verify=True).run(module)
    executable = get_backend("cpu").compile(optimized, Options(backend="cpu"))
    for values in args:
        assert_close(interpret(module, values), executable(values))


def test_convolution_results_are_laid_out_features_minor_whatever_the_labels() -> None:
    from jitc import lax

    def nchw(x, w):
        return lax.conv_general_dilated(x, w, dimension_numbers="bf01_oi01->bf01").sum(
            axis=(2, 3))

    def nhwc(x, w):
        return lax.conv_general_dilated(x, w, dimension_numbers="b01f_01io->b01f").sum(
            axis=(1, 2))
    x = RNG.standard_normal((2, 3, 9, 9)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    cases = [(nchw, (x, w)), (nhwc, (x.transpose(0, 2, 3, 1).copy(),
                                      w.transpose(2, 3, 1, 0).copy()))]
    results = []
    for fn, args in cases:
        optimized = jitc.jit(fn).lower(*args).optimize()
        (conv,) = [i for i in optimized.entry.body if i.op is ops.CONVOLUTION]
        features = ops.parse_dim_labels(conv.attrs["dim_labels"]).out_feature
        assert conv.results[0].type.layout[0] == features  # features are contiguous
        assert kernel_count(fn, *args) == 2  # convolution and reduce: no layout copy
        results.append(jitc.jit(fn)(*args))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-4)


def test_an_epilogue_that_moves_data_is_not_fused_into_the_contraction() -> None:
    x, w = RNG.standard_normal((8, 8)).astype(np.float32), RNG.standard_normal((8, 8))

    def transposed_epilogue(x, w):
        return np.tanh((x @ w).T) + 1
    w = w.astype(np.float32)
    assert kernel_count(transposed_epilogue, x, w) == 2  # the product is materialised first


def test_a_loop_kernel_joins_the_loop_kernel_reading_its_result_as_a_second_output() -> None:
    """An LSTM step's tail: the cell state c and h = o * tanh(c) in one pass, c returned too."""
    import jitc

    def tail(f, i, g, o, c):
        c = 1 / (1 + np.exp(-f)) * c + 1 / (1 + np.exp(-i)) * np.tanh(g)
        return 1 / (1 + np.exp(-o)) * np.tanh(c), c

    rng = np.random.default_rng(0)
    args = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(5)]
    optimized = jitc.jit(tail).lower(*args).optimize()
    kernels = [i for i in optimized.entry.body if i.op is ops.FUSION]
    assert len(kernels) == 1 and len(kernels[0].results) == 2
    for backend in ("interpreter", "cpu", "c", "cuda-sim"):
        for got, want in zip(jitc.jit(tail, backend=backend)(*args), tail(*args), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
