"""The reference interpreter: numpy semantics for every op, straight from the op table.

It is the correctness oracle: every backend and every pass is compared against it. A module
with symbolic dimensions runs once the arguments' shapes have bound its symbols: each op's
reference then sees concrete types and attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jitc.ir import symbolic
from jitc.ir.core import Function, Module
from jitc.ir.opdef import AttrKind, Trait
from jitc.ir.types import TensorType


class ArgumentError(TypeError):
    """A call passed arrays that do not match the function's parameter types."""


def _static_arguments(fn: Function, args: Sequence[object]) -> list[np.ndarray]:
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


def bind_symbols(fn: Function, arrays: Sequence[np.ndarray],
                 constraints: Sequence[symbolic.Constraint] = ()) -> dict[str, int]:
    """The value of each symbol of `fn`'s parameter types, read from the arguments' shapes;
    ArgumentError when two arguments disagree, a dimension does not match or a constraint
    does not hold. `arrays` already have the right count."""
    env: dict[str, int] = {}
    where: dict[str, str] = {}
    params = fn.parameter_types
    for i, (array, want) in enumerate(zip(arrays, params)):
        if array.ndim != want.rank or array.dtype != want.dtype.numpy:
            got = f"{array.dtype}{list(array.shape)}"
            raise ArgumentError(f"@{fn.name} argument {i}: expected {want.short()}, got {got}")
        for axis, (dim, size) in enumerate(zip(want.shape, array.shape)):
            name = symbolic.symbol_name(dim)
            if name is None:
                continue
            if name in env and env[name] != size:
                raise ArgumentError(f"@{fn.name}: symbol {name} is {env[name]} ({where[name]}) "
                                    f"and {size} (argument {i} dimension {axis})")
            env[name] = size
            where[name] = f"argument {i} dimension {axis}"
    for i, (array, want) in enumerate(zip(arrays, params)):
        for axis, (dim, size) in enumerate(zip(want.shape, array.shape)):
            expected = symbolic.evaluate(dim, env)
            if expected != size:
                got = f"{array.dtype}{list(array.shape)}"
                message = f"@{fn.name} argument {i}: expected {want.short()}, got {got}"
                if not symbolic.is_static(dim):
                    values = ", ".join(f"{s}={env[s]}" for s in sorted(symbolic.symbols_of(dim)))
                    message += f" (dimension {axis} is {dim} = {expected} with {values})"
                raise ArgumentError(message)
    for constraint in constraints:
        if not constraint.holds(env):
            values = ", ".join(f"{s}={env[s]}" for s in sorted(constraint.symbols))
            raise ArgumentError(f"@{fn.name}: constraint {constraint} does not hold: {values} "
                                f"(from the shapes of the arguments)")
    return env


def check_arguments(fn: Function, args: Sequence[object],
                    constraints: Sequence[symbolic.Constraint] = ()
                    ) -> tuple[list[np.ndarray], dict[str, int]]:
    """The arguments as arrays and the symbols their shapes bind; ArgumentError when they do
    not fit the parameters."""
    params = fn.parameter_types
    if all(p.is_static for p in params) and not constraints:
        return _static_arguments(fn, args), {}
    if len(args) != len(params):
        raise ArgumentError(f"@{fn.name} takes {len(params)} argument(s), got {len(args)}")
    arrays = [np.asarray(a) for a in args]
    return arrays, bind_symbols(fn, arrays, constraints)


def _concrete_attrs(inst, sizes: Mapping[str, int]) -> Mapping[str, object]:
    if not sizes:
        return inst.attrs
    attrs = dict(inst.attrs)
    for spec in inst.op.attrs:
        if spec.kind is AttrKind.DIMS:
            attrs[spec.name] = symbolic.substitute(attrs[spec.name], sizes)
    return attrs


def run_function(module: Module, fn: Function, args: Sequence[np.ndarray],
                 sizes: Mapping[str, int] | None = None) -> list[np.ndarray]:
    """Run `fn` on arrays of its parameter types; `sizes` are the values of the symbols
    (bound from the arguments, which are then checked, when not given)."""
    if sizes is None:
        symbolic_params = not all(p.is_static for p in fn.parameter_types)
        sizes = bind_symbols(fn, args, module.constraints) if symbolic_params else {}
    env: dict[int, np.ndarray] = {id(p): a for p, a in zip(fn.parameters, args)}

    def call(name: str, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return run_function(module, module.functions[name], arrays, sizes)

    with np.errstate(all="ignore"):
        for inst in fn.body:
            if inst.op.name == "parameter":
                continue
            operands = [env[id(v)] for v in inst.operands]
            types: list[TensorType] = [v.type.concrete(sizes) for v in inst.results]
            if inst.op.has(Trait.CALLS):
                callee = module.functions[inst.attrs["calls"]]  # type: ignore[index]
                outputs = run_function(module, callee, operands, sizes)
            elif inst.op.control is not None:
                outputs = inst.op.control.evaluate(inst.attrs, operands, call)
            else:
                outputs = inst.op.reference(operands, _concrete_attrs(inst, sizes), types)
            for value, type_, out in zip(inst.results, types, outputs):
                out = np.asarray(out)
                assert out.shape == type_.shape and out.dtype == type_.dtype.numpy, (
                    f"reference of {inst.op.name} gave {out.dtype}{out.shape} for {type_}")
                env[id(value)] = out
    return [np.array(env[id(v)], copy=True) for v in fn.outputs]


def interpret(module: Module, args: Sequence[object]) -> list[np.ndarray]:
    """Run the module's entry function on numpy arrays; returns fresh arrays."""
    fn = module.entry
    arrays, sizes = check_arguments(fn, args, module.constraints)
    return run_function(module, fn, arrays, sizes)
