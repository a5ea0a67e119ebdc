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


def _widened_byte(value: Value) -> Value | None:
    """The int8/uint8 value that `value` is the int32 conversion of, or None."""
    inst = value.producer
    if inst.op is not ops.CONVERT:
        return None
    source = inst.operands[0]
    return source if source.type.dtype in NARROW_INTEGERS else None


def _narrow(builder: Builder, inst: Instruction, operands: Sequence[Value]
            ) -> Sequence[Value] | None:
    if inst.op is not ops.DOT_GENERAL or inst.attrs.get("result") or \
            inst.results[0].type.dtype is not dtypes.int32:
        return None
    narrow = [_widened_byte(v) for v in operands]
    if any(v is None for v in narrow):
        return None
    attrs = dict(inst.attrs)
    attrs["result"] = "i32"
    return [builder.emit(ops.DOT_GENERAL, narrow, attrs,  # type: ignore[arg-type]
                         inst.results[0].type, name_hint=inst.results[0].name_hint)]


@module_pass("integer_dots")
def integer_dots(module: Module) -> Module:
    return rebuild_module(module, _narrow)


__all__ = ["integer_dots"]
