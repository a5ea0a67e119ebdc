"""Kernels that compute the same thing are generated once: the layers of a model, each traced
with its own weights, share their code, so compile time stops growing with depth."""

from __future__ import annotations

import re

import numpy as np
import pytest
from jitcheck import check_jit
from ops.backends import require

import jitc
from jitc.backends.cpu.codegen import lower_module
from jitc.backends.cuda.ptx import entry_names
from jitc.ir.core import Function
from jitc.ir.parser import parse_module
from jitc.ir.structural import function_key

WIDTH, ROWS = 32, 8


def block(x, g, b, w1, b1, w2, b2):
    mean = x.mean(axis=-1, keepdims=True)
    h = g * (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) + b
    h = h @ w1 + b1
    h = 0.5 * h * (1 + np.tanh(0.79788456 * (h + 0.044715 * h**3)))
    return x + (h @ w2 + b2)


def stack(x, layers):
    for layer in layers:
        x = block(x, *layer)
    return x


def _inputs(depth: int, seed: int = 0):
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)
    layers = [(1 + normal(WIDTH), normal(WIDTH), normal(WIDTH, 4 * WIDTH), normal(4 * WIDTH),
               normal(4 * WIDTH, WIDTH), normal(WIDTH)) for _ in range(depth)]
    return normal(ROWS, WIDTH), layers


def _compiled_bodies(depth: int) -> tuple[int, int]:
    """(kernels the entry runs, kernel bodies LLVM compiles) of a `depth`-layer stack."""
    x, layers = _inputs(depth)
    module = jitc.jit(stack).lower(x, layers).optimize()
    lowering = lower_module(module, 2, partitions=2, external_routines=True)
    bodies = [name for part in lowering.parts for name, value in part.globals.items()
              if name.endswith(".body") and not value.is_declaration]
    return len(lowering.kernels), len(bodies)


def test_layers_compile_each_distinct_kernel_once() -> None:
    kernels_2, bodies_2 = _compiled_bodies(2)
    kernels_4, bodies_4 = _compiled_bodies(4)
    assert kernels_4 == 2 * kernels_2
    # Deeper models add kernels the entry calls, not code LLVM compiles.
    assert bodies_4 == bodies_2 <= kernels_2


def _c_functions(depth: int) -> tuple[int, int]:
    """(kernel calls in the entry, kernel functions defined) of the C source."""
    x, layers = _inputs(depth)
    source = jitc.jit(stack, backend="c").lower(x, layers).compile().as_text()
    entry = source[source.index("void jitc_entry("):]
    return len(re.findall(r"^    k\d+_\w+\(", entry, re.M)), \
        len(re.findall(r"^static void k\d+_\w+\(", source, re.M))


def test_c_layers_define_each_distinct_kernel_once() -> None:
    require("c")
    calls_2, functions_2 = _c_functions(2)
    calls_4, functions_4 = _c_functions(4)
    assert calls_4 == 2 * calls_2
    assert functions_4 == functions_2 < calls_4


def _ptx_kernels(depth: int) -> tuple[int, int]:
    """(kernel launches, kernels the PTX defines) of the cuda backend's code."""
    x, layers = _inputs(depth)
    compiled = jitc.jit(stack, backend="cuda").lower(x, layers).compile()
    return compiled.executable.kernel_count, len(entry_names(compiled.as_text()))


def test_cuda_layers_generate_each_distinct_kernel_once() -> None:
    launches_2, kernels_2 = _ptx_kernels(2)
    launches_4, kernels_4 = _ptx_kernels(4)
    assert launches_4 == 2 * launches_2
    assert kernels_4 == kernels_2 < launches_4


@pytest.mark.parametrize("backend", ["cpu", "c", "cuda-sim"])
def test_shared_kernels_compute_each_layer_with_its_own_weights(backend) -> None:
    require(backend)
    x, layers = _inputs(4, seed=1)
    check_jit(stack, x, layers, backend=backend, rtol=1e-4, atol=1e-5)


def _function(text: str) -> tuple[Function, str]:
    module = parse_module(text)
    return module.entry, function_key(module.entry, module)


def test_structural_key_ignores_names_and_independent_order() -> None:
    _, first = _function("""
func @layer0 {
  %x = parameter() index=0 : f32[4]
  %w_0 = parameter() index=1 : f32[4]
  %0 = constant() value=2.0 : f32[]
  %1 = broadcast_in_dim(%0) dims=[] : f32[4]
  %2 = mul(%x, %1) : f32[4]
  %3 = add(%2, %w_0) : f32[4]
  return %3
}
""")
    _, second = _function("""
func @layer1 {
  %x = parameter() index=0 : f32[4]
  %w_1 = parameter() index=1 : f32[4]
  %a = constant() value=2.0 : f32[]
  %unused = exp(%x) : f32[4]
  %b = broadcast_in_dim(%a) dims=[] : f32[4]
  %c = mul(%x, %b) : f32[4]
  %d = add(%c, %w_1) : f32[4]
  return %d
}
""")
    assert first == second


def test_structural_key_sees_constants_operand_order_and_parameter_index() -> None:
    base = """
func @f {
  %x = parameter() index=0 : f32[4]
  %y = parameter() index=1 : f32[4]
  %0 = constant() value=2.0 : f32[]
  %1 = broadcast_in_dim(%0) dims=[] : f32[4]
  %2 = sub(%x, %1) : f32[4]
  %3 = div(%2, %y) : f32[4]
  return %3
}
"""
    _, key = _function(base)
    variants = [base.replace("value=2.0", "value=3.0"),
                base.replace("sub(%x, %1)", "sub(%1, %x)"),
                base.replace("index=0", "index=2").replace("index=1", "index=0")
                    .replace("index=2", "index=1"),
                base.replace("div(%2, %y)", "div(%2, %x)")]
    keys = {_function(text)[1] for text in variants}
    assert key not in keys and len(keys) == len(variants)
