"""Lowering an optimized IR module to one LLVM module for the host CPU.

The module exports `jitc_entry(ptr buffers)`: `buffers` holds the argument pointers, the
result pointers, the array-constant pointers and the workspace pointer, in that order. The
entry function lays out the frame (one pointer per materialised value) and runs the kernels
in program order, splitting large ones across threads through `jitc_parallel_for` when the
function was compiled for more than one thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from jitc.backends.cpu import kernels
from jitc.backends.cpu.fusions import emit_fusion
from jitc.backends.cpu.plan import BufferPlan, plan_buffers
from jitc.backends.llvm.elemental import RULES
from jitc.backends.llvm.types import I8, I64, PTR, VOID
from jitc.ir.core import Instruction, Module
from jitc.ir.ops import FUSION

ENTRY = "jitc_entry"
PARALLEL_FOR = "jitc_parallel_for"
# A kernel is split across threads only when it has at least this many element operations
# per thread: below that, waking the pool costs more than it saves.
PARALLEL_GRAIN = 1 << 15

_SPECIAL = {"reduce": kernels.emit_reduce, "argmax": kernels.emit_arg,
            "argmin": kernels.emit_arg, "dot_general": kernels.emit_dot,
            "convolution": kernels.emit_convolution}


@dataclass
class Lowering:
    llvm_ir: ir.Module
    plan: BufferPlan
    kernels: list[kernels.Kernel]


def emit_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                program: Module) -> kernels.Kernel:
    if inst.op is FUSION:
        return emit_fusion(module, plan, name, inst, program)
    special = _SPECIAL.get(inst.op.name)
    if special is not None:
        return special(module, plan, name, inst)
    if inst.op.name not in RULES:
        raise NotImplementedError(f"the CPU backend cannot lower {inst.op.name}")
    return kernels.emit_elemental(module, plan, name, inst)


def lower_module(module: Module, num_threads: int = 1, name: str = "jitc") -> Lowering:
    fn = module.entry
    plan = plan_buffers(fn)
    llvm_module = ir.Module(name=name)
    emitted: list[kernels.Kernel] = []
    for n, inst in enumerate(fn.body):
        if inst.op.name in ("parameter", "constant") or id(inst.results[0]) in plan.aliases:
            continue
        label = inst.attrs["kind"] if inst.op is FUSION else inst.op.name
        emitted.append(emit_kernel(llvm_module, plan, f"k{n}.{label}", inst, module))
    for n, (source, slot) in enumerate(plan.copies):
        emitted.append(kernels.emit_copy(llvm_module, plan, f"copy{n}", source, slot))
    _emit_entry(llvm_module, plan, emitted, num_threads)
    return Lowering(llvm_module, plan, emitted)


def _emit_entry(module: ir.Module, plan: BufferPlan, emitted: list[kernels.Kernel],
                num_threads: int) -> None:
    entry = ir.Function(module, ir.FunctionType(VOID, [PTR]), ENTRY)
    (buffers,) = entry.args
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    frame = b.alloca(PTR, ir.Constant(I64, max(plan.num_slots, 1)), name="frame")
    direct = plan.num_args + plan.num_outputs + len(plan.constants)
    for slot in range(direct):
        pointer = b.load(b.gep(buffers, [ir.Constant(I64, slot)], source_etype=PTR), typ=PTR)
        b.store(pointer, b.gep(frame, [ir.Constant(I64, slot)], source_etype=PTR))
    workspace = b.load(b.gep(buffers, [ir.Constant(I64, direct)], source_etype=PTR), typ=PTR)
    for slot, offset in plan.temp_offsets.items():
        pointer = b.gep(workspace, [ir.Constant(I64, offset)], source_etype=I8)
        b.store(pointer, b.gep(frame, [ir.Constant(I64, slot)], source_etype=PTR))
    parallel_for = None
    for kernel in emitted:
        fn = module.get_global(kernel.name)
        threads = min(num_threads, kernel.outer, max(1, kernel.cost // PARALLEL_GRAIN))
        if threads > 1:
            if parallel_for is None:
                parallel_for = ir.Function(module, ir.FunctionType(
                    VOID, [PTR, PTR, I64, I64]), PARALLEL_FOR)
            b.call(parallel_for, [fn, frame, ir.Constant(I64, kernel.outer),
                                  ir.Constant(I64, threads)])
        else:
            b.call(fn, [frame, ir.Constant(I64, 0), ir.Constant(I64, kernel.outer)])
    b.ret_void()
