"""CPU kernels: one LLVM function per materialised instruction.

Every kernel has the signature `void k(ptr frame, i64 begin, i64 end)` and computes the part
of its output whose outermost (most major) index lies in [begin, end), so a thread pool can
split it. The body sits in an internal function whose buffer arguments are `noalias`; once
inlined into the wrapper that noalias becomes scoped alias metadata, which is what lets LLVM
vectorize.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from jitc.backends.cpu.convolution_rows import convolution_rows
from jitc.backends.cpu.lanes import Lanes, flush_count, lane_count, reduction_loops
from jitc.backends.cpu.plan import BufferPlan, is_inline_constant
from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.convolution import convolution_element, window_size
from jitc.backends.llvm.elemental import RULES, ElementalEmitter, convert_value
from jitc.backends.llvm.elemental_movement import clamped_starts
from jitc.backends.llvm.loops import for_range, loop_nest
from jitc.backends.llvm.reductions import accumulator_dtype, combine
from jitc.backends.llvm.types import (
    I32,
    I64,
    PTR,
    VOID,
    constant,
    declare,
    memory_type,
    value_type,
)
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value
from jitc.ir.dtypes import Kind
from jitc.ir.ops.reduce import reduce_identity
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

# Rows a column reduction adds together before touching its result row.
COLUMN_ROWS = 4


@dataclass
class Kernel:
    name: str
    outer: DimLike | extents.Choice  # the extent of the split dimension (1: no split)
    cost: DimLike | extents.Choice  # rough element operations, for the parallelism decision


def physical_order(t: TensorType) -> list[int]:
    """Dimensions from the most major to the most minor."""
    return list(reversed(t.layout))


class KernelContext:
    """Builds one kernel: the noalias body function and its frame-reading wrapper."""

    def __init__(self, module: ir.Module, plan: BufferPlan, name: str,
                 values: Sequence[Value], extra_slots: Sequence[int] = ()) -> None:
        self.module = module
        self.name = name
        self.constraints = plan.constraints
        self.packed = plan.packed
        self.values = list(values)
        self.slots = [plan.slot(v) for v in self.values] + list(extra_slots)
        # A symbolic function's kernels also get the pointer to the symbol values, last.
        if plan.dims_slot is not None:
            self.slots.append(plan.dims_slot)
        assert all(s is not None for s in self.slots), "a kernel buffer has no slot"
        body_type = ir.FunctionType(VOID, [PTR] * len(self.slots) + [I64, I64])
        self.body = ir.Function(module, body_type, f"{name}.body")
        self.body.linkage = "internal"
        self.body.attributes.add("alwaysinline")
        for arg in self.body.args[:len(self.slots)]:
            arg.add_attribute("noalias")
        self.begin, self.end = self.body.args[-2:]
        self.extra = list(self.body.args[len(self.values):len(self.values) + len(extra_slots)])
        self.builder = ir.IRBuilder(self.body.append_basic_block("entry"))
        if plan.dims_slot is not None:
            extents.bind(self.builder, self.body.args[len(self.slots) - 1], plan.symbols)
        buffers = {id(v): a for v, a in zip(self.values, self.body.args)}
        self.emitter = ElementalEmitter(self.builder, buffers)
        self._wrapper()

    def _wrapper(self) -> None:
        emit_wrapper(self.module, self.name, self.body, self.slots)  # type: ignore[arg-type]

    def pointer(self, value: Value) -> ir.Value:
        return self.emitter.buffers[id(value)]

    def finish(self) -> None:
        self.builder.ret_void()


def emit_wrapper(module: ir.Module, name: str, body: ir.Function, slots: Sequence[int]) -> None:
    """`void name(ptr frame, i64 begin, i64 end)`: the kernel's buffers from their frame slots,
    passed to the body. Kernels that compute the same thing on different buffers share a
    body and differ only in this wrapper."""
    wrapper = ir.Function(module, ir.FunctionType(VOID, [PTR, I64, I64]), name)
    frame, begin, end = wrapper.args
    b = ir.IRBuilder(wrapper.append_basic_block("entry"))
    pointers = []
    for slot in slots:
        address = b.gep(frame, [ir.Constant(I64, slot)], source_etype=PTR, inbounds=True)
        pointers.append(b.load(address, typ=PTR))
    b.call(body, pointers + [begin, end])
    b.ret_void()


def share_body(body: ir.Function) -> None:
    """Keep a body called by several wrappers out of line: compiled once, called N times."""
    body.attributes.discard("alwaysinline")
    body.attributes.add("noinline")


def buffers_used(inst: Instruction, plan: BufferPlan) -> list[Value]:
    """The materialised values a kernel for `inst` reads or writes (results first)."""
    seen: dict[int, Value] = {}
    for v in inst.results:
        seen[id(v)] = v

    def visit(v: Value) -> None:
        if id(v) in seen:
            return
        if plan.slot(v) is not None:
            seen[id(v)] = v
        elif is_inline_constant(v):
            return
        else:
            for operand in v.producer.operands:
                visit(operand)
    for operand in inst.operands:
        visit(operand)
    return list(seen.values())


def _outer_bounds(ctx: KernelContext, t: TensorType) -> list[tuple[ir.Value | int, ir.Value | int]]:
    """Loop bounds over t in physical order, the outermost limited to [begin, end)."""
    order = physical_order(t)
    bounds: list[tuple[ir.Value | int, ir.Value | int]] = [(0, t.shape[d]) for d in order]
    if bounds:
        bounds[0] = (ctx.begin, ctx.end)
    return bounds


def logical_index(order: list[int], counters: list[ir.Value]) -> list[ir.Value]:
    """The logical index of loop `counters` that run over the dimensions in `order`."""
    index: list[ir.Value] = [ir.Constant(I64, 0)] * len(order)
    for d, c in zip(order, counters):
        index[d] = c
    return index


def outer_extent(t: TensorType) -> int:
    """The extent of `t`'s outermost physical dimension, which threads divide."""
    return t.shape[physical_order(t)[0]] if t.rank else 1


# -- elemental kernels -----------------------------------------------------------------------

def emit_elemental(module: ir.Module, plan: BufferPlan, name: str,
                   inst: Instruction) -> Kernel:
    """A loop over the output computing each element with the elemental emitter."""
    out = inst.results[0]
    ctx = KernelContext(module, plan, name, buffers_used(inst, plan))

    def generate(index: list[ir.Value]) -> ir.Value:
        return RULES[inst.op.name](ctx.emitter, inst, index)
    return _elementwise_loop(ctx, out.type, ctx.pointer(out), generate)


def emit_copy(module: ir.Module, plan: BufferPlan, name: str, source: Value,
              slot: int) -> Kernel:
    """Copy `source` into frame slot `slot` (a result that is a parameter, a constant or a
    value already returned in another position)."""
    inputs = [source] if plan.slot(source) is not None else []
    ctx = KernelContext(module, plan, name, inputs, extra_slots=[slot])

    def generate(index: list[ir.Value]) -> ir.Value:
        return ctx.emitter.value_at(source, index)
    return _elementwise_loop(ctx, source.type, ctx.extra[0], generate)


def multi_output_loop(ctx: KernelContext, t: TensorType,
                      targets: Sequence[tuple[Value, ir.Value]]) -> Kernel:
    """One loop over the shared shape `t` storing each (value, buffer) pair: sibling outputs
    computed from the same inputs in one pass over memory."""
    def store(index: list[ir.Value]) -> None:
        for value, target in targets:
            indexing.store(ctx.builder, ctx.emitter.value_at(value, index), target,
                           value.type, index)
    return _each_element(ctx, t, store, len(targets))


def update_in_place(ctx: KernelContext, root: Instruction, target: ir.Value) -> Kernel:
    """dynamic_update_slice `root` computed in its operand's own buffer (`target`; plan.py's
    `_updated_in_place`): only the block is stored, at the start indices clamped as the op
    clamps them; every other element already holds the operand's value."""
    b = ctx.builder
    operand, update = root.operands[0].type, root.operands[1]
    starts = clamped_starts(ctx.emitter, root.operands[2:], operand.shape, update.type.shape)

    def store(index: list[ir.Value]) -> None:
        placed = [b.add(i, s) for i, s in zip(index, starts)]
        indexing.store(b, ctx.emitter.value_at(update, index), target, operand, placed)
    return _each_element(ctx, update.type, store, 1)


def _elementwise_loop(ctx: KernelContext, t: TensorType, target: ir.Value,
                      generate: Callable[[list[ir.Value]], ir.Value]) -> Kernel:
    def store(index: list[ir.Value]) -> None:
        indexing.store(ctx.builder, generate(index), target, t, index)
    return _each_element(ctx, t, store, 1)


def _each_element(ctx: KernelContext, t: TensorType, store: Callable[[list[ir.Value]], None],
                  outputs: int) -> Kernel:
    """The kernel running store(index) for every element of `t` in physical order (a rank-0
    `t` has one element, run by the thread whose range is not empty)."""
    def body(counters: list[ir.Value]) -> None:
        store(logical_index(physical_order(t), counters))

    if t.rank == 0:
        with ctx.builder.if_then(ctx.builder.icmp_signed("<", ctx.begin, ctx.end)):
            body([])
    else:
        loop_nest(ctx.builder, _outer_bounds(ctx, t), body)
    ctx.finish()
    return Kernel(ctx.name, outer_extent(t), extents.positive(t.size) * outputs)


# -- reductions ------------------------------------------------------------------------------

def emit_reduce(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction) -> Kernel:
    return reduce_into(KernelContext(module, plan, name, buffers_used(inst, plan)), inst)


def reduce_into(ctx: KernelContext, inst: Instruction) -> Kernel:
    """A reduce kernel in `ctx`: by rows, or in place when the contiguous dimension is kept."""
    dims = list(inst.attrs["dims"])  # type: ignore[arg-type]
    in_type = inst.operands[0].type
    minor = physical_order(in_type)[-1] if in_type.rank else None
    wide = any(v.type.dtype is dtypes.float16 for v in inst.operands)
    if dims and minor is not None and minor not in dims and not wide:
        return _column_reduce(ctx, inst)
    return _row_reduce(ctx, inst)


def _row_reduce(ctx: KernelContext, inst: Instruction) -> Kernel:
    """Each output element accumulates its reduced elements in lanes (see lanes.py)."""
    kind = inst.attrs["kind"]
    dims = list(inst.attrs["dims"])  # type: ignore[arg-type]
    b = ctx.builder
    in_type = inst.operands[0].type
    out_type = inst.results[0].type
    kept = [d for d in range(in_type.rank) if d not in dims]
    reduced_order = [d for d in physical_order(in_type) if d in dims]
    acc_types = [accumulator_dtype(v.type.dtype) for v in inst.operands]
    count = lane_count(acc_types)
    flushes = flush_count(in_type, reduced_order, count)

    def body(counters: list[ir.Value]) -> None:
        out_index = logical_index(physical_order(out_type), counters)
        accumulators = [Lanes(b, kind, dt, count, flushes)  # type: ignore[arg-type]
                        for dt in acc_types]

        def accumulate(lane: ir.Value, reduced_index: dict[int, ir.Value]) -> None:
            index = [reduced_index[d] if d in reduced_index else out_index[kept.index(d)]
                     for d in range(in_type.rank)]
            for n, lanes in enumerate(accumulators):
                x = ctx.emitter.value_at(inst.operands[n], index)
                lanes.accumulate(lane, convert_value(b, x, inst.operands[n].type.dtype,
                                                     lanes.dtype))

        def flush() -> None:
            for lanes in accumulators:
                lanes.flush()

        reduction_loops(b, in_type, reduced_order, count, accumulate, flush=flush)
        for result, lanes in zip(inst.results, accumulators):
            value = convert_value(b, lanes.total(), lanes.dtype, result.type.dtype)
            indexing.store(b, value, ctx.pointer(result), result.type, out_index)

    if out_type.rank == 0:
        with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
            body([])
    else:
        loop_nest(b, _outer_bounds(ctx, out_type), body)
    ctx.finish()
    return Kernel(ctx.name, outer_extent(out_type),
                  extents.positive(in_type.size) * len(inst.operands))


def _column_reduce(ctx: KernelContext, inst: Instruction) -> Kernel:
    """A reduction whose input's contiguous dimension is kept (e.g. a sum over rows).

    The results are accumulated in place with the kept minor dimensions innermost: contiguous,
    independent lanes that vectorize without reassociation. The innermost reduced dimension
    goes COLUMN_ROWS rows at a time (combined pairwise, then into the result), so the result
    row is loaded and stored once per block of rows rather than once per row.
    """
    kind = inst.attrs["kind"]
    dims = set(inst.attrs["dims"])  # type: ignore[arg-type]
    b = ctx.builder
    in_type = inst.operands[0].type
    out_type = inst.results[0].type
    order = physical_order(in_type)
    last_reduced = max(i for i, d in enumerate(order) if d in dims)
    outer_kept = [d for d in order[:last_reduced] if d not in dims]
    reduced = [d for d in order if d in dims]
    inner_kept = order[last_reduced + 1:]
    kept = [d for d in range(in_type.rank) if d not in dims]
    split = kept[physical_order(out_type)[0]]  # the input dimension the threads divide

    def bounds(ds: list[int]) -> list[tuple[ir.Value | int, ir.Value | int]]:
        return [(ctx.begin, ctx.end) if d == split else (0, in_type.shape[d]) for d in ds]

    def out_index(fixed: dict[int, ir.Value]) -> list[ir.Value]:
        return [fixed[d] for d in kept]

    def outer(outer_counters: list[ir.Value]) -> None:
        fixed = dict(zip(outer_kept, outer_counters))

        def clear(inner_counters: list[ir.Value]) -> None:
            at = {**fixed, **dict(zip(inner_kept, inner_counters))}
            for result in inst.results:
                identity = constant(result.type.dtype, reduce_identity(
                    kind, result.type.dtype.numpy))  # type: ignore[arg-type]
                indexing.store(b, identity, ctx.pointer(result), result.type, out_index(at))
        loop_nest(b, bounds(inner_kept), clear, name="z")

        last = reduced[-1]
        extent = in_type.shape[last]
        main = extent - extent % COLUMN_ROWS if is_static(extent) else \
            extent // COLUMN_ROWS * COLUMN_ROWS

        def rows(first: ir.Value, count: int, partial: dict[int, ir.Value]) -> None:
            def accumulate(inner_counters: list[ir.Value]) -> None:
                at = {**partial, **dict(zip(inner_kept, inner_counters))}
                for n, result in enumerate(inst.results):
                    xs = []
                    for k in range(count):
                        at[last] = first if k == 0 else b.add(first, ir.Constant(I64, k),
                                                               flags=["nsw"])
                        index = [at[d] for d in range(in_type.rank)]
                        xs.append(ctx.emitter.value_at(inst.operands[n], index))
                    dtype = result.type.dtype
                    while len(xs) > 1:
                        xs = [combine(b, kind, dtype, xs[i], xs[i + 1])
                              for i in range(0, len(xs), 2)]
                    target = ctx.pointer(result)
                    where = out_index(at)
                    current = indexing.load(b, target, result.type, where)
                    indexing.store(b, combine(b, kind, dtype, current, xs[0]), target,
                                   result.type, where)
            loop_nest(b, bounds(inner_kept), accumulate, name="c")

        def over_reduced(reduced_counters: list[ir.Value]) -> None:
            partial = {**fixed, **dict(zip(reduced, reduced_counters))}
            # A symbolic extent emits both loops (either may run zero times).
            if not is_static(main) or main:
                with for_range(b, 0, main, COLUMN_ROWS, name="rb") as first:
                    rows(first, COLUMN_ROWS, partial)
            if not is_static(extent) or main < extent:
                with for_range(b, main, extent, name="rt") as first:
                    rows(first, 1, partial)
        loop_nest(b, [(0, in_type.shape[d]) for d in reduced[:-1]], over_reduced, name="r")

    loop_nest(b, bounds(outer_kept), outer, name="o")
    ctx.finish()
    return Kernel(ctx.name, in_type.shape[split],
                  extents.positive(in_type.size) * len(inst.operands))


# -- argmax / argmin -------------------------------------------------------------------------

def emit_arg(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction) -> Kernel:
    return arg_into(KernelContext(module, plan, name, buffers_used(inst, plan)), inst)


def arg_into(ctx: KernelContext, inst: Instruction) -> Kernel:
    """The first index of the extreme value along `axis`; the first nan wins."""
    from jitc.backends.llvm.elemental import _is_nan
    axis = inst.attrs["axis"]
    b = ctx.builder
    in_type, out = inst.operands[0].type, inst.results[0]
    larger = inst.op.name == "argmax"
    kind = in_type.dtype.kind

    def body(counters: list[ir.Value]) -> None:
        out_index = logical_index(physical_order(out.type), counters)

        def at(i: ir.Value) -> ir.Value:
            index = list(out_index[:axis]) + [i] + list(out_index[axis:])  # type: ignore
            return ctx.emitter.value_at(inst.operands[0], index)

        with b.goto_entry_block():
            best_slot = b.alloca(value_type(in_type.dtype))
            where_slot = b.alloca(I64)
        b.store(at(ir.Constant(I64, 0)), best_slot)
        b.store(ir.Constant(I64, 0), where_slot)
        with for_range(b, 1, in_type.shape[axis], name="a") as i:  # type: ignore[index]
            x, best = at(i), b.load(best_slot)
            if kind is Kind.FLOAT:
                better = b.fcmp_ordered(">" if larger else "<", x, best)
                better = b.or_(better, b.and_(_is_nan(b, x), b.not_(_is_nan(b, best))))
            elif kind is Kind.SIGNED:
                better = b.icmp_signed(">" if larger else "<", x, best)
            else:
                better = b.icmp_unsigned(">" if larger else "<", x, best)
            b.store(b.select(better, x, best), best_slot)
            b.store(b.select(better, i, b.load(where_slot)), where_slot)
        result = convert_value(b, b.load(where_slot), dtypes.int64, out.type.dtype)
        indexing.store(b, result, ctx.pointer(out), out.type, out_index)

    if out.type.rank == 0:
        with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
            body([])
    else:
        loop_nest(b, _outer_bounds(ctx, out.type), body)
    ctx.finish()
    return Kernel(ctx.name, outer_extent(out.type), extents.positive(in_type.size))


# -- dot_general -----------------------------------------------------------------------------

def emit_dot(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction) -> Kernel:
    return dot_into(KernelContext(module, plan, name, buffers_used(inst, plan)), inst)


def dot_into(ctx: KernelContext, inst: Instruction, epilogue: Value | None = None) -> Kernel:
    """out[batch, lhs free, rhs free] = sum over contracting dims.

    For each output row (batch and lhs-free indices) the kernel zeroes the row, then for each
    contracting index adds lhs * rhs-row into it: the innermost loop runs over the rhs free
    dimensions, contiguous in row-major operands, so it vectorizes into FMAs. float16 uses a
    float32 accumulator per element instead. Float GEMM-shaped products large enough to
    amortize packing go to the blocked kernel in gemm.py instead; one with a symbolic row or
    column count holds both and runs this one for a single row or column (gemm.generic_tests).
    """
    from jitc.backends.cpu import gemm
    blocked = gemm.emit(ctx, inst, epilogue,
                        lambda few: _dot_rows(ctx, inst, epilogue, few))
    if blocked is not None:
        return blocked
    outer, cost = _dot_rows(ctx, inst, epilogue)
    ctx.finish()
    return Kernel(ctx.name, outer, cost)


def _dot_rows(ctx: KernelContext, inst: Instruction, epilogue: Value | None,
              small: DimLike | None = None) -> tuple[DimLike, DimLike]:
    """The code of dot_into's own kernel at the builder's position (without returning);
    returns its split extent and cost. `small`: a symbolic extent that the caller tested to
    be at most 1 at the call; a dimension of that extent then picks the loops that a static
    1 picks, so the code is the one an exact compilation of that size runs."""
    attrs = inst.attrs
    lhs, rhs = inst.operands
    out = inst.results[0]
    lb, rb = list(attrs["lhs_batch"]), list(attrs["rhs_batch"])  # type: ignore[arg-type]
    lc, rc = list(attrs["lhs_contract"]), list(attrs["rhs_contract"])  # type: ignore[arg-type]
    lf = [d for d in range(lhs.type.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.type.rank) if d not in rb and d not in rc]
    nb, nlf, nrf = len(lb), len(lf), len(rf)
    b = ctx.builder
    dtype = out.type.dtype
    row_dims = list(range(nb + nlf))
    col_dims = list(range(nb + nlf, nb + nlf + nrf))
    contract_sizes = [lhs.type.shape[d] for d in lc]

    def operand_index(operand_rank: int, batch: list[int], contract: list[int],
                      free: list[int], out_index: list[ir.Value], k: list[ir.Value],
                      free_offset: int) -> list[ir.Value]:
        index: list[ir.Value] = [ir.Constant(I64, 0)] * operand_rank
        for j, d in enumerate(batch):
            index[d] = out_index[j]
        for j, d in enumerate(contract):
            index[d] = k[j]
        for j, d in enumerate(free):
            index[d] = out_index[free_offset + j]
        return index

    def product(out_index: list[ir.Value], k: list[ir.Value], acc: dtypes.DType) -> ir.Value:
        x = ctx.emitter.value_at(lhs, operand_index(lhs.type.rank, lb, lc, lf, out_index, k,
                                                    nb))
        y = ctx.emitter.value_at(rhs, operand_index(rhs.type.rank, rb, rc, rf, out_index, k,
                                                    nb + nlf))
        x = convert_value(b, x, lhs.type.dtype, acc)
        y = convert_value(b, y, rhs.type.dtype, acc)
        return b.fmul(x, y) if acc.is_float else b.mul(x, y)

    def add(x: ir.Value, y: ir.Value, acc: dtypes.DType) -> ir.Value:
        return b.fadd(x, y) if acc.is_float else b.add(x, y)

    out_ptr = ctx.pointer(out)
    bounds_rows: list[tuple[ir.Value | int, ir.Value | int]] = \
        [(0, out.type.shape[d]) for d in row_dims]
    if bounds_rows:
        bounds_rows[0] = (ctx.begin, ctx.end)

    # A byte product's epilogue may narrow its int32 sums (requantization to int8): the
    # output buffer cannot hold the sums, so each is kept in a register until finished.
    narrowing = epilogue is not None and epilogue.type.dtype is not dtype
    if dtype is dtypes.float16 or narrowing:
        acc_dtype = dtypes.float32 if dtype is dtypes.float16 else dtype

        def element(counters: list[ir.Value]) -> None:
            out_index = counters
            with b.goto_entry_block():
                slot = b.alloca(memory_type(acc_dtype))
            b.store(constant(acc_dtype, 0), slot)

            def step(k: list[ir.Value]) -> None:
                b.store(add(b.load(slot), product(out_index, k, acc_dtype), acc_dtype), slot)
            loop_nest(b, [(0, s) for s in contract_sizes], step, name="k")
            value = convert_value(b, b.load(slot), acc_dtype, dtype)
            if narrowing:
                assert epilogue is not None
                ctx.emitter.registers[id(out)] = value
                finished = ctx.emitter.value_at(epilogue, out_index)
                del ctx.emitter.registers[id(out)]
                indexing.store(b, finished, out_ptr, epilogue.type, out_index)
                return
            indexing.store(b, value, out_ptr, out.type, out_index)
            _apply_epilogue(ctx, epilogue, out_ptr, out.type, out_index)
        all_bounds = bounds_rows + [(0, out.type.shape[d]) for d in col_dims]
        if not all_bounds:
            with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                element([])
        elif not bounds_rows:
            with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                loop_nest(b, all_bounds, element)
        else:
            loop_nest(b, all_bounds, element)
    elif len(col_dims) == 1 and contract_sizes and (dtype.is_float or dtype.is_int) and \
            all(_at_most_one(out.type.shape[d], small) for d in row_dims):
        return _vector_times_matrix(ctx, out, product, epilogue, row_dims, contract_sizes,
                                    _prefetcher(ctx, rhs, rc, rf))
    elif contract_sizes and (dtype.is_float or dtype.is_int) and \
            all(_at_most_one(out.type.shape[d], small) for d in col_dims):
        # Each output element is a dot of two vectors (A @ x, a batch of q . k): its products
        # accumulate in lanes, which vectorize without reassociating anything, summed
        # pairwise as a reduction is (lanes.py). One running sum was a chain of dependent
        # adds: 1024x768 @ 768 took 8 times numpy's time.
        summed = TensorType(dtype, tuple(contract_sizes))
        order = list(range(len(contract_sizes)))
        count = lane_count([dtype])
        flushes = flush_count(summed, order, count)

        def dot_elements(rows: list[list[ir.Value]]) -> None:
            indices = [r + [ir.Constant(I64, 0)] * len(col_dims) for r in rows]
            sums = [Lanes(b, "sum", dtype, count, flushes) for _ in indices]

            def accumulate(lane: ir.Value, at: dict[int, ir.Value]) -> None:
                k = [at[d] for d in order]
                for index, lanes in zip(indices, sums):
                    lanes.accumulate(lane, product(index, k, dtype))

            def flush() -> None:
                for lanes in sums:
                    lanes.flush()
            reduction_loops(b, summed, order, count, accumulate, flush=flush)
            for index, lanes in zip(indices, sums):
                indexing.store(b, lanes.total(), out_ptr, out.type, index)
                _apply_epilogue(ctx, epilogue, out_ptr, out.type, index)

        columns = math.prod(out.type.shape[d] for d in col_dims)
        with b.if_then(b.icmp_signed(">", extents.value(b, columns), ir.Constant(I64, 0))):
            if len(bounds_rows) == 1:
                # DOT_ROWS rows at a time: as many memory streams for the prefetchers, and one
                # load of the vector for all of them (the same sums, row by row).
                begin, end = ctx.begin, ctx.end
                blocked = b.add(begin, b.mul(b.sdiv(b.sub(end, begin), _i64(DOT_ROWS)),
                                             _i64(DOT_ROWS)))
                with for_range(b, begin, blocked, DOT_ROWS, name="m") as first:
                    dot_elements([[b.add(first, _i64(r))] for r in range(DOT_ROWS)])
                with for_range(b, blocked, end, name="m") as row:
                    dot_elements([[row]])
            elif bounds_rows:  # (a symbolic column count tested <= 1 may be 0)
                loop_nest(b, bounds_rows, lambda counters: dot_elements([counters]), name="m")
            else:
                with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                    dot_elements([[]])
    else:
        zero = constant(dtype, 0)

        def row(row_counters: list[ir.Value]) -> None:
            col_bounds = [(0, out.type.shape[d]) for d in col_dims]

            def clear(cols: list[ir.Value]) -> None:
                indexing.store(b, zero, out_ptr, out.type, row_counters + cols)
            loop_nest(b, col_bounds, clear, name="z")

            def contract(k: list[ir.Value]) -> None:
                def accumulate(cols: list[ir.Value]) -> None:
                    index = row_counters + cols
                    current = indexing.load(b, out_ptr, out.type, index)
                    indexing.store(b, add(current, product(index, k, dtype), dtype), out_ptr,
                                   out.type, index)
                loop_nest(b, col_bounds, accumulate, name="n")
            loop_nest(b, [(0, s) for s in contract_sizes], contract, name="k")
            if epilogue is not None:
                def finish_row(cols: list[ir.Value]) -> None:
                    _apply_epilogue(ctx, epilogue, out_ptr, out.type, row_counters + cols)
                loop_nest(b, col_bounds, finish_row, name="e")

        if bounds_rows:
            loop_nest(b, bounds_rows, row, name="m")
        else:
            with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                row([])
    outer = out.type.shape[0] if row_dims else 1
    return outer, extents.positive(out.type.size) * extents.positive(_product(contract_sizes))


# The rows a product of one output column sums at once.
DOT_ROWS = 4


def _i64(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def _at_most_one(extent: DimLike, small: DimLike | None) -> bool:
    if is_static(extent):
        return extent == 1
    return small is not None and extent == small


def _vector_times_matrix(ctx: KernelContext, out: Value,
                         product: Callable[[list[ir.Value], list[ir.Value], dtypes.DType],
                                           ir.Value],
                         epilogue: Value | None, row_dims: list[int],
                         contract_sizes: list[DimLike],
                         prefetch: Callable[[ir.Value, ir.Value, int], None] | None
                         ) -> tuple[DimLike, DimLike]:
    """A product with one row (x @ W): threads split its columns into blocks of a few vector
    registers, which accumulate over the whole contraction before they are stored. The row
    kernel's loop order (each step of the contraction adds into the whole output row) read
    and wrote the row once per step, on one thread: 2.4 times numpy's time for 768x2304.
    Each element still sums its products in contraction order, so the bits are the row
    kernel's. `prefetch(k, first, bytes)`, when given, fetches the matrix's block at step k.
    """
    b = ctx.builder
    dtype = out.type.dtype
    width = lane_count([dtype])
    columns = out.type.shape[-1]
    blocks = (columns + (width - 1)) // width
    element = value_type(dtype)
    with b.goto_entry_block():
        sums = b.alloca(ir.ArrayType(element, width))
        sums.align = 64
    zero = ir.Constant(I64, 0)
    out_ptr = ctx.pointer(out)

    def block_of_rows(first: ir.Value, count: ir.Value | int) -> None:
        def row(row_counters: list[ir.Value]) -> None:
            with for_range(b, 0, count, name="clear") as lane:
                b.store(constant(dtype, 0), b.gep(sums, [zero, lane], inbounds=True))

            def step(k: list[ir.Value]) -> None:
                if prefetch is not None:
                    prefetch(b.add(k[0], _i64(PREFETCH_STEPS)), first,
                             width * dtype.itemsize)
                with for_range(b, 0, count, name="lane") as lane:
                    slot = b.gep(sums, [zero, lane], inbounds=True)
                    term = product(row_counters + [b.add(first, lane, flags=["nsw"])], k, dtype)
                    current = b.load(slot)
                    b.store(b.fadd(current, term) if dtype.is_float else b.add(current, term),
                            slot)
            loop_nest(b, [(0, s) for s in contract_sizes], step, name="k")
            with for_range(b, 0, count, name="store") as lane:
                index = row_counters + [b.add(first, lane, flags=["nsw"])]
                indexing.store(b, b.load(b.gep(sums, [zero, lane], inbounds=True)), out_ptr,
                               out.type, index)
                _apply_epilogue(ctx, epilogue, out_ptr, out.type, index)
        loop_nest(b, [(0, out.type.shape[d]) for d in row_dims], row, name="m")

    columns_value = extents.value(b, columns)
    full = b.sdiv(columns_value, ir.Constant(I64, width))
    last = b.select(b.icmp_signed("<", ctx.end, full), ctx.end, full)
    with for_range(b, ctx.begin, last, name="cb") as block:
        block_of_rows(b.mul(block, ir.Constant(I64, width)), width)
    # The last, partial block (its own copy, so that the full blocks keep a constant width).
    tail = b.mul(full, ir.Constant(I64, width))
    with b.if_then(b.and_(b.icmp_signed("<", tail, columns_value),
                          b.and_(b.icmp_signed("<=", ctx.begin, full),
                                 b.icmp_signed("<", full, ctx.end)))):
        block_of_rows(tail, b.sub(columns_value, tail))
    cost = extents.positive(out.type.size) * extents.positive(_product(contract_sizes))
    return blocks, cost


# How many steps of the contraction ahead a product of one row fetches its matrix's blocks:
# a block's rows are a matrix row apart, too far for the hardware's stride prefetchers.
# 1x768 @ 768x2304: 175 us without, 137-145 with 4 steps (numpy 122-133); 16 or 32 steps
# were slower than none.
PREFETCH_STEPS = 4


def _prefetcher(ctx: KernelContext, rhs: Value, contract: list[int], free: list[int]
                ) -> Callable[[ir.Value, ir.Value, int], None] | None:
    """prefetch(k, column, bytes): fetch `bytes` of the rhs matrix from [k, column] on, when
    the rhs is a matrix in a buffer of the kernel; None otherwise."""
    from jitc.backends.cpu.gemm import _buffer_value
    source = _buffer_value(ctx, rhs)
    if source is None or source.type.rank != 2 or contract != [0] or free != [1] \
            or source.type.shape != rhs.type.shape or source.type.strides[1] != 1:
        return None  # a row-major matrix: the columns of a block are adjacent
    b = ctx.builder
    intrinsic = declare(b.module, "llvm.prefetch.p0",
                        ir.FunctionType(VOID, [PTR, I32, I32, I32]))
    item = memory_type(rhs.type.dtype)

    def prefetch(k: ir.Value, column: ir.Value, size: int) -> None:
        base = b.gep(ctx.pointer(source), [indexing.linear_offset(b, source.type, [k, column])],
                     source_etype=item)
        for line in range(0, size, 64):
            address = b.gep(base, [_i64(line)], source_etype=ir.IntType(8))
            b.call(intrinsic, [address, ir.Constant(I32, 0), ir.Constant(I32, 3),
                               ir.Constant(I32, 1)])
    return prefetch


def _apply_epilogue(ctx: KernelContext, epilogue: Value | None, target: ir.Value,
                    t: TensorType, index: list[ir.Value]) -> None:
    """Rewrite one finished element of a contraction with its fused epilogue, in place: the
    epilogue reads the contraction's value from the same buffer it writes."""
    if epilogue is not None:
        value = ctx.emitter.value_at(epilogue, index)
        indexing.store(ctx.builder, value, target, t, index)


def _product(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


# -- convolution -----------------------------------------------------------------------------

def emit_convolution(module: ir.Module, plan: BufferPlan, name: str,
                     inst: Instruction) -> Kernel:
    return convolution_into(KernelContext(module, plan, name, buffers_used(inst, plan)), inst)


def convolution_into(ctx: KernelContext, inst: Instruction,
                     epilogue: Value | None = None) -> Kernel:
    """Direct convolution, each product and sum rounded separately: a row of outputs at a time
    (convolution_rows.py), or one element at a time (backends/llvm/convolution.py) where the
    output's innermost dimension is its batch."""
    b = ctx.builder
    out = inst.results[0]
    cost = extents.positive(out.type.size) * max(1, window_size(inst))
    if convolution_rows(ctx, inst, epilogue):
        ctx.finish()
        return Kernel(ctx.name, outer_extent(out.type), cost)

    def element(counters: list[ir.Value]) -> None:
        out_index = logical_index(physical_order(out.type), counters)
        value = convolution_element(ctx.emitter, inst, out_index, _multiply_then_add)
        indexing.store(b, value, ctx.pointer(out), out.type, out_index)
        _apply_epilogue(ctx, epilogue, ctx.pointer(out), out.type, out_index)

    loop_nest(b, _outer_bounds(ctx, out.type), element)
    ctx.finish()
    return Kernel(ctx.name, outer_extent(out.type), cost)


def _multiply_then_add(b: ir.IRBuilder, current: ir.Value, x: ir.Value, w: ir.Value,
                       valid: ir.Value, acc: dtypes.DType) -> ir.Value:
    term = b.fmul(x, w) if acc.is_float else b.mul(x, w)
    term = b.select(valid, term, constant(acc, 0))
    return b.fadd(current, term) if acc.is_float else b.add(current, term)
