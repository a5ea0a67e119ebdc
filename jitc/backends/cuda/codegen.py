"""Lowering an optimized module to kernel IR: one GPU kernel per fusion or materialised
instruction, plus the copies of results that are arguments or constants.

The result is target-neutral: LLVM IR text holding every kernel's phase functions, and a
`KernelSpec` per kernel (launch configuration, steps, buffers). `ptx.py` wraps it into
`ptx_kernel`s for NVPTX and `simulator.py` into host loops over the grid.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from jitc.backends.cpu.kernels import buffers_used
from jitc.backends.cpu.plan import BufferPlan, plan_buffers
from jitc.backends.cuda import ptx
from jitc.backends.cuda.dot import dot_kernel
from jitc.backends.cuda.elementwise import PhaseContext, convolution_element, elementwise_kernel
from jitc.backends.cuda.kernel import GpuEmitter, KernelSpec
from jitc.backends.cuda.reductions import reduction_kernel, row_fusion_kernel
from jitc.ir import ops
from jitc.ir.core import Instruction, Module, Value


@dataclass(frozen=True)
class Lowering:
    kernel_ir: str
    specs: tuple[KernelSpec, ...]
    plan: BufferPlan


def lower_module(module: Module) -> Lowering:
    fn = module.entry
    plan = plan_buffers(fn)
    llvm_module = ir.Module(name="jitc_kernels")
    llvm_module.triple = ptx.TRIPLE  # vmath emits no CPU-only code (vector variants) for it
    specs: list[KernelSpec] = []
    for n, inst in enumerate(fn.body):
        if inst.op in (ops.PARAMETER, ops.CONSTANT) or id(inst.results[0]) in plan.aliases:
            continue
        label = inst.attrs["kind"] if inst.op is ops.FUSION else inst.op.name
        spec = emit_kernel(llvm_module, plan, f"jitc_k{n}_{label}", inst, module)
        if spec is not None:
            specs.append(spec)
    for n, (source, slot) in enumerate(plan.copies):
        inputs = [source] if plan.slot(source) is not None else []

        def copy(ctx: PhaseContext, index: list[ir.Value],
                 source: Value = source) -> list[ir.Value]:
            return [ctx.emitter.value_at(source, index)]
        spec = elementwise_kernel(llvm_module, plan, f"jitc_copy{n}", inputs, source.type, copy,
                                  copy_slot=slot)
        if spec is not None:
            specs.append(spec)
    return Lowering(str(llvm_module), tuple(specs), plan)


def emit_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                program: Module) -> KernelSpec | None:
    if inst.op is ops.FUSION:
        return _fusion_kernel(module, plan, name, inst, program)
    values = buffers_used(inst, plan)
    result = inst.results[0]
    if inst.op in (ops.REDUCE, ops.ARGMAX, ops.ARGMIN):
        return reduction_kernel(module, plan, name, inst, values, list(inst.results))
    if inst.op is ops.DOT_GENERAL:
        return dot_kernel(module, plan, name, inst, values, result)
    if inst.op is ops.CONVOLUTION:
        return elementwise_kernel(module, plan, name, values, result.type,
                                  lambda ctx, index: [convolution_element(ctx, inst, index)],
                                  targets=[result])
    rule = GpuEmitter.rules.get(inst.op.name)
    if rule is None:
        raise NotImplementedError(f"the CUDA backend cannot lower {inst.op.name}")
    return elementwise_kernel(module, plan, name, values, result.type,
                              lambda ctx, index: [rule(ctx.emitter, inst, index)],
                              targets=[result])


def _fusion_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                   program: Module) -> KernelSpec | None:
    body = program.functions[inst.attrs["calls"]]  # type: ignore[index]
    values: list[Value] = list(inst.results)
    for operand in inst.operands:
        if plan.slot(operand) is not None and all(v is not operand for v in values):
            values.append(operand)
    aliases = {id(p): operand for p, operand in zip(body.parameters, inst.operands)}
    kind = inst.attrs["kind"]
    result = inst.results[0]
    root = body.outputs[0]
    if kind == "loop":
        def outputs(ctx: PhaseContext, index: list[ir.Value]) -> list[ir.Value]:
            return [ctx.emitter.value_at(out, index) for out in body.outputs]
        return elementwise_kernel(module, plan, name, values, result.type, outputs,
                                  targets=list(inst.results), aliases=aliases)
    if kind == "reduce":
        return reduction_kernel(module, plan, name, root.producer, values, [result], aliases)
    if kind == "row":
        return row_fusion_kernel(module, plan, name, inst, body, values)
    core = next(i for i in body.body if i.op in (ops.DOT_GENERAL, ops.CONVOLUTION))
    epilogue = root if root is not core.results[0] else None
    if core.op is ops.DOT_GENERAL:
        return dot_kernel(module, plan, name, core, values, result, epilogue, aliases)

    def element(ctx: PhaseContext, index: list[ir.Value]) -> list[ir.Value]:
        value = convolution_element(ctx, core, index)
        if epilogue is None:
            return [value]
        ctx.emitter.registers[id(core.results[0])] = value
        value = ctx.emitter.value_at(epilogue, index)
        ctx.emitter.registers.clear()
        return [value]
    return elementwise_kernel(module, plan, name, values, result.type, element,
                              targets=[result], aliases=aliases)
