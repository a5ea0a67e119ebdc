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

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Instruction, Literal, Module, Value
from jitc.ir.ops.linalg import NARROW_INTEGERS
from jitc.ir.types import TensorType
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import rebuild_module

# Ops that only move elements: they commute with the widening (matmul reshapes a vector
# operand after numpy's astype, for instance).
MOVES = frozenset({ops.RESHAPE, ops.TRANSPOSE, ops.BROADCAST_IN_DIM})


def _widening(value: Value) -> tuple[Value | np.ndarray, list[Instruction]] | None:
    """(the int8/uint8 value that `value` is the int32 conversion of, or the bytes of an int32
    constant, the moves after the conversion, first to last), or None."""
    moves: list[Instruction] = []
    inst = value.producer
    while inst.op in MOVES:
        moves.append(inst)
        inst = inst.operands[0].producer
    if inst.op is ops.CONSTANT:
        narrow = _narrow_constant(inst.attrs["value"].array)  # type: ignore[union-attr]
        return None if narrow is None else (narrow, moves[::-1])
    if inst.op is not ops.CONVERT or inst.operands[0].type.dtype not in NARROW_INTEGERS:
        return None
    return inst.operands[0], moves[::-1]


def _narrow_constant(array: np.ndarray) -> np.ndarray | None:
    """An int32 constant as bytes, when every value fits: folding has already widened a
    small byte constant (`w.astype(np.int32)` of an int8 array the function closes over)."""
    if array.dtype != np.int32 or array.size == 0:
        return None
    low, high = int(array.min()), int(array.max())
    for narrow in (np.int8, np.uint8):
        info = np.iinfo(narrow)
        if info.min <= low and high <= info.max:
            return array.astype(narrow)
    return None


def _moved(builder: Builder, source: Value | np.ndarray, moves: list[Instruction]) -> Value:
    """`source` through `moves`, which then move bytes."""
    if isinstance(source, np.ndarray):
        source = builder.emit(ops.CONSTANT, [], {"value": Literal(source)})
    for move in moves:
        result = move.results[0].type.with_dtype(source.type.dtype)
        source = builder.emit(move.op, [source], move.attrs, result)
    return source


def _zero_point(value: Value) -> tuple[Value, Value] | None:
    """(x, z) when `value` is `x - z` for a scalar z broadcast (an input's zero point)."""
    inst = value.producer
    if inst.op is not ops.SUB:
        return None
    x, z = inst.operands
    if z.producer.op is not ops.BROADCAST_IN_DIM or z.producer.operands[0].type.rank != 0:
        return None
    return x, z.producer.operands[0]


def _operand(value: Value
             ) -> tuple[Value | np.ndarray, list[Instruction], Value, Value | None] | None:
    """(byte source, moves, the widened value, zero point or None) of a product's operand."""
    split = _zero_point(value)
    if split is not None and _widening(split[0]) is not None:
        widened, zero = split
    else:
        widened, zero = value, None
    found = _widening(widened)
    return None if found is None else (*found, widened, zero)


def _correction(builder: Builder, widened: Value, zero: Value, contract: Sequence[int],
                out: TensorType, dims: list[int]) -> Value:
    """zero * (the sums of `widened` over `contract`), broadcast to `out` along `dims`."""
    sums = builder.emit(ops.REDUCE, [widened], {"dims": list(contract), "kind": "sum"})
    scaled = builder.emit(ops.MUL, [sums, builder.emit(
        ops.BROADCAST_IN_DIM, [zero], {"dims": []}, TensorType(dtypes.int32, sums.type.shape))])
    return builder.emit(ops.BROADCAST_IN_DIM, [scaled], {"dims": dims},
                        TensorType(dtypes.int32, out.shape))


def _narrow(builder: Builder, inst: Instruction, operands: Sequence[Value]
            ) -> Sequence[Value] | None:
    if inst.op is not ops.DOT_GENERAL or inst.attrs.get("result") or \
            inst.results[0].type.dtype is not dtypes.int32:
        return None
    found = [_operand(v) for v in operands]
    if found[0] is None or found[1] is None:
        return None
    (a, a_moves, a_wide, za), (b, b_moves, b_wide, zb) = found
    attrs = dict(inst.attrs)
    lc, rc = list(attrs["lhs_contract"]), list(attrs["rhs_contract"])  # type: ignore
    if (za is not None or zb is not None) and attrs["lhs_batch"]:
        return None  # zero points are folded into products without batch dimensions only
    out = inst.results[0].type
    attrs["result"] = "i32"
    product = builder.emit(ops.DOT_GENERAL, [_moved(builder, a, a_moves),
                                             _moved(builder, b, b_moves)],
                           attrs, out)  # type: ignore[arg-type]
    # (A - za)(B - zb) = AB - za colsum(B) - zb rowsum(A) + K za zb, all modulo 2^32.
    lhs_free = a_wide.type.rank - len(lc)
    if za is not None:
        dims = list(range(lhs_free, out.rank))
        product = builder.emit(ops.SUB, [product, _correction(builder, b_wide, za, rc, out,
                                                               dims)])
    if zb is not None:
        product = builder.emit(ops.SUB, [product, _correction(builder, a_wide, zb, lc, out,
                                                               list(range(lhs_free)))])
    if za is not None and zb is not None:
        depth = 1
        for d in lc:
            depth *= a_wide.type.shape[d]
        k = builder.emit(ops.CONSTANT, [], {"value": Literal(np.array(depth, np.int32))})
        both = builder.emit(ops.MUL, [builder.emit(ops.MUL, [za, zb]), k])
        product = builder.emit(ops.ADD, [product, builder.emit(
            ops.BROADCAST_IN_DIM, [both], {"dims": []}, TensorType(dtypes.int32, out.shape))])
    return [product]


@module_pass("integer_dots")
def integer_dots(module: Module) -> Module:
    return rebuild_module(module, _narrow)


__all__ = ["integer_dots"]
