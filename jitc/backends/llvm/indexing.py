"""Layout-aware addressing: a logical index into an array becomes an element address.

A buffer holds its elements densely in the order of its layout (XLA's minor_to_major): the
first dimension listed varies fastest. Strides follow from that; nothing else about layouts
is needed to read or write an element.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from jitc.backends.llvm import extents
from jitc.backends.llvm.types import I1, I64, memory_type, value_type
from jitc.ir.types import TensorType


def linear_offset(builder: ir.IRBuilder, t: TensorType, index: Sequence[ir.Value]) -> ir.Value:
    offset: ir.Value = ir.Constant(I64, 0)
    for i, stride in zip(index, t.strides):
        if stride == 0 or (isinstance(i, ir.Constant) and i.constant == 0):
            continue
        term = i if stride == 1 else builder.mul(i, extents.value(builder, stride),
                                                 flags=["nsw"])
        offset = term if (isinstance(offset, ir.Constant) and offset.constant == 0) \
            else builder.add(offset, term, flags=["nsw"])
    return offset


def element_pointer(builder: ir.IRBuilder, base: ir.Value, t: TensorType,
                    index: Sequence[ir.Value]) -> ir.Value:
    return builder.gep(base, [linear_offset(builder, t, index)],
                       source_etype=memory_type(t.dtype), inbounds=True)


def load(builder: ir.IRBuilder, base: ir.Value, t: TensorType,
         index: Sequence[ir.Value]) -> ir.Value:
    pointer = element_pointer(builder, base, t, index)
    value = builder.load(pointer, typ=memory_type(t.dtype))
    if value_type(t.dtype) == I1:
        return builder.icmp_unsigned("!=", value, ir.Constant(value.type, 0))
    return value


def store(builder: ir.IRBuilder, value: ir.Value, base: ir.Value, t: TensorType,
          index: Sequence[ir.Value]) -> None:
    pointer = element_pointer(builder, base, t, index)
    if value.type == I1:
        value = builder.zext(value, memory_type(t.dtype))
    builder.store(value, pointer)
