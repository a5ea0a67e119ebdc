"""Byte products (`dot_general ... result=i32` of int8/uint8 operands) with AVX512-VNNI.

`vpdpbusd acc, u, s` adds, to each 32-bit lane of `acc`, the four products of the lane's
unsigned bytes in `u` and signed bytes in `s`: 64 multiply-adds per instruction, four times
a float32 FMA's 16. The structure is gemm.py's (column blocks, depth blocks, row strips of
MR rows, register tiles of MR x 32 columns); the packing is what differs:

- an lhs strip is, per group of 4 depth steps, the 4 bytes of each of its MR rows: one i32
  the tile broadcasts, as the signed operand (`s`);
- an rhs block is panels of 32 columns, per group of 4 depth steps the 4 bytes of each
  column: two 64-byte vectors, the unsigned operand (`u`);
- depth steps past the end are zero bytes, so a depth that is no multiple of 4 adds nothing.

The instruction wants the lhs signed and the rhs unsigned. Other combinations are moved there
by offsets applied while packing (the usual u8 offset trick): an uint8 lhs is packed as
A' = A - 128 (its top bit flipped), an int8 rhs as B' = B + 128. Then

    sum A'B' = sum AB + 128 [B int8] rowsum(A) - 128 [A uint8] colsum(B) - 128^2 K [both]

and the tile adds the correction back from row and column sums the packing keeps. Modules
not marked with `use_vnni` (hosts without it, `jitc aot` objects for a baseline CPU) get the
same kernel with the instruction written in plain IR (`_widening_dot4`). All of it
is int32 arithmetic modulo 2^32, which is what numpy's int32 sum is: a sum that wraps in numpy
wraps here to the same bits (two's complement addition is associative and commutative).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from jitc.backends.cpu.gemm import Form, _unflatten
from jitc.backends.cpu.gemm_routines import at, const, minimum
from jitc.backends.cpu.kernels import Kernel, KernelContext
from jitc.backends.cpu.plan import aligned_zeros
from jitc.backends.llvm import indexing
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.types import I1, I8, I32, I64, PTR, VOID, declare
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value

MR = 8              # rows of the register tile
NR = 32             # columns of the register tile: two vectors of 16 int32 lanes
LANES = 16
KC = 4096           # largest depth of a packed block, in bytes per row or column
RHS_BLOCK_BYTES = 512 << 10
# The widest column block: its column sums and (with an epilogue) its MR rows of int32
# products live on the stack too, however shallow the product.
MAX_NC = 2048
# With a fused epilogue a strip's products are finished in a scratch tile before the
# epilogue reads them, so the whole depth is one block: deeper products use the generic kernel.
EPILOGUE_MAX_DEPTH = KC
# The largest lhs (the rows one kernel call covers, at most a batch index's) packed once for
# all column blocks when the depth is one block: repacking each strip for every column block
# took a quarter of the GPT-2 block's int8 time on one thread (64 rows, 2-5 column blocks).
WHOLE_LHS_BYTES = 256 << 10
# Multiply-adds per element operation of the threading cost model (gemm.FMAS_PER_OPERATION
# for float32; a VNNI instruction does four times the work of an FMA).
MACS_PER_OPERATION = 32

_VNNI: weakref.WeakSet[ir.Module] = weakref.WeakSet()

VEC_I32 = ir.VectorType(I32, LANES)
VEC_I8 = ir.VectorType(I8, 4 * LANES)


def use_vnni(module: ir.Module) -> None:
    """Let byte products emitted into `module` use AVX512-VNNI (the module runs on a host
    that has it; `jitc aot` objects for a baseline CPU do not)."""
    _VNNI.add(module)


def _widening_dot4(b: ir.IRBuilder, acc: ir.Value, u: ir.Value, s: ir.Value) -> ir.Value:
    """What vpdpbusd computes, in plain IR for hosts without VNNI: each product of an
    unsigned and a signed byte fits int16 exactly, and summing neighbouring pairs of them
    into int32 is the pattern x86 backends select `pmaddwd` for; a second pairwise sum
    finishes each group of four."""
    wide = ir.VectorType(I32, 4 * LANES)
    products = b.mul(b.zext(u, wide), b.sext(s, wide))

    def pairs(x: ir.Value, count: int) -> ir.Value:
        undefined = ir.Constant(x.type, ir.Undefined)
        even = b.shuffle_vector(x, undefined, ir.Constant(ir.VectorType(I32, count),
                                                           list(range(0, 2 * count, 2))))
        odd = b.shuffle_vector(x, undefined, ir.Constant(ir.VectorType(I32, count),
                                                          list(range(1, 2 * count, 2))))
        return b.add(even, odd)
    return b.add(acc, pairs(pairs(products, 2 * LANES), LANES))


def _splat_i32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    one = b.insert_element(ir.Constant(VEC_I32, ir.Undefined), x, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(VEC_I32, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, LANES), [0] * LANES))


class _Routines:
    """The strip packer, block packer and tile of one (lhs, rhs) signedness, in one module."""

    def __init__(self, module: ir.Module, a_unsigned: bool, b_signed: bool) -> None:
        self.module = module
        # Offsets added to the packed bytes (their top bit flipped).
        self.a_flip, self.b_flip = a_unsigned, b_signed
        tag = f"{'u' if a_unsigned else 's'}8x{'s' if b_signed else 'u'}8"
        self.prefix = f"jitc.gemm.bytes.{tag}{'' if module in _VNNI else '.widening'}"

    def _function(self, name: str, args: list[ir.Type]) -> tuple[ir.Function, ir.IRBuilder, bool]:
        full = f"{self.prefix}.{name}"
        if full in self.module.globals:
            return self.module.get_global(full), None, False  # type: ignore[return-value]
        fn = ir.Function(self.module, ir.FunctionType(VOID, args), full)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        return fn, ir.IRBuilder(fn.append_basic_block("entry")), True

    def _memset(self, b: ir.IRBuilder, dest: ir.Value, count: ir.Value) -> None:
        memset = declare(self.module, "llvm.memset.p0.i64",
                         ir.FunctionType(VOID, [PTR, I8, I64, I1]))
        b.call(memset, [dest, ir.Constant(I8, 0), count, ir.Constant(I1, 0)])

    def _load_byte(self, b: ir.IRBuilder, p: ir.Value, signed: bool, flip: bool
                   ) -> tuple[ir.Value, ir.Value]:
        """(the byte to pack, its value as i32)."""
        x = b.load(p, typ=I8)
        wide = b.sext(x, I32) if signed else b.zext(x, I32)
        return (b.xor(x, ir.Constant(I8, 0x80)) if flip else x), wide

    def pack_strip(self, a_signed: bool) -> ir.Function:
        """`strip(dest, sums, src, rows, kc, s_p, s_k)`: dest[(q * MR + i) * 4 + r] holds
        row i, depth 4q + r; sums[i] the correction of row i."""
        fn, b, new = self._function("strip", [PTR, PTR, PTR, I64, I64, I64, I64])
        if not new:
            return fn
        dest, sums, src, rows, kc, s_p, s_k = fn.args
        groups = b.udiv(b.add(kc, const(3)), const(4))
        self._memset(b, dest, b.mul(groups, const(MR * 4)))
        total = b.alloca(I32)
        with for_range(b, 0, rows, name="i") as i:
            row = at(b, src, b.mul(i, s_p), I8)
            b.store(ir.Constant(I32, 0), total)
            with for_range(b, 0, kc, name="k") as k:
                x, wide = self._load_byte(b, at(b, row, b.mul(k, s_k), I8), a_signed,
                                          self.a_flip)
                slot = b.add(b.mul(b.add(b.mul(b.udiv(k, const(4)), const(MR)), i), const(4)),
                             b.urem(k, const(4)))
                b.store(x, at(b, dest, slot, I8))
                b.store(b.add(b.load(total, typ=I32), wide), total)
            # rowsum(A) enters with +128 when the rhs was offset by +128 (see the docstring)
            # and the constant term when both were.
            correction: ir.Value = ir.Constant(I32, 0)
            if self.b_flip:
                correction = b.mul(b.load(total, typ=I32), ir.Constant(I32, -128))
            if self.a_flip and self.b_flip:
                correction = b.add(correction, b.mul(b.trunc(kc, I32), ir.Constant(I32, 16384)))
            b.store(correction, at(b, sums, i, I32))
        b.ret_void()
        return fn

    def pack_block(self, b_signed: bool) -> ir.Function:
        """`block(dest, sums, src, kc, columns, s_p, s_k)`: panels of NR columns, panel p at
        dest[p * groups * 4 * NR], in it [(q * NR + j) * 4 + r]; sums[j] the correction of
        column j. Per panel and group of 4 depth steps the inner loop runs along the columns:
        unit-stride loads from a row-major rhs and one 128-byte run of stores, which the
        loop vectorizer turns into whole-vector shuffles."""
        fn, b, new = self._function("block", [PTR, PTR, PTR, I64, I64, I64, I64])
        if not new:
            return fn
        for n in (0, 1, 2):
            fn.args[n].add_attribute("noalias")
        dest, sums, src, kc, columns, s_p, s_k = fn.args
        groups = b.udiv(b.add(kc, const(3)), const(4))
        panels = b.udiv(b.add(columns, const(NR - 1)), const(NR))
        panel_bytes = b.mul(groups, const(4 * NR))
        self._memset(b, dest, b.mul(panel_bytes, panels))
        self._memset(b, sums, b.mul(columns, const(4)))
        with for_range(b, 0, panels, name="p") as p:
            first = b.mul(p, const(NR))
            count = minimum(b, const(NR), b.sub(columns, first))
            panel = at(b, dest, b.mul(p, panel_bytes), I8)
            with for_range(b, 0, groups, name="q") as q:
                out = at(b, panel, b.mul(q, const(4 * NR)), I8)
                # Depth steps past kc (in the last group only) read row 0 and store zero.
                steps = [b.add(b.mul(q, const(4)), const(r)) for r in range(4)]
                inside = [b.icmp_signed("<", k, kc) for k in steps]
                rows = [at(b, src, b.add(b.mul(b.select(ok, k, const(0)), s_k),
                                         b.mul(first, s_p)), I8)
                        for k, ok in zip(steps, inside)]
                with for_range(b, 0, count, name="j") as j:
                    total: ir.Value = b.load(at(b, sums, b.add(first, j), I32), typ=I32)
                    for r in range(4):
                        x, wide = self._load_byte(b, at(b, rows[r], b.mul(j, s_p), I8),
                                                  b_signed, self.b_flip)
                        x = b.select(inside[r], x, ir.Constant(I8, 0))
                        wide = b.select(inside[r], wide, ir.Constant(I32, 0))
                        b.store(x, at(b, out, b.add(b.mul(j, const(4)), const(r)), I8))
                        total = b.add(total, wide)
                    b.store(total, at(b, sums, b.add(first, j), I32))
        if self.a_flip:
            with for_range(b, 0, columns, name="j") as j:
                p = at(b, sums, j, I32)
                b.store(b.mul(b.load(p, typ=I32), ir.Constant(I32, 128)), p)
        else:
            self._memset(b, sums, b.mul(columns, const(4)))
        b.ret_void()
        return fn

    def tile(self) -> ir.Function:
        """`tile(groups, a, bp, c, ldc, rows, columns, accumulate, row_sums, column_sums)`:
        C[0:rows, 0:columns] (+)= the packed strip times one packed panel, plus the
        corrections."""
        fn, b, new = self._function("tile", [I64, PTR, PTR, PTR, I64, I64, I64, I1, PTR, PTR])
        if not new:
            return fn
        for n in (1, 2, 3):
            fn.args[n].add_attribute("noalias")
        groups, a, bp, c, ldc, rows, columns, accumulate, row_sums, column_sums = fn.args
        if self.module in _VNNI:
            intrinsic = declare(self.module, "llvm.x86.avx512.vpdpbusd.512",
                                ir.FunctionType(VEC_I32, [VEC_I32, VEC_I8, VEC_I8]))

            def dot4(acc: ir.Value, u: ir.Value, s: ir.Value) -> ir.Value:
                return b.call(intrinsic, [acc, u, s])
        else:
            def dot4(acc: ir.Value, u: ir.Value, s: ir.Value) -> ir.Value:
                return _widening_dot4(b, acc, u, s)
        entry = b.block
        loop = fn.append_basic_block("q")
        done = fn.append_basic_block("store")
        b.branch(loop)
        b.position_at_end(loop)
        q = b.phi(I64, name="q")
        q.add_incoming(const(0), entry)
        accs = [[b.phi(VEC_I32) for _ in range(2)] for _ in range(MR)]
        for row in accs:
            for acc in row:
                acc.add_incoming(ir.Constant(VEC_I32, None), entry)
        panel = at(b, bp, b.mul(q, const(4 * NR)), I8)
        # A constant packed at compile time may lie anywhere once the disk cache reloads it.
        rhs = [b.load(at(b, panel, v * 4 * LANES, I8), typ=VEC_I8, align=1) for v in range(2)]
        strip = at(b, a, b.mul(q, const(4 * MR)), I8)
        tile = []
        for i in range(MR):
            x = b.bitcast(_splat_i32(b, b.load(at(b, strip, 4 * i, I8), typ=I32, align=4)),
                          VEC_I8)
            tile.append([dot4(accs[i][v], rhs[v], x) for v in range(2)])
        following = b.add(q, const(1))
        q.add_incoming(following, loop)
        for row, new_values in zip(accs, tile):
            for acc, value in zip(row, new_values):
                acc.add_incoming(value, loop)
        b.cbranch(b.icmp_signed("<", following, groups), loop, done)

        b.position_at_end(done)
        column_parts = [b.load(at(b, column_sums, v * LANES, I32), typ=VEC_I32, align=4)
                        for v in range(2)]
        finished = []
        for i in range(MR):
            row_part = _splat_i32(b, b.load(at(b, row_sums, i, I32), typ=I32))
            finished.append([b.add(b.add(tile[i][v], column_parts[v]), row_part)
                             for v in range(2)])
        with b.goto_entry_block():
            scratch = b.alloca(I32, size=const(MR * NR), name="scratch")
            scratch.align = 64
        full = b.and_(b.icmp_signed("==", rows, const(MR)),
                      b.icmp_signed("==", columns, const(NR)))
        target = b.select(full, c, scratch)
        stride = b.select(full, ldc, const(NR))
        merge = b.and_(accumulate, full)
        for i in range(MR):
            row = at(b, target, b.mul(const(i), stride), I32)
            for v in range(2):
                p = at(b, row, v * LANES, I32)
                old = b.load(p, typ=VEC_I32, align=4)
                b.store(b.select(merge, b.add(finished[i][v], old), finished[i][v]), p,
                        align=4)
        with b.if_then(b.not_(full)), for_range(b, 0, rows, name="i") as i, \
                    for_range(b, 0, columns, name="j") as j:
            p = at(b, c, b.add(b.mul(i, ldc), j), I32)
            x = b.load(at(b, scratch, b.add(b.mul(i, const(NR)), j), I32), typ=I32)
            b.store(b.select(accumulate, b.add(x, b.load(p, typ=I32)), x), p)
        b.ret_void()
        return fn


def _ceil(x: int, y: int) -> int:
    return -(-x // y)


def depth_block(k: int) -> int:
    """The depth of a packed block: equal blocks of at most KC."""
    return _ceil(k, _ceil(k, KC))


@dataclass(frozen=True)
class PackedRhs:
    """A constant rhs packed when the function was compiled, as `pack_block` would pack it
    at every call: per depth block (`kc` deep, the last one possibly shallower), the panels of
    all `n` columns, then, from `sums_offset` on, per depth block the `width` int32 column
    corrections. `pack_rhs` makes the bytes."""

    k: int
    n: int
    free: int               # element strides of the constant's buffer the packing read
    contract: int
    a_unsigned: bool        # the lhs it was packed for (its column corrections)
    b_signed: bool

    @property
    def kc(self) -> int:
        return depth_block(self.k)

    @property
    def width(self) -> int:
        return _ceil(self.n, NR) * NR

    @property
    def block_bytes(self) -> int:
        return _ceil(self.kc, 4) * 4 * self.width

    @property
    def sums_offset(self) -> int:
        return _ceil(_ceil(self.k, self.kc) * self.block_bytes, LANES * 4) * LANES * 4

    def matches(self, form: Form) -> bool:
        return (form.k, form.n, form.b.free, form.b.contract) == \
            (self.k, self.n, self.free, self.contract) and not any(form.b.batch)


def pack_rhs(data: np.ndarray, layout: PackedRhs) -> np.ndarray:
    """The packed bytes of `layout` from the constant's buffer `data` (its bytes as the
    kernel reads them), 64-byte aligned like the packing buffers."""
    flat = np.ascontiguousarray(data).reshape(-1).view(np.int8 if layout.b_signed else np.uint8)
    matrix = np.lib.stride_tricks.as_strided(flat, (layout.k, layout.n),
                                             (layout.contract, layout.free), writeable=False)
    width = layout.width
    packed = aligned_zeros(layout.sums_offset + 4 * width * _ceil(layout.k, layout.kc))
    sums = packed[layout.sums_offset:].view(np.int32).reshape(-1, width)
    for block, start in enumerate(range(0, layout.k, layout.kc)):
        part = matrix[start:start + layout.kc]
        groups = _ceil(part.shape[0], 4)
        grid = np.zeros((groups * 4, width), np.uint8)
        # The kernel's operand is unsigned: an int8 rhs is offset by +128 (its top bit flipped).
        grid[:part.shape[0], :layout.n] = part.view(np.uint8) ^ (0x80 if layout.b_signed else 0)
        # [panel][group of 4 depth steps][column of the panel][step]: pack_block's order.
        panels = grid.reshape(groups, 4, width // NR, NR).transpose(2, 0, 3, 1)
        offset = block * layout.block_bytes
        packed[offset:offset + panels.size] = panels.reshape(-1)
        if layout.a_unsigned:
            sums[block, :layout.n] = part.astype(np.int64).sum(axis=0) * 128
    return packed


class _BytesGemm:
    """Emits one byte-product kernel into a KernelContext: threads split row strips."""

    def __init__(self, ctx: KernelContext, inst: Instruction, form: Form,
                 epilogue: Value | None) -> None:
        self.ctx, self.form, self.epilogue = ctx, form, epilogue
        self.b = ctx.builder
        self.out = inst.results[0]
        a_signed = form.a.value.type.dtype is dtypes.int8
        b_signed = form.b.value.type.dtype is dtypes.int8
        routines = _Routines(ctx.module, not a_signed, b_signed)
        self.strip = routines.pack_strip(a_signed)
        # A constant rhs that the plan packed at compile time (packed_weights.py) is read in
        # place: no block is packed per call.
        self.packed: PackedRhs | None = ctx.packed.get(id(form.b.value))
        if self.packed is None:
            self.block = routines.pack_block(b_signed)
        else:
            assert self.packed.matches(form) and self.packed.a_unsigned == (not a_signed), \
                "a byte product's rhs was packed for another product"
        self.tile = routines.tile()
        self.kc = depth_block(form.k)
        depth = _ceil(self.kc, 4) * 4
        width = _ceil(form.n, NR) * NR
        self.nc = max(min(RHS_BLOCK_BYTES // depth // NR * NR, width, MAX_NC), NR)
        self.depth = depth
        strips = _ceil(form.m, MR) if isinstance(form.m, int) else 0
        self.lhs_strips = strips if 0 < strips * MR * depth <= WHOLE_LHS_BYTES and \
            form.k <= self.kc else 1

    def _buffer(self, etype: ir.Type, count: int, name: str) -> ir.Value:
        with self.b.goto_entry_block():
            buffer = self.b.alloca(etype, size=const(count), name=name)
            buffer.align = 64
        return buffer

    def emit(self) -> Kernel:
        b, form = self.b, self.form
        if self.packed is None:
            self.packed_b = self._buffer(I8, self.depth * self.nc, "bpack")
            self.column_sums = self._buffer(I32, self.nc + NR, "colsums")
        self.packed_a = self._buffer(I8, self.depth * MR * self.lhs_strips, "apack")
        self.row_sums = self._buffer(I32, MR * self.lhs_strips, "rowsums")
        self.scratch = None if self.epilogue is None else \
            self._buffer(I32, MR * self.nc, "products")
        per_batch = _ceil(form.m, MR)
        batches = math.prod(form.batch)
        begin, end = self.ctx.begin, self.ctx.end
        if batches == 1:
            self._rows(const(0), begin, end)
        else:
            first = b.sdiv(begin, const(per_batch))
            last = b.sdiv(b.sub(end, const(1)), const(per_batch))
            with for_range(b, first, b.add(last, const(1)), name="batch") as batch:
                base = b.mul(batch, const(per_batch))
                lo = b.select(b.icmp_signed(">", b.sub(begin, base), const(0)),
                              b.sub(begin, base), const(0))
                hi = minimum(b, b.sub(end, base), const(per_batch))
                self._rows(batch, lo, hi)
        self.ctx.finish()
        macs = batches * form.m * form.n * form.k
        return Kernel(self.ctx.name, batches * per_batch, max(macs // MACS_PER_OPERATION, 1))

    def _rows(self, batch: ir.Value, lo: ir.Value, hi: ir.Value) -> None:
        """Row strips [lo, hi) of batch index `batch`."""
        b, form = self.b, self.form
        batch_index = _unflatten(b, batch, form.batch)

        def base(pointer: ir.Value, strides: tuple[int, ...], etype: ir.Type) -> ir.Value:
            offset: ir.Value = const(0)
            for i, stride in zip(batch_index, strides):
                offset = b.add(offset, b.mul(i, const(stride)))
            return at(b, pointer, offset, etype)

        buffers = self.ctx.emitter.buffers
        a_base = base(buffers[id(form.a.value)], form.a.batch, I8)
        b_base = base(buffers[id(form.b.value)], form.b.batch, I8)
        c_base = base(self.ctx.pointer(self.out), form.c_batch, I32)
        m0 = b.mul(lo, const(MR))
        m1 = minimum(b, b.mul(hi, const(MR)), const(form.m))
        a, rhs = form.a, form.b

        def pack_strip(ic: ir.Value, pc: ir.Value, kc: ir.Value, slot: ir.Value
                       ) -> tuple[ir.Value, ir.Value]:
            strip, sums = at(b, self.packed_a, b.mul(slot, const(self.depth)), I8), \
                at(b, self.row_sums, slot, I32)
            source = at(b, a_base, b.add(b.mul(ic, const(a.free)),
                                         b.mul(pc, const(a.contract))), I8)
            b.call(self.strip, [strip, sums, source, minimum(b, const(MR), b.sub(m1, ic)), kc,
                                const(a.free), const(a.contract)])
            return strip, sums

        whole = self.lhs_strips > 1
        if whole:  # every strip of these rows once: one depth block, the whole depth
            with for_range(b, m0, m1, MR, name="is") as ic:
                pack_strip(ic, const(0), const(form.k), ic)
        with for_range(b, 0, form.n, self.nc, name="jc") as jc:
            nc = minimum(b, const(self.nc), b.sub(const(form.n), jc))
            with for_range(b, 0, form.k, self.kc, name="pc") as pc:
                kc = minimum(b, const(self.kc), b.sub(const(form.k), pc))
                groups = b.udiv(b.add(kc, const(3)), const(4))
                if self.packed is None:
                    packed_b, column_sums = self.packed_b, self.column_sums
                    source = at(b, b_base, b.add(b.mul(jc, const(rhs.free)),
                                                 b.mul(pc, const(rhs.contract))), I8)
                    b.call(self.block, [packed_b, column_sums, source, kc, nc,
                                        const(rhs.free), const(rhs.contract)])
                else:
                    packed_b, column_sums = self._packed_block(b_base, jc, pc, groups)
                accumulate = b.icmp_signed("!=", pc, const(0))
                with for_range(b, m0, m1, MR, name="ic") as ic:
                    mr = minimum(b, const(MR), b.sub(m1, ic))
                    if whole:
                        strip, row_sums = at(b, self.packed_a, b.mul(ic, const(self.depth)),
                                             I8), at(b, self.row_sums, ic, I32)
                    else:
                        strip, row_sums = pack_strip(ic, pc, kc, const(0))
                    if self.scratch is None:
                        target = at(b, c_base, b.add(b.mul(ic, const(form.c_row)), jc), I32)
                        ldc = const(form.c_row)
                    else:
                        target, ldc = self.scratch, const(self.nc)
                    panel_bytes = b.mul(groups, const(4 * NR))
                    with for_range(b, 0, nc, NR, name="j") as j:
                        panel = at(b, packed_b, b.mul(b.udiv(j, const(NR)), panel_bytes), I8)
                        b.call(self.tile, [groups, strip, panel, at(b, target, j, I32),
                                           ldc, mr, minimum(b, const(NR), b.sub(nc, j)),
                                           accumulate, row_sums, at(b, column_sums, j, I32)])
                    if self.scratch is not None:
                        self._apply_epilogue(batch_index, ic, mr, jc, nc)

    def _packed_block(self, base: ir.Value, jc: ir.Value, pc: ir.Value, groups: ir.Value
                      ) -> tuple[ir.Value, ir.Value]:
        """Where the packed constant holds the panels and column sums of the block at
        columns `jc`, depth `pc` (`groups` groups of 4 deep)."""
        b, packed = self.b, self.packed
        assert packed is not None
        block = b.udiv(pc, const(self.kc))
        first = b.add(b.mul(block, const(packed.block_bytes)),
                      b.mul(b.udiv(jc, const(NR)), b.mul(groups, const(4 * NR))))
        sums = b.add(const(packed.sums_offset // 4),
                     b.add(b.mul(block, const(packed.width)), jc))
        return at(b, base, first, I8), at(b, base, sums, I32)

    def _apply_epilogue(self, batch_index: list[ir.Value], ic: ir.Value, mr: ir.Value,
                        jc: ir.Value, nc: ir.Value) -> None:
        """Finish rows [ic, ic + mr) x columns [jc, jc + nc) from the scratch products
        through the fused epilogue into the kernel's output."""
        b, form, out, epilogue = self.b, self.form, self.out, self.epilogue
        assert epilogue is not None and self.scratch is not None
        emitter = self.ctx.emitter
        with for_range(b, 0, mr, name="ei") as i, for_range(b, 0, nc, name="ej") as j:
            product = b.load(at(b, self.scratch, b.add(b.mul(i, const(self.nc)), j), I32),
                             typ=I32)
            index: list[ir.Value] = [const(0)] * out.type.rank
            for d, x in enumerate(batch_index):
                index[d] = x
            for parts, linear in ((form.rows, b.add(ic, i)), (form.cols, b.add(jc, j))):
                for (d, _), x in zip(parts, _unflatten(b, linear, [s for _, s in parts])):
                    index[d] = x
            emitter.registers[id(out)] = product
            value = emitter.value_at(epilogue, index)
            del emitter.registers[id(out)]
            indexing.store(b, value, self.ctx.pointer(out), epilogue.type, index)


def runs(form: Form, fused_epilogue: bool) -> bool:
    """Whether this kernel (rather than the generic one) runs a byte product of `form`."""
    return form.k >= 4 and not (fused_epilogue and form.k > EPILOGUE_MAX_DEPTH)


def emit(ctx: KernelContext, inst: Instruction, form: Form, epilogue: Value | None
         ) -> Kernel | None:
    """The VNNI kernel of byte product `inst`, or None when the generic kernel runs it."""
    if not runs(form, epilogue is not None):
        assert id(form.b.value) not in ctx.packed, "a packed rhs left to the generic kernel"
        return None
    return _BytesGemm(ctx, inst, form, epilogue).emit()
