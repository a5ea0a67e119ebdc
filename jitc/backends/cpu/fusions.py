"""CPU kernels for fusion ops: one kernel template per fusion kind.

The body function's parameters alias the fusion's operands, so the elemental emitter computes
every other body value on the fly; only the fusion's results touch memory.
"""

from __future__ import annotations

import math

from llvmlite import ir

from jitc.backends.cpu import dots, kernels
from jitc.backends.cpu.kernels import Kernel, KernelContext
from jitc.backends.cpu.lanes import Lanes, flush_count, lane_count, reduction_loops
from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import loop_nest
from jitc.backends.llvm.reductions import accumulator_dtype
from jitc.backends.llvm.types import I32, I64, PTR, declare, memory_type
from jitc.ir import ops
from jitc.ir.core import Function, Instruction, Module, Value
from jitc.ir.opdef import Trait
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

# A row buffer on the stack: 64 KiB of float32.
ROW_BUFFER_LIMIT = 16384


def fusion_buffers(inst: Instruction, plan: BufferPlan) -> list[Value]:
    """The buffers a fusion kernel touches: its results, then its materialised operands."""
    values: list[Value] = list(inst.results)
    seen = {id(v) for v in values}
    for operand in inst.operands:
        if plan.slot(operand) is not None and id(operand) not in seen:
            seen.add(id(operand))
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
        if id(inst) in plan.in_place:
            return kernels.update_in_place(ctx, body.outputs[0].producer, targets[0][1])
        if _piecewise(body):
            return _concatenate_pieces(ctx, body.outputs[0].producer, targets[0][1])
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
            return dots.dot_into(ctx, core, epilogue)
        return kernels.convolution_into(ctx, core, epilogue)
    return _row_kernel(ctx, body, inst)


def _piecewise(body: Function) -> bool:
    """Whether the loop fusion `body` computes one concatenate joined along an inner axis of
    static size: copied operand by operand, each element's loop needs no test of which operand
    it comes from (a 3x3 convolution's patches: 9 pieces, 12 times faster than the element loop
    that branches to its piece)."""
    if len(body.outputs) != 1 or body.outputs[0].producer.op is not ops.CONCATENATE:
        return False
    root = body.outputs[0].producer
    t = root.results[0].type
    return t.rank > 1 and kernels.physical_order(t)[0] != root.attrs["dimension"] and \
        all(is_static(d) for v in root.operands for d in v.type.shape)


def _concatenate_pieces(ctx: KernelContext, root: Instruction, target: ir.Value) -> Kernel:
    """Each operand of `root` in a loop of its own over its elements, stored at its offset
    along the joined axis. Threads divide the outermost dimension, which is not joined."""
    b = ctx.builder
    t = root.results[0].type
    axis: int = root.attrs["dimension"]  # type: ignore[assignment]
    order = kernels.physical_order(t)
    offset = 0
    for operand in root.operands:
        size = operand.type.shape[axis]
        if size:
            def copy(counters: list[ir.Value], operand: Value = operand, at: int = offset
                     ) -> None:
                index = kernels.logical_index(order, counters)
                value = ctx.emitter.value_at(operand, index)
                index[axis] = b.add(index[axis], ir.Constant(I64, at))
                indexing.store(b, value, target, t, index)
            bounds: list[tuple[ir.Value | int, ir.Value | int]] = [
                (0, operand.type.shape[d]) for d in order]
            bounds[0] = (ctx.begin, ctx.end)
            loop_nest(b, bounds, copy)
        offset += size
    ctx.finish()
    return Kernel(ctx.name, kernels.outer_extent(t), extents.positive(t.size))


def _row_kernel(ctx: KernelContext, body: Function, inst: Instruction) -> Kernel:
    """One row at a time: each reduction of the row accumulates in lanes (lanes.py), in
    program order, so later reductions can use earlier results (layernorm's variance uses its
    mean); a reduced transcendental that the outputs also need is kept in a row buffer on the
    stack (`_worth_keeping`), and the last reduction pass prefetches the next row. Then the
    row's outputs are computed from the input, the reduced values and the row buffers."""
    b = ctx.builder
    reduces = [i for i in body.body if i.op is ops.REDUCE]
    full = reduces[0].operands[0].type
    outer_rank = reduces[0].results[0].type.rank
    inner = list(range(outer_rank, full.rank))
    acc_types = {id(r): [accumulator_dtype(v.type.dtype) for v in r.operands] for r in reduces}
    count = lane_count([t for types in acc_types.values() for t in types])
    row_shape = tuple(full.shape[d] for d in inner)
    flushes = flush_count(full, inner, count)
    row_size = math.prod(row_shape)
    kept: dict[int, tuple[ir.Value, TensorType]] = {}
    for v in _worth_keeping(body, reduces, row_size):
        row_type = TensorType(v.type.dtype, row_shape)
        # A row of symbolic length gets a buffer for the longest row it keeps values of.
        elements = row_type.size if is_static(row_size) else ROW_BUFFER_LIMIT
        with b.goto_entry_block():
            buffer = b.alloca(memory_type(v.type.dtype), size=ir.Constant(I64, elements))
        kept[id(v)] = (buffer, row_type)

    def row(counters: list[ir.Value], stash: dict[int, tuple[ir.Value, TensorType]]) -> None:
        outer_index = list(counters)
        for r in reduces:
            accumulators = [Lanes(b, r.attrs["kind"], dt, count, flushes)  # type: ignore
                            for dt in acc_types[id(r)]]

            def accumulate(lane: ir.Value, at: dict[int, ir.Value], r: Instruction = r,
                           accumulators: list[Lanes] = accumulators) -> None:
                inner_index = [at[d] for d in inner]
                index = outer_index + inner_index
                for operand, lanes in zip(r.operands, accumulators):
                    x = ctx.emitter.value_at(operand, index)
                    if id(operand) in stash:
                        buffer, row_type = stash[id(operand)]
                        indexing.store(b, x, buffer, row_type, inner_index)
                    lanes.accumulate(lane, convert_value(b, x, operand.type.dtype, lanes.dtype))

            prefetch = None
            if r is reduces[-1] and len(reduces) > 1:
                # The last pass over a row runs from L1 (the first one brought the row in):
                # fetch the next row meanwhile, so its first pass does not wait on memory.
                def prefetch(at: dict[int, ir.Value]) -> None:
                    _prefetch_next_row(ctx, inst, full, outer_index + [at[d] for d in inner],
                                       math.prod(row_shape), count)
            def flush(accumulators: list[Lanes] = accumulators) -> None:
                for lanes in accumulators:
                    lanes.flush()
            reduction_loops(b, full, inner, count, accumulate, prefetch, flush)
            for result, lanes in zip(r.results, accumulators):
                ctx.emitter.registers[id(result)] = convert_value(
                    b, lanes.total(), lanes.dtype, result.type.dtype)
            for operand in r.operands:
                if id(operand) in stash:
                    ctx.emitter.rows[id(operand)] = stash[id(operand)]
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
        ctx.emitter.rows.clear()

    outer_bounds: list[tuple[ir.Value | int, ir.Value | int]] = \
        [(0, full.shape[d]) for d in range(outer_rank)]

    def rows(stash: dict[int, tuple[ir.Value, TensorType]]) -> None:
        if outer_bounds:
            outer_bounds[0] = (ctx.begin, ctx.end)
            loop_nest(b, outer_bounds, lambda counters: row(counters, stash), name="row")
        else:
            with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                row([], stash)

    if not kept or is_static(row_size):
        rows(kept)
    else:
        # Whether a row of symbolic length fits the stack buffers is known per call; longer
        # rows keep their values on the heap. One copy of the row code serves both (two
        # copies, one recomputing the kept values, cost a softmax 0.2 s of LLVM's time).
        length = extents.value(b, row_size)
        long_row = b.icmp_signed(">", length, ir.Constant(I64, ROW_BUFFER_LIMIT))
        buffers = _heap_when(b, long_row, length, kept)
        rows(buffers)
        _free_when(b, long_row, buffers)
    ctx.finish()
    extent = full.shape[0] if outer_rank else 1
    return Kernel(ctx.name, extent,
                  extents.positive(full.size) * (len(reduces) + len(body.outputs)))


def _heap_when(b: ir.IRBuilder, long_row: ir.Value, length: ir.Value,
               kept: dict[int, tuple[ir.Value, TensorType]]
               ) -> dict[int, tuple[ir.Value, TensorType]]:
    """`kept` with each stack buffer replaced, when `long_row`, by a heap block of `length`
    elements, which the caller frees with `_free_when` after the rows."""
    malloc = declare(b.module, "malloc", ir.FunctionType(PTR, [I64]))
    chosen: dict[int, tuple[ir.Value, TensorType]] = {}
    for key, (stack, row_type) in kept.items():
        with b.goto_entry_block():
            slot = b.alloca(PTR)
        b.store(b.bitcast(stack, PTR), slot)
        with b.if_then(long_row, likely=False):
            size = b.mul(length, ir.Constant(I64, row_type.dtype.itemsize))
            b.store(b.call(malloc, [size]), slot)
        chosen[key] = (b.load(slot), row_type)
    return chosen


def _free_when(b: ir.IRBuilder, long_row: ir.Value,
               buffers: dict[int, tuple[ir.Value, TensorType]]) -> None:
    free = declare(b.module, "free", ir.FunctionType(ir.VoidType(), [PTR]))
    with b.if_then(long_row, likely=False):
        for buffer, _ in buffers.values():
            b.call(free, [buffer])


def _prefetch_next_row(ctx: KernelContext, inst: Instruction, full: TensorType,
                       index: list[ir.Value], row_size: DimLike, count: int) -> None:
    """Prefetch the cache lines of the block at `index` one row further on (`row_size`
    elements) in every row-major operand of the row shape. A prefetch never faults, so the
    row after the last one needs no test."""
    b = ctx.builder
    prefetch = _prefetch_intrinsic(b.module)
    for operand in inst.operands:
        t = operand.type
        if t.shape != full.shape or not t.is_row_major or id(operand) not in ctx.emitter.buffers:
            continue
        offset = b.add(indexing.linear_offset(b, t, index), extents.value(b, row_size))
        base = b.gep(ctx.pointer(operand), [offset], source_etype=memory_type(t.dtype))
        for line in range(0, count * t.dtype.itemsize, 64):
            address = b.gep(base, [ir.Constant(I64, line)], source_etype=ir.IntType(8))
            b.call(prefetch, [address, ir.Constant(I32, 0), ir.Constant(I32, 3),
                              ir.Constant(I32, 1)])


def _prefetch_intrinsic(module: ir.Module) -> ir.Function:
    return declare(module, "llvm.prefetch.p0", ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]))


def _worth_keeping(body: Function, reduces: list[Instruction], row_size: DimLike
                   ) -> list[Value]:
    """Reduced values that the row kernel should keep in a row buffer for their other users
    instead of computing them twice: those with a transcendental op in their expression (the
    exp of softmax is reduced, then divided by the sum). Rows above ROW_BUFFER_LIMIT elements
    recompute instead of growing the stack (for a row of symbolic length the kernel decides
    per call)."""
    if is_static(row_size) and row_size > ROW_BUFFER_LIMIT:
        return []
    users: dict[int, int] = {}
    for i in body.body:
        for v in i.operands:
            users[id(v)] = users.get(id(v), 0) + 1
    for v in body.outputs:
        users[id(v)] = users.get(id(v), 0) + 1
    expensive: dict[int, bool] = {}

    def costly(v: Value) -> bool:
        if id(v) not in expensive:
            inst = v.producer
            expensive[id(v)] = inst.op is not ops.PARAMETER and inst.op is not ops.REDUCE and (
                inst.op.has(Trait.TRANSCENDENTAL) or any(costly(o) for o in inst.operands))
        return expensive[id(v)]

    kept: list[Value] = []
    for r in reduces:
        for v in r.operands:
            if users[id(v)] > 1 and costly(v) and all(k is not v for k in kept):
                kept.append(v)
    return kept


__all__ = ["emit_fusion", "fusion_buffers"]
