"""Checks that a module is well formed; every pass's output goes through it in tests."""

from __future__ import annotations

from jitc.ir import symbolic
from jitc.ir.core import Function, Module
from jitc.ir.opdef import AttrKind, IRTypeError, Trait
from jitc.ir.printer import print_module


class VerifyError(ValueError):
    """The module breaks an IR rule; the message quotes the offending instruction."""


def _describe(module: Module, fn: Function, index: int) -> str:
    """The printed text of instruction `index` of `fn` (its return line when `index` is the
    length of the body), for error messages."""
    try:
        text = print_module(Module([fn], fn.name), elide_constants=True).splitlines()
    except Exception:
        # Attribute values of the wrong kind cannot be printed; show the raw instruction.
        inst = fn.body[index]
        return f"{inst.op.name}(...) {inst.attrs}"
    body = text[text.index(f"func @{fn.name} {{") + 1:]
    return body[index].strip()


def _call_mismatch(module: Module, caller: Function, inst) -> str | None:
    """Why the operands and results of a calling op do not fit its callee, or None."""
    name = inst.attrs["calls"]
    if name == caller.name or name == module.entry_name:
        return f"cannot call @{name} (the entry function or itself)"
    callee = module.functions[name]
    params = callee.parameter_types
    if len(params) != len(inst.operands) or any(
            not p.same_shape_and_dtype(v.type) for p, v in zip(params, inst.operands)):
        want = ", ".join(p.short() for p in params)
        return f"its operands do not match the parameters of @{name} ({want})"
    outs = callee.output_types
    if len(outs) != len(inst.results) or any(
            not o.same_shape_and_dtype(v.type) for o, v in zip(outs, inst.results)):
        want = ", ".join(o.short() for o in outs)
        return f"its results do not match what @{name} returns ({want})"
    return None


def _region_mismatch(module: Module, caller: Function, inst) -> str | None:
    """Why the regions of a control flow op do not fit its operands and results, or None."""
    for name in inst.op.called_functions(inst.attrs):
        if name == caller.name or name == module.entry_name:
            return f"cannot run @{name} (the entry function or itself) as a region"

    def signature(name: str) -> tuple[list, list]:
        region = module.functions[name]
        return region.parameter_types, region.output_types
    return inst.op.control.check(inst.attrs, [v.type for v in inst.operands],
                                 [v.type for v in inst.results], signature)


def verify_function(module: Module, fn: Function) -> None:
    defined: set[int] = set()
    parameter_positions: dict[int, int] = {}  # parameter index -> position in the body
    for n, inst in enumerate(fn.body):
        def fail(problem: str, n: int = n) -> VerifyError:
            return VerifyError(f"@{fn.name}: `{_describe(module, fn, n)}`: {problem}")
        for position, operand in enumerate(inst.operands):
            if id(operand) not in defined:
                raise fail(f"operand {position} is used before it is defined (or is defined "
                           "in another function)")
        try:
            attrs = inst.op.normalize_attrs(inst.attrs)
            inst.op.result_types([v.type for v in inst.operands], attrs,
                                 [v.type for v in inst.results])
        except IRTypeError as exc:
            raise fail(str(exc)) from None
        if attrs != inst.attrs:
            raise fail("attributes are not in canonical form")
        for name in inst.op.called_functions(inst.attrs):
            if name not in module.functions:
                raise fail(f"calls @{name}, which the module does not define")
        if inst.op.control is not None:
            problem = _region_mismatch(module, fn, inst)
            if problem:
                raise fail(problem)
        if inst.op.has(Trait.CALLS):
            problem = _call_mismatch(module, fn, inst)
            if problem:
                raise fail(problem)
        for result in inst.results:
            if id(result) in defined or result.producer is not inst:
                raise fail("a result value is defined twice")
            defined.add(id(result))
        if inst.op.has(Trait.NO_OPERANDS) and inst.op.name == "parameter":
            index: int = inst.attrs["index"]  # type: ignore[assignment]
            if index in parameter_positions:
                earlier = _describe(module, fn, parameter_positions[index])
                raise fail(f"parameter index {index} is already taken by `{earlier}`")
            parameter_positions[index] = n
    count = len(parameter_positions)
    for index, n in parameter_positions.items():
        # Distinct non-negative indices other than 0..count-1 include one of count or more.
        if index >= count:
            raise VerifyError(f"@{fn.name}: `{_describe(module, fn, n)}`: parameter index "
                              f"{index} leaves a gap; {count} parameter(s) need the indices "
                              f"0..{count - 1}")
    for position, value in enumerate(fn.outputs):
        if id(value) not in defined:
            raise VerifyError(f"@{fn.name}: `{_describe(module, fn, len(fn.body))}`: returned "
                              f"value {position} is not defined in it")


def bound_symbols(module: Module) -> set[str]:
    """The symbols a call binds: those that are a whole dimension of an entry parameter."""
    return {name for t in module.entry.parameter_types for d in t.shape
            if (name := symbolic.symbol_name(d)) is not None}


def _check_symbols(module: Module) -> None:
    """Every symbol of the module must be bound by the entry's parameters: a call could not
    give it a value otherwise."""
    bound = bound_symbols(module)
    for constraint in module.constraints:
        missing = constraint.symbols - bound
        if missing:
            raise VerifyError(f"constraint {constraint}: symbol {min(missing)} is not a "
                              f"dimension of any parameter of @{module.entry_name}")
    for fn in module.functions.values():
        for n, inst in enumerate(fn.body):
            used = set().union(*(v.type.symbols for v in inst.results))
            for spec in inst.op.attrs:
                if spec.kind is AttrKind.DIMS:
                    used |= symbolic.symbols_of(inst.attrs.get(spec.name, ()))
            missing = used - bound
            if missing:
                raise VerifyError(f"@{fn.name}: `{_describe(module, fn, n)}`: symbol "
                                  f"{min(missing)} is not a dimension of any parameter of "
                                  f"@{module.entry_name}")


def verify(module: Module) -> Module:
    """Raise VerifyError at the first broken rule; return the module when it is well formed.

    Shape rules may rely on the module's constraints and on nothing else."""
    if module.entry_name not in module.functions:
        raise VerifyError(f"the entry function @{module.entry_name} is not defined")
    with symbolic.checking(module.constraints):
        for fn in module.functions.values():
            verify_function(module, fn)
    _check_symbols(module)
    return module
