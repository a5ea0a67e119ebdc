"""Common subexpression elimination.

Two instructions compute the same values when they have the same op, the same operands (after
earlier merges), the same attributes and the same result types, layouts included; constants thus
merge by literal value. Operands of commutative ops match in either order. Ops with side effects
never merge. The first of equal instructions stays, the later ones go and their uses follow.
"""

from __future__ import annotations

from jitc.ir.core import Builder, Function, Instruction, Module, Value
from jitc.ir.opdef import Trait
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import copy_instruction


def _key(inst: Instruction, operands: list[Value]) -> tuple | None:
    if inst.op.has(Trait.SIDE_EFFECT):
        return None
    ids = [id(v) for v in operands]
    if inst.op.has(Trait.COMMUTATIVE):
        ids.sort()
    return (inst.op, tuple(ids), inst.attr_key(), tuple(v.type for v in inst.results))


def cse_function(fn: Function) -> Function:
    new = Function(fn.name)
    builder = Builder(new)
    mapping: dict[int, Value] = {}
    seen: dict[tuple, tuple[Value, ...]] = {}
    merged = False
    for inst in fn.body:
        operands = [mapping[id(v)] for v in inst.operands]
        key = _key(inst, operands)
        results = seen.get(key) if key is not None else None
        if results is None:
            results = copy_instruction(builder, inst, operands)
            if key is not None:
                seen[key] = results
        else:
            merged = True
        for old, value in zip(inst.results, results, strict=True):
            mapping[id(old)] = value
    if not merged:
        return fn
    new.outputs = [mapping[id(v)] for v in fn.outputs]
    return new


@module_pass("cse")
def cse(module: Module) -> Module:
    functions = [cse_function(fn) for fn in module.functions.values()]
    if all(new is old for new, old in zip(functions, module.functions.values())):
        return module
    return Module(functions, module.entry_name)
