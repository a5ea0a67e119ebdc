"""Reduction kernels: reduce, argmax/argmin, and row fusions (softmax, layernorm).

Two shapes of kernel, chosen by whether the reduced elements of one output are contiguous:

- row (the input's minor dimension is reduced): `group` threads share a row and stride along
  it, so a warp reads consecutive addresses; their partial results meet in a butterfly of
  warp shuffles (`shfl.sync.bfly`), after which every thread of the group holds the total.
  Rows longer than a warp take a whole block: each warp's total goes through shared memory
  and every thread then combines the warps' totals in the same fixed order.
- column (the minor dimension is kept): a block takes 32 consecutive outputs, one per lane,
  and 8 rows of threads split the reduced elements; the 8 partial results meet in shared
  memory after a barrier.

Every combination order is fixed by the launch configuration alone, so results are
deterministic, and a butterfly of commutative combines leaves bitwise-equal totals in every
lane. Reductions accumulate float16 in float32, as on the CPU. A thread's share of a float sum
is summed pairwise (llvm/reductions.py `Cascade`), so long sums keep numpy's accuracy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.cuda import launch as launches
from jitc.backends.cuda.elementwise import delinearize, physical_order
from jitc.backends.cuda.kernel import KernelBuilder, KernelSpec, PhaseContext, StateSlot
from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.elemental import _is_nan, convert_value
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.reductions import Cascade, accumulator_dtype, combine
from jitc.backends.llvm.types import I1, I64, constant, value_type
from jitc.ir import dtypes, ops
from jitc.ir.core import Function, Instruction, Value
from jitc.ir.dtypes import Kind
from jitc.ir.ops.reduce import reduce_identity
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

Index = list[ir.Value]


class Reduction:
    """How one reduce (or argmax/argmin) instruction accumulates: the types of its
    accumulator's components, their identity, an associative and commutative combine, what it
    reads at an input index and what it leaves in its results."""

    def __init__(self, inst: Instruction) -> None:
        self.inst = inst
        self.input = inst.operands[0].type
        if inst.op is ops.REDUCE:
            self.dims = sorted(inst.attrs["dims"])  # type: ignore[arg-type]
            self.kind: str = inst.attrs["kind"]  # type: ignore[assignment]
            self.accs = [accumulator_dtype(v.type.dtype) for v in inst.operands]
            self.types = [value_type(d) for d in self.accs]
        else:
            self.dims = [inst.attrs["axis"]]  # type: ignore[list-item]
            self.kind = inst.op.name
            self.types = [value_type(self.input.dtype), I64]
        self.kept = [d for d in range(self.input.rank) if d not in self.dims]

    @property
    def is_arg(self) -> bool:
        return self.inst.op is not ops.REDUCE

    def identity(self) -> list[ir.Value]:
        if not self.is_arg:
            return [constant(d, reduce_identity(self.kind, d.numpy))  # type: ignore[arg-type]
                    for d in self.accs]
        # Worse than any element, so an element always replaces it (on equal values the
        # element's smaller index wins).
        dtype = self.input.dtype
        worst = reduce_identity("max" if self.kind == "argmax" else "min", dtype.numpy)
        return [constant(dtype, worst), ir.Constant(I64, 2**63 - 1)]

    def cascade(self, b: ir.IRBuilder, slots: list[ir.Value]) -> Cascade:
        """Pairwise summation of a thread's share of a float sum (no code otherwise)."""
        return Cascade(b, "" if self.is_arg else self.kind, [] if self.is_arg else self.accs,
                       slots)

    def combine(self, b: ir.IRBuilder, x: list[ir.Value], y: list[ir.Value]) -> list[ir.Value]:
        if not self.is_arg:
            return [combine(b, self.kind, d, p, q) for d, p, q in zip(self.accs, x, y)]
        (xv, xi), (yv, yi) = x, y
        kind = self.input.dtype.kind
        larger = self.kind == "argmax"
        if kind is Kind.FLOAT:
            better = b.fcmp_ordered(">" if larger else "<", xv, yv)
            better = b.or_(better, b.and_(_is_nan(b, xv), b.not_(_is_nan(b, yv))))
            tie = b.or_(b.fcmp_ordered("==", xv, yv), b.and_(_is_nan(b, xv), _is_nan(b, yv)))
        else:
            compare = b.icmp_signed if kind is Kind.SIGNED else b.icmp_unsigned
            better = compare(">" if larger else "<", xv, yv)
            tie = b.icmp_unsigned("==", xv, yv)
        pick_x = b.or_(better, b.and_(tie, b.icmp_signed("<", xi, yi)))
        return [b.select(pick_x, xv, yv), b.select(pick_x, xi, yi)]

    def read(self, ctx: PhaseContext, index: Index) -> list[ir.Value]:
        """The accumulator of the input element at `index`."""
        b, e = ctx.builder, ctx.emitter
        if self.is_arg:
            return [e.value_at(self.inst.operands[0], index), index[self.dims[0]]]
        return [convert_value(b, e.value_at(v, index), v.type.dtype, acc)
                for v, acc in zip(self.inst.operands, self.accs)]

    def results(self, b: ir.IRBuilder, acc: list[ir.Value]) -> list[tuple[Value, ir.Value]]:
        if self.is_arg:
            result = self.inst.results[0]
            return [(result, convert_value(b, acc[1], dtypes.int64, result.type.dtype))]
        return [(r, convert_value(b, a, d, r.type.dtype))
                for r, a, d in zip(self.inst.results, acc, self.accs)]

    def input_index(self, out_index: Index, reduced_index: Index) -> Index:
        index: Index = [ir.Constant(I64, 0)] * self.input.rank
        for d, i in zip(self.kept, out_index):
            index[d] = i
        for d, i in zip(self.dims, reduced_index):
            index[d] = i
        return index

    def reduced_order(self) -> list[int]:
        return [d for d in physical_order(self.input) if d in self.dims]

    @property
    def length(self) -> DimLike:
        n: DimLike = 1
        for d in self.dims:
            n *= self.input.shape[d]
        return n

    def partial_bytes(self) -> int:
        """Shared memory for one partial result, with room to align each component."""
        return 8 * len(self.types)


def reduces_minor(t: TensorType, dims: Sequence[int]) -> bool:
    """Whether the reduced dimensions include the input's minor (contiguous) one; size-1
    dimensions do not count."""
    for d in t.layout:
        if t.shape[d] != 1:  # a symbolic extent counts as more than 1: either kernel is right
            return d in dims
    return True


# -- row kernels ---------------------------------------------------------------------------------

@dataclass
class RowThread:
    """This thread's place in a row kernel (recomputed in every phase)."""

    row: ir.Value      # i64
    lane: ir.Value     # i64, the thread's position within its row's group
    valid: ir.Value    # i1, whether `row` exists (the last block may have spare groups)
    group: int

    def each(self, ctx: PhaseContext, length: DimLike,
             body: Callable[[ir.Value], None]) -> None:
        """`body(k)` for this thread's share of positions 0 <= k < length of its row."""
        b = ctx.builder
        start = b.select(self.valid, self.lane, extents.value(b, length))
        with for_range(b, start, length, step=self.group, name="k") as k:
            body(k)

    def leader(self, ctx: PhaseContext) -> ir.Value:
        b = ctx.builder
        return b.and_(self.valid, b.icmp_unsigned("==", self.lane, ir.Constant(I64, 0)))


def _row_thread(ctx: PhaseContext, config: launches.RowReduction, rows: DimLike) -> RowThread:
    b = ctx.builder
    g = config.group
    if config.whole_block:
        # A block per row; a symbolic launch has at least one block, even for no rows.
        valid = ir.Constant(I1, 1) if is_static(rows) else \
            b.icmp_unsigned("<", ctx.block(), extents.value(b, rows))
        return RowThread(ctx.block(), ctx.thread(), valid, g)
    t = ctx.global_thread()
    row = b.udiv(t, ir.Constant(I64, g))
    lane = b.urem(t, ir.Constant(I64, g))
    return RowThread(row, lane, b.icmp_unsigned("<", row, extents.value(b, rows)), g)


# Where a row's element k sits: (thread's row, reduced position k) -> the input's index.
ElementIndex = Callable[[PhaseContext, RowThread, ir.Value], Index]
# What the final phase writes, with every reduction's total in the emitter's registers.
Writer = Callable[[PhaseContext, RowThread], None]


def row_kernel(kb: KernelBuilder, config: launches.RowReduction, reductions: list[Reduction],
               rows: DimLike, length: DimLike, element: ElementIndex, write: Writer
               ) -> KernelSpec:
    """The reductions of each row in order (each may read the totals of the ones before it,
    as layernorm's variance reads its mean), then `write`."""
    totals: list[Callable[[PhaseContext], list[ir.Value]]] = []

    def load_totals(ctx: PhaseContext) -> None:
        for reduction, total in zip(reductions, totals):
            for result, value in reduction.results(ctx.builder, total(ctx)):
                ctx.emitter.registers[id(result)] = value

    for reduction in reductions:
        acc = [kb.state(t) for t in reduction.types]
        other = [kb.state(t) for t in reduction.types]
        with kb.phase() as ctx:
            load_totals(ctx)
            thread = _row_thread(ctx, config, rows)
            _accumulate(ctx, reduction, acc, lambda k, c=ctx, t=thread: element(c, t, k),
                        thread, length)
        _butterfly(kb, reduction, acc, other, min(config.group, launches.WARP))
        if config.whole_block:
            totals.append(_through_shared(kb, reduction, acc, config.warps))
        else:
            totals.append(lambda ctx, acc=acc: [ctx.load_state(s) for s in acc])
    with kb.phase() as ctx:
        load_totals(ctx)
        write(ctx, _row_thread(ctx, config, rows))
    return kb.finish()


def _accumulate(ctx: PhaseContext, reduction: Reduction, acc: list[StateSlot],
                index_at: Callable[[ir.Value], Index], thread: RowThread,
                length: DimLike) -> None:
    """This thread's share of the row into `acc` (through allocas, which stay registers)."""
    b = ctx.builder
    with b.goto_entry_block():
        slots = [b.alloca(t) for t in reduction.types]
    for slot, value in zip(slots, reduction.identity()):
        b.store(value, slot)
    cascade = reduction.cascade(b, slots)

    def body(k: ir.Value) -> None:
        current = [b.load(s) for s in slots]
        x = reduction.read(ctx, index_at(k))
        for slot, value in zip(slots, reduction.combine(b, current, x)):
            b.store(value, slot)
        cascade.step()
    thread.each(ctx, length, body)
    cascade.finish()
    for state, slot, t in zip(acc, slots, reduction.types):
        ctx.store_state(state, b.load(slot, typ=t))


def _butterfly(kb: KernelBuilder, reduction: Reduction, acc: list[StateSlot],
               other: list[StateSlot], width: int) -> None:
    """After this every lane of each aligned group of `width` lanes holds the group's total."""
    mask = width // 2
    while mask:
        for a, o in zip(acc, other):
            kb.shuffle_xor(a, o, mask)
        with kb.phase() as ctx:
            mine = [ctx.load_state(s) for s in acc]
            theirs = [ctx.load_state(s) for s in other]
            for slot, value in zip(acc, reduction.combine(ctx.builder, mine, theirs)):
                ctx.store_state(slot, value)
        mask //= 2


def _through_shared(kb: KernelBuilder, reduction: Reduction, acc: list[StateSlot],
                    warps: int) -> Callable[[PhaseContext], list[ir.Value]]:
    """Lane 0 of each warp publishes the warp's total; later phases combine them."""
    partials = [kb.shared(t, warps) for t in reduction.types]
    with kb.phase() as ctx:
        b = ctx.builder
        warp = b.udiv(ctx.thread(), ir.Constant(I64, launches.WARP))
        lane = b.urem(ctx.thread(), ir.Constant(I64, launches.WARP))
        with b.if_then(b.icmp_unsigned("==", lane, ir.Constant(I64, 0))):
            for array, slot in zip(partials, acc):
                ctx.store_shared(array, warp, ctx.load_state(slot))
    kb.barrier()

    def total(ctx: PhaseContext) -> list[ir.Value]:
        result = [ctx.load_shared(a, 0) for a in partials]
        for w in range(1, warps):
            result = reduction.combine(ctx.builder, result,
                                       [ctx.load_shared(a, w) for a in partials])
        return result
    return total


# -- column kernels ------------------------------------------------------------------------------

def column_kernel(kb: KernelBuilder, config: launches.ColumnReduction, reduction: Reduction,
                  outputs: DimLike, output_index: Callable[[PhaseContext, ir.Value], Index],
                  destinations: Sequence[Value]) -> KernelSpec:
    width, height = config.width, config.height
    partials = [kb.shared(t, width * height) for t in reduction.types]
    length = reduction.length
    shape = [reduction.input.shape[d] for d in range(reduction.input.rank)]
    order = reduction.reduced_order()

    def position(ctx: PhaseContext) -> tuple[ir.Value, ir.Value, ir.Value]:
        b = ctx.builder
        tx = b.urem(ctx.thread(), ir.Constant(I64, width))
        ty = b.udiv(ctx.thread(), ir.Constant(I64, width))
        o = b.add(b.mul(ctx.block(), ir.Constant(I64, width)), tx)
        return tx, ty, o

    with kb.phase() as ctx:
        b = ctx.builder
        tx, ty, o = position(ctx)
        valid = b.icmp_unsigned("<", o, extents.value(b, outputs))
        with b.goto_entry_block():
            slots = [b.alloca(t) for t in reduction.types]
        for slot, value in zip(slots, reduction.identity()):
            b.store(value, slot)
        cascade = reduction.cascade(b, slots)
        out_index = output_index(ctx, b.select(valid, o, ir.Constant(I64, 0)))
        start = b.select(valid, ty, extents.value(b, length))
        with for_range(b, start, length, step=height, name="k") as k:
            reduced = delinearize(b, k, shape, order)
            index = reduction.input_index(out_index, [reduced[d] for d in reduction.dims])
            x = reduction.read(ctx, index)
            current = [b.load(s) for s in slots]
            for slot, value in zip(slots, reduction.combine(b, current, x)):
                b.store(value, slot)
            cascade.step()
        cascade.finish()
        cell = b.add(b.mul(ty, ir.Constant(I64, width)), tx)
        for array, slot in zip(partials, slots):
            ctx.store_shared(array, cell, b.load(slot, typ=array.type))
    kb.barrier()
    with kb.phase() as ctx:
        b = ctx.builder
        tx, ty, o = position(ctx)
        first = b.icmp_unsigned("==", ty, ir.Constant(I64, 0))
        with b.if_then(b.and_(first, b.icmp_unsigned("<", o, extents.value(b, outputs)))):
            total = [ctx.load_shared(a, tx) for a in partials]
            for y in range(1, height):
                cell = b.add(tx, ir.Constant(I64, y * width))
                total = reduction.combine(b, total, [ctx.load_shared(a, cell) for a in partials])
            _store_results(ctx, reduction, total, destinations, output_index(ctx, o))
    return kb.finish()


def _store_results(ctx: PhaseContext, reduction: Reduction, acc: list[ir.Value],
                   destinations: Sequence[Value], index: Index) -> None:
    for (_, value), target in zip(reduction.results(ctx.builder, acc), destinations):
        indexing.store(ctx.builder, value, ctx.pointer(target), target.type, index)


# -- the kernels the code generator asks for ------------------------------------------------------

def reduction_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                     values: Sequence[Value], destinations: Sequence[Value],
                     aliases: dict[int, Value] | None = None) -> KernelSpec | None:
    """A reduce or argmax/argmin instruction (possibly a fusion's root, whose producers
    `aliases` maps to the fusion's operands) writing its results to `destinations`."""
    reduction = Reduction(inst)
    out = inst.results[0].type
    outputs = out.size
    if is_static(outputs) and outputs == 0:
        return None
    shape = list(reduction.input.shape)
    order = reduction.reduced_order()

    def output_index(ctx: PhaseContext, o: ir.Value) -> Index:
        return delinearize(ctx.builder, o, out.shape, physical_order(out))

    if not reduces_minor(reduction.input, reduction.dims):
        column = launches.column_reduction(outputs, reduction.partial_bytes())
        kb = KernelBuilder(module, plan, name, values, destinations, column.launch)
        kb.aliases.update(aliases or {})
        return column_kernel(kb, column, reduction, outputs, output_index, destinations)

    config = _row_launch(outputs, reduction.length, reduction.partial_bytes())
    kb = KernelBuilder(module, plan, name, values, destinations, config.launch)
    kb.aliases.update(aliases or {})

    def element(ctx: PhaseContext, thread: RowThread, k: ir.Value) -> Index:
        reduced = delinearize(ctx.builder, k, shape, order)
        row = ctx.builder.select(thread.valid, thread.row, ir.Constant(I64, 0))
        return reduction.input_index(output_index(ctx, row),
                                     [reduced[d] for d in reduction.dims])

    def write(ctx: PhaseContext, thread: RowThread) -> None:
        b = ctx.builder
        with b.if_then(thread.leader(ctx)):
            index = output_index(ctx, thread.row)
            for result, target in zip(inst.results, destinations):
                value = ctx.emitter.registers[id(result)]
                indexing.store(b, value, ctx.pointer(target), target.type, index)

    return row_kernel(kb, config, [reduction], outputs, reduction.length, element, write)


def row_fusion_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                      body: Function, values: Sequence[Value]) -> KernelSpec | None:
    """A row fusion: reductions over the trailing dimensions of one row-major shape, the
    elementwise ops around them, and outputs per element or per row."""
    reduces = [Reduction(i) for i in body.body if i.op is ops.REDUCE]
    full = reduces[0].input
    outer_rank = reduces[0].inst.results[0].type.rank
    rows = _product(full.shape[:outer_rank])
    length = _product(full.shape[outer_rank:])
    if all(is_static(r.type.size) and r.type.size == 0 for r in inst.results):
        return None
    config = _row_launch(rows, length, sum(r.partial_bytes() for r in reduces))
    kb = KernelBuilder(module, plan, name, values, list(inst.results), config.launch)
    for param, operand in zip(body.parameters, inst.operands):
        kb.aliases[id(param)] = operand
    outer, inner = list(full.shape[:outer_rank]), list(full.shape[outer_rank:])
    inner_order = list(range(len(inner)))

    def outer_index(ctx: PhaseContext, thread: RowThread) -> Index:
        row = ctx.builder.select(thread.valid, thread.row, ir.Constant(I64, 0))
        return delinearize(ctx.builder, row, outer, list(range(outer_rank)))

    def element(ctx: PhaseContext, thread: RowThread, k: ir.Value) -> Index:
        return outer_index(ctx, thread) + delinearize(ctx.builder, k, inner, inner_order)

    def write(ctx: PhaseContext, thread: RowThread) -> None:
        b = ctx.builder
        for out, result in zip(body.outputs, inst.results):
            target = ctx.pointer(result)
            if out.type.shape == full.shape:
                def store(k: ir.Value, out: Value = out, target: ir.Value = target,
                          result: Value = result) -> None:
                    index = element(ctx, thread, k)
                    indexing.store(b, ctx.emitter.value_at(out, index), target, result.type,
                                   index)
                thread.each(ctx, length, store)
            else:
                with b.if_then(thread.leader(ctx)):
                    index = outer_index(ctx, thread)
                    index += [ir.Constant(I64, 0)] * (out.type.rank - outer_rank)
                    indexing.store(b, ctx.emitter.value_at(out, index), target, result.type,
                                   index)

    return row_kernel(kb, config, reduces, rows, length, element, write)


def _row_launch(rows: DimLike, length: DimLike, partial_bytes: int) -> launches.RowReduction:
    if isinstance(rows, int) and isinstance(length, int):
        return launches.row_reduction(rows, length, partial_bytes)
    return launches.symbolic_row_reduction(rows, length, partial_bytes)


def _product(xs: Sequence[DimLike]) -> DimLike:
    n: DimLike = 1
    for x in xs:
        n *= x
    return n
