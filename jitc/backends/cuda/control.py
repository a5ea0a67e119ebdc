"""Control flow on the GPU: `while` and `conditional` as host-driven steps between kernels.

A GPU kernel cannot launch the next one, so the host drives the loop (host.py runs it). Each
region is optimized as a module of its own and lowered like a whole program into kernels of
the same PTX module (codegen.lower_module) and a `Program` of its own, whose frame is
`[arguments..., results..., its constants, its temporaries]`; its workspace is carved out of
the caller's. A `while` keeps its carry in device buffers laid out as on the CPU
(cpu/control.py `carry_layout`): the while's own results (A) and scratch (B) of the caller's
workspace, swapped after each body run, so nothing is copied per iteration. Each iteration
runs the condition's kernels, which write the predicate to device memory, and the host reads
that one byte back; a counted loop (`fori_loop`, `scan`: the condition is `i < stop`, the body
adds 1 to `i`, and `stop` is a constant or a carry the body keeps) reads nothing per
iteration: the host computes the trip count once from the start and stop values. A carry the
body writes one block of (scan's stacked outputs) is updated in place by a small kernel that
reads the block's start indices on the device. A `conditional` reads its branch index back
and runs the chosen branch's program.

In a symbolic program (docs/dynamic-shapes.md) the carries' sizes and the scratch offsets are
`Dim` expressions the host evaluates with the call's symbol values; every region's kernels
take the program's `dims` buffer, and so does the block-write kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir

from jitc.backends.cpu.control import carry_layout, largest, region_module
from jitc.backends.cpu.plan import ALIGNMENT, BufferPlan, is_inline_constant
from jitc.backends.cuda import launch as launches
from jitc.backends.cuda.elementwise import grid_stride
from jitc.backends.cuda.kernel import KernelBuilder, KernelSpec
from jitc.backends.llvm import extents
from jitc.backends.llvm.types import I64, memory_type
from jitc.ir import ops
from jitc.ir.core import Function, Instruction, Module, Value
from jitc.ir.dtypes import Kind
from jitc.ir.symbolic import DimLike, is_static

if TYPE_CHECKING:
    from jitc.backends.cuda.codegen import Lowerer


@dataclass(frozen=True)
class Uploaded:
    """An array the runtime puts on the device once, when it loads the program: a constant
    of a region, or an inline scalar constant that control flow passes by pointer."""

    index: int  # into Lowering.arrays


# Where a control-flow operand is: a slot of the caller's frame, or an uploaded array.
Source = int | Uploaded


@dataclass(frozen=True)
class Program:
    """A function lowered for the host to run: kernels and control-flow steps, in order."""

    plan: BufferPlan
    steps: tuple[ProgramStep, ...]
    constants: tuple[int, ...]  # Lowering.arrays index of each of the plan's constants

    @property
    def has_control_flow(self) -> bool:
        return any(not isinstance(step, KernelSpec) for step in self.steps)


@dataclass(frozen=True)
class BlockWrite:
    """dynamic_update_slice of a carry in place: `spec` copies the body's block (scratch
    block `block`) to the carry at the clamped starts (scratch blocks `starts`)."""

    spec: KernelSpec
    carry: int
    block: int
    starts: tuple[int, ...]


@dataclass(frozen=True)
class Literal:
    """A scalar the compiler knows."""

    value: int


@dataclass(frozen=True)
class Extent:
    """A bound the call's symbol values give (an `extent` op, `range(x.shape[0])` over a
    symbolic axis): the host evaluates it, reading nothing back."""

    size: DimLike


@dataclass(frozen=True)
class CountedLoop:
    """A `while` whose trip count the host computes before the loop: the condition is
    `carry[counter] < stop` on integers and the body adds 1 to the counter. A bound that is
    neither a literal nor an extent is read back from the device once per loop."""

    counter: int
    start: Source | Literal
    stop: Source | Literal | Extent
    dtype: np.dtype


@dataclass(frozen=True)
class WhileLoop:
    # Sizes and offsets are `Dim`s in a symbolic program, evaluated per call.
    operands: tuple[Source, ...]
    results: tuple[int, ...]     # caller frame slots: the carry's home (A)
    nbytes: tuple[DimLike, ...]
    cond: Program
    body: Program                # returns the moving carries, then the blocks it writes
    moving: tuple[int, ...]      # carries that alternate between A and B
    spare_offsets: tuple[DimLike, ...]  # of each moving carry's B, in the loop's scratch
    block_offsets: tuple[DimLike, ...]
    writes: tuple[BlockWrite, ...]
    predicate_offset: DimLike
    region_offset: DimLike       # the regions' workspace, in the loop's scratch
    scratch_offset: DimLike      # of the loop's scratch, in the caller's workspace
    counted: CountedLoop | None


@dataclass(frozen=True)
class Conditional:
    index: Source
    operands: tuple[Source, ...]
    results: tuple[int, ...]
    branches: tuple[Program, ...]
    scratch_offset: DimLike


ProgramStep = KernelSpec | WhileLoop | Conditional
# (region module, kernel name prefix) -> its program; its kernels join the PTX module.
LowerRegion = Callable[[Module, str], Program]


def _aligned(n: DimLike) -> DimLike:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _scratch(plan: BufferPlan, size: DimLike) -> DimLike:
    """The offset of `size` fresh bytes at the end of the caller's workspace (one more byte
    for a symbolic size, which may be 0 at a call)."""
    offset = _aligned(plan.workspace_bytes)
    plan.workspace_bytes = offset + _aligned(max(size, 1) if is_static(size) else size + 1)
    return offset


def _optimized(module: Module) -> Module:
    from jitc.backends.cuda.passes import GPU_PASSES
    from jitc.passes.pipeline import Pipeline
    return Pipeline("region", GPU_PASSES, verify=False).run(module)


def _source(lowerer: Lowerer, plan: BufferPlan, value: Value) -> Source:
    slot = plan.slot(value)
    if slot is not None:
        return slot
    assert is_inline_constant(value), value
    literal = value.producer.attrs["value"].array  # type: ignore[union-attr]
    return lowerer.upload(np.asarray(literal, value.type.dtype.numpy).reshape(value.type.shape))


def lower_control(lowerer: Lowerer, program: Module, plan: BufferPlan, prefix: str,
                  inst: Instruction, lower_region: LowerRegion) -> ProgramStep:
    if inst.op is ops.WHILE:
        return _lower_while(lowerer, program, plan, prefix, inst, lower_region)
    if inst.op is ops.CONDITIONAL:
        return _lower_conditional(lowerer, program, plan, prefix, inst, lower_region)
    raise NotImplementedError(f"the CUDA backend cannot lower {inst.op.name}")


def _lower_while(lowerer: Lowerer, program: Module, plan: BufferPlan, prefix: str,
                 inst: Instruction, lower_region: LowerRegion) -> WhileLoop:
    cond_fn = program.functions[inst.attrs["cond"]]  # type: ignore[index]
    body_fn = program.functions[inst.attrs["body"]]  # type: ignore[index]
    layout = carry_layout(inst, body_fn)
    cond = lower_region(_optimized(region_module(program, cond_fn.name)), f"{prefix}cond_")
    body = lower_region(_optimized(region_module(program, body_fn.name,
                                                 layout.body_outputs(body_fn))),
                        f"{prefix}body_")
    predicate = layout.carry_bytes
    region = predicate + ALIGNMENT
    scratch = _scratch(plan, region + largest([cond.plan.workspace_bytes,
                                               body.plan.workspace_bytes]))
    writes, position = [], 0
    for j, write in layout.writes.items():
        count = len(write.operands) - 2
        spec = block_write_kernel(lowerer.llvm_module, f"jitc_{prefix}write{j}", write,
                                  plan.symbols)
        if spec is not None:
            writes.append(BlockWrite(spec, j, position,
                                     tuple(range(position + 1, position + 1 + count))))
            lowerer.specs.append(spec)
        position += 1 + count
    operands = tuple(_source(lowerer, plan, v) for v in inst.operands)
    return WhileLoop(
        operands, tuple(plan.slot(v) for v in inst.results),  # type: ignore[misc]
        tuple(v.type.nbytes for v in inst.results), cond, body, tuple(layout.moving),
        tuple(layout.offsets[i] for i in layout.moving), tuple(layout.block_offsets),
        tuple(writes), predicate, region, scratch,
        counted_loop(cond_fn, body_fn, inst.operands, operands))


def _lower_conditional(lowerer: Lowerer, program: Module, plan: BufferPlan, prefix: str,
                       inst: Instruction, lower_region: LowerRegion) -> Conditional:
    branches = tuple(lower_region(_optimized(region_module(program, name)), f"{prefix}b{k}_")
                     for k, name in enumerate(inst.attrs["branches"]))  # type: ignore
    scratch = _scratch(plan, largest([b.plan.workspace_bytes for b in branches]))
    return Conditional(_source(lowerer, plan, inst.operands[0]),
                       tuple(_source(lowerer, plan, v) for v in inst.operands[1:]),
                       tuple(plan.slot(v) for v in inst.results),  # type: ignore[misc]
                       branches, scratch)


def counted_loop(cond: Function, body: Function, initial: Sequence[Value],
                 sources: Sequence[Source]) -> CountedLoop | None:
    """The counter and bounds of a loop the host can count (see CountedLoop), or None.
    `initial` are the while's operands, `sources` where they are at run time."""

    def bound(n: int) -> Source | Literal:
        literal = _literal(initial[n])
        return sources[n] if literal is None else Literal(literal)
    (out,) = cond.outputs
    test = out.producer
    if test.op is not ops.COMPARE or test.attrs["direction"] != "lt":
        return None
    counter, stop = test.operands
    dtype = counter.type.dtype
    params = cond.parameters
    if dtype.kind not in (Kind.SIGNED, Kind.UNSIGNED) or all(counter is not p for p in params):
        return None
    k = next(n for n, p in enumerate(params) if p is counter)
    step = body.outputs[k].producer
    one = [v for v in step.operands if v is not body.parameters[k]]
    if step.op is not ops.ADD or len(one) != 1 or len(step.operands) != 2 \
            or _literal(one[0]) != 1:
        return None
    if any(stop is p for p in cond.parameters):
        m = next(n for n, p in enumerate(cond.parameters) if p is stop)
        if body.outputs[m] is not body.parameters[m]:
            return None  # the bound changes inside the loop
        limit = bound(m)
    elif stop.producer.op is ops.EXTENT:
        limit = Extent(stop.producer.attrs["size"][0])  # type: ignore[index]
    else:
        literal = _literal(stop)
        if literal is None:
            return None
        limit = Literal(literal)
    return CountedLoop(k, bound(k), limit, np.dtype(dtype.numpy))


def _literal(value: Value) -> int | None:
    if value.producer.op is not ops.CONSTANT or value.type.size != 1:
        return None
    return int(value.producer.attrs["value"].array.reshape(()))  # type: ignore[union-attr]


def block_write_kernel(module: ir.Module, name: str, write: Instruction,
                       symbols: tuple[str, ...] = ()) -> KernelSpec | None:
    """A kernel writing the block (buffer 1) into the carry (buffer 0) at the starts (buffers
    2...), clamped as dynamic_update_slice clamps them. block_writes guarantees the block is
    contiguous in the carry, so it is a copy of words at one offset. In a program with
    `symbols` the kernel takes their values last and computes the extents from them."""
    operand, update = write.operands[0].type, write.operands[1].type
    if is_static(update.size) and update.size == 0:
        return None
    starts = write.operands[2:]
    itemsize = operand.dtype.itemsize
    word = next(w for w in (8, 4, 2, 1) if itemsize % w == 0)
    words_per_item = itemsize // word
    word_type = ir.IntType(8 * word)
    types = [operand, update, *(s.type for s in starts)]
    plan = BufferPlan(len(types), 0)
    if symbols:
        plan.symbols, plan.dims_slot = symbols, len(types)
    count = update.size * words_per_item
    launch = launches.elementwise(count) if isinstance(count, int) else \
        launches.symbolic_elementwise(count)
    kb = KernelBuilder(module, plan, name, [], [], launch, extra=list(enumerate(types)))
    with kb.phase() as ctx:
        b = ctx.builder
        offset: ir.Value = ir.Constant(I64, 0)
        for d, start_value in enumerate(starts):
            dtype = start_value.type.dtype
            start = b.load(kb.extra_buffer(ctx, 2 + d), typ=memory_type(dtype))
            if start.type != I64:
                widen = b.sext if dtype.kind is Kind.SIGNED else b.zext
                start = widen(start, I64)
            limit = extents.value(b, operand.shape[d] - update.shape[d])
            zero = ir.Constant(I64, 0)
            start = b.select(b.icmp_signed("<", start, zero), zero, start)
            start = b.select(b.icmp_signed(">", start, limit), limit, start)
            offset = b.add(offset, b.mul(start, extents.value(
                b, operand.strides[d] * words_per_item)))
        target, block = kb.extra_buffer(ctx, 0), kb.extra_buffer(ctx, 1)

        def copy(i: ir.Value) -> None:
            value = b.load(b.gep(block, [i], source_etype=word_type), typ=word_type)
            b.store(value, b.gep(target, [b.add(offset, i)], source_etype=word_type))
        grid_stride(ctx, count, copy)
    return kb.finish()

