"""The kernel program model itself: hand-written kernels whose results depend on barriers,
warp shuffles and repeats meaning what they mean on a GPU, run on the simulator and
assembled for the GPU from the same phases."""

from __future__ import annotations

import numpy as np
import pytest
from cudacheck import require_ptxas
from llvmlite import ir

from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.cuda.codegen import Lowering
from jitc.backends.cuda.control import Program
from jitc.backends.cuda.kernel import KernelBuilder, KernelSpec
from jitc.backends.cuda.launch import LaunchConfig
from jitc.backends.cuda.ptx import assemble, emit_ptx, entry_names
from jitc.backends.cuda.simulator import SimulatedKernels
from jitc.backends.cuda.wrappers import scratch_bytes
from jitc.backends.llvm.types import I32, I64
from jitc.ir.dtypes import int32
from jitc.ir.types import TensorType

GRID, BLOCK = 2, 64
OUT = TensorType(int32, (GRID * BLOCK,))


def _builder(module: ir.Module, name: str, shared_bytes: int = 0) -> KernelBuilder:
    plan = BufferPlan(num_args=0, num_outputs=1)
    return KernelBuilder(module, plan, name, [], [], LaunchConfig(GRID, BLOCK, shared_bytes),
                         extra=[(0, OUT)])


def _store_output(kb: KernelBuilder, ctx, value: ir.Value) -> None:
    b = ctx.builder
    pointer = b.gep(kb.extra_buffer(ctx, 0), [ctx.global_thread()], source_etype=I32)
    b.store(value, pointer)


def _run(module: ir.Module, spec: KernelSpec) -> np.ndarray:
    program = Program(BufferPlan(num_args=0, num_outputs=1), (spec,), ())
    lowering = Lowering(str(module), (spec,), program, ())
    kernels = SimulatedKernels(lowering)
    out = np.full(OUT.shape, -1, np.int32)
    scratch = np.zeros(max(scratch_bytes(spec), 1), np.uint8)
    kernels.launch(spec.name, [out.ctypes.data], scratch.ctypes.data, spec.launch.grid)
    return out


def _assembles(module: ir.Module, spec: KernelSpec, *features: str) -> None:
    require_ptxas()
    ptx = emit_ptx(str(module), [spec])
    assert entry_names(ptx) == [spec.name]
    for feature in features:
        assert feature in ptx
    assemble(ptx, "sm_80")


def test_a_barrier_makes_every_thread_see_the_block_s_shared_writes() -> None:
    module = ir.Module()
    kb = _builder(module, "neighbours", shared_bytes=4 * BLOCK)
    cells = kb.shared(I32, BLOCK)
    with kb.phase() as ctx:
        b = ctx.builder
        ctx.store_shared(cells, ctx.thread(), b.add(b.trunc(ctx.thread(), I32),
                                                    b.mul(ctx.bid, ir.Constant(I32, 1000))))
    kb.barrier()
    with kb.phase() as ctx:
        b = ctx.builder
        right = b.urem(b.add(ctx.thread(), ir.Constant(I64, 1)), ir.Constant(I64, BLOCK))
        _store_output(kb, ctx, ctx.load_shared(cells, right))
    spec = kb.finish()
    tid = np.arange(BLOCK)
    expected = np.concatenate([(tid + 1) % BLOCK + 1000 * block for block in range(GRID)])
    np.testing.assert_array_equal(_run(module, spec), expected)
    _assembles(module, spec, "bar.sync", ".shared")


@pytest.mark.parametrize("mask", [1, 4, 16])
def test_a_shuffle_hands_each_lane_its_butterfly_partner_s_state(mask: int) -> None:
    module = ir.Module()
    kb = _builder(module, f"butterfly{mask}")
    mine, theirs = kb.state(I64), kb.state(I64)
    with kb.phase() as ctx:
        ctx.store_state(mine, ctx.global_thread())
    kb.shuffle_xor(mine, theirs, mask)
    with kb.phase() as ctx:
        _store_output(kb, ctx, ctx.builder.trunc(ctx.load_state(theirs), I32))
    spec = kb.finish()
    np.testing.assert_array_equal(_run(module, spec), np.arange(GRID * BLOCK) ^ mask)
    _assembles(module, spec, "shfl.sync.bfly")


def test_repeated_steps_see_their_iteration_and_keep_state_between_them() -> None:
    module = ir.Module()
    kb = _builder(module, "repeat")
    total = kb.state(I64)
    with kb.phase() as ctx:
        ctx.store_state(total, ctx.thread())
    with kb.repeat(5):
        with kb.phase() as ctx:
            b = ctx.builder
            ctx.store_state(total, b.add(ctx.load_state(total), ctx.iteration))
        kb.barrier()
    with kb.phase() as ctx:
        _store_output(kb, ctx, ctx.builder.trunc(ctx.load_state(total), I32))
    spec = kb.finish()
    np.testing.assert_array_equal(_run(module, spec), np.tile(np.arange(BLOCK) + 10, GRID))
    _assembles(module, spec)


def test_shuffles_need_whole_warps() -> None:
    module = ir.Module()
    plan = BufferPlan(num_args=0, num_outputs=1)
    kb = KernelBuilder(module, plan, "partial", [], [], LaunchConfig(1, 48), extra=[(0, OUT)])
    slot = kb.state(I32)
    with pytest.raises(AssertionError, match="whole warps"):
        kb.shuffle_xor(slot, kb.state(I32), 1)
