"""The C kernel of the `sort` op: each row along `axis` becomes unsigned keys in numpy's order
(as llvm/sorting.py: -0.0 as 0.0, nan largest) paired with positions, radix-sorted stably by
the `jitc_radix_sort` helper in scratch memory of the workspace; the values are read back by
position."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jitc.ir import dtypes
from jitc.ir.core import Instruction
from jitc.ir.dtypes import Kind
from jitc.ir.symbolic import is_static

from .cgen import extent, physical_order
from .helpers import _define
from .kernels import Kernel, KernelContext, buffers_used

if TYPE_CHECKING:
    from .codegen import Program

_define("jitc_radix_sort", """
/* Stable LSD radix sort of n (key, position) pairs by the low `bits` bits of the keys, 8 bits
   a pass; the result is in keys/pos (keys2/pos2 are scratch of the same size). */
static void jitc_radix_sort(uint64_t *keys, int64_t *pos, uint64_t *keys2, int64_t *pos2,
                            int64_t n, int bits) {
    int64_t counts[256];
    for (int shift = 0; shift < bits; shift += 8) {
        memset(counts, 0, sizeof counts);
        for (int64_t i = 0; i < n; i++) counts[(keys[i] >> shift) & 255u]++;
        if (counts[(keys[0] >> shift) & 255u] == n) continue; /* one digit: nothing moves */
        int64_t sum = 0;
        for (int d = 0; d < 256; d++) { int64_t c = counts[d]; counts[d] = sum; sum += c; }
        for (int64_t i = 0; i < n; i++) {
            int64_t to = counts[(keys[i] >> shift) & 255u]++;
            keys2[to] = keys[i];
            pos2[to] = pos[i];
        }
        memcpy(keys, keys2, (size_t)n * sizeof *keys);
        memcpy(pos, pos2, (size_t)n * sizeof *pos);
    }
}""")


for _type, _raw, _bits in (("float", "uint32_t", 32), ("double", "uint64_t", 64)):
    _define(f"jitc_sort_key_{_bits}", f"""
/* The radix key of a {_type}: -0.0 as 0.0, the sign flipping the other bits, nan largest. */
static uint64_t jitc_sort_key_{_bits}({_type} v) {{
    {_raw} r;
    if (isnan(v)) return ({_raw})-1;
    if (v == 0) v = 0;
    memcpy(&r, &v, sizeof r);
    return (r >> {_bits - 1}) ? ({_raw})~r : (r | (({_raw})1 << {_bits - 1}));
}}""")


def _key(x: str, kind: Kind, bits: int) -> str:
    """The uint64_t key of element x, whose unsigned order is numpy's (float16 is a float in
    registers, with a float's order)."""
    if kind is Kind.FLOAT:
        return f"jitc_sort_key_{bits}({x})"
    if kind is Kind.SIGNED:
        return f"((uint64_t)(int64_t){x} + ((uint64_t)1 << 63))"
    return f"((uint64_t){x})"


def emit_sort(program: Program, name: str, inst: Instruction) -> Kernel:
    ctx = KernelContext(program, name, inst, buffers_used(inst, program))
    axis = inst.attrs["axis"]
    operand, out = inst.operands[0], inst.results[0]
    dtype = operand.type.dtype
    n = operand.type.shape[axis]
    bits = 64 if dtype.kind is Kind.SIGNED else max(8, dtype.numpy.itemsize * 8)
    if dtype.kind is Kind.FLOAT:
        bits = 64 if dtype.numpy.itemsize == 8 else 32
    w = ctx.w
    scratch = ctx.extra(dtypes.int64, "scratch", *program.scratch_bytes(32 * n))
    w.line(f"uint64_t *keys = (uint64_t *){scratch};")
    w.line(f"int64_t *pos = {scratch} + 2 * {extent(n)};")
    row_dims = [d for d in physical_order(out.type) if d != axis]

    def level(k: int, index: list[str]) -> None:
        if k < len(row_dims):
            with w.loop(0, out.type.shape[row_dims[k]]) as c:
                index[row_dims[k]] = c
                level(k + 1, index)
            return

        def at(i: str) -> list[str]:
            return index[:axis] + [i] + index[axis + 1:]
        with w.loop(0, n) as i:
            key = _key(ctx.e.value_at(operand, at(i)), dtype.kind, bits)
            w.line(f"keys[{i}] = {key};")
            w.line(f"pos[{i}] = {i};")
        count = extent(n)
        sort = f"jitc_radix_sort(keys, pos, keys + {count}, pos + {count}, {count}, {bits});"
        if is_static(n):
            w.line(sort)
        else:  # the sort reads keys[0], which an empty row at run time does not have
            with w.block(f"if ({count} > 0)"):
                w.line(sort)
        with w.loop(0, n) as i:
            if inst.attrs["output"] == "indices":
                value = f"pos[{i}]"
            else:
                value = ctx.e.value_at(operand, at(f"pos[{i}]"))
            ctx.e.store(value, ctx.pointer(out), out.type, at(i))
    level(0, ["0"] * out.type.rank)
    return ctx.finish()
