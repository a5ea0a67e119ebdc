"""Lowering an optimized module to kernel IR: one GPU kernel per fusion or materialised
instruction, plus the copies of results that are arguments or constants; control flow
becomes host-driven steps whose regions are lowered the same way (control.py).

The result is target-neutral: LLVM IR text holding every kernel's phase functions, a
`KernelSpec` per kernel (launch configuration, steps, buffers) and the `Program` the host
runs (host.py). `ptx.py` wraps the kernels into `ptx_kernel`s for NVPTX and `simulator.py`
into host loops over the grid.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from llvmlite import ir

from jitc.backends.cpu.codegen import kernel_key
from jitc.backends.cpu.fusions import fusion_buffers
from jitc.backends.cpu.kernels import buffers_used
from jitc.backends.cpu.plan import BufferPlan, plan_buffers
from jitc.backends.cuda import ptx
from jitc.backends.cuda.control import Program, ProgramStep, Uploaded, lower_control
from jitc.backends.cuda.dot import dot_kernel
from jitc.backends.cuda.elementwise import PhaseContext, convolution_element, elementwise_kernel
from jitc.backends.cuda.kernel import GpuEmitter, KernelSpec, Phase, Repeat, Step
from jitc.backends.cuda.reductions import reduction_kernel, row_fusion_kernel
from jitc.backends.cuda.sort_kernel import sort_kernel
from jitc.ir import ops
from jitc.ir.core import Instruction, Module, Value
from jitc.ir.opdef import Trait


@dataclass(frozen=True)
class Lowering:
    kernel_ir: str
    specs: tuple[KernelSpec, ...]    # every kernel, the regions' included
    program: Program                 # what the host runs: the entry function's steps
    arrays: tuple[np.ndarray, ...]   # put on the device once: every program's constants

    @property
    def plan(self) -> BufferPlan:
        return self.program.plan


class Lowerer:
    """Collects the kernels and device arrays of a program and its regions."""

    def __init__(self) -> None:
        self.llvm_module = ir.Module(name="jitc_kernels")
        # vmath emits no CPU-only code (vector variants) for the NVPTX triple
        self.llvm_module.triple = ptx.TRIPLE
        self.specs: list[KernelSpec] = []
        self.arrays: list[np.ndarray] = []
        # The first kernel of each computation (cpu/codegen.kernel_key): a kernel equal to one
        # of these launches its code on its own buffers instead of adding code of its own.
        self.distinct: dict[str, KernelSpec] = {}

    def kernel(self, plan: BufferPlan, name: str, inst: Instruction,
               module: Module) -> KernelSpec | None:
        """The kernel computing `inst`, sharing the code of an equal earlier kernel: it is
        built aside first, and kept only where its launch, memory or aliasing differ."""
        values = fusion_buffers(inst, plan) if inst.op is ops.FUSION else \
            buffers_used(inst, plan)
        key = kernel_key(inst, values, module)
        first = self.distinct.get(key)
        if first is not None:
            aside = ir.Module(name="jitc_shared")
            aside.triple = ptx.TRIPLE
            spec = emit_kernel(aside, plan, name, inst, module)
            if spec is not None and _same_code(first, spec):
                return replace(first, slots=spec.slots)
        spec = emit_kernel(self.llvm_module, plan, name, inst, module)
        if spec is not None and first is None:
            self.distinct[key] = spec
        return spec

    def upload(self, array: np.ndarray) -> Uploaded:
        self.arrays.append(np.ascontiguousarray(array))
        return Uploaded(len(self.arrays) - 1)

    def program(self, module: Module, prefix: str = "",
                symbols: tuple[str, ...] = ()) -> Program:
        """The kernels of `module`'s entry function, named `jitc_<prefix>...`, and the steps
        that run them; control flow lowers its regions the same way (control.py). `symbols`:
        those of the program whose region `module` is, whose values its kernels take."""
        fn = module.entry
        plan = plan_buffers(fn, symbols=symbols)

        def region(region_module: Module, region_prefix: str) -> Program:
            # A region of a symbolic program takes all its symbol values, even where its own
            # extents are static: the host passes the program's `dims` to every kernel.
            return self.program(region_module, region_prefix, plan.symbols)
        constants = tuple(self.upload(c).index for c in plan.constants)
        steps: list[ProgramStep] = []

        def kernel(spec: KernelSpec | None) -> None:
            if spec is not None:
                self.specs.append(spec)
                steps.append(spec)
        for n, inst in enumerate(fn.body):
            if inst.op in (ops.PARAMETER, ops.CONSTANT) or id(inst.results[0]) in plan.aliases:
                continue
            if inst.op.has(Trait.REGIONS):
                steps.append(lower_control(self, module, plan, f"{prefix}{inst.op.name}{n}_",
                                           inst, region))
                continue
            label = inst.attrs["kind"] if inst.op is ops.FUSION else inst.op.name
            kernel(self.kernel(plan, f"jitc_{prefix}k{n}_{label}", inst, module))
        for n, (source, slot) in enumerate(plan.copies):
            inputs = [source] if plan.slot(source) is not None else []

            def copy(ctx: PhaseContext, index: list[ir.Value],
                     source: Value = source) -> list[ir.Value]:
                return [ctx.emitter.value_at(source, index)]
            kernel(elementwise_kernel(self.llvm_module, plan, f"jitc_{prefix}copy{n}", inputs,
                                      source.type, copy, copy_slot=slot))
        return Program(plan, tuple(steps), constants)


def lower_module(module: Module) -> Lowering:
    lowerer = Lowerer()
    program = lowerer.program(module)
    return Lowering(str(lowerer.llvm_module), tuple(lowerer.specs), program,
                    tuple(lowerer.arrays))


def _same_code(first: KernelSpec, other: KernelSpec) -> bool:
    """Whether `other` runs what `first` runs, but for the names of its phases and slots."""
    return (first.launch, first.state_bytes, first.written, first.noalias, len(first.slots)) \
        == (other.launch, other.state_bytes, other.written, other.noalias, len(other.slots)) \
        and _step_shape(first.steps, first.name) == _step_shape(other.steps, other.name)


def _step_shape(steps: tuple[Step, ...], name: str) -> tuple:
    shape: list[object] = []
    for step in steps:
        if isinstance(step, Phase):
            shape.append(("phase", step.function.removeprefix(name)))
        elif isinstance(step, Repeat):
            shape.append(("repeat", step.count, _step_shape(step.steps, name)))
        else:
            shape.append(step)
    return tuple(shape)


def emit_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                program: Module) -> KernelSpec | None:
    if inst.op is ops.FUSION:
        return _fusion_kernel(module, plan, name, inst, program)
    values = buffers_used(inst, plan)
    result = inst.results[0]
    if inst.op in (ops.REDUCE, ops.ARGMAX, ops.ARGMIN):
        return reduction_kernel(module, plan, name, inst, values, list(inst.results))
    if inst.op is ops.SORT:
        return sort_kernel(module, plan, name, inst, values)
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
