"""The op-table machinery: what every op declares about itself, in one place.

An `OpDef` carries the op's operand count, its attributes (name, kind, default), its traits, its
shape-and-dtype rule and its numpy reference semantics. Printing, parsing, verification,
interpretation and tracing all read these declarations; none of them knows an op by itself.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from jitc.ir.core import Literal
from jitc.ir.symbolic import ConstraintError, Dim
from jitc.ir.types import TensorType


class IRTypeError(ValueError):
    """An op was given operands or attributes its shape-and-dtype rule rejects."""


class Trait(enum.Enum):
    ELEMENTWISE = enum.auto()       # output element i depends only on operand elements i
    BROADCASTS = enum.auto()        # operands may have numpy-broadcastable shapes until legalized
    COMMUTATIVE = enum.auto()
    TRANSCENDENTAL = enum.auto()    # expensive per element: never duplicate into consumers
    NO_OPERANDS = enum.auto()       # a leaf (parameter, constant, iota)
    SIDE_EFFECT = enum.auto()       # never removed by DCE even when unused
    TYPED_RESULT = enum.auto()      # the result type is part of the instruction, not inferred
    CALLS = enum.auto()             # runs the function named by its `calls` attribute
    REGIONS = enum.auto()           # control flow: runs functions of the module (`control`)


class AttrKind(enum.Enum):
    INT = "int"
    INTS = "ints"
    DIMS = "dims"           # extents: ints or symbolic dimensions
    INT_PAIRS = "int_pairs"
    BOOL = "bool"
    FLOAT = "float"
    ENUM = "enum"
    STRING = "string"
    LITERAL = "literal"
    FUNCTION = "function"
    FUNCTIONS = "functions"


REQUIRED = object()


@dataclass(frozen=True)
class Attr:
    name: str
    kind: AttrKind
    default: object = REQUIRED
    choices: tuple[str, ...] = ()

    def normalize(self, value: object) -> object:
        """The canonical, hashable form of a value of this attribute, or IRTypeError."""
        kind = self.kind
        try:
            if kind is AttrKind.INT:
                return _as_int(value)
            if kind is AttrKind.INTS:
                return tuple(_as_int(v) for v in value)  # type: ignore[union-attr]
            if kind is AttrKind.DIMS:
                return tuple(v if isinstance(v, Dim) else _as_int(v)
                             for v in value)  # type: ignore[union-attr]
            if kind is AttrKind.INT_PAIRS:
                pairs = tuple(tuple(_as_int(x) for x in p) for p in value)  # type: ignore
                if any(len(p) != 2 for p in pairs):
                    raise TypeError("each element must be a pair")
                return pairs
            if kind is AttrKind.BOOL:
                if not isinstance(value, (bool, np.bool_)):
                    raise TypeError("expected true or false")
                return bool(value)
            if kind is AttrKind.FLOAT:
                return float(value)  # type: ignore[arg-type]
            if kind is AttrKind.ENUM:
                if value not in self.choices:
                    raise TypeError(f"expected one of {', '.join(self.choices)}")
                return str(value)
            if kind is AttrKind.STRING or kind is AttrKind.FUNCTION:
                if not isinstance(value, str):
                    raise TypeError("expected a string")
                return value
            if kind is AttrKind.FUNCTIONS:
                if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                    raise TypeError("expected a list of function names")
                return tuple(value)
            if kind is AttrKind.LITERAL:
                return value if isinstance(value, Literal) else Literal(value)
        except (TypeError, ValueError) as exc:
            raise IRTypeError(f"attribute {self.name}={value!r}: {exc}") from None
        raise AssertionError(kind)


def _as_int(value: object) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"expected an integer, got {value!r}")
    return int(value)


# Runs one function of the module on arrays: what control flow ops evaluate their regions with.
CallFunction = Callable[[str, Sequence[np.ndarray]], list[np.ndarray]]


@dataclass(frozen=True)
class ControlFlow:
    """What a control flow op declares besides its shape rule: how it runs its regions (the
    functions its attributes name) and what their signatures must be.

    `evaluate(attrs, operands, call)` gives the results, calling regions through `call`;
    `check(attrs, operand_types, result_types, signature)` returns the problem or None, where
    `signature(name)` is the (parameter types, output types) of a function of the module."""

    evaluate: Callable[[Mapping[str, object], Sequence[np.ndarray], CallFunction],
                       list[np.ndarray]]
    check: Callable[..., str | None]


ShapeRule = Callable[[Sequence[TensorType], Mapping[str, object], Sequence[TensorType] | None],
                     Sequence[TensorType]]
Reference = Callable[[Sequence[np.ndarray], Mapping[str, object], Sequence[TensorType]],
                     Sequence[np.ndarray]]

VARIADIC = -1       # one operand or more
ANY_COUNT = -2      # zero operands or more


@dataclass(frozen=True, eq=False)
class OpDef:
    """One operation of the IR. `num_operands` is a count, or VARIADIC (at least one)."""

    name: str
    num_operands: int
    rule: ShapeRule
    reference: Reference
    summary: str
    attrs: tuple[Attr, ...] = ()
    traits: frozenset[Trait] = field(default_factory=frozenset)
    control: ControlFlow | None = None  # for REGIONS ops

    def __repr__(self) -> str:
        return f"OpDef({self.name})"

    def has(self, trait: Trait) -> bool:
        return trait in self.traits

    def called_functions(self, attrs: Mapping[str, object]) -> list[str]:
        """The functions of the module an instruction with these attributes refers to."""
        names: list[str] = []
        for spec in self.attrs:
            if spec.kind is AttrKind.FUNCTION:
                names.append(attrs[spec.name])  # type: ignore[arg-type]
            elif spec.kind is AttrKind.FUNCTIONS:
                names.extend(attrs[spec.name])  # type: ignore[arg-type]
        return names

    @functools.cached_property
    def attr_names(self) -> frozenset[str]:
        return frozenset(a.name for a in self.attrs)

    def normalize_attrs(self, attrs: Mapping[str, object]) -> dict[str, object]:
        if not self.attr_names.issuperset(attrs):
            unknown = sorted(set(attrs) - self.attr_names)
            raise IRTypeError(f"{self.name}: unknown attribute {unknown[0]!r}; "
                              f"{self.name} takes {sorted(self.attr_names) or 'no attributes'}")
        out: dict[str, object] = {}
        for attr in self.attrs:
            if attr.name in attrs:
                out[attr.name] = attr.normalize(attrs[attr.name])
            elif attr.default is REQUIRED:
                raise IRTypeError(f"{self.name}: missing attribute {attr.name!r}")
            else:
                out[attr.name] = attr.default
        return out

    def check_arity(self, count: int) -> None:
        if self.num_operands == ANY_COUNT:
            return
        if self.num_operands == VARIADIC:
            if count < 1:
                raise IRTypeError(f"{self.name} takes at least one operand")
        elif count != self.num_operands:
            raise IRTypeError(f"{self.name} takes {self.num_operands} operand(s), got {count}")

    def result_types(self, operand_types: Sequence[TensorType], attrs: Mapping[str, object],
                     declared: Sequence[TensorType] | None = None) -> tuple[TensorType, ...]:
        """The result types of this op; `declared` keeps its layouts once its shapes check."""
        self.check_arity(len(operand_types))
        if self.has(Trait.TYPED_RESULT) and declared is None:
            raise IRTypeError(f"{self.name} needs its result type to be given")
        try:
            inferred = tuple(self.rule(operand_types, attrs, declared))
        except ConstraintError as exc:
            raise IRTypeError(f"{self.name}: {exc}") from None
        if declared is None:
            return inferred
        declared = tuple(declared)
        if len(declared) != len(inferred):
            raise IRTypeError(f"{self.name} has {len(inferred)} result(s), "
                              f"{len(declared)} type(s) were given")
        for want, got in zip(inferred, declared):
            if not want.same_shape_and_dtype(got):
                raise IRTypeError(f"{self.name}: result type {got} does not match the "
                                  f"inferred {want.short()}")
            if sorted(got.layout) != list(range(got.rank)):
                raise IRTypeError(f"{self.name}: layout {{{','.join(map(str, got.layout))}}} "
                                  f"is not a permutation of the {got.rank} dimensions")
        return declared


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} registered twice")
    OPS[op.name] = op
    return op


def lookup(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise IRTypeError(f"unknown op {name!r}") from None
