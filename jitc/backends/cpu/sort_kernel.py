"""The CPU kernel of the `sort` op: each row along `axis` radix-sorted (llvm/sorting.py) in
scratch memory of the workspace: one row's worth per index of the split (outermost) row
dimension, so threads that split the rows never share it."""

from __future__ import annotations

from llvmlite import ir

from jitc.backends.cpu.kernels import Kernel, KernelContext, buffers_used, physical_order
from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.llvm import indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import loop_nest
from jitc.backends.llvm.sorting import emit_sort_row, radix_plan
from jitc.backends.llvm.types import I8, I64
from jitc.ir import dtypes
from jitc.ir.core import Instruction


def emit_sort(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction) -> Kernel:
    axis = inst.attrs["axis"]
    operand, out = inst.operands[0], inst.results[0]
    n = operand.type.shape[axis]
    radix = radix_plan(n, operand.type.dtype)
    row_dims = [d for d in physical_order(out.type) if d != axis]
    outer = out.type.shape[row_dims[0]] if row_dims else 1
    row_bytes = -(-radix.scratch_bytes() // 64) * 64
    scratch_slot = plan.add_scratch(max(outer, 1) * row_bytes)
    ctx = KernelContext(module, plan, name, buffers_used(inst, plan), [scratch_slot])
    b = ctx.builder
    indices = inst.attrs["output"] == "indices"
    bounds: list[tuple[ir.Value | int, ir.Value | int]] = [(0, out.type.shape[d])
                                                             for d in row_dims]
    if bounds:
        bounds[0] = (ctx.begin, ctx.end)
    with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
        def row(counters: list[ir.Value]) -> None:
            first = counters[0] if counters else ir.Constant(I64, 0)
            scratch = b.gep(ctx.extra[0], [b.mul(first, ir.Constant(I64, row_bytes))],
                            source_etype=I8)
            index: list[ir.Value] = [ir.Constant(I64, 0)] * out.type.rank
            for d, c in zip(row_dims, counters):
                index[d] = c

            def at(i: ir.Value) -> list[ir.Value]:
                return index[:axis] + [i] + index[axis + 1:]

            def load(i: ir.Value) -> ir.Value:
                return ctx.emitter.value_at(operand, at(i))

            def store(i: ir.Value, value: ir.Value) -> None:
                indexing.store(b, value, ctx.pointer(out), out.type, at(i))

            def by_position(i: ir.Value, position: ir.Value) -> None:
                if indices:
                    store(i, convert_value(b, position, dtypes.int64, out.type.dtype))
                else:
                    store(i, load(position))
            emit_sort_row(b, radix, operand.type.dtype, scratch, load, by_position,
                          None if indices else store)
        loop_nest(b, bounds, row, name="row")
    ctx.finish()
    return Kernel(ctx.name, outer, max(operand.type.size, 1) * 8)
