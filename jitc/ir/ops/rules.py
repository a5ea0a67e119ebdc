"""Small building blocks shared by the shape-and-dtype rules of the op table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jitc.ir import dtypes, symbolic
from jitc.ir.dtypes import DType, Kind
from jitc.ir.opdef import IRTypeError
from jitc.ir.symbolic import Dim, DimLike
from jitc.ir.types import TensorType

NUMERIC = frozenset({Kind.SIGNED, Kind.UNSIGNED, Kind.FLOAT})
INTEGER = frozenset({Kind.SIGNED, Kind.UNSIGNED})
FLOAT = frozenset({Kind.FLOAT})
LOGICAL = frozenset({Kind.BOOL, Kind.SIGNED, Kind.UNSIGNED})
ANY = frozenset(Kind)
# The ops whose numpy meaning extends to complex values (jitc/passes/complex_split.py).
ARITHMETIC = NUMERIC | {Kind.COMPLEX}
INEXACT = FLOAT | {Kind.COMPLEX}

KIND_WORDS = {NUMERIC: "a numeric", INTEGER: "an integer", FLOAT: "a floating-point",
              LOGICAL: "a bool or integer", ANY: "any", ARITHMETIC: "a numeric or complex",
              INEXACT: "a floating-point or complex"}


def broadcast_shapes(shapes: Sequence[tuple[DimLike, ...]]) -> tuple[DimLike, ...]:
    """numpy's broadcasting of several shapes, or IRTypeError naming them all.

    Two different extents of which one is symbolic broadcast only when equal: the rule
    requires that (see docs/dynamic-shapes.md) rather than guess which one is 1."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[DimLike] = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            static = {d for d in sizes if not isinstance(d, Dim)}
            if len(static) > 1:
                listed = " with ".join(_shape_text(s) for s in shapes)
                raise IRTypeError(f"cannot broadcast shapes {listed}")
            chosen = static.pop() if static else min(sizes, key=str)
            listed = " with ".join(_shape_text(s) for s in shapes)
            for other in sorted(sizes - {chosen}, key=str):
                require_equal(other, chosen, f"broadcasting shapes {listed}")
            sizes = {chosen}
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _shape_text(shape: Sequence[DimLike]) -> str:
    return "[" + ",".join(map(str, shape)) + "]"


def is_symbolic(*dims: DimLike) -> bool:
    return any(isinstance(d, Dim) for d in dims)


def require_equal(a: DimLike, b: DimLike, why: str) -> None:
    """`a == b`, decided now when it can be, else required of the call (or IRTypeError)."""
    try:
        symbolic.require(symbolic.equal(a, b), why)
    except symbolic.ConstraintError as exc:
        raise IRTypeError(str(exc)) from None


def require_at_least(a: DimLike, b: DimLike, why: str) -> None:
    """`a >= b`, decided now when it can be, else required of the call (or IRTypeError)."""
    try:
        symbolic.require(symbolic.at_least(a, b), why)
    except symbolic.ConstraintError as exc:
        raise IRTypeError(str(exc)) from None


def require_same_shape(op: str, types: Sequence[TensorType]) -> bool:
    """Whether the operands' shapes are the same, requiring the equality of symbolic
    extents that differ; False when they differ in rank or in a static extent."""
    first = types[0].shape
    for t in types[1:]:
        if len(t.shape) != len(first):
            return False
        for a, b in zip(t.shape, first):
            if a == b:
                continue
            if not is_symbolic(a, b):
                return False
            listed = ", ".join(t.short() for t in types)
            require_equal(a, b, f"{op} of {listed}")
    return True


def same_dtype(op: str, types: Sequence[TensorType]) -> DType:
    first = types[0].dtype
    for t in types[1:]:
        if t.dtype is not first:
            listed = ", ".join(t.short() for t in types)
            raise IRTypeError(f"{op}: operand dtypes differ ({listed}); convert them first")
    return first


def check_kind(op: str, dtype: DType, kinds: frozenset[Kind]) -> None:
    if dtype.kind not in kinds:
        words = KIND_WORDS.get(kinds) or "a " + " or ".join(k.value for k in Kind if k in kinds)
        raise IRTypeError(f"{op} needs {words} dtype, got {dtype.name}")


def check_axes(op: str, axes: Iterable[int], rank: int, what: str = "dimension") -> None:
    seen = set()
    for axis in axes:
        if not 0 <= axis < rank:
            raise IRTypeError(f"{op}: {what} {axis} is out of range for rank {rank}")
        if axis in seen:
            raise IRTypeError(f"{op}: {what} {axis} is repeated")
        seen.add(axis)


def check_scalar_index(op: str, t: TensorType) -> None:
    if t.rank != 0 or not t.dtype.is_int:
        raise IRTypeError(f"{op}: start indices must be integer scalars, got {t.short()}")


def tensor(dtype: DType, shape: Iterable[int]) -> TensorType:
    return TensorType(dtype, tuple(shape))


def declared_one(op: str, declared: Sequence[TensorType] | None) -> TensorType:
    if declared is None or len(declared) != 1:
        raise IRTypeError(f"{op} needs exactly one declared result type")
    return declared[0]


BOOL = dtypes.bool_
