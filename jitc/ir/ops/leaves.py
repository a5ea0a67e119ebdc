"""Ops without operands: function parameters, constants, iota and extent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jitc.ir import dtypes
from jitc.ir.core import Literal
from jitc.ir.opdef import Attr, AttrKind, IRTypeError, OpDef, Trait, register
from jitc.ir.ops.rules import NUMERIC, check_kind, declared_one, tensor
from jitc.ir.types import TensorType

LEAF = frozenset({Trait.NO_OPERANDS})


def _parameter_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                    declared: Sequence[TensorType] | None) -> list[TensorType]:
    result = declared_one("parameter", declared)
    if attrs["index"] < 0:
        raise IRTypeError(f"parameter index {attrs['index']} is negative")
    return [tensor(result.dtype, result.shape)]


def _parameter_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                         results: Sequence[TensorType]) -> list[np.ndarray]:
    raise RuntimeError("parameters are bound by the caller, not evaluated")


def _constant_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                   declared: Sequence[TensorType] | None) -> list[TensorType]:
    literal = attrs["value"]
    assert isinstance(literal, Literal)
    return [literal.type]


def _constant_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                        results: Sequence[TensorType]) -> list[np.ndarray]:
    literal = attrs["value"]
    assert isinstance(literal, Literal)
    return [literal.array]


def _iota_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
               declared: Sequence[TensorType] | None) -> list[TensorType]:
    result = declared_one("iota", declared)
    check_kind("iota", result.dtype, NUMERIC)
    if not 0 <= attrs["dimension"] < result.rank:
        raise IRTypeError(f"iota: dimension {attrs['dimension']} is out of range for "
                          f"{result.short()}")
    return [tensor(result.dtype, result.shape)]


def _iota_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                    results: Sequence[TensorType]) -> list[np.ndarray]:
    result = results[0]
    axis = attrs["dimension"]
    line = np.arange(result.shape[axis]).astype(result.dtype.numpy)
    view = [1] * result.rank
    view[axis] = result.shape[axis]
    return [np.broadcast_to(line.reshape(view), result.shape)]


def _extent_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                 declared: Sequence[TensorType] | None) -> list[TensorType]:
    if len(attrs["size"]) != 1:  # type: ignore[arg-type]
        raise IRTypeError(f"extent: size holds one extent, got {len(attrs['size'])}")
    return [tensor(dtypes.int64, ())]


def _extent_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                      results: Sequence[TensorType]) -> list[np.ndarray]:
    # The interpreter hands over `size` with the call's symbol values substituted.
    return [np.asarray(attrs["size"][0], np.int64)]  # type: ignore[index]


PARAMETER = register(OpDef(
    "parameter", 0, _parameter_rule, _parameter_reference,
    "the function argument number `index`", (Attr("index", AttrKind.INT),),
    LEAF | {Trait.TYPED_RESULT}))
CONSTANT = register(OpDef(
    "constant", 0, _constant_rule, _constant_reference,
    "a literal array", (Attr("value", AttrKind.LITERAL),), LEAF))
IOTA = register(OpDef(
    "iota", 0, _iota_rule, _iota_reference,
    "each element is its own index along `dimension`", (Attr("dimension", AttrKind.INT),),
    LEAF | {Trait.TYPED_RESULT}))
# A symbolic extent as a value (`x / x.shape[0]`, the count of a mean): the call's symbols
# decide it. A static one is a constant, and constant folding makes it one.
EXTENT = register(OpDef(
    "extent", 0, _extent_rule, _extent_reference,
    "the value of the extent expression `size` (one entry, symbols allowed) as an i64 scalar",
    (Attr("size", AttrKind.DIMS),), LEAF))
