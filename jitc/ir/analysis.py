"""Static cost and memory figures of a module, for `Compiled.cost_analysis()` and
`Compiled.memory_analysis()`."""

from __future__ import annotations

from collections.abc import Callable

from jitc.ir import ops
from jitc.ir.core import Function, Instruction, Module, Value
from jitc.ir.opdef import Trait
from jitc.ir.printer import value_names

_LEAVES = (ops.PARAMETER, ops.CONSTANT)


def _contraction_flops(inst: Instruction) -> int:
    result = inst.results[0].type
    if inst.op is ops.DOT_GENERAL:
        lhs = inst.operands[0].type
        k = 1
        for d in inst.attrs["lhs_contract"]:  # type: ignore[union-attr]
            k *= lhs.shape[d]
        return 2 * result.size * k
    dims = ops.parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    kernel = inst.operands[1].type
    taps = kernel.shape[dims.rhs_in]
    for d in dims.rhs_spatial:
        taps *= kernel.shape[d]
    return 2 * result.size * taps


def _function_costs(module: Module, fn: Function) -> tuple[int, int]:
    """(flops, transcendental evaluations) of one function, fusion bodies included."""
    flops = transcendentals = 0
    for inst in fn.body:
        f, t = _instruction_costs(module, inst)
        flops, transcendentals = flops + f, transcendentals + t
    return flops, transcendentals


def _instruction_costs(module: Module, inst: Instruction) -> tuple[int, int]:
    if inst.op in _LEAVES:
        return 0, 0
    if inst.op.has(Trait.CALLS):
        return _function_costs(module, module.functions[inst.attrs["calls"]])  # type: ignore
    if inst.op in (ops.DOT_GENERAL, ops.CONVOLUTION):
        return _contraction_flops(inst), 0
    if inst.op is ops.REDUCE or inst.op in (ops.ARGMAX, ops.ARGMIN):
        return sum(v.type.size for v in inst.operands), 0
    if inst.op.has(Trait.ELEMENTWISE) and inst.op is not ops.CONVERT:
        size = inst.results[0].type.size
        return size, size if inst.op.has(Trait.TRANSCENDENTAL) else 0
    return 0, 0


def kernel_costs(module: Module) -> list[dict[str, object]]:
    """Per kernel (each top-level instruction other than a parameter or constant, as in
    `cost_analysis`): the value it defines as the printer names it, its op (a fusion's
    function), the source line, and the flops, transcendentals and bytes it reads and writes."""
    fn = module.entry
    names = value_names(fn)
    out: list[dict[str, object]] = []
    for inst in fn.body:
        if inst.op in _LEAVES:
            continue
        flops, transcendentals = _instruction_costs(module, inst)
        op = inst.op.name
        if inst.op.has(Trait.CALLS):
            op = f"{op} @{inst.attrs['calls']}"
        out.append({"kernel": "%" + names[id(inst.results[0])], "op": op,
                    "source": str(inst.loc) if inst.loc is not None else "",
                    "flops": flops, "transcendentals": transcendentals,
                    "bytes": sum(v.type.nbytes for v in (*inst.operands, *inst.results))})
    return out


def cost_analysis(module: Module) -> dict[str, int]:
    """flops, transcendental evaluations, bytes accessed by the kernels, and kernel count.

    Each top-level instruction other than a parameter or constant counts as one kernel that
    reads its operands and writes its results once (a backend that turns some of them into
    free bitcasts reports its own, smaller kernel count).
    """
    fn = module.entry
    flops, transcendentals = _function_costs(module, fn)
    kernels = [i for i in fn.body if i.op not in _LEAVES]
    accessed = sum(v.type.nbytes for i in kernels for v in (*i.operands, *i.results))
    return {"flops": flops, "transcendentals": transcendentals, "bytes_accessed": accessed,
            "kernels": len(kernels)}


def intermediate_bytes(module: Module) -> int:
    """The bytes of every value that is neither an argument, a constant nor a result: what an
    executor without buffer reuse would allocate."""
    fn = module.entry
    outputs = {id(v) for v in fn.outputs}
    return sum(v.type.nbytes for i in fn.body if i.op not in _LEAVES for v in i.results
               if id(v) not in outputs)


def signature_bytes(module: Module) -> dict[str, int]:
    fn = module.entry
    constants = sum(i.results[0].type.nbytes for i in fn.body if i.op is ops.CONSTANT)
    return {"argument_bytes": sum(t.nbytes for t in fn.parameter_types),
            "output_bytes": sum(t.nbytes for t in fn.output_types),
            "constant_bytes": constants}


def elementwise_chain(value: Value, resolve: Callable[[Value], Value | None]) -> list[Value]:
    """The values an element of `value` is computed from at that same index (through
    elementwise ops on operands of its shape), each after those it is computed from, `value`
    last. `resolve` maps an operand to the value that stands for it, or None where the walk
    stops (a value stored in memory, or one already computed).

    Element emitters generate these bottom-up, so that a fused chain of thousands of ops is not
    one recursive call per op deep."""
    order: list[Value] = []
    seen = {id(value)}
    stack: list[tuple[Value, bool]] = [(value, False)]
    while stack:
        v, operands_done = stack.pop()
        if operands_done:
            order.append(v)
            continue
        stack.append((v, True))
        inst = v.producer
        if not inst.op.has(Trait.ELEMENTWISE):
            continue
        for operand in inst.operands:
            target = resolve(operand) if operand.type.shape == v.type.shape else None
            if target is not None and id(target) not in seen:
                seen.add(id(target))
                stack.append((target, False))
    return order
