"""The arithmetic of a reduction step, shared by the LLVM code generators (CPU and CUDA)."""

from __future__ import annotations

from llvmlite import ir

from jitc.backends.llvm.elemental import _extremum
from jitc.ir import dtypes


def accumulator_dtype(dtype: dtypes.DType) -> dtypes.DType:
    """float16 sums and products accumulate in float32; everything else in its own type."""
    return dtypes.float32 if dtype is dtypes.float16 else dtype


def combine(b: ir.IRBuilder, kind: str, dtype: dtypes.DType, acc: ir.Value,
            x: ir.Value) -> ir.Value:
    """acc (kind) x for a reduce of `kind`; scalars or vectors alike."""
    if kind == "sum":
        return b.fadd(acc, x) if dtype.is_float else b.add(acc, x)
    if kind == "prod":
        return b.fmul(acc, x) if dtype.is_float else b.mul(acc, x)
    if kind == "and":
        return b.and_(acc, x)
    if kind == "or":
        return b.or_(acc, x)
    return _extremum(b, acc, x, dtype.kind, larger=(kind == "max"))


__all__ = ["accumulator_dtype", "combine"]
