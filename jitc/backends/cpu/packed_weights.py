"""Constant right-hand sides of byte products, packed once when the function is compiled.

The byte-product kernel (gemm_bytes.py) packs its rhs into VNNI panels at every call, and each
thread packs every block it multiplies by, since threads split the rows. For the weights of a
`jitc.quant` function, which are constants, that repacking is all overhead: the GPT-2 block's
four products (64 rows against 7 MB of int8 weights) spent about half their time on it.

`pack_constants` finds the array constants whose every reader is the rhs of a byte product
that gemm_bytes runs, packs each once with numpy (`gemm_bytes.pack_rhs`: the bytes `pack_block`
would make, with their column corrections) and passes the packed array in the constant's
frame slot; `plan.packed` tells the kernels which constants are packed and how. A constant
anything else reads (another kernel, a bitcast or slice of it, a result of the function, the
lhs of a product, a product the generic kernel runs, products that would pack it differently)
is left as it is. The kernels check the decision (gemm.emit, gemm_bytes.emit): a packed
constant that reaches any other code is an internal error, never a wrong answer.
"""

from __future__ import annotations

from jitc.backends.cpu import gemm, gemm_bytes
from jitc.backends.cpu.gemm_bytes import PackedRhs
from jitc.backends.cpu.plan import BufferPlan
from jitc.ir import dtypes
from jitc.ir.core import Function, Instruction, Module, Value
from jitc.ir.ops import CONSTANT, CONVOLUTION, DOT_GENERAL, FUSION
from jitc.ir.symbolic import is_static


def pack_constants(fn: Function, program: Module, plan: BufferPlan) -> None:
    """Pack the constants of `fn` that only byte products read as their rhs (see above)."""
    constants = {id(inst.results[0]): inst.results[0] for inst in fn.body
                 if inst.op is CONSTANT and plan.slot(inst.results[0]) is not None}
    layouts: dict[int, PackedRhs] = {}
    rejected = {id(v) for v in fn.outputs}
    for inst in fn.body:
        for position, operand in enumerate(inst.operands):
            if id(operand) not in constants or id(operand) in rejected:
                continue
            layout = _rhs_layout(inst, position, operand, program, plan)
            if layout is None or layouts.setdefault(id(operand), layout) != layout:
                rejected.add(id(operand))
    first = plan.num_args + plan.num_outputs
    for key, layout in layouts.items():
        if key not in rejected:
            index = plan.slots[key] - first
            plan.constants[index] = gemm_bytes.pack_rhs(plan.constants[index], layout)
            plan.packed[key] = layout


def _rhs_layout(inst: Instruction, position: int, constant: Value, program: Module,
                plan: BufferPlan) -> PackedRhs | None:
    """How the kernel of `inst` would pack its operand `position`, the constant, or None when
    that kernel is no byte product reading the constant as its rhs and nothing else."""
    if id(inst.results[0]) in plan.aliases:
        return None
    if inst.op is DOT_GENERAL:
        core, operands, fused_epilogue = inst, list(inst.operands), False
        if position != 1:
            return None
    elif inst.op is FUSION and inst.attrs["kind"] == "dot":
        body = program.functions[inst.attrs["calls"]]  # type: ignore[index]
        # The core emit_fusion picks (fusions.py).
        core = next(i for i in body.body if i.op in (DOT_GENERAL, CONVOLUTION))
        parameter = body.parameters[position]
        readers = [(i, n) for i in body.body for n, v in enumerate(i.operands)
                   if v is parameter]
        if readers != [(core, 1)] or any(v is parameter for v in body.outputs):
            return None
        outer = {id(p): v for p, v in zip(body.parameters, inst.operands)}
        operands = [outer.get(id(v)) for v in core.operands]
        fused_epilogue = body.outputs[0] is not core.results[0]
    else:
        return None
    if core.op is not DOT_GENERAL or not core.attrs.get("result"):
        return None
    lhs, rhs = operands
    if lhs is None or rhs is not constant or lhs is constant or plan.slot(lhs) is None:
        return None
    form = gemm.gemm_form(core, lhs, rhs)
    if form is None or form.b.value is not constant or not gemm_bytes.runs(form, fused_epilogue):
        return None
    if not (is_static(form.k) and is_static(form.n)) or any(form.b.batch):
        return None
    return PackedRhs(form.k, form.n, form.b.free, form.b.contract,
                     a_unsigned=lhs.type.dtype is dtypes.uint8,
                     b_signed=rhs.type.dtype is dtypes.int8)
