"""Which instructions are views: results that are a contiguous block of their operand's bytes.

A backend that addresses buffers through pointers can give such a result a pointer into its
operand's buffer instead of copying it (the CPU backend does, see backends/cpu/plan.py).
"""

from __future__ import annotations

from jitc.ir import ops
from jitc.ir.core import Instruction


def slice_view_offset(inst: Instruction) -> int | None:
    """For a slice that is one contiguous block of its row-major operand, the element offset
    of that block; None for anything else.

    Contiguous: unit strides, every dimension after the last sliced one taken whole (by
    definition), and every dimension before it of extent 1 in the result.
    """
    if inst.op is not ops.SLICE:
        return None
    operand, result = inst.operands[0].type, inst.results[0].type
    if not operand.is_row_major or not result.is_row_major or result.size == 0:
        return None
    start = inst.attrs["start"]
    stride = inst.attrs["stride"] or (1,) * operand.rank
    if any(s != 1 for s in stride):  # type: ignore[union-attr]
        return None
    partial = [d for d in range(operand.rank) if result.shape[d] != operand.shape[d]]
    if partial and any(result.shape[d] != 1 for d in range(partial[-1])):
        return None
    return sum(s * t for s, t in zip(start, operand.strides))  # type: ignore[arg-type]


__all__ = ["slice_view_offset"]
