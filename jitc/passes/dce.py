"""Dead code elimination: drop instructions whose results nothing uses.

Parameters stay (they are the function's signature) and so do ops with side effects.
"""

from __future__ import annotations

from jitc.ir.core import Function, Module
from jitc.ir.opdef import Trait
from jitc.passes.pipeline import module_pass


def _keeps(inst) -> bool:
    return inst.op.name == "parameter" or inst.op.has(Trait.SIDE_EFFECT)


def dce_function(fn: Function) -> Function:
    live = {id(v) for v in fn.outputs}
    kept = []
    for inst in reversed(fn.body):
        if _keeps(inst) or any(id(v) in live for v in inst.results):
            kept.append(inst)
            live.update(id(v) for v in inst.operands)
    if len(kept) == len(fn.body):
        return fn
    kept.reverse()
    return Function(fn.name, kept, fn.outputs)


@module_pass("dce")
def dce(module: Module) -> Module:
    functions = [dce_function(fn) for fn in module.functions.values()]
    if all(new is old for new, old in zip(functions, module.functions.values())):
        return module
    return Module(functions, module.entry_name)
