"""Matrix products: shared-memory tiled dot_general with a fused elementwise epilogue.

The operands are seen as [batch, m, k] and [batch, k, n] whatever their dimension order and
layout (each index goes through layout-aware addressing). A block owns a tile_m x tile_n
output tile of one batch entry; for each tile_k slice of the contraction its 256 threads
copy both operand tiles into shared memory (walking each operand along its contiguous
dimension, so the loads coalesce), wait at a barrier, multiply-accumulate from shared
memory into per-thread accumulators, and wait again. A thread's outputs are strided by 16
in both directions, so a warp stores 16 consecutive elements of a row and reads distinct
shared-memory banks. The epilogue (bias, activation) is applied to each accumulated value
in registers before its only store.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.cuda import launch as launches
from jitc.backends.cuda.elementwise import delinearize, multiply_add
from jitc.backends.cuda.kernel import (
    KernelBuilder,
    KernelSpec,
    PhaseContext,
    SharedArray,
    StateSlot,
    byte_size,
)
from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.reductions import accumulator_dtype
from jitc.backends.llvm.types import I32, I64, constant, declare, value_type
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value
from jitc.ir.dtypes import DType
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

Index = list[ir.Value]
SIDE = launches.DOT_THREADS_SIDE
BYTES_PER_CELL = 4


def _dp4a_name(lhs: DType, rhs: DType) -> str:
    """The helper computing acc + the dot product of two words of 4 bytes (linked by
    ptx.link: PTX's dp4a on the device, plain IR in the simulator)."""
    def sign(d: DType) -> str:
        return "s" if d is dtypes.int8 else "u"
    return f"jitc.dp4a.{sign(lhs)}.{sign(rhs)}"


def dp4a_definitions(device: bool) -> str:
    """LLVM IR text defining every _dp4a_name helper: with NVPTX's idp4a intrinsics when
    `device`, else with byte vectors (what the simulator compiles for the host)."""
    lines = []
    if not device:
        lines.append("declare i32 @llvm.vector.reduce.add.v4i32(<4 x i32>)")
    for a in "su":
        for c in "su":
            name = f"jitc.dp4a.{a}.{c}"
            lines.append(f'define i32 @"{name}"(i32 %a, i32 %b, i32 %acc) alwaysinline {{')
            if device:
                lines.append(f"  %r = call i32 @llvm.nvvm.idp4a.{a}.{c}(i32 %a, i32 %b, "
                             "i32 %acc)")
            else:
                ext = {"s": "sext", "u": "zext"}
                lines += ["  %va = bitcast i32 %a to <4 x i8>",
                          "  %vb = bitcast i32 %b to <4 x i8>",
                          f"  %xa = {ext[a]} <4 x i8> %va to <4 x i32>",
                          f"  %xb = {ext[c]} <4 x i8> %vb to <4 x i32>",
                          "  %m = mul <4 x i32> %xa, %xb",
                          "  %s = call i32 @llvm.vector.reduce.add.v4i32(<4 x i32> %m)",
                          "  %r = add i32 %s, %acc"]
            lines += ["  ret i32 %r", "}"]
            if device:
                lines.append(f"declare i32 @llvm.nvvm.idp4a.{a}.{c}(i32, i32, i32)")
    return "\n".join(lines) + "\n"


def _minor(t: TensorType) -> int | None:
    """The operand's contiguous dimension (size-1 dimensions do not count)."""
    return next((d for d in t.layout if t.shape[d] != 1), None)


def _product(xs: Sequence[DimLike]) -> DimLike:
    n: DimLike = 1
    for x in xs:
        n *= x
    return n


class _Operand:
    """One operand as a [batch, free, contract] array."""

    def __init__(self, value: Value, batch: list[int], contract: list[int]) -> None:
        self.value = value
        self.batch, self.contract = batch, contract
        t = value.type
        self.free = [d for d in range(t.rank) if d not in batch and d not in contract]
        self.free_size = _product([t.shape[d] for d in self.free])
        # Walk the contraction fastest when it is the operand's contiguous dimension.
        self.k_fastest = _minor(t) in contract

    def index(self, b: ir.IRBuilder, batch: Index, free: ir.Value, k: ir.Value) -> Index:
        t = self.value.type
        index: Index = [ir.Constant(I64, 0)] * t.rank
        for d, i in zip(self.batch, batch):
            index[d] = i
        sub = delinearize(b, free, [t.shape[d] for d in self.free], list(range(len(self.free))))
        for d, i in zip(self.free, sub):
            index[d] = i
        sub = delinearize(b, k, [t.shape[d] for d in self.contract],
                          list(range(len(self.contract))))
        for d, i in zip(self.contract, sub):
            index[d] = i
        return index


def dot_kernel(module: ir.Module, plan: BufferPlan, name: str, core: Instruction,
               values: Sequence[Value], destination: Value, epilogue: Value | None = None,
               aliases: dict[int, Value] | None = None) -> KernelSpec | None:
    """`core` (a dot_general) into `destination`, through `epilogue` when given (an
    elementwise function of the core's result, computed at the same index)."""
    attrs = core.attrs
    out = core.results[0]
    if is_static(out.type.size) and out.type.size == 0:
        return None
    lhs = _Operand(core.operands[0], list(attrs["lhs_batch"]),  # type: ignore[arg-type]
                   list(attrs["lhs_contract"]))  # type: ignore[arg-type]
    rhs = _Operand(core.operands[1], list(attrs["rhs_batch"]),  # type: ignore[arg-type]
                   list(attrs["rhs_contract"]))  # type: ignore[arg-type]
    lhs_type = lhs.value.type
    batch_shape = [lhs_type.shape[d] for d in lhs.batch]
    batches = _product(batch_shape)
    m, n = lhs.free_size, rhs.free_size
    k = _product([lhs_type.shape[d] for d in lhs.contract])
    dtype = out.type.dtype
    acc = accumulator_dtype(dtype)
    acc_type = value_type(acc)
    tiles = launches.dot(batches, m, n, k, byte_size(acc_type))
    # A byte product (`result=i32`) keeps 4 depth steps per shared cell and multiplies
    # them with one dp4a.
    dp4a = _dp4a_name(lhs.value.type.dtype, rhs.value.type.dtype) if attrs.get("result") \
        else None
    kb = KernelBuilder(module, plan, name, values, [destination], tiles.launch)
    kb.aliases.update(aliases or {})
    tm, tn, tk = tiles.tile_m, tiles.tile_n, tiles.tile_k
    rm, rn = tiles.per_thread_m, tiles.per_thread_n
    a_tile = kb.shared(acc_type, tk * tm)   # [kk][mm]
    b_tile = kb.shared(acc_type, tk * tn)   # [kk][nn]
    accumulators = kb.state(acc_type, rm * rn)
    threads = tiles.launch.block

    def position(ctx: PhaseContext) -> tuple[Index, ir.Value, ir.Value]:
        """(batch multi-index, first row, first column) of this block's tile."""
        b = ctx.builder
        bid = ctx.block()
        # A symbolic count is at least 1 here: the host launches no block for an empty result.
        blocks_n, blocks_m = extents.value(b, tiles.blocks_n), extents.value(b, tiles.blocks_m)
        column = b.urem(bid, blocks_n)
        rest = b.udiv(bid, blocks_n)
        row = b.urem(rest, blocks_m)
        batch = delinearize(b, b.udiv(rest, blocks_m), batch_shape,
                            list(range(len(batch_shape))))
        return (batch, b.mul(row, ir.Constant(I64, tm)), b.mul(column, ir.Constant(I64, tn)))

    with kb.phase() as ctx:
        for i in range(rm * rn):
            ctx.store_state(accumulators, constant(acc, 0), i)
    with kb.repeat(tiles.k_steps):
        with kb.phase() as ctx:
            batch, row0, col0 = position(ctx)
            k0 = ctx.builder.mul(ctx.iteration, ir.Constant(I64, tk))
            for operand, tile, first, size, width in ((lhs, a_tile, row0, m, tm),
                                                      (rhs, b_tile, col0, n, tn)):
                if dp4a is None:
                    _load_tile(ctx, operand, tile, batch, first, k0, size, k, width, tk,
                               threads, operand.value.type.dtype, acc)
                else:
                    _load_packed_tile(ctx, operand, tile, batch, first, k0, size, k, width,
                                      tk, threads)
        kb.barrier()
        with kb.phase() as ctx:
            _multiply_tiles(ctx, a_tile, b_tile, accumulators, tiles, acc, dp4a)
        kb.barrier()
    with kb.phase() as ctx:
        b = ctx.builder
        batch, row0, col0 = position(ctx)
        ty = b.udiv(ctx.thread(), ir.Constant(I64, SIDE))
        tx = b.urem(ctx.thread(), ir.Constant(I64, SIDE))
        target = ctx.pointer(destination)
        for r in range(rm):
            row = b.add(row0, b.add(ty, ir.Constant(I64, SIDE * r)))
            for c in range(rn):
                col = b.add(col0, b.add(tx, ir.Constant(I64, SIDE * c)))
                inside = b.and_(b.icmp_unsigned("<", row, extents.value(b, m)),
                                b.icmp_unsigned("<", col, extents.value(b, n)))
                with b.if_then(inside):
                    value = convert_value(b, ctx.load_state(accumulators, r * rn + c), acc,
                                          dtype)
                    index = batch + _free_index(b, lhs, row) + _free_index(b, rhs, col)
                    if epilogue is not None:
                        ctx.emitter.registers[id(out)] = value
                        value = ctx.emitter.value_at(epilogue, index)
                        ctx.emitter.registers.clear()
                    indexing.store(b, value, target, destination.type, index)
    return kb.finish()


def _free_index(b: ir.IRBuilder, operand: _Operand, position: ir.Value) -> Index:
    t = operand.value.type
    return delinearize(b, position, [t.shape[d] for d in operand.free],
                       list(range(len(operand.free))))


def _load_tile(ctx: PhaseContext, operand: _Operand, tile: SharedArray, batch: Index,
               free0: ir.Value, k0: ir.Value, free_size: DimLike, k_size: DimLike, width: int,
               depth: int, threads: int, dtype: DType, acc: DType) -> None:
    """Copy the depth x width slice [k0, k0 + depth) x [free0, free0 + width) of an operand
    into `tile` (stored [kk][ff]), zero outside the operand; consecutive threads take
    consecutive elements of the operand's contiguous dimension."""
    b = ctx.builder
    tid = ctx.thread()
    zero = constant(acc, 0)
    for q in range(width * depth // threads):
        e = b.add(tid, ir.Constant(I64, q * threads))
        if operand.k_fastest:
            kk, ff = b.urem(e, ir.Constant(I64, depth)), b.udiv(e, ir.Constant(I64, depth))
        else:
            ff, kk = b.urem(e, ir.Constant(I64, width)), b.udiv(e, ir.Constant(I64, width))
        f, kpos = b.add(free0, ff), b.add(k0, kk)
        f_inside = b.icmp_unsigned("<", f, extents.value(b, free_size))
        k_inside = b.icmp_unsigned("<", kpos, extents.value(b, k_size))
        inside = b.and_(f_inside, k_inside)
        # Clamped indices keep the load in bounds (a launched block has at least one row,
        # and a k-step at least one depth step); the value is dropped outside.
        f = b.select(f_inside, f, extents.value(b, free_size - 1))
        kpos = b.select(k_inside, kpos, extents.value(b, k_size - 1))
        value = ctx.emitter.value_at(operand.value, operand.index(b, batch, f, kpos))
        value = convert_value(b, value, dtype, acc)
        cell = b.add(b.mul(kk, ir.Constant(I64, width)), ff)
        ctx.store_shared(tile, cell, b.select(inside, value, zero))


def _load_packed_tile(ctx: PhaseContext, operand: _Operand, tile: SharedArray, batch: Index,
                      free0: ir.Value, k0: ir.Value, free_size: DimLike, k_size: DimLike,
                      width: int, depth: int, threads: int) -> None:
    """Like _load_tile for byte operands: cell [kq][ff] holds the bytes of depth steps
    k0 + 4 kq .. + 3 (zero outside the operand), the first in the low byte."""
    b = ctx.builder
    tid = ctx.thread()
    cells = depth // BYTES_PER_CELL
    for q in range(-(-width * cells // threads)):
        e = b.add(tid, ir.Constant(I64, q * threads))
        ff, kq = b.urem(e, ir.Constant(I64, width)), b.udiv(e, ir.Constant(I64, width))
        f = b.add(free0, ff)
        f_inside = b.icmp_unsigned("<", f, extents.value(b, free_size))
        f = b.select(f_inside, f, extents.value(b, free_size - 1))
        word: ir.Value = ir.Constant(I32, 0)
        for r in range(BYTES_PER_CELL):
            kpos = b.add(k0, b.add(b.mul(kq, ir.Constant(I64, BYTES_PER_CELL)),
                                   ir.Constant(I64, r)))
            k_inside = b.icmp_unsigned("<", kpos, extents.value(b, k_size))
            inside = b.and_(f_inside, k_inside)
            kpos = b.select(k_inside, kpos, extents.value(b, k_size - 1))
            byte = ctx.emitter.value_at(operand.value, operand.index(b, batch, f, kpos))
            byte = b.select(inside, b.zext(byte, I32), ir.Constant(I32, 0))
            word = b.or_(word, b.shl(byte, ir.Constant(I32, 8 * r)))
        cell = b.add(b.mul(kq, ir.Constant(I64, width)), ff)
        valid = b.icmp_unsigned("<", e, ir.Constant(I64, width * cells))
        with b.if_then(valid):
            ctx.store_shared(tile, cell, word)


def _multiply_tiles(ctx: PhaseContext, a_tile: SharedArray, b_tile: SharedArray,
                    accumulators: StateSlot, tiles: launches.DotTiles, acc: DType,
                    dp4a: str | None = None) -> None:
    """This thread's outputs += its rows of the lhs tile times its columns of the rhs tile,
    accumulated in allocas (registers) and kept in state between k-steps."""
    b = ctx.builder
    rm, rn = tiles.per_thread_m, tiles.per_thread_n
    ty = b.udiv(ctx.thread(), ir.Constant(I64, SIDE))
    tx = b.urem(ctx.thread(), ir.Constant(I64, SIDE))
    with b.goto_entry_block():
        slots = [b.alloca(accumulators.type) for _ in range(rm * rn)]
    for i, slot in enumerate(slots):
        b.store(ctx.load_state(accumulators, i), slot)
    steps = tiles.tile_k if dp4a is None else tiles.tile_k // BYTES_PER_CELL
    with for_range(b, 0, steps, name="kk") as kk:
        a_row = b.mul(kk, ir.Constant(I64, tiles.tile_m))
        b_row = b.mul(kk, ir.Constant(I64, tiles.tile_n))
        xs = [ctx.load_shared(a_tile, b.add(a_row, b.add(ty, ir.Constant(I64, SIDE * r))))
              for r in range(rm)]
        ys = [ctx.load_shared(b_tile, b.add(b_row, b.add(tx, ir.Constant(I64, SIDE * c))))
              for c in range(rn)]
        for r in range(rm):
            for c in range(rn):
                slot = slots[r * rn + c]
                if dp4a is None:
                    b.store(multiply_add(b, xs[r], ys[c], b.load(slot), acc), slot)
                else:
                    fn = declare(b.module, dp4a, ir.FunctionType(I32, [I32] * 3))
                    b.store(b.call(fn, [xs[r], ys[c], b.load(slot)]), slot)
    for i, slot in enumerate(slots):
        ctx.store_state(accumulators, b.load(slot), i)
