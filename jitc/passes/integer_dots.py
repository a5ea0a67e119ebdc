"""Products of bytes widened to int32 become one byte product with an int32 result.

numpy has no mixed-width product, so int8 code spells it `a.astype(np.int32) @
b.astype(np.int32)` (or np.dot, np.matmul, np.einsum): two widening converts, then an int32
dot_general. Reading four times the bytes and multiplying 32-bit lanes wastes what makes 8-bit
inference fast, so this pass rewrites

    %x = convert(%a) : s32[..]        (%a: s8 or u8)
    %y = convert(%b) : s32[..]        (%b: s8 or u8)
    %p = dot_general(%x, %y) ...      : s32[..]

into `dot_general(%a, %b) ... result=i32`, which backends lower to byte instructions (VNNI
`vpdpbusd` on the CPU). The result is the same bits: every product of two bytes fits in int32
exactly and int32 addition wraps modulo 2^32 in any order, so summing in int32, as numpy
does, gives numpy's result even when the sum overflows. The converts stay when something else
reads them (DCE drops them otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Instruction, Module, Value
from jitc.ir.ops.linalg import NARROW_INTEGERS
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import rebuild_module

# Ops that only move elements: they commute with the widening (matmul reshapes a vector
# operand after numpy's astype, for instance).
MOVES = frozenset({ops.RESHAPE, ops.TRANSPOSE, ops.BROADCAST_IN_DIM})


def _widening(value: Value) -> tuple[Value, list[Instruction]] | None:
    """(the int8/uint8 value that `value` is the int32 conversion of, the moves after the
    conversion, first to last), or None."""
    moves: list[Instruction] = []
    inst = value.producer
    while inst.op in MOVES:
        moves.append(inst)
        inst = inst.operands[0].producer
    if inst.op is not ops.CONVERT or inst.operands[0].type.dtype not in NARROW_INTEGERS:
        return None
    return inst.operands[0], moves[::-1]


def _moved(builder: Builder, source: Value, moves: list[Instruction]) -> Value:
    """`source` through `moves`, which then move bytes."""
    for move in moves:
        result = move.results[0].type.with_dtype(source.type.dtype)
        source = builder.emit(move.op, [source], move.attrs, result)
    return source


def _narrow(builder: Builder, inst: Instruction, operands: Sequence[Value]
            ) -> Sequence[Value] | None:
    if inst.op is not ops.DOT_GENERAL or inst.attrs.get("result") or \
            inst.results[0].type.dtype is not dtypes.int32:
        return None
    found = [_widening(v) for v in operands]
    if any(f is None for f in found):
        return None
    narrow = [_moved(builder, *f) for f in found]  # type: ignore[misc]
    attrs = dict(inst.attrs)
    attrs["result"] = "i32"
    return [builder.emit(ops.DOT_GENERAL, narrow, attrs,  # type: ignore[arg-type]
                         inst.results[0].type, name_hint=inst.results[0].name_hint)]


@module_pass("integer_dots")
def integer_dots(module: Module) -> Module:
    return rebuild_module(module, _narrow)


__all__ = ["integer_dots"]
