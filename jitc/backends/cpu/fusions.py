"""CPU kernels for fusion ops: one kernel template per fusion kind.

The body function's parameters alias the fusion's operands, so the elemental emitter computes
every other body value on the fly; only the fusion's results touch memory.
"""

from __future__ import annotations

from llvmlite import ir

from jitc.backends.cpu import kernels
from jitc.backends.cpu.kernels import Kernel, KernelContext
from jitc.backends.cpu.lanes import Lanes, accumulator_dtype, lane_count, reduction_loops
from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.llvm import indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import loop_nest
from jitc.backends.llvm.types import I64
from jitc.ir import ops
from jitc.ir.core import Function, Instruction, Module, Value


def fusion_buffers(inst: Instruction, plan: BufferPlan) -> list[Value]:
    """The buffers a fusion kernel touches: its results, then its materialised operands."""
    values: list[Value] = list(inst.results)
    for operand in inst.operands:
        if plan.slot(operand) is not None and all(v is not operand for v in values):
            values.append(operand)
    return values


def emit_fusion(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                program: Module) -> Kernel:
    body = program.functions[inst.attrs["calls"]]  # type: ignore[index]
    ctx = KernelContext(module, plan, name, fusion_buffers(inst, plan))
    for param, operand in zip(body.parameters, inst.operands):
        ctx.emitter.aliases[id(param)] = operand
    kind = inst.attrs["kind"]
    if kind == "loop":
        targets = [(root, ctx.pointer(result)) for root, result in
                   zip(body.outputs, inst.results)]
        return kernels.multi_output_loop(ctx, inst.results[0].type, targets)
    if kind == "reduce":
        root = body.outputs[0].producer
        for out, result in zip(root.results, inst.results):
            ctx.emitter.buffers[id(out)] = ctx.pointer(result)
        return kernels.reduce_into(ctx, root)
    if kind == "dot":
        core = next(i for i in body.body if i.op in (ops.DOT_GENERAL, ops.CONVOLUTION))
        ctx.emitter.buffers[id(core.results[0])] = ctx.pointer(inst.results[0])
        epilogue = body.outputs[0] if body.outputs[0] is not core.results[0] else None
        if core.op is ops.DOT_GENERAL:
            return kernels.dot_into(ctx, core, epilogue)
        return kernels.convolution_into(ctx, core, epilogue)
    return _row_kernel(ctx, body, inst)


def _row_kernel(ctx: KernelContext, body: Function, inst: Instruction) -> Kernel:
    """One row at a time: each reduction of the row accumulates into registers (in program
    order, so later reductions can use earlier results, as layernorm's variance uses its
    mean), then the row's outputs are computed from the input and those registers."""
    b = ctx.builder
    reduces = [i for i in body.body if i.op is ops.REDUCE]
    full = reduces[0].operands[0].type
    outer_rank = reduces[0].results[0].type.rank
    inner = list(range(outer_rank, full.rank))
    acc_types = {id(r): [accumulator_dtype(v.type.dtype) for v in r.operands] for r in reduces}
    count = lane_count([t for types in acc_types.values() for t in types])

    def row(counters: list[ir.Value]) -> None:
        outer_index = list(counters)
        for r in reduces:
            accumulators = [Lanes(b, r.attrs["kind"], dt, count)  # type: ignore[arg-type]
                            for dt in acc_types[id(r)]]

            def accumulate(lane: ir.Value, at: dict[int, ir.Value], r: Instruction = r,
                           accumulators: list[Lanes] = accumulators) -> None:
                index = outer_index + [at[d] for d in inner]
                for operand, lanes in zip(r.operands, accumulators):
                    x = ctx.emitter.value_at(operand, index)
                    lanes.accumulate(lane, convert_value(b, x, operand.type.dtype, lanes.dtype))

            reduction_loops(b, full, inner, count, accumulate)
            for result, lanes in zip(r.results, accumulators):
                ctx.emitter.registers[id(result)] = convert_value(
                    b, lanes.total(), lanes.dtype, result.type.dtype)
        for out, result in zip(body.outputs, inst.results):
            target = ctx.pointer(result)
            if out.type.shape == full.shape:
                def store(inner_counters: list[ir.Value], out: Value = out,
                          target: ir.Value = target) -> None:
                    index = outer_index + inner_counters
                    indexing.store(b, ctx.emitter.value_at(out, index), target, out.type, index)
                loop_nest(b, [(0, full.shape[d]) for d in inner], store, name="w")
            else:
                padding = [ir.Constant(I64, 0)] * (out.type.rank - outer_rank)
                index = outer_index + padding
                indexing.store(b, ctx.emitter.value_at(out, index), target, out.type, index)
        ctx.emitter.registers.clear()

    outer_bounds: list[tuple[ir.Value | int, ir.Value | int]] = \
        [(0, full.shape[d]) for d in range(outer_rank)]
    if outer_bounds:
        outer_bounds[0] = (ctx.begin, ctx.end)
        loop_nest(b, outer_bounds, row, name="row")
    else:
        with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
            row([])
    ctx.finish()
    extent = full.shape[0] if outer_rank else 1
    return Kernel(ctx.name, extent, max(full.size, 1) * (len(reduces) + len(body.outputs)))


__all__ = ["emit_fusion", "fusion_buffers"]
