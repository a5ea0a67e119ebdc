"""Constant folding, and the helpers that recognize and build constants (simplify uses them too).

A *constant* is a `constant` instruction, or a `broadcast_in_dim` of one; a *splat* is a constant
whose elements all have the same bits. Folding evaluates an instruction whose operands are all
constants with the op's own reference semantics (as the interpreter does) and puts a constant in
its place, under these limits:

- an elementwise op on splats (and a reshape, transpose, slice or reverse of a splat) becomes a
  splat of its result type, at any size: only the one element is computed;
- any other op folds only when its results have at most FOLD_LIMIT elements together and its
  operands at most OPERAND_LIMIT, so that folding never writes a large literal nor runs long;
- a splat of more than TINY elements is kept as `broadcast_in_dim` of a scalar constant rather
  than written out; `iota` folds when it has at most FOLD_LIMIT elements.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jitc.ir import ops
from jitc.ir.core import Builder, Instruction, Literal, Module, Value
from jitc.ir.opdef import AttrKind, OpDef, Trait
from jitc.ir.printer import INLINE_LITERAL_ELEMENTS
from jitc.ir.symbolic import at_most, symbols_of
from jitc.ir.types import TensorType
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import rebuild_module

FOLD_LIMIT = 1024
OPERAND_LIMIT = 65536
# Up to this size a constant is written as a literal even when it is a splat: it prints inline
# and costs less than a broadcast.
TINY = INLINE_LITERAL_ELEMENTS

# Ops whose result is a rearrangement of the elements of their single operand.
MOVES_ELEMENTS: frozenset[OpDef] = frozenset({ops.RESHAPE, ops.TRANSPOSE, ops.SLICE,
                                              ops.REVERSE})
NEVER_FOLDED: frozenset[OpDef] = frozenset({ops.PARAMETER, ops.CONSTANT, ops.BROADCAST_IN_DIM})


def _bits(array: np.ndarray) -> np.ndarray:
    # complex128 has no unsigned integer of its width: its bytes compare as a void type
    size = array.dtype.itemsize
    return array.view(f"u{size}" if size <= 8 else f"V{size}")


def splat_value(value: Value) -> np.ndarray | None:
    """The 0-d array that every element of `value` equals bit for bit, when `value` is a
    non-empty constant splat; else None."""
    inst = value.producer
    if inst.op is ops.BROADCAST_IN_DIM:
        # A symbolic extent may be 0 at the call, but a rewrite by the element's value is then
        # still right: it has no element to get wrong.
        return splat_value(inst.operands[0]) if value.type.size != 0 else None
    if inst.op is not ops.CONSTANT:
        return None
    literal = inst.attrs["value"]
    assert isinstance(literal, Literal)
    flat = literal.array.reshape(-1)
    if flat.size == 0:
        return None
    bits = _bits(flat)
    # The last element first: most literals that are not splats fail there without a full scan.
    if bits[-1] != bits[0] or not np.all(bits == bits[0]):
        return None
    return flat[0:1].reshape(())


def is_splat_of(value: Value, number: float) -> bool:
    """Whether `value` is a splat equal to `number` (either sign of zero matches 0)."""
    scalar = splat_value(value)
    return scalar is not None and bool(scalar == number)


def constant_array(value: Value, limit: int = FOLD_LIMIT) -> np.ndarray | None:
    """The elements of `value` when it is a literal, or a broadcast of a literal with at most
    `limit` elements; else None."""
    inst = value.producer
    if inst.op is ops.CONSTANT:
        literal = inst.attrs["value"]
        assert isinstance(literal, Literal)
        return literal.array
    if inst.op is ops.BROADCAST_IN_DIM and at_most(value.type.size, limit):
        operand = constant_array(inst.operands[0], limit)
        if operand is not None:
            return inst.op.reference([operand], inst.attrs, [value.type])[0]
    return None


def make_constant(builder: Builder, array: np.ndarray, type_: TensorType,
                  name_hint: str | None = None) -> Value:
    """A literal holding `array`, of exactly `type_` (its layout included)."""
    return builder.emit(ops.CONSTANT, [], {"value": Literal(array, type_.dtype)}, type_,
                        name_hint=name_hint)


def make_splat(builder: Builder, scalar: np.ndarray, type_: TensorType,
               name_hint: str | None = None) -> Value:
    """Every element `scalar`: a literal when tiny, else a broadcast scalar constant."""
    scalar = np.asarray(scalar, type_.dtype.numpy)
    if at_most(type_.size, TINY):
        return make_constant(builder, np.full(type_.shape, scalar), type_, name_hint)
    element = make_constant(builder, scalar, TensorType(type_.dtype, ()))
    return builder.emit(ops.BROADCAST_IN_DIM, [element], {"dims": []}, type_,
                        name_hint=name_hint)


def _evaluate(inst: Instruction, arrays: Sequence[np.ndarray],
              types: Sequence[TensorType]) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        outputs = inst.op.reference(arrays, inst.attrs, types)
    results = [np.asarray(out) for out in outputs]
    for out, t in zip(results, types, strict=True):
        assert out.shape == t.shape and out.dtype == t.dtype.numpy, (
            f"reference of {inst.op.name} gave {out.dtype}{out.shape} for {t}")
    return results


def _symbolic_attributes(inst: Instruction) -> bool:
    """Whether an attribute holds a symbolic extent, which only the call decides (`extent`
    of `n`, a slice to `n-1`): a reference cannot evaluate it now."""
    return any(spec.kind is AttrKind.DIMS and symbols_of(inst.attrs[spec.name])
               for spec in inst.op.attrs)


def _foldable(op: OpDef) -> bool:
    return (op not in NEVER_FOLDED and not op.has(Trait.SIDE_EFFECT)
            and not op.has(Trait.REGIONS)
            and all(a.kind is not AttrKind.FUNCTION for a in op.attrs))


def _fold_splats(builder: Builder, inst: Instruction,
                 operands: Sequence[Value]) -> Sequence[Value] | None:
    if not operands or not (inst.op.has(Trait.ELEMENTWISE) or inst.op in MOVES_ELEMENTS):
        return None
    scalars = [splat_value(v) for v in operands]
    if any(s is None for s in scalars):
        return None
    result = inst.result
    if inst.op in MOVES_ELEMENTS:
        element = scalars[0]
    else:
        (element,) = _evaluate(inst, scalars, [TensorType(result.type.dtype, ())])
    return [make_splat(builder, element, result.type, result.name_hint)]


def _fold(builder: Builder, inst: Instruction,
          operands: Sequence[Value]) -> Sequence[Value] | None:
    if not _foldable(inst.op) or _symbolic_attributes(inst):
        return None
    if inst.operands and all(v.type.size == 0 for v in inst.results):
        # Nothing to compute: code generators then never see an op without elements (an
        # empty concatenate has no operand to read an element from).
        return [make_constant(builder, np.zeros(v.type.shape, v.type.dtype.numpy), v.type,
                              v.name_hint) for v in inst.results]
    folded = _fold_splats(builder, inst, operands)
    if folded is not None:
        return folded
    types = [v.type for v in inst.results]
    if not at_most(sum(t.size for t in types), FOLD_LIMIT):
        return None
    arrays = [constant_array(v) for v in operands]
    if any(a is None for a in arrays) or sum(a.size for a in arrays) > OPERAND_LIMIT:
        return None
    outputs = _evaluate(inst, arrays, types)
    return [make_constant(builder, out, v.type, v.name_hint)
            for out, v in zip(outputs, inst.results)]


@module_pass("fold")
def fold(module: Module) -> Module:
    return rebuild_module(module, _fold)
