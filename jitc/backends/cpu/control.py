"""Control flow on the CPU: a `while` or `conditional` is one step of the entry function that
calls the entry functions of its regions.

Each region is optimized as a module of its own and lowered like a whole program (codegen.py):
its entry takes `[arguments..., results..., workspace]` (its constants are baked in). The step
function of a `while` keeps the carry in two sets of buffers: the while's own result buffers
(A) and scratch buffers (B) in the caller's workspace. Each iteration runs the condition on A,
then the body from A into B, and swaps the two: no copy per iteration. A carried value the body
returns unchanged (a weight read by every step) stays in A and is never copied. At the end a
carry whose last value sits in B is copied to A once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from jitc.backends.cpu.kernels import Kernel
from jitc.backends.cpu.plan import ALIGNMENT, BufferPlan, is_inline_constant
from jitc.backends.llvm import extents
from jitc.backends.llvm.types import I8, I32, I64, PTR, VOID, constant, memory_type
from jitc.ir.core import Function, Instruction, Module, Value, reachable_functions
from jitc.ir.ops import CONDITIONAL, DYNAMIC_UPDATE_SLICE, WHILE
from jitc.ir.ops.control import branch_index
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType


@dataclass
class RegionCode:
    """A lowered region: the symbol of its entry and the workspace it needs."""

    entry: str
    workspace_bytes: DimLike


# (region module, symbol prefix) -> its lowered code; the caller keeps the LLVM modules.
LowerRegion = Callable[[Module, str], RegionCode]


def _aligned(n: DimLike) -> DimLike:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _block_bytes(t: TensorType) -> DimLike:
    """The bytes a buffer of type `t` takes in scratch: at least one, aligned."""
    return _aligned(max(t.nbytes, 1) if is_static(t.nbytes) else t.nbytes + 1)


def region_module(program: Module, name: str, outputs: Sequence[Value] | None = None) -> Module:
    """Function `name` of `program` as the entry of a module of its own (with the functions it
    runs), returning `outputs` (values of the function) when given."""
    fn = program.functions[name]
    if outputs is not None:
        fn = Function(fn.name, fn.body, list(outputs))
    # The program's constraints hold in its regions (their extents are the program's symbols).
    return Module(reachable_functions({**program.functions, name: fn}, name).values(), name,
                  program.constraints)


def _scratch(plan: BufferPlan, size: DimLike) -> int:
    """A new frame slot pointing at `size` fresh bytes at the end of the workspace."""
    return plan.add_scratch(size)


class _Step:
    """The builder of one step function `name(frame, lo, hi)`."""

    def __init__(self, module: ir.Module, plan: BufferPlan, name: str) -> None:
        self.module = module
        self.plan = plan
        self.function = ir.Function(module, ir.FunctionType(VOID, [PTR, I64, I64]), name)
        self.function.linkage = "internal"
        self.frame = self.function.args[0]
        self.b = ir.IRBuilder(self.function.append_basic_block("entry"))
        self.memcpy = module.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
        # A symbolic program passes its symbol values on to every region it calls.
        self.dims = None if plan.dims_slot is None else self.slot(plan.dims_slot)
        if self.dims is not None:
            extents.bind(self.b, self.dims, plan.symbols)

    def slot(self, slot: int) -> ir.Value:
        return self.b.load(self.b.gep(self.frame, [ir.Constant(I64, slot)], source_etype=PTR),
                           typ=PTR)

    def pointer(self, value: Value) -> ir.Value:
        """The address of `value`: its buffer, or a stack copy of an inline scalar constant."""
        slot = self.plan.slot(value)
        if slot is not None:
            return self.slot(slot)
        assert is_inline_constant(value), value
        dtype = value.type.dtype
        literal = value.producer.attrs["value"].array.reshape(())  # type: ignore[union-attr]
        cell = self.b.alloca(memory_type(dtype))
        llvm_value = constant(dtype, literal[()])
        if llvm_value.type != memory_type(dtype):
            llvm_value = self.b.zext(llvm_value, memory_type(dtype))
        self.b.store(llvm_value, cell)
        return cell

    def copy(self, target: ir.Value, source: ir.Value, nbytes: DimLike) -> None:
        self.b.call(self.memcpy, [target, source, extents.value(self.b, nbytes),
                                  ir.Constant(ir.IntType(1), 0)])

    def buffers(self, count: int) -> ir.Value:
        """An array of `count` + 1 pointers (+ 1 for the symbol values) for a region's `buffers`
        argument (made once, in the entry block: an alloca in the loop would grow the stack
        every iteration)."""
        return self.b.alloca(PTR, ir.Constant(I64, count + 1 + (self.dims is not None)))

    def call_region(self, code: RegionCode, buffers: ir.Value, pointers: Sequence[ir.Value],
                    workspace: ir.Value) -> None:
        passed = [*pointers, workspace] + ([self.dims] if self.dims is not None else [])
        for n, pointer in enumerate(passed):
            self.b.store(pointer, self.b.gep(buffers, [ir.Constant(I64, n)], source_etype=PTR))
        entry = self.module.globals.get(code.entry)
        if entry is None:
            entry = ir.Function(self.module, ir.FunctionType(VOID, [PTR]), code.entry)
        self.b.call(entry, [buffers])


def emit_control(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                 program: Module, lower_region: LowerRegion) -> Kernel:
    if inst.op is WHILE:
        return _emit_while(module, plan, name, inst, program, lower_region)
    if inst.op is CONDITIONAL:
        return _emit_conditional(module, plan, name, inst, program, lower_region)
    raise NotImplementedError(f"the CPU backend cannot lower {inst.op.name}")


@dataclass(frozen=True)
class CarryLayout:
    """Where a while loop's carries live between iterations (both native backends).

    Carries the body returns unchanged keep their buffer (A), and so do those it writes a
    block of (`writes`; the body returns the block and its start indices); the others
    (`moving`) alternate between A and a scratch buffer B at `offsets`. The blocks the body
    returns go to scratch at `block_offsets`; the regions' workspace follows at `carry_bytes`.
    """

    writes: dict[int, Instruction]
    moving: list[int]
    block_outputs: list[Value]
    offsets: dict[int, DimLike]
    block_offsets: list[DimLike]
    carry_bytes: DimLike

    def body_outputs(self, body: Function) -> list[Value]:
        """What the lowered body returns: the moving carries, then the written blocks."""
        return [body.outputs[i] for i in self.moving] + self.block_outputs


def carry_layout(inst: Instruction, body: Function) -> CarryLayout:
    writes = block_writes(body)
    moving = [i for i, out in enumerate(body.outputs)
              if out is not body.parameters[i] and i not in writes]
    block_outputs = [v for j in writes for v in writes[j].operands[1:]]
    offsets: dict[int, DimLike] = {}
    size: DimLike = 0
    for i in moving:
        offsets[i] = size
        size += _block_bytes(inst.results[i].type)
    block_offsets = []
    for v in block_outputs:
        block_offsets.append(size)
        size += _block_bytes(v.type)
    return CarryLayout(writes, moving, block_outputs, offsets, block_offsets, size)


def block_writes(body: Function) -> dict[int, Instruction]:
    """Carry position -> the dynamic_update_slice that computes it from the carried value
    itself, where that is the value's only use and the block is contiguous in memory (scan's
    stacked outputs): the step writes the block into the carry's buffer in place instead of the
    body copying the whole array."""
    params = body.parameters
    found = {}
    for j, out in enumerate(body.outputs):
        inst = out.producer
        if inst.op is not DYNAMIC_UPDATE_SLICE or inst.operands[0] is not params[j]:
            continue
        uses = sum(v is params[j] for user in body.body for v in user.operands)
        if uses != 1 or any(v is params[j] for v in body.outputs):
            continue
        operand, update = inst.operands[0].type, inst.operands[1].type
        if not (operand.is_row_major and update.is_row_major):
            continue
        split = next((d for d, n in enumerate(update.shape) if n != 1), update.rank)
        if update.shape[split + 1:] == operand.shape[split + 1:]:
            found[j] = inst
    return found


def _emit_while(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                program: Module, lower_region: LowerRegion) -> Kernel:
    body_fn = program.functions[inst.attrs["body"]]  # type: ignore[index]
    layout = carry_layout(inst, body_fn)
    writes, moving, block_outputs = layout.writes, layout.moving, layout.block_outputs
    offsets, block_offsets = layout.offsets, layout.block_offsets
    region_workspace = layout.carry_bytes
    cond = lower_region(region_module(program, inst.attrs["cond"]), f"{name}.cond.")  # type: ignore
    body = lower_region(region_module(program, body_fn.name, layout.body_outputs(body_fn)),
                        f"{name}.body.")
    size = region_workspace + _larger(cond.workspace_bytes, body.workspace_bytes)
    scratch_slot = _scratch(plan, size)

    step = _Step(module, plan, name)
    b = step.b
    scratch = step.slot(scratch_slot)
    results = [step.slot(plan.slot(v)) for v in inst.results]  # type: ignore[arg-type]
    for result, operand in zip(results, inst.operands):
        step.copy(result, step.pointer(operand), operand.type.nbytes)
    count = len(results)
    current = b.alloca(PTR, ir.Constant(I64, count))   # where each carry is now (A)
    spare = b.alloca(PTR, ir.Constant(I64, count))     # where the body writes it (B)

    def cell(array: ir.Value, i: int) -> ir.Value:
        return b.gep(array, [ir.Constant(I64, i)], source_etype=PTR)
    for i, result in enumerate(results):
        b.store(result, cell(current, i))
        if i in offsets:
            b.store(b.gep(scratch, [extents.value(b, offsets[i])], source_etype=I8),
                    cell(spare, i))
    workspace = b.gep(scratch, [extents.value(b, region_workspace)], source_etype=I8)
    predicate = b.alloca(I8)
    cond_buffers = step.buffers(count + 1)
    body_buffers = step.buffers(count + len(moving) + len(block_outputs))
    blocks = [b.gep(scratch, [extents.value(b, offset)], source_etype=I8)
              for offset in block_offsets]
    loop = step.function.append_basic_block("loop")
    run_body = step.function.append_basic_block("body")
    done = step.function.append_basic_block("done")
    b.branch(loop)

    b.position_at_end(loop)
    carry = [b.load(cell(current, i), typ=PTR) for i in range(count)]
    step.call_region(cond, cond_buffers, [*carry, predicate], workspace)
    go = b.icmp_unsigned("!=", b.load(predicate, typ=I8), ir.Constant(I8, 0))
    b.cbranch(go, run_body, done)

    b.position_at_end(run_body)
    carry = [b.load(cell(current, i), typ=PTR) for i in range(count)]
    targets = [b.load(cell(spare, i), typ=PTR) for i in moving]
    step.call_region(body, body_buffers, [*carry, *targets, *blocks], workspace)
    position = 0
    for j, write in writes.items():
        count_starts = len(write.operands) - 2
        _write_block(step, carry[j], write, blocks[position],
                     blocks[position + 1:position + 1 + count_starts])
        position += 1 + count_starts
    for i, target in zip(moving, targets):
        b.store(carry[i], cell(spare, i))
        b.store(target, cell(current, i))
    b.branch(loop)

    b.position_at_end(done)
    for i in moving:
        last = b.load(cell(current, i), typ=PTR)
        with b.if_then(b.icmp_unsigned("!=", last, results[i])):
            step.copy(results[i], last, inst.results[i].type.nbytes)
    b.ret_void()
    return Kernel(name, 1, 0)


def _write_block(step: _Step, target: ir.Value, write: Instruction, block: ir.Value,
                 starts: Sequence[ir.Value]) -> None:
    """dynamic_update_slice in place: the block at the clamped starts of `target`."""
    b = step.b
    operand, update = write.operands[0].type, write.operands[1].type
    offset: ir.Value = ir.Constant(I64, 0)
    for d, (pointer, start_value) in enumerate(zip(starts, write.operands[2:])):
        start = b.load(pointer, typ=memory_type(start_value.type.dtype))
        if start.type != I64:
            start = b.sext(start, I64)
        limit = extents.value(b, operand.shape[d] - update.shape[d])
        start = b.select(b.icmp_signed("<", start, ir.Constant(I64, 0)), ir.Constant(I64, 0),
                         start)
        start = b.select(b.icmp_signed(">", start, limit), limit, start)
        stride = operand.strides[d] * operand.dtype.itemsize
        offset = b.add(offset, b.mul(start, extents.value(b, stride)))
    step.copy(b.gep(target, [offset], source_etype=I8), block, update.nbytes)


def _larger(a: DimLike, b: DimLike) -> DimLike:
    """The larger of two sizes; of symbolic ones (whose order only the call knows) the sum."""
    return max(a, b) if is_static(a) and is_static(b) else a + b


def largest(sizes: Sequence[DimLike]) -> DimLike:
    """The largest of sizes (their sum where a symbolic one is among them); the cuda
    backend's control flow sizes its regions' workspace with it too."""
    result = sizes[0]
    for size in sizes[1:]:
        result = _larger(result, size)
    return result


def _emit_conditional(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                      program: Module, lower_region: LowerRegion) -> Kernel:
    branches = inst.attrs["branches"]
    codes = [lower_region(region_module(program, branch), f"{name}.branch{k}.")
             for k, branch in enumerate(branches)]  # type: ignore[union-attr]
    scratch_slot = _scratch(plan, largest([code.workspace_bytes for code in codes]))
    step = _Step(module, plan, name)
    b = step.b
    workspace = step.slot(scratch_slot)
    index = b.load(step.pointer(inst.operands[0]), typ=I32)
    operands = [step.pointer(v) for v in inst.operands[1:]]
    results = [step.slot(plan.slot(v)) for v in inst.results]  # type: ignore[arg-type]
    buffers = step.buffers(len(operands) + len(results))
    done = step.function.append_basic_block("done")
    last = step.function.append_basic_block(f"branch{len(codes) - 1}")
    switch = b.switch(index, last)
    blocks = []
    for k in range(len(codes) - 1):
        block = step.function.append_basic_block(f"branch{k}")
        switch.add_case(ir.Constant(I32, k), block)
        blocks.append(block)
    blocks.append(last)
    assert branch_index(len(codes), len(codes)) == len(codes) - 1  # the default: the last
    for block, code in zip(blocks, codes):
        b.position_at_end(block)
        step.call_region(code, buffers, [*operands, *results], workspace)
        b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return Kernel(name, 1, 0)
