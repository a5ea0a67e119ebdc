"""The CUDA kernels of the `sort` op; the keys are llvm/sorting.py's, so the order is the
other backends'.

- Rows of up to BITONIC_MAX elements: one block per row sorts (key, position) pairs in shared
  memory with a bitonic network, a phase and a barrier per stage (log2(m) (log2(m) + 1) / 2
  stages for the row padded to m, a power of two, with keys that sort last). Positions break
  ties, so the network, unstable by itself, gives the stable order.
- Longer rows, by rank: one thread per element counts the elements of its row that sort
  before it (smaller key, or an equal key earlier) and writes itself to that position: n
  comparisons per element.

With symbolic extents (docs/dynamic-shapes.md) a static row length keeps the network, one
block per row for as many rows as the call has; a row length known only at the call sorts
by rank, whose loops and grid take any length (the network's stages depend on it).
"""

from __future__ import annotations

from llvmlite import ir

from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.cuda import launch as launches
from jitc.backends.cuda.elementwise import delinearize, grid_stride, physical_order
from jitc.backends.cuda.kernel import KernelBuilder, KernelSpec, PhaseContext, SharedArray
from jitc.backends.llvm import indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.sorting import sort_key
from jitc.backends.llvm.types import I32, I64
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value
from jitc.ir.symbolic import DimLike, is_static

# The longest row the shared-memory network sorts: 2048 (8-byte key, 4-byte position) pairs
# take 24 KiB of the 48 KiB every target provides.
BITONIC_MAX = 2048


def sort_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                values: list[Value]) -> KernelSpec | None:
    operand, out = inst.operands[0], inst.results[0]
    if is_static(out.type.size) and out.type.size == 0:
        return None
    n = operand.type.shape[inst.attrs["axis"]]
    if is_static(n) and n <= BITONIC_MAX:
        return _bitonic_kernel(module, plan, name, inst, values)
    return _rank_kernel(module, plan, name, inst, values)


def _bitonic_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                    values: list[Value]) -> KernelSpec:
    operand, out = inst.operands[0], inst.results[0]
    axis = inst.attrs["axis"]
    n = operand.type.shape[axis]
    dtype = operand.type.dtype
    m = launches.next_power_of_two(n)
    key_t = ir.IntType(max(8, dtype.numpy.itemsize * 8))
    block = min(1024, max(launches.WARP, m // 2))
    rows: DimLike = 1
    for d, extent in enumerate(out.type.shape):
        if d != axis:
            rows = rows * extent
    row_dims = [d for d in physical_order(out.type) if d != axis]
    row_shape = [out.type.shape[d] for d in range(out.type.rank)]
    row_shape[axis] = 1
    shared_bytes = m * (key_t.width // 8 + 4) + 8
    launch = launches.block_per_item(rows, block, shared_bytes)
    kb = KernelBuilder(module, plan, name, values, [out], launch)
    keys, positions = kb.shared(key_t, m), kb.shared(I32, m)

    def row_index(ctx: PhaseContext) -> list[ir.Value]:
        order = row_dims + [axis]
        return delinearize(ctx.builder, ctx.block(), row_shape, order)

    def at(index: list[ir.Value], i: ir.Value) -> list[ir.Value]:
        return index[:axis] + [i] + index[axis + 1:]

    with kb.phase() as ctx:  # the row into shared memory, padded with keys that sort last
        b = ctx.builder
        index = row_index(ctx)
        with for_range(b, ctx.thread(), m, step=block, name="load") as i:
            inside = b.icmp_signed("<", i, ir.Constant(I64, n))
            with b.if_else(inside) as (real, pad):
                with real:
                    x = ctx.emitter.value_at(operand, at(index, i))
                    ctx.store_shared(keys, i, sort_key(b, x, dtype))
                with pad:
                    ctx.store_shared(keys, i, ir.Constant(key_t, -1))
            ctx.store_shared(positions, i, b.trunc(i, I32))
    kb.barrier()
    k = 2
    while k <= m:
        j = k // 2
        while j >= 1:
            with kb.phase() as ctx:
                _compare_exchange(ctx, keys, positions, m, block, k, j)
            kb.barrier()
            j //= 2
        k *= 2
    with kb.phase() as ctx:  # the sorted row out
        b = ctx.builder
        index = row_index(ctx)
        with for_range(b, ctx.thread(), n, step=block, name="store") as i:
            position = b.zext(ctx.load_shared(positions, i), I64)
            if inst.attrs["output"] == "indices":
                value = convert_value(b, position, dtypes.int64, out.type.dtype)
            else:
                value = ctx.emitter.value_at(operand, at(index, position))
            indexing.store(b, value, ctx.pointer(out), out.type, at(index, i))
    return kb.finish()


def _compare_exchange(ctx: PhaseContext, keys: SharedArray, positions: SharedArray, m: int,
                      block: int, k: int, j: int) -> None:
    """One stage of the network: element i and i + j (i's bit j clear) in order, ascending
    where i's bit k is clear; (key, position) pairs compare lexicographically."""
    b = ctx.builder
    with for_range(b, ctx.thread(), m // 2, step=block, name="pair") as p:
        low = b.add(b.mul(b.udiv(p, ir.Constant(I64, j)), ir.Constant(I64, 2 * j)),
                    b.urem(p, ir.Constant(I64, j)))
        high = b.add(low, ir.Constant(I64, j))
        key_a, key_b = ctx.load_shared(keys, low), ctx.load_shared(keys, high)
        pos_a, pos_b = ctx.load_shared(positions, low), ctx.load_shared(positions, high)
        greater = b.or_(b.icmp_unsigned(">", key_a, key_b),
                        b.and_(b.icmp_unsigned("==", key_a, key_b),
                               b.icmp_unsigned(">", pos_a, pos_b)))
        ascending = b.icmp_unsigned("==", b.and_(low, ir.Constant(I64, k)),
                                    ir.Constant(I64, 0))
        swap = b.select(ascending, greater, b.not_(greater))
        with b.if_then(swap):
            ctx.store_shared(keys, low, key_b)
            ctx.store_shared(keys, high, key_a)
            ctx.store_shared(positions, low, pos_b)
            ctx.store_shared(positions, high, pos_a)


def _rank_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                 values: list[Value]) -> KernelSpec:
    operand, out = inst.operands[0], inst.results[0]
    axis = inst.attrs["axis"]
    n = operand.type.shape[axis]
    dtype = operand.type.dtype
    size = out.type.size
    launch = launches.elementwise(size) if is_static(size) else \
        launches.symbolic_elementwise(size)  # type: ignore[arg-type]
    kb = KernelBuilder(module, plan, name, values, [out], launch)
    with kb.phase() as ctx:
        b = ctx.builder

        def body(linear: ir.Value) -> None:
            index = delinearize(b, linear, out.type.shape, physical_order(out.type))
            mine = index[axis]
            x = ctx.emitter.value_at(operand, index)
            key = sort_key(b, x, dtype)
            with b.goto_entry_block():
                rank_slot = b.alloca(I64, name="rank")
            b.store(ir.Constant(I64, 0), rank_slot)
            with for_range(b, 0, n, name="j") as j:
                other = sort_key(b, ctx.emitter.value_at(
                    operand, index[:axis] + [j] + index[axis + 1:]), dtype)
                before = b.or_(b.icmp_unsigned("<", other, key),
                               b.and_(b.icmp_unsigned("==", other, key),
                                      b.icmp_signed("<", j, mine)))
                rank = b.load(rank_slot, typ=I64)
                b.store(b.add(rank, b.zext(before, I64)), rank_slot)
            target = index[:axis] + [b.load(rank_slot, typ=I64)] + index[axis + 1:]
            if inst.attrs["output"] == "indices":
                value = convert_value(b, mine, dtypes.int64, out.type.dtype)
            else:
                value = x
            indexing.store(b, value, ctx.pointer(out), out.type, target)
        grid_stride(ctx, out.type.size, body)
    return kb.finish()
