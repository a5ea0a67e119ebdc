"""CPU kernels: one LLVM function per materialised instruction.

Every kernel has the signature `void k(ptr frame, i64 begin, i64 end)` and computes the part
of its output whose outermost (most major) index lies in [begin, end), so a thread pool can
split it. The body sits in an internal function whose buffer arguments are `noalias`; once
inlined into the wrapper that noalias becomes scoped alias metadata, which is what lets LLVM
vectorize.
"""

from __future__ import annotations

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
    I64,
    PTR,
    VOID,
    constant,
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


def apply_epilogue(ctx: KernelContext, epilogue: Value | None, target: ir.Value,
                    t: TensorType, index: list[ir.Value]) -> None:
    """Rewrite one finished element of a contraction with its fused epilogue, in place: the
    epilogue reads the contraction's value from the same buffer it writes."""
    if epilogue is not None:
        value = ctx.emitter.value_at(epilogue, index)
        indexing.store(ctx.builder, value, target, t, index)


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
        apply_epilogue(ctx, epilogue, ctx.pointer(out), out.type, out_index)

    loop_nest(b, _outer_bounds(ctx, out.type), element)
    ctx.finish()
    return Kernel(ctx.name, outer_extent(out.type), cost)


def _multiply_then_add(b: ir.IRBuilder, current: ir.Value, x: ir.Value, w: ir.Value,
                       valid: ir.Value, acc: dtypes.DType) -> ir.Value:
    term = b.fmul(x, w) if acc.is_float else b.mul(x, w)
    term = b.select(valid, term, constant(acc, 0))
    return b.fadd(current, term) if acc.is_float else b.add(current, term)
