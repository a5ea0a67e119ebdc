"""Small building blocks shared by the shape-and-dtype rules of the op table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jitc.ir import dtypes
from jitc.ir.dtypes import DType, Kind
from jitc.ir.opdef import IRTypeError
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


def broadcast_shapes(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """numpy's broadcasting of several shapes, or IRTypeError naming them all."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            listed = " with ".join("[" + ",".join(map(str, s)) + "]" for s in shapes)
            raise IRTypeError(f"cannot broadcast shapes {listed}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


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
