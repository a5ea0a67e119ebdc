"""The CUDA kernel of the `sort` op, by rank: one thread per element counts the elements of
its row that sort before it (smaller key, or an equal key earlier: stable) and writes itself
to that position. The keys are llvm/sorting.py's, so the order is the other backends'. It
takes n comparisons per element, so it suits rows up to some thousands of elements; a
bitonic or radix kernel is the way to longer rows."""

from __future__ import annotations

from llvmlite import ir

from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.cuda import launch as launches
from jitc.backends.cuda.elementwise import delinearize, grid_stride, physical_order
from jitc.backends.cuda.kernel import KernelBuilder, KernelSpec
from jitc.backends.llvm import indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.sorting import sort_key
from jitc.backends.llvm.types import I64
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value


def sort_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                values: list[Value]) -> KernelSpec | None:
    operand, out = inst.operands[0], inst.results[0]
    if out.type.size == 0:
        return None
    axis = inst.attrs["axis"]
    n = operand.type.shape[axis]
    dtype = operand.type.dtype
    kb = KernelBuilder(module, plan, name, values, [out], launches.elementwise(out.type.size))
    with kb.phase() as ctx:
        b = ctx.builder

        def body(linear: ir.Value) -> None:
            index = delinearize(b, linear, out.type.shape, physical_order(out.type))
            mine = index[axis]
            x = ctx.emitter.value_at(operand, index)
            key = sort_key(b, x, dtype)
            with b.goto_entry_block():
                rank_slot = b.alloca(I64, name="rank")
            b.store(ir.Constant(I64, 0), rank_slot)
            with for_range(b, 0, n, name="j") as j:
                other = sort_key(b, ctx.emitter.value_at(
                    operand, index[:axis] + [j] + index[axis + 1:]), dtype)
                before = b.or_(b.icmp_unsigned("<", other, key),
                               b.and_(b.icmp_unsigned("==", other, key),
                                      b.icmp_signed("<", j, mine)))
                rank = b.load(rank_slot, typ=I64)
                b.store(b.add(rank, b.zext(before, I64)), rank_slot)
            target = index[:axis] + [b.load(rank_slot, typ=I64)] + index[axis + 1:]
            if inst.attrs["output"] == "indices":
                value = convert_value(b, mine, dtypes.int64, out.type.dtype)
            else:
                value = x
            indexing.store(b, value, ctx.pointer(out), out.type, target)
        grid_stride(ctx, out.type.size, body)
    return kb.finish()
