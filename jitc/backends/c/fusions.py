"""C kernels for fusion ops: one template per fusion kind (see jitc/ir/ops/fusion.py).

The body function's parameters alias the fusion's operands, so the elemental emitter computes
every other body value on the fly; only the fusion's results touch memory.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from jitc.ir import ops
from jitc.ir.core import Function, Instruction, Value
from jitc.ir.opdef import Trait
from jitc.ir.symbolic import at_most, is_static

from .cgen import extent, loop_nest, register_type
from .elemental import accumulator_dtype, combine, convert_value
from .kernels import (
    Kernel,
    KernelContext,
    PairwiseSums,
    buffers_used,
    convolution_into,
    declare_accumulator,
    dot_into,
    elementwise_loop,
    loop_over,
    reduce_into,
)
from .movement import clamped_starts

if TYPE_CHECKING:
    from .codegen import Program


def fusion_values(program: Program, inst: Instruction) -> list[Value]:
    """The buffers fusion `inst`'s kernel touches: its results, then its materialised
    operands."""
    values: list[Value] = list(inst.results)
    for operand in inst.operands:
        if program.plan.slot(operand) is not None and all(v is not operand for v in values):
            values.append(operand)
    return values


def emit_fusion(program: Program, name: str, inst: Instruction) -> Kernel:
    body = program.module.functions[inst.attrs["calls"]]  # type: ignore[index]
    ctx = KernelContext(program, name, inst, fusion_values(program, inst))
    ctx.parallel = True
    for param, operand in zip(body.parameters, inst.operands):
        ctx.e.aliases[id(param)] = operand
    kind = inst.attrs["kind"]
    if kind == "loop":
        # Sibling roots of one shape are computed in one loop, sharing what they read.
        def element(index: list[str]) -> None:
            for root, result in zip(body.outputs, inst.results):
                ctx.e.store(ctx.e.value_at(root, index), ctx.pointer(result), result.type,
                            index)
        loop_over(ctx, inst.results[0].type, element)
    elif kind == "reduce":
        root = body.outputs[0].producer
        for out, result in zip(root.results, inst.results):
            ctx.e.buffers[id(out)] = ctx.pointer(result)
        reduce_into(ctx, root)
    elif kind == "dot":
        _dot_kernel(program, ctx, body, inst)
    else:
        _row_kernel(ctx, body, inst)
    return ctx.finish()


def update_in_place(program: Program, name: str, inst: Instruction) -> Kernel:
    """A dynamic_update_slice (`inst`, or the root of loop fusion `inst`) computed in its
    operand's buffer, a written argument's (the plan's `in_place`): only the block is stored,
    at the starts clamped as the op clamps them."""
    ctx = KernelContext(program, name, inst, fusion_values(program, inst)
                        if inst.op is ops.FUSION else buffers_used(inst, program))
    root = inst
    if inst.op is ops.FUSION:
        body = program.module.functions[inst.attrs["calls"]]  # type: ignore[index]
        for param, operand in zip(body.parameters, inst.operands):
            ctx.e.aliases[id(param)] = operand
        root = body.outputs[0].producer
    operand, update = root.operands[0].type, root.operands[1]
    starts = clamped_starts(ctx.e, root.operands[2:], operand.shape, update.type.shape)
    target = ctx.pointer(inst.results[0])

    def element(index: list[str]) -> None:
        placed = [ctx.e.let_index(f"{s} + {i}") for s, i in zip(starts, index)]
        ctx.e.store(ctx.e.value_at(update, index), target, operand, placed)
    loop_over(ctx, update.type, element)
    return ctx.finish()


def _dot_kernel(program: Program, ctx: KernelContext, body: Function,
                inst: Instruction) -> None:
    """The contraction, then its epilogue on each finished element. The epilogue reads the
    contraction's value from the buffer it writes, in place, when it has the contraction's
    type and reads each element only where it writes it; otherwise (a transpose or a
    conversion of the contraction in a hand-written body) the contraction goes to scratch
    space first."""
    core = next(i for i in body.body if i.op in (ops.DOT_GENERAL, ops.CONVOLUTION))
    result = inst.results[0]
    root = body.outputs[0]
    target = ctx.pointer(result)
    into = dot_into if core.op is ops.DOT_GENERAL else convolution_into
    if root is core.results[0]:
        ctx.e.buffers[id(core.results[0])] = target
        into(ctx, core, target)
        return

    def finish(index: list[str]) -> None:
        ctx.e.store(ctx.e.value_at(root, index), target, result.type, index)

    # In place needs the same bytes for both: one dtype, shape and layout.
    if root.type == core.results[0].type and _reads_only_in_place(root, core.results[0]):
        ctx.e.buffers[id(core.results[0])] = target
        into(ctx, core, target, finish)
        return
    core_type = core.results[0].type
    scratch = ctx.extra(core_type.dtype, "scratch", *program.scratch(core_type))
    ctx.e.buffers[id(core.results[0])] = scratch
    into(ctx, core, scratch)
    elementwise_loop(ctx, result.type, target, lambda index: ctx.e.value_at(root, index))


def _reads_only_in_place(root: Value, core: Value) -> bool:
    """Whether every path from `root` back to `core` goes through elementwise ops only, so
    element i of the root reads element i of the core and nothing else."""
    pending, seen = [root], set()
    while pending:
        value = pending.pop()
        if value is core or id(value) in seen:
            continue
        seen.add(id(value))
        inst = value.producer
        if _depends_on(value, core) and not inst.op.has(Trait.ELEMENTWISE):
            return False
        pending.extend(inst.operands)
    return True


def _depends_on(value: Value, target: Value) -> bool:
    pending, seen = [value], set()
    while pending:
        v = pending.pop()
        if v is target:
            return True
        if id(v) not in seen:
            seen.add(id(v))
            pending.extend(v.producer.operands)
    return False


def _row_kernel(ctx: KernelContext, body: Function, inst: Instruction) -> None:
    """One row at a time: each reduction of the row accumulates into local variables (in
    program order, so later reductions can use earlier results, as layernorm's variance uses
    its mean), then the row's outputs are computed from the input and those values."""
    reduces = [i for i in body.body if i.op is ops.REDUCE]
    full = reduces[0].operands[0].type
    outer_rank = reduces[0].results[0].type.rank
    inner = [(0, full.shape[d]) for d in range(outer_rank, full.rank)]
    e, w = ctx.e, ctx.w

    def row(outer_index: list[str]) -> None:
        for r in reduces:
            kind = r.attrs["kind"]
            accs = [accumulator_dtype(kind, v.type.dtype) for v in r.operands]  # type: ignore
            names = [declare_accumulator(ctx, kind, dt) for dt in accs]  # type: ignore
            pairwise = PairwiseSums(ctx, kind, r.operands, names,  # type: ignore[arg-type]
                                    math.prod(hi for _, hi in inner))

            def accumulate(inner_index: list[str], r: Instruction = r, kind: str = kind,
                           accs: list = accs, names: list[str] = names,
                           pairwise: PairwiseSums = pairwise) -> None:
                for operand, acc, dt in zip(r.operands, names, accs):
                    x = e.value_at(operand, outer_index + inner_index)
                    x = convert_value(e, x, operand.type.dtype, dt)
                    w.line(f"{acc} = {combine(e, kind, dt, acc, x)};")  # type: ignore
                pairwise.step()
            w.comment(program_text(ctx, r))
            if _computed_sum(r, inner, pairwise):
                _sum_in_chunks(ctx, r, outer_index, inner[0][1], names[0], accs[0])
            else:
                loop_nest(w, inner, accumulate)
            pairwise.finish()
            for result, acc, dt in zip(r.results, names, accs):
                # The accumulator is final here: use it as it is when no conversion is due.
                value = convert_value(e, acc, dt, result.type.dtype)
                e.registers[id(result)] = acc if value == acc else e.let(result.type.dtype,
                                                                          value)
        for out, result in zip(body.outputs, inst.results):
            target = ctx.pointer(result)
            if out.type.shape == full.shape:
                def store(inner_index: list[str], out: Value = out, target: str = target
                          ) -> None:
                    index = outer_index + inner_index
                    e.store(e.value_at(out, index), target, out.type, index)
                loop_nest(w, inner, store)
            else:
                index = outer_index + ["0"] * (out.type.rank - outer_rank)
                e.store(e.value_at(out, index), target, out.type, index)
        e.registers.clear()

    loop_nest(w, [(0, full.shape[d]) for d in range(outer_rank)], row)


# Elements of a row a chunked sum computes before adding them (_sum_in_chunks), and the
# shortest row that is chunked (a shorter one gains nothing from vectors).
SUM_CHUNK = 64
SUM_CHUNK_MIN = 16


def _computed_sum(r: Instruction, inner: list, pairwise: PairwiseSums) -> bool:
    """Whether reduction `r` of a row kernel is a float sum along one dimension of values
    computed in the kernel (softmax's exponentials), outside the pairwise cascade."""
    operand, length = r.operands[0], inner[0][1] if len(inner) == 1 else 0
    return (r.attrs["kind"] == "sum" and len(r.operands) == 1 and len(inner) == 1 and
            not at_most(length, SUM_CHUNK_MIN - 1) and
            operand.type.dtype.is_float and not pairwise.names and
            operand.producer.op is not ops.PARAMETER)


def _sum_in_chunks(ctx: KernelContext, r: Instruction, outer_index: list[str],
                   length: object, acc: str, acc_dtype: object) -> None:
    """The sum of a row's computed values, SUM_CHUNK at a time: a loop computes a chunk into
    a local array, which the compiler vectorizes, then a loop adds it to the accumulator in
    order. A loop doing both is not vectorized (the in-order sum serializes it); the same
    values are added in the same order."""
    e, w = ctx.e, ctx.w
    operand = r.operands[0]
    chunk = w.fresh("s")

    def one_chunk(start: str, count: str | int, size: int) -> None:
        w.line(f"{register_type(operand.type.dtype)} {chunk}[{size}];")
        with w.loop(0, count) as j:
            index = j if start == "0" else e.let_index(f"{start} + {j}")
            w.line(f"{chunk}[{j}] = {e.value_at(operand, outer_index + [index])};")
        with w.loop(0, count) as j:
            x = convert_value(e, f"{chunk}[{j}]", operand.type.dtype, acc_dtype)  # type: ignore
            w.line(f"{acc} = {combine(e, 'sum', acc_dtype, acc, x)};")  # type: ignore

    if is_static(length) and length <= SUM_CHUNK:  # type: ignore[operator]
        one_chunk("0", length, length)  # type: ignore[arg-type]
        return
    start = w.fresh("i")
    with w.block(f"for (int64_t {start} = 0; {start} < {extent(length)}; "
                 f"{start} += {SUM_CHUNK})"):
        one_chunk(start, e.let_index(f"{extent(length)} - {start} < {SUM_CHUNK} ? "
                                     f"{extent(length)} - {start} : {SUM_CHUNK}"), SUM_CHUNK)


def program_text(ctx: KernelContext, inst: Instruction) -> str:
    return ctx.program.texts.get(id(inst), inst.op.name)


__all__ = ["emit_fusion"]
