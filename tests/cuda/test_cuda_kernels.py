"""What the CUDA backend's kernels look like: one kernel per fusion, the kernel kinds and the
GPU features each uses (warp shuffles, barriers, shared memory, non-coherent loads), the
targets, exact remainders and the GPU's pass pipeline. Results are checked on the simulator."""

from __future__ import annotations

import re

import numpy as np
import pytest
from cudacheck import check_ptx, compile_for_gpu, require_ptxas

import jitc
from jitc.backends.cuda.passes import gpu_reads_strided, is_pointwise_epilogue
from jitc.backends.cuda.ptx import check_arch, entry_names
from jitc.ir import ops
from jitc.ir.types import TensorType


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ptx_of(fn, *args, **options) -> str:
    return compile_for_gpu(fn, *args, **options).as_text()


def on_sim(fn, *args):
    return jitc.jit(fn, backend="cuda-sim")(*args)


def test_softmax_is_one_kernel_with_warp_shuffles_and_no_local_memory() -> None:
    x = np.random.default_rng(0).standard_normal((4, 100)).astype(np.float32)
    ptx = ptx_of(softmax, x)
    assert len(entry_names(ptx)) == 1 and entry_names(ptx)[0].endswith("_row")
    # Two reductions, each a butterfly of five shuffles, then one partial per warp.
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 10
    assert len(re.findall(r"bar\.sync", ptx)) == 2
    assert ".local" not in ptx, "per-thread state must live in registers"
    assert "ld.global.nc" in ptx, "a read-only input goes through the non-coherent cache"
    np.testing.assert_allclose(on_sim(softmax, x), softmax(x), rtol=1e-6, atol=1e-7)


def test_short_rows_are_reduced_by_part_of_a_warp_without_barriers() -> None:
    x = np.random.default_rng(1).standard_normal((64, 10)).astype(np.float32)
    ptx = ptx_of(softmax, x)
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 8  # groups of 16 lanes: 4 steps each
    assert "bar.sync" not in ptx
    np.testing.assert_allclose(on_sim(softmax, x), softmax(x), rtol=1e-6, atol=1e-7)


def test_a_column_reduction_meets_in_shared_memory() -> None:
    x = np.random.default_rng(2).standard_normal((100, 70)).astype(np.float32)
    ptx = ptx_of(lambda x: x.sum(axis=0), x)
    assert "shfl" not in ptx and "bar.sync" in ptx and ".shared" in ptx
    np.testing.assert_allclose(on_sim(lambda x: x.sum(axis=0), x),
                               x.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-5)


def test_reductions_are_deterministic() -> None:
    x = np.random.default_rng(3).standard_normal((3, 100_000)).astype(np.float32)
    f = jitc.jit(lambda x: (x.sum(axis=1), x.T.sum(axis=0)), backend="cuda-sim")
    first, second = f(x), f(x)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    exact = x.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(first[0], exact, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(first[1], exact, rtol=1e-5, atol=1e-3)


def test_dot_is_tiled_through_shared_memory_with_its_epilogue_fused() -> None:
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((70, 40), (40, 90), (90,)))

    def layer(x, w, b):
        return np.maximum(x @ w + b, 0)
    compiled = compile_for_gpu(layer, x, w, b)
    ptx = compiled.as_text()
    assert compiled.executable.kernel_count == 1
    assert ".shared" in ptx and "bar.sync" in ptx and "fma.rn.f32" in ptx
    np.testing.assert_allclose(on_sim(layer, x, w, b), layer(x, w, b), rtol=1e-5, atol=1e-5)


def test_an_epilogue_reading_the_product_transposed_is_split_off() -> None:
    rng = np.random.default_rng(5)
    x, w = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))

    def f(x, w):
        return np.tanh((x @ w).T) + 1
    module = jitc.jit(f, backend="cuda").lower(x, w).optimize()
    entry = [i.op.name for i in module.entry.body]
    assert "dot_general" in entry and "fusion" in entry
    np.testing.assert_allclose(on_sim(f, x, w), f(x, w), rtol=1e-5, atol=1e-6)


def test_pointwise_epilogues_are_recognised() -> None:
    x = np.ones((4, 4), np.float32)
    module = jitc.jit(lambda x, w: np.tanh(x @ w) * (x @ w).T, backend="interpreter") \
        .lower(x, x).optimize()
    dot = next(i for i in module.entry.body if i.op is ops.DOT_GENERAL)
    tanh = next(i for i in module.entry.body if i.op.name == "tanh").result
    transposed = next(i for i in module.entry.body if i.op is ops.TRANSPOSE).result
    assert is_pointwise_epilogue(tanh, dot.result)
    assert not is_pointwise_epilogue(transposed, dot.result)


def test_elementwise_chains_are_one_grid_stride_kernel() -> None:
    x = np.random.default_rng(6).standard_normal((1000, 3)).astype(np.float32)
    compiled = compile_for_gpu(lambda x: np.exp(x) * 2 + np.sin(x), x)
    assert compiled.executable.kernel_count == 1
    assert "bar.sync" not in compiled.as_text()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_remainder_is_exact_where_the_quotient_is_huge(dtype: type) -> None:
    info = np.finfo(dtype)
    x = np.array([1e10, -7.5e30, 3e-30, info.max, info.smallest_subnormal * 5], dtype)
    y = np.array([3.0, 0.7, 1e-31, 1.1, info.smallest_subnormal * 3], dtype)
    np.testing.assert_array_equal(on_sim(np.fmod, x, y), np.fmod(x, y))


def test_the_target_is_selectable() -> None:
    require_ptxas()
    x = np.ones(8, np.float32)
    assert "\n.target sm_80\n" in ptx_of(np.exp, x)
    compiled = jitc.jit(np.exp, backend="cuda:sm_90").lower(x).compile()
    assert "\n.target sm_90\n" in compiled.as_text()
    check_ptx(compiled, archs=("sm_90",))
    with pytest.raises(ValueError, match="sm_70"):
        check_arch("sm_70")


def test_compiling_needs_no_gpu_and_running_says_what_is_missing() -> None:
    from jitc.backends.cuda.runtime import runtime_unavailable_reason
    if runtime_unavailable_reason() is None:
        pytest.skip("a GPU is present: the error path is not reachable here")
    x = np.ones(8, np.float32)
    f = jitc.jit(np.exp, backend="cuda")
    assert f.lower(x).compile().as_text().startswith("//")
    with pytest.raises(RuntimeError, match="cuda-sim"):
        f(x)
    with pytest.raises(RuntimeError, match=r"pycuda|driver|device"):
        jitc.device_put(x)


def test_in_place_updates_drop_noalias_on_the_shared_buffer() -> None:
    x = np.ones((4, 4), np.float32)
    compiled = jitc.jit(lambda x: np.exp(np.sin(x) + 1) * 2, backend="cuda",
                        disabled_passes=("fusion",)).lower(x).compile()
    specs = compiled.executable.lowering.specs
    plan = compiled.executable.lowering.plan
    # The workspace temporaries overwrite their operands in place: a kernel that reads and
    # writes one buffer must not declare it noalias; its other buffers stay noalias.
    def storage(slot: int) -> tuple[str, int]:
        offset = plan.temp_offsets.get(slot)
        return ("slot", slot) if offset is None else ("workspace", offset)
    in_place = 0
    for spec in specs:
        keys = [storage(slot) for slot in spec.slots]
        for key, unique in zip(keys, spec.noalias):
            assert unique is (keys.count(key) == 1)
            in_place += keys.count(key) > 1
    assert in_place
    np.testing.assert_allclose(
        jitc.jit(lambda x: np.exp(np.sin(x) + 1) * 2, backend="cuda-sim",
                 disabled_passes=("fusion",))(x), np.exp(np.sin(x) + 1) * 2, rtol=1e-6)


def _conv(dim_labels: str, lhs: tuple[int, ...]) -> ops.Instruction:
    from jitc.ir.core import Builder, Function
    from jitc.ir.dtypes import float32
    fn = Function("f")
    b = Builder(fn)
    x = b.emit(ops.PARAMETER, [], {"index": 0}, TensorType(float32, lhs))
    w_shape = (3, 3, 2, 2) if dim_labels.startswith("bf") else (2, 2, 3, 3)
    w = b.emit(ops.PARAMETER, [], {"index": 1}, TensorType(float32, w_shape))
    b.emit(ops.CONVOLUTION, [x, w], {"dim_labels": dim_labels})
    return fn.body[-1]


@pytest.mark.parametrize("labels,lhs,minor,reads", [
    ("bf01_oi01->bf01", (1, 3, 5, 5), 3, True),    # NCHW in, NCHW out, W contiguous
    ("bf01_oi01->bf01", (1, 3, 5, 5), 1, False),   # channels contiguous: strided for W
    ("b01f_01io->b01f", (1, 5, 5, 3), 3, True),    # NHWC out walks features: any input
])
def test_convolution_reads_an_input_layout_that_keeps_neighbours_together(
        labels: str, lhs: tuple[int, ...], minor: int, reads: bool) -> None:
    inst = _conv(labels, lhs)
    others = [d for d in range(4) if d != minor]
    layout = TensorType(inst.operands[0].type.dtype, lhs, (minor, *reversed(others)))
    assert gpu_reads_strided(inst, 0, layout) is reads
    assert gpu_reads_strided(inst, 1, layout)


@pytest.mark.parametrize("shift", [jitc.lax.shift_left, jitc.lax.shift_right_logical])
def test_a_64_bit_shift_amount_is_range_checked_in_full(shift) -> None:
    # PTX shifts take a 32-bit amount. LLVM folded `y < 64 ? x << y : 0` into one shift of the
    # truncated amount, so on a GPU 1 << -2**63 gave 1 (numpy: 0); the whole 64-bit amount
    # must be compared before the select.
    x = np.arange(9, dtype=np.int64)
    ptx = ptx_of(shift, x, np.full(9, -2**63, np.int64))
    assert re.search(r"setp\.\w+\.[us]64\s+%p\d+, %rd\d+, 6[34];", ptx)
    assert "selp.b64" in ptx
