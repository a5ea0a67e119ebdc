"""Rebuilding a function instruction by instruction: the common skeleton of rewriting passes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from jitc.ir.core import Builder, Function, Instruction, Module, Value

# A transform sees the builder of the new function, the old instruction and its operands in the
# new function. It returns the new values replacing the instruction's results, or None to copy
# the instruction unchanged.
Transform = Callable[[Builder, Instruction, Sequence[Value]], Sequence[Value] | None]


def copy_instruction(builder: Builder, inst: Instruction,
                     operands: Sequence[Value]) -> tuple[Value, ...]:
    new = Instruction(inst.op, operands, inst.attrs, [v.type for v in inst.results], inst.loc,
                      [v.name_hint for v in inst.results])
    builder.function.body.append(new)
    return new.results


def users_of(instructions: Iterable[Instruction]) -> dict[int, list[Instruction]]:
    """id(value) -> the instructions that read it, in order (once per operand)."""
    users: dict[int, list[Instruction]] = {}
    for inst in instructions:
        for v in inst.operands:
            users.setdefault(id(v), []).append(inst)
    return users


def remapped(body: Sequence[Instruction], mapping: dict[int, Value]) -> list[Instruction]:
    """`body` reading mapping[id(v)] in place of each mapped v: instructions that read a mapped
    value are copied (their results join `mapping`), the others are kept as they are."""
    scratch = Builder(Function(""))

    def current(value: Value) -> Value:
        # A replacement may itself have been copied since (it read a mapped value): read the
        # copy, not the replacement left behind.
        while id(value) in mapping:
            value = mapping[id(value)]
        return value

    for inst in body:
        if any(id(v) in mapping for v in inst.operands):
            copies = copy_instruction(scratch, inst, [current(v) for v in inst.operands])
            mapping.update((id(old), new) for old, new in zip(inst.results, copies))
        else:
            scratch.function.body.append(inst)
    return scratch.function.body


def rebuild_function(fn: Function, transform: Transform) -> tuple[Function, bool]:
    new = Function(fn.name)
    builder = Builder(new)
    mapping: dict[int, Value] = {}
    changed = False
    for inst in fn.body:
        operands = [mapping[id(v)] for v in inst.operands]
        builder.loc = inst.loc
        replacement = transform(builder, inst, operands)
        if replacement is None:
            replacement = copy_instruction(builder, inst, operands)
        else:
            changed = True
        for old, value in zip(inst.results, replacement, strict=True):
            mapping[id(old)] = value
    new.outputs = [mapping[id(v)] for v in fn.outputs]
    return new, changed


def rebuild_module(module: Module, transform: Transform) -> Module:
    """Apply `transform` to every function; the same module back when nothing changed."""
    functions, any_changed = [], False
    for fn in module.functions.values():
        new, changed = rebuild_function(fn, transform)
        functions.append(new if changed else fn)
        any_changed |= changed
    return Module(functions, module.entry_name) if any_changed else module
