"""Checks that a module is well formed; every pass's output goes through it in tests."""

from __future__ import annotations

from jitc.ir.core import Function, Module
from jitc.ir.opdef import AttrKind, IRTypeError, Trait
from jitc.ir.printer import print_module


class VerifyError(ValueError):
    """The module breaks an IR rule; the message quotes the offending instruction."""


def _describe(module: Module, fn: Function, index: int) -> str:
    """The printed text of instruction `index` of `fn`, for error messages."""
    text = print_module(Module([fn], fn.name), elide_constants=True).splitlines()
    body = text[text.index(f"func @{fn.name} {{") + 1:]
    return body[index].strip()


def verify_function(module: Module, fn: Function) -> None:
    defined: set[int] = set()
    parameter_indices: list[int] = []
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
        for spec in inst.op.attrs:
            if spec.kind is AttrKind.FUNCTION and inst.attrs[spec.name] not in module.functions:
                raise fail(f"calls @{inst.attrs[spec.name]}, which the module does not define")
        for result in inst.results:
            if id(result) in defined or result.producer is not inst:
                raise fail("a result value is defined twice")
            defined.add(id(result))
        if inst.op.has(Trait.NO_OPERANDS) and inst.op.name == "parameter":
            parameter_indices.append(inst.attrs["index"])  # type: ignore[arg-type]
    if sorted(parameter_indices) != list(range(len(parameter_indices))):
        raise VerifyError(f"@{fn.name}: parameter indices {sorted(parameter_indices)} are not "
                          f"0..{len(parameter_indices) - 1}, each once")
    for position, value in enumerate(fn.outputs):
        if id(value) not in defined:
            raise VerifyError(f"@{fn.name}: returned value {position} is not defined in it")


def verify(module: Module) -> Module:
    """Raise VerifyError at the first broken rule; return the module when it is well formed."""
    if module.entry_name not in module.functions:
        raise VerifyError(f"the entry function @{module.entry_name} is not defined")
    for fn in module.functions.values():
        verify_function(module, fn)
    return module
