"""The reference interpreter: numpy semantics for every op, straight from the op table.

It is the correctness oracle: every backend and every pass is compared against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jitc.ir.core import Function, Module
from jitc.ir.opdef import Trait
from jitc.ir.types import TensorType


class ArgumentError(TypeError):
    """A call passed arrays that do not match the function's parameter types."""


def check_arguments(fn: Function, args: Sequence[object]) -> list[np.ndarray]:
    params = fn.parameter_types
    if len(args) != len(params):
        raise ArgumentError(f"@{fn.name} takes {len(params)} argument(s), got {len(args)}")
    arrays = []
    for i, (arg, want) in enumerate(zip(args, params)):
        array = np.asarray(arg)
        if array.shape != want.shape or array.dtype != want.dtype.numpy:
            got = f"{array.dtype}{list(array.shape)}"
            raise ArgumentError(f"@{fn.name} argument {i}: expected {want.short()}, got {got}")
        arrays.append(array)
    return arrays


def run_function(module: Module, fn: Function, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    env: dict[int, np.ndarray] = {id(p): a for p, a in zip(fn.parameters, args)}

    def call(name: str, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return run_function(module, module.functions[name], arrays)

    with np.errstate(all="ignore"):
        for inst in fn.body:
            if inst.op.name == "parameter":
                continue
            operands = [env[id(v)] for v in inst.operands]
            types: list[TensorType] = [v.type for v in inst.results]
            if inst.op.has(Trait.CALLS):
                callee = module.functions[inst.attrs["calls"]]  # type: ignore[index]
                outputs = run_function(module, callee, operands)
            elif inst.op.control is not None:
                outputs = inst.op.control.evaluate(inst.attrs, operands, call)
            else:
                outputs = inst.op.reference(operands, inst.attrs, types)
            for value, out in zip(inst.results, outputs):
                out = np.asarray(out)
                assert out.shape == value.type.shape and out.dtype == value.type.dtype.numpy, (
                    f"reference of {inst.op.name} gave {out.dtype}{out.shape} for {value.type}")
                env[id(value)] = out
    return [np.array(env[id(v)], copy=True) for v in fn.outputs]


def interpret(module: Module, args: Sequence[object]) -> list[np.ndarray]:
    """Run the module's entry function on numpy arrays; returns fresh arrays."""
    fn = module.entry
    return run_function(module, fn, check_arguments(fn, args))
