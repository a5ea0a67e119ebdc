"""SSA IR: values, instructions, functions, modules and the builder that creates them.

Values are defined exactly once, by an instruction, and used only after their definition. An
instruction never changes after it is built: passes build new instructions and new functions.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from jitc.ir import dtypes
from jitc.ir.symbolic import Constraint, checking
from jitc.ir.types import TensorType

if TYPE_CHECKING:
    from jitc.ir.opdef import OpDef


@dataclass(frozen=True, slots=True)
class Location:
    """Where the user's code created a value: printed after each instruction."""

    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        text = f"{os.path.basename(self.file)}:{self.line}"
        return f"{text} ({self.function})" if self.function else text


class Literal:
    """An immutable array constant, compared and hashed by value (bit pattern)."""

    __slots__ = ("_key", "array")

    def __init__(self, value: object, dtype: dtypes.DType | None = None) -> None:
        array = np.asarray(value, dtype=None if dtype is None else dtype.numpy)
        dtypes.from_numpy(array.dtype)
        array = np.array(array, copy=True, order="C")
        array.setflags(write=False)
        self.array = array
        self._key = (array.dtype.str, array.shape, _bit_pattern(array))

    @property
    def type(self) -> TensorType:
        return TensorType(dtypes.from_numpy(self.array.dtype), self.array.shape)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Literal) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Literal({self.type}, {self.array.size} elements)"


# Above this size a literal is keyed by a digest of its bytes rather than a copy of them: the
# weights of a model would otherwise be held a second time while traced and compiled.
_DIGEST_BYTES = 64


def _bit_pattern(array: np.ndarray) -> bytes:
    if array.nbytes <= _DIGEST_BYTES:
        return array.tobytes()
    return hashlib.sha256(array.reshape(-1).view(np.uint8).data).digest()


class Value:
    """An SSA value: one result of one instruction."""

    __slots__ = ("index", "name_hint", "producer", "type")

    def __init__(self, type: TensorType, producer: Instruction, index: int,
                 name_hint: str | None = None) -> None:
        self.type = type
        self.producer = producer
        self.index = index
        self.name_hint = name_hint

    def __repr__(self) -> str:
        return f"<Value {self.name_hint or ''}: {self.type} from {self.producer.op.name}>"


class Instruction:
    """`results = op(operands) attrs` with explicit result types."""

    __slots__ = ("attrs", "loc", "op", "operands", "results")

    def __init__(self, op: OpDef, operands: Iterable[Value], attrs: Mapping[str, object],
                 result_types: Iterable[TensorType], loc: Location | None = None,
                 name_hints: Iterable[str | None] = ()) -> None:
        self.op = op
        self.operands: tuple[Value, ...] = tuple(operands)
        self.attrs: dict[str, object] = dict(attrs)
        hints = list(name_hints)
        self.results: tuple[Value, ...] = tuple(
            Value(t, self, i, hints[i] if i < len(hints) else None)
            for i, t in enumerate(result_types))
        self.loc = loc

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.op.name} has {len(self.results)} results, not one")
        return self.results[0]

    def attr_key(self) -> tuple:
        """A hashable summary of the attributes (for CSE and equality)."""
        return tuple(sorted(self.attrs.items()))

    def __repr__(self) -> str:
        return f"<Instruction {self.op.name}>"


class Function:
    """A list of instructions in definition order; parameters are `parameter` instructions."""

    __slots__ = ("body", "name", "outputs")

    def __init__(self, name: str, body: Iterable[Instruction] = (),
                 outputs: Iterable[Value] = ()) -> None:
        self.name = name
        self.body: list[Instruction] = list(body)
        self.outputs: list[Value] = list(outputs)

    @property
    def parameters(self) -> list[Value]:
        params = [i for i in self.body if i.op.name == "parameter"]
        params.sort(key=lambda inst: inst.attrs["index"])
        return [p.result for p in params]

    @property
    def parameter_types(self) -> list[TensorType]:
        return [p.type for p in self.parameters]

    @property
    def output_types(self) -> list[TensorType]:
        return [v.type for v in self.outputs]

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.body)

    def __repr__(self) -> str:
        return f"<Function @{self.name}: {len(self.body)} instructions>"


class Module:
    """Functions by name; `entry` is the one a caller runs. `constraints` are the facts about
    symbolic dimensions that its instructions rely on and that each call checks."""

    __slots__ = ("constraints", "entry_name", "functions")

    def __init__(self, functions: Iterable[Function] = (), entry: str | None = None,
                 constraints: Iterable[Constraint] = ()) -> None:
        self.constraints: tuple[Constraint, ...] = tuple(dict.fromkeys(constraints))
        self.functions: dict[str, Function] = {}
        for fn in functions:
            if fn.name in self.functions:
                raise ValueError(f"duplicate function @{fn.name}")
            self.functions[fn.name] = fn
        self.entry_name = entry if entry is not None else next(iter(self.functions), "")

    @property
    def entry(self) -> Function:
        return self.functions[self.entry_name]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Module):
            return NotImplemented
        return structure(self) == structure(other)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        from jitc.ir.printer import print_module
        return print_module(self)

    def __repr__(self) -> str:
        return f"<Module entry=@{self.entry_name} functions={list(self.functions)}>"


def structure(module: Module) -> tuple:
    """Everything that defines a module's meaning, with values replaced by positions.

    Names and source locations are not part of it, nor is the order of the functions (the
    printer puts the entry first) or of the constraints: two modules that differ only in those
    are equal.
    """
    functions = tuple((name, *function_structure(module.functions[name]))
                      for name in sorted(module.functions))
    return (module.entry_name, functions, frozenset(module.constraints))


def function_structure(fn: Function, attr_key: Callable[[Instruction], tuple] | None = None
                       ) -> tuple[tuple, tuple]:
    """A function's instructions and outputs with values replaced by positions; `attr_key`
    summarizes an instruction's attributes (default: `Instruction.attr_key`)."""
    key = attr_key or Instruction.attr_key
    position: dict[int, tuple[int, int]] = {}
    body = []
    for n, inst in enumerate(fn.body):
        operands = tuple(position[id(v)] for v in inst.operands)
        body.append((inst.op.name, operands, key(inst), tuple(v.type for v in inst.results)))
        for v in inst.results:
            position[id(v)] = (n, v.index)
    return tuple(body), tuple(position[id(v)] for v in fn.outputs)


def transform_module(module: Module, transform: Callable[[Module], Module]) -> Module:
    """`transform(module)` (a pass) with its shape rules granted exactly the module's
    constraints, which the result keeps: a pass neither adds assumptions nor drops them."""
    with checking(module.constraints):
        result = transform(module)
    if result is module or result.constraints == module.constraints:
        return result
    return Module(result.functions.values(), result.entry_name, module.constraints)


def reachable_functions(functions: Mapping[str, Function], root: str) -> dict[str, Function]:
    """`root` and every function it runs (through control flow or calls), transitively: root
    first, then in the order they are found."""
    found = {root: functions[root]}
    pending = [found[root]]
    while pending:
        for inst in pending.pop().body:
            for callee in inst.op.called_functions(inst.attrs):
                if callee not in found:
                    found[callee] = functions[callee]
                    pending.append(found[callee])
    return found


class Builder:
    """Appends instructions to a function, inferring result types from the op table."""

    def __init__(self, function: Function) -> None:
        self.function = function
        self.loc: Location | None = None

    def emit_multi(self, op: OpDef, operands: Iterable[Value] = (),
                   attrs: Mapping[str, object] | None = None,
                   result_types: Iterable[TensorType] | None = None,
                   loc: Location | None = None,
                   name_hints: Iterable[str | None] = ()) -> tuple[Value, ...]:
        operands = tuple(operands)
        normalized = op.normalize_attrs(attrs or {})
        declared = None if result_types is None else tuple(result_types)
        types = op.result_types([v.type for v in operands], normalized, declared)
        inst = Instruction(op, operands, normalized, types, loc or self.loc, name_hints)
        self.function.body.append(inst)
        return inst.results

    def emit(self, op: OpDef, operands: Iterable[Value] = (),
             attrs: Mapping[str, object] | None = None,
             result_type: TensorType | None = None, loc: Location | None = None,
             name_hint: str | None = None) -> Value:
        declared = None if result_type is None else (result_type,)
        (value,) = self.emit_multi(op, operands, attrs, declared, loc, (name_hint,))
        return value
