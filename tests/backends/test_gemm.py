"""The blocked GEMM of the CPU backend against numpy: shapes off the tile sizes, empty and
unit dimensions, transposed and batched operands, fused epilogues, float32 and float64, one
and two threads, and the narrower tilings of AVX2 and SSE hosts."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import numpy as np
import pytest

import jitc
from jitc.backends.cpu import gemm, gemm_routines
from jitc.backends.cpu.backend import CpuBackend
from jitc.backends.cpu.codegen import lower_module
from jitc.ir import ops
from jitc.ir.core import Module
from jitc.ir.parser import parse_module
from jitc.options import Options
from jitc.passes import KERNEL_PASSES, Pipeline

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64]


@pytest.fixture(autouse=True)
def _same_data_in_any_order() -> None:
    """Each test draws the same arrays whichever tests ran before it in its process (the
    float tolerances below hold for these draws; the order differs under pytest -n)."""
    global RNG
    RNG = np.random.default_rng(0)


def compile_cpu(module: Module, threads: int) -> Callable[[list[np.ndarray]], list]:
    return CpuBackend().compile(module, Options(backend="cpu", num_threads=threads))


def uses_gemm(module: Module) -> bool:
    return "jitc.gemm." in str(lower_module(module).llvm_ir)


def check(fn: Callable, *args: np.ndarray, blocked: bool | None = True) -> None:
    """fn compiled for 1 and 2 threads matches numpy in float64, and both agree; `blocked`
    says whether the GEMM kernel must (True) or must not (False) be used."""
    optimized = jitc.jit(fn).lower(*args).optimize()
    if blocked is not None:
        assert uses_gemm(optimized) == blocked
    expected = fn(*(a.astype(np.float64) for a in args))
    # Of the largest result: float32 sums of 700 terms drift a few units in the last place.
    tolerance = 4e-6 if args[0].dtype == np.float32 else 1e-13
    scale = max(float(np.abs(expected).max(initial=0)), 1.0)
    results = []
    for threads in (1, 2):
        (got,) = compile_cpu(optimized, threads)(list(args))
        assert got.shape == expected.shape and got.dtype == args[0].dtype
        assert float(np.abs(got - expected).max(initial=0)) <= tolerance * scale
        results.append(got)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-6 * scale)


def rand(dtype: type, *shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


# M, K, N: multiples of the tiles, one off, below one tile, several depth blocks (kc is 256
# float32 / 128 float64 elements) and several column blocks (nc is 512).
SHAPES = [(8, 256, 32), (64, 128, 64), (9, 257, 33), (7, 300, 31), (37, 300, 53),
          (100, 129, 97), (25, 600, 70), (30, 40, 1100), (64, 784, 10), (3, 3000, 5),
          (200, 3, 200), (2, 200, 128), (130, 200, 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_matches_numpy(dtype: type, m: int, k: int, n: int) -> None:
    check(lambda a, b: a @ b, rand(dtype, m, k), rand(dtype, k, n))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transposed_operands_are_read_through_their_layout(dtype: type) -> None:
    a, b = rand(dtype, 300, 37), rand(dtype, 53, 300)
    check(lambda a, b: a.T @ b.T, a, b)
    check(lambda a, b: a.T @ b, a, rand(dtype, 300, 45))
    check(lambda a, b: a @ b.T, rand(dtype, 41, 300), b)
    check(lambda a, b: a.T @ b.T, rand(dtype, 3, 120), rand(dtype, 100, 3))


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_products(dtype: type) -> None:
    check(lambda a, b: a @ b, rand(dtype, 5, 33, 40), rand(dtype, 5, 40, 29))
    check(lambda q, k: q @ k.transpose(0, 2, 1), rand(dtype, 3, 64, 40), rand(dtype, 3, 64, 40))
    check(lambda a, b: np.einsum("bij,bkj->bki", a, b), rand(dtype, 4, 30, 50),
          rand(dtype, 4, 20, 50))
    check(lambda a, b: np.einsum("hbij,hbjk->hbik", a, b), rand(dtype, 2, 3, 17, 25),
          rand(dtype, 2, 3, 25, 19))


def test_attention_heads_from_one_projection() -> None:
    """q, k and v are head-sliced, transposed views of one [seq, 3 * d] matrix."""
    def attention(x):
        s, d = x.shape[0], x.shape[1] // 3
        q, k, v = (x[:, i * d:(i + 1) * d].reshape(s, 4, d // 4).transpose(1, 0, 2)
                   for i in range(3))
        scores = q @ k.transpose(0, 2, 1)
        return scores @ v
    check(attention, rand(np.float32, 40, 3 * 64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_free_and_contracting_dimensions_are_merged(dtype: type) -> None:
    check(lambda x, w: x @ w, rand(dtype, 4, 30, 50), rand(dtype, 50, 70))
    check(lambda a, b: np.tensordot(a, b, axes=2), rand(dtype, 30, 8, 9),
          rand(dtype, 8, 9, 40))
    # Contracting dimensions in opposite orders cannot become one strided index.
    check(lambda a, b: np.tensordot(a, b, axes=([1, 2], [1, 0])), rand(dtype, 30, 8, 9),
          rand(dtype, 9, 8, 40), blocked=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_epilogues_see_the_finished_product(dtype: type) -> None:
    def dense_relu(x, w, b):
        return np.maximum(x @ w + b, 0)

    def rnn_step(x, w, h, b):
        return np.tanh(x @ w + h + b)

    def gelu(x, w):
        y = x @ w
        return 0.5 * y * (1 + np.tanh(0.79788456 * (y + 0.044715 * y * y * y)))
    # Several depth and column blocks: the epilogue must run once, after the last.
    check(dense_relu, rand(dtype, 70, 700), rand(dtype, 700, 600), rand(dtype, 600))
    check(dense_relu, rand(dtype, 17, 40), rand(dtype, 40, 50), rand(dtype, 50))
    check(rnn_step, rand(dtype, 32, 64), rand(dtype, 64, 128), rand(dtype, 32, 128),
          rand(dtype, 128))
    check(gelu, rand(dtype, 20, 300), rand(dtype, 300, 90))
    check(lambda a, b: (a @ b).sum(axis=1), rand(dtype, 40, 300), rand(dtype, 300, 70))


def test_empty_unit_and_tiny_products_use_the_row_kernel() -> None:
    f = np.float32
    check(lambda a, b: a @ b, rand(f, 0, 30), rand(f, 30, 40), blocked=False)
    check(lambda a, b: a @ b, rand(f, 30, 0), rand(f, 0, 40), blocked=False)
    check(lambda a, b: a @ b, rand(f, 30, 40), rand(f, 40, 0), blocked=False)
    check(lambda a, b: a @ b, rand(f, 1, 300), rand(f, 300, 40), blocked=False)
    check(lambda a, b: a @ b, rand(f, 300), rand(f, 300, 40), blocked=False)
    check(lambda a, b: a @ b, rand(f, 40, 300), rand(f, 300), blocked=False)
    check(lambda a, b: a @ b, rand(f, 4, 5), rand(f, 5, 6), blocked=False)


def test_integer_and_half_products_use_the_row_kernel() -> None:
    a = RNG.integers(-9, 9, (40, 300)).astype(np.int32)
    b = RNG.integers(-9, 9, (300, 50)).astype(np.int32)
    optimized = jitc.jit(lambda a, b: a @ b).lower(a, b).optimize()
    assert not uses_gemm(optimized)
    (got,) = compile_cpu(optimized, 2)([a, b])
    np.testing.assert_array_equal(got, a @ b)
    h, w = rand(np.float16, 40, 300), rand(np.float16, 300, 50)
    assert not uses_gemm(jitc.jit(lambda a, b: a @ b).lower(h, w).optimize())


COLUMN_MAJOR = """
func @f {
  %x = parameter() index=0 : f32[40,300]{1,0}
  %w = parameter() index=1 : f32[300,60]{1,0}
  %0 = dot_general(%x, %w) lhs_contract=[1] rhs_contract=[0] : f32[40,60]{0,1}
  %1 = transpose(%0) permutation=[1,0] : f32[60,40]{1,0}
  %2 = tanh(%1) : f32[60,40]{1,0}
  return %2
}
"""


def test_a_column_major_product_is_computed_transposed() -> None:
    module = parse_module(textwrap.dedent(COLUMN_MAJOR).lstrip())
    dot = next(i for i in module.entry.body if i.op is ops.DOT_GENERAL)
    form = gemm.analyse(dot, *dot.operands)
    assert form is not None and (form.m, form.n, form.k) == (60, 40, 300)
    assert form.a.value is dot.operands[1]
    x, w = rand(np.float32, 40, 300), rand(np.float32, 300, 60)
    optimized = Pipeline("kernel", KERNEL_PASSES, verify=True).run(module)
    assert uses_gemm(optimized)
    expected = np.tanh((x.astype(np.float64) @ w).T)
    for threads in (1, 2):
        (got,) = compile_cpu(optimized, threads)([x, w])
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("vector_bytes", [16, 32])
@pytest.mark.parametrize("dtype", DTYPES)
def test_narrower_vector_tilings_compute_the_same(monkeypatch: pytest.MonkeyPatch,
                                                   vector_bytes: int, dtype: type) -> None:
    """The AVX2 and SSE tilings (chosen from the host's features) are correct too."""
    monkeypatch.setattr(gemm_routines, "host_vector_bytes", lambda: vector_bytes)
    tiling = gemm_routines.tiling_for(_dtype(dtype))
    assert tiling.lanes * _dtype(dtype).itemsize == vector_bytes
    check(lambda a, b: a.T @ b, rand(dtype, 150, 37), rand(dtype, 150, 29))
    check(lambda a, b: a @ b.T, rand(dtype, 45, 300), rand(dtype, 23, 300))
    check(lambda x, w, b: np.maximum(x @ w + b, 0), rand(dtype, 30, 70), rand(dtype, 70, 50),
          rand(dtype, 50))


def _dtype(numpy_type: type) -> object:
    from jitc.ir import dtypes
    return dtypes.float32 if numpy_type is np.float32 else dtypes.float64


def test_collapse_merges_only_dense_runs() -> None:
    # Row-major [2, 3, 4] in two tensors: all three dimensions form one index.
    assert gemm._collapse([2, 3, 4], ([12, 4, 1], [12, 4, 1]), [0, 1, 2]) == \
        (24, (1, 1), ((0, 2), (1, 3), (2, 4)))
    # Unit dimensions drop out; the order follows the first tensor's strides.
    assert gemm._collapse([1, 4, 3], ([99, 1, 4], [99, 3, 1]), [0, 1, 2]) is None
    assert gemm._collapse([1, 1], ([5, 5], [7, 7]), [0, 1]) == (1, (0, 0), ())
    assert gemm._collapse([4, 3], ([1, 4], [1, 4]), [0, 1]) == (12, (1, 1), ((1, 3), (0, 4)))


@pytest.mark.parametrize("m,k,n,packed", [
    (64, 784, 512, False),   # 1.6 MB of rhs: read in place
    (64, 768, 2304, True),   # 7 MB: streamed from L3 per row strip in place, packed instead
    (128, 768, 768, True),   # 2.4 MB, just over a core's L2
    (8, 768, 2304, False),   # one row strip reads each rhs element once: never packed
])
def test_a_short_product_reads_its_rhs_in_place_only_when_it_fits_in_l2(m, k, n, packed):
    x = RNG.standard_normal((m, k)).astype(np.float32)
    w = RNG.standard_normal((k, n)).astype(np.float32)
    compiled = jitc.jit(lambda x, w: x @ w).lower(x, w).compile()
    assert (".pack_rows(" in compiled.as_text()) == packed
    np.testing.assert_allclose(compiled(x, w), x @ w, rtol=1e-4, atol=1e-3)
