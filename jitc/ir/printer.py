"""The IR's text form. `jitc.ir.parser` reads exactly what this writes.

    func @f {
      %x = parameter() index=0 : f32[4,8]{1,0}
      %0 = tanh(%x) : f32[4,8]{1,0}  # model.py:3 (f)
      return %0
    }

Small literals are written inline; larger ones go to a `const @cN` declaration holding their
bytes in hex, which `elide_constants=True` shortens to a size for human readers.
"""

from __future__ import annotations

import json
import re

import numpy as np

from jitc.ir.core import Function, Instruction, Literal, Module, Value
from jitc.ir.opdef import Attr, AttrKind

INLINE_LITERAL_ELEMENTS = 16
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def format_scalar(value: object, dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return "true" if value else "false"
    if dtype.kind == "f":
        return str(dtype.type(value))  # numpy's shortest text that reads back to the same value
    return str(int(value))  # type: ignore[call-overload]


def _inline_literal_ok(array: np.ndarray) -> bool:
    if array.size > INLINE_LITERAL_ELEMENTS:
        return False
    if array.dtype.kind == "c":  # written as bytes: no scalar syntax for a pair
        return False
    if array.dtype.kind != "f":
        return True
    nans = array[np.isnan(array)]
    canonical = np.array(np.nan, array.dtype).tobytes()
    return all(n.tobytes() == canonical for n in nans)


def format_literal(array: np.ndarray) -> str:
    if array.ndim == 0:
        return format_scalar(array[()], array.dtype)
    return "[" + ", ".join(format_literal(sub) for sub in array) + "]"


UNDEFINED = "%<undefined>"


def _use(names: dict[int, str], value: Value) -> str:
    """The name of a used value; one defined outside the function (an IR error) gets none."""
    return names.get(id(value), UNDEFINED)



def value_names(fn: Function) -> dict[int, str]:
    """id(value) -> the name the printer gives it without its `%`: its name hint when that is
    an identifier not taken yet, else the lowest free number."""
    names: dict[int, str] = {}
    used: set[str] = set()
    counter = 0
    for v in (v for inst in fn.body for v in inst.results):
        hint = v.name_hint
        if hint and _IDENT.match(hint) and hint not in used:
            chosen = hint
        else:
            while str(counter) in used:
                counter += 1
            chosen = str(counter)
        used.add(chosen)
        names[id(v)] = chosen
    return names

class _Printer:
    def __init__(self, module: Module, elide_constants: bool) -> None:
        self.module = module
        self.elide = elide_constants
        self.pool: dict[Literal, str] = {}

    def literal(self, literal: Literal) -> str:
        if _inline_literal_ok(literal.array):
            return format_literal(literal.array)
        if literal not in self.pool:
            self.pool[literal] = f"@c{len(self.pool)}"
        return self.pool[literal]

    def attr(self, spec: Attr, value: object) -> str:
        kind = spec.kind
        if kind is AttrKind.INTS or kind is AttrKind.DIMS:
            return "[" + ",".join(str(v) for v in value) + "]"  # type: ignore[union-attr]
        if kind is AttrKind.INT_PAIRS:
            return "[" + ",".join(f"[{a},{b}]" for a, b in value) + "]"  # type: ignore
        if kind is AttrKind.BOOL:
            return "true" if value else "false"
        if kind is AttrKind.FLOAT:
            return repr(float(value))  # type: ignore[arg-type]
        if kind is AttrKind.STRING:
            return json.dumps(value)
        if kind is AttrKind.LITERAL:
            assert isinstance(value, Literal)
            return self.literal(value)
        if kind is AttrKind.FUNCTION:
            return f"@{value}"
        if kind is AttrKind.FUNCTIONS:
            return "[" + ", ".join(f"@{v}" for v in value) + "]"  # type: ignore[union-attr]
        return str(value)

    def function(self, fn: Function) -> list[str]:
        # Every result is named before any instruction is printed, so that the verifier can
        # quote an instruction that uses a value before its definition.
        names = {key: "%" + name for key, name in value_names(fn).items()}

        lines = [f"func @{fn.name} {{"]
        for inst in fn.body:
            lines.append("  " + self.instruction(inst, names))
        lines.append("  return " + ", ".join(_use(names, v) for v in fn.outputs))
        lines.append("}")
        return lines

    def instruction(self, inst: Instruction, names: dict[int, str]) -> str:
        operands = ", ".join(_use(names, v) for v in inst.operands)
        results = ", ".join(names[id(v)] for v in inst.results)
        # A missing attribute is skipped rather than fatal: broken instructions get printed in
        # the verifier's messages.
        attrs = "".join(f" {spec.name}={self.attr(spec, inst.attrs[spec.name])}"
                        for spec in inst.op.attrs
                        if spec.name in inst.attrs and inst.attrs[spec.name] != spec.default)
        types = ", ".join(str(v.type) for v in inst.results)
        text = f"{results} = {inst.op.name}({operands}){attrs} : {types}"
        return f"{text}  # {inst.loc}" if inst.loc else text

    def module_text(self) -> str:
        body: list[str] = []
        for fn in self.module.functions.values():
            if body:
                body.append("")
            body.extend(self.function(fn))
        head = []
        for literal, ref in self.pool.items():
            data = f"<{literal.array.nbytes} bytes>" if self.elide else \
                f'hex"{literal.array.tobytes().hex()}"'
            head.append(f"const {ref} : {literal.type} = {data}")
        constraints = [f"constraint {c}" for c in self.module.constraints]
        head = constraints + head
        if head:
            head.append("")
        return "\n".join(head + body) + "\n"


def print_module(module: Module, elide_constants: bool = False) -> str:
    """The module as text; with `elide_constants` large constants show only their size."""
    order = [module.entry] + [f for n, f in module.functions.items() if n != module.entry_name]
    ordered = Module(order, module.entry_name, module.constraints)
    return _Printer(ordered, elide_constants).module_text()
