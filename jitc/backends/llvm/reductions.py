"""The arithmetic of a reduction step, shared by the LLVM code generators (CPU and CUDA)."""

from __future__ import annotations

from llvmlite import ir

from jitc.backends.llvm.elemental import _extremum
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.types import I1, I64, declare, value_type
from jitc.ir import dtypes

# Elements one accumulator of a float sum adds in sequence before joining the cascade.
CASCADE_BLOCK = 32
# Levels of the cascade: enough for 2^CASCADE_LEVELS blocks.
CASCADE_LEVELS = 48


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


class Cascade:
    """Pairwise summation for scalar float-sum accumulators (`slots`, allocas): `step()` after
    each element pushes the accumulators into a cascade of partial sums every CASCADE_BLOCK
    elements (level j holds the sum of 2^j blocks while bit j of the push count is set), and
    `finish()` adds the levels back, smallest first. The error of a sum of n elements then
    grows with CASCADE_BLOCK + log2(n), not with n. Other reductions get no code at all."""

    def __init__(self, b: ir.IRBuilder, kind: str, dtypes_: list[dtypes.DType],
                 slots: list[ir.Value]) -> None:
        self.b = b
        self.parts = [(d, s) for d, s in zip(dtypes_, slots) if kind == "sum" and d.is_float]
        if not self.parts:
            return
        with b.goto_entry_block():
            self.count = b.alloca(I64)
            self.pushed = b.alloca(I64)
            self.levels = [b.alloca(ir.ArrayType(value_type(d), CASCADE_LEVELS))
                           for d, _ in self.parts]
        b.store(ir.Constant(I64, 0), self.count)
        b.store(ir.Constant(I64, 0), self.pushed)

    def _level(self, levels: ir.Value, j: ir.Value) -> ir.Value:
        return self.b.gep(levels, [ir.Constant(I64, 0), j], inbounds=True)

    def step(self) -> None:
        if not self.parts:
            return
        b = self.b
        count = b.add(b.load(self.count), ir.Constant(I64, 1))
        full = b.icmp_unsigned("==", count, ir.Constant(I64, CASCADE_BLOCK))
        b.store(b.select(full, ir.Constant(I64, 0), count), self.count)
        with b.if_then(full):
            pushed = b.load(self.pushed)
            cttz = declare(b.module, "llvm.cttz.i64", ir.FunctionType(I64, [I64, I1]))
            level = b.call(cttz, [b.not_(pushed), ir.Constant(I1, 0)])
            for (dtype, slot), levels in zip(self.parts, self.levels):
                with for_range(b, 0, level, name="level") as j:
                    older = b.load(self._level(levels, j))
                    b.store(combine(b, "sum", dtype, older, b.load(slot)), slot)
                b.store(b.load(slot), self._level(levels, level))
                b.store(ir.Constant(value_type(dtype), 0.0), slot)
            b.store(b.add(pushed, ir.Constant(I64, 1)), self.pushed)

    def finish(self) -> None:
        if not self.parts:
            return
        b = self.b
        pushed = b.load(self.pushed)
        for (dtype, slot), levels in zip(self.parts, self.levels):
            with for_range(b, 0, CASCADE_LEVELS, name="unwind") as j:
                bit = b.trunc(b.lshr(pushed, j), I1)
                with b.if_then(bit):
                    older = b.load(self._level(levels, j))
                    b.store(combine(b, "sum", dtype, older, b.load(slot)), slot)


__all__ = ["Cascade", "accumulator_dtype", "combine"]
