"""The CPU kernel of the `sort` op: each row along `axis` radix-sorted (llvm/sorting.py) in
scratch memory of the workspace. The rows are dealt into at most GROUPS consecutive groups,
the dimension threads split; each group has one row's worth of scratch, so threads never
share it and the scratch stays a few rows' size however many rows there are."""

from __future__ import annotations

import math

from llvmlite import ir

from jitc.backends.cpu.kernels import Kernel, KernelContext, buffers_used, physical_order
from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.sorting import emit_sort_row, radix_plan
from jitc.backends.llvm.types import I8, I64
from jitc.ir import dtypes
from jitc.ir.core import Instruction
from jitc.ir.symbolic import is_static

# Groups of rows the kernel's threads share out (and rows' worth of scratch it takes).
GROUPS = 16


def emit_sort(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction) -> Kernel:
    axis = inst.attrs["axis"]
    operand, out = inst.operands[0], inst.results[0]
    n = operand.type.shape[axis]
    radix = radix_plan(n, operand.type.dtype)
    row_dims = [d for d in physical_order(out.type) if d != axis]
    rows = math.prod(out.type.shape[d] for d in row_dims)
    if is_static(n) and n == 0:
        rows = 0
    # A symbolic row count is taken as large: GROUPS groups, some empty when it is small.
    groups = max(1, min(rows, GROUPS)) if is_static(rows) else GROUPS
    row_bytes = (radix.scratch_bytes() + 63) // 64 * 64
    scratch_slot = plan.add_scratch(groups * row_bytes)
    ctx = KernelContext(module, plan, name, buffers_used(inst, plan), [scratch_slot])
    b = ctx.builder
    indices = inst.attrs["output"] == "indices"

    def row(group: ir.Value, r: ir.Value) -> None:
        scratch = b.gep(ctx.extra[0], [b.mul(group, extents.value(b, row_bytes))],
                        source_etype=I8)
        index: list[ir.Value] = [ir.Constant(I64, 0)] * out.type.rank
        rest = r
        for d in reversed(row_dims):  # row number -> index, the most minor dimension first
            size = extents.value(b, out.type.shape[d])
            index[d] = b.urem(rest, size)
            rest = b.udiv(rest, size)

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

    with for_range(b, ctx.begin, ctx.end, name="group") as group:
        first = b.udiv(b.mul(group, extents.value(b, rows)), ir.Constant(I64, groups))
        following = b.add(group, ir.Constant(I64, 1))
        last = b.udiv(b.mul(following, extents.value(b, rows)), ir.Constant(I64, groups))
        with for_range(b, first, last, name="row") as r:
            row(group, r)
    ctx.finish()
    return Kernel(ctx.name, groups, extents.positive(operand.type.size) * 8)
