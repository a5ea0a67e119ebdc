"""The CPU kernel of the `sort` op: each row along `axis` radix-sorted (llvm/sorting.py) in
scratch memory from malloc, one allocation per call of the kernel, so threads that split the
rows each have their own."""

from __future__ import annotations

from llvmlite import ir

from jitc.backends.cpu.kernels import Kernel, KernelContext, buffers_used, physical_order
from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.llvm import indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import loop_nest
from jitc.backends.llvm.sorting import emit_sort_row, free, malloc, radix_plan
from jitc.backends.llvm.types import I64
from jitc.ir import dtypes
from jitc.ir.core import Instruction


def emit_sort(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction) -> Kernel:
    ctx = KernelContext(module, plan, name, buffers_used(inst, plan))
    axis = inst.attrs["axis"]
    operand, out = inst.operands[0], inst.results[0]
    n = operand.type.shape[axis]
    radix = radix_plan(n, operand.type.dtype)
    b = ctx.builder
    row_dims = [d for d in physical_order(out.type) if d != axis]
    bounds: list[tuple[ir.Value | int, ir.Value | int]] = [(0, out.type.shape[d])
                                                             for d in row_dims]
    if bounds:
        bounds[0] = (ctx.begin, ctx.end)
        outer = out.type.shape[row_dims[0]]
    else:
        outer = 1
    work = b.icmp_signed("<", ctx.begin, ctx.end)
    with b.if_then(work):
        scratch = malloc(b, max(radix.scratch_bytes(), 1))

        def row(counters: list[ir.Value]) -> None:
            index: list[ir.Value] = [ir.Constant(I64, 0)] * out.type.rank
            for d, c in zip(row_dims, counters):
                index[d] = c

            def at(i: ir.Value) -> list[ir.Value]:
                return index[:axis] + [i] + index[axis + 1:]

            def load(i: ir.Value) -> ir.Value:
                return ctx.emitter.value_at(operand, at(i))

            def emit(i: ir.Value, position: ir.Value) -> None:
                if inst.attrs["output"] == "indices":
                    value = convert_value(b, position, dtypes.int64, out.type.dtype)
                else:
                    value = load(position)
                indexing.store(b, value, ctx.pointer(out), out.type, at(i))
            emit_sort_row(b, radix, operand.type.dtype, scratch, load, emit)
        loop_nest(b, bounds, row, name="row")
        free(b, scratch)
    ctx.finish()
    return Kernel(ctx.name, outer, max(operand.type.size, 1) * 8)
