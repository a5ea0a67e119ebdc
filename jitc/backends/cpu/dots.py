"""CPU kernels for dot_general: the blocked GEMM (gemm.py) where it pays, else loops of our
own: a product with one output column sums each element in lanes, several rows at a time;
one with one output row streams its matrix's rows through each thread's range of columns;
others zero each output row and add lhs * rhs-row into it, contracting index by index.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from llvmlite import ir

from jitc.backends.cpu.kernels import (
    Kernel,
    KernelContext,
    apply_epilogue,
    buffers_used,
)
from jitc.backends.cpu.lanes import Lanes, flush_count, lane_count, reduction_loops
from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import for_range, loop_nest
from jitc.backends.llvm.types import I64, constant, memory_type
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value
from jitc.ir.ops.linalg import dot_axes, dot_operand_index
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType


def emit_dot(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction) -> Kernel:
    return dot_into(KernelContext(module, plan, name, buffers_used(inst, plan)), inst)


def dot_into(ctx: KernelContext, inst: Instruction, epilogue: Value | None = None) -> Kernel:
    """out[batch, lhs free, rhs free] = sum over contracting dims.

    For each output row (batch and lhs-free indices) the kernel zeroes the row, then for each
    contracting index adds lhs * rhs-row into it: the innermost loop runs over the rhs free
    dimensions, contiguous in row-major operands, so it vectorizes into FMAs. float16 uses a
    float32 accumulator per element instead. Float GEMM-shaped products large enough to
    amortize packing go to the blocked kernel in gemm.py instead; one with a symbolic row or
    column count holds both and runs this one for a single row or column (gemm.generic_tests).
    """
    from jitc.backends.cpu import gemm
    blocked = gemm.emit(ctx, inst, epilogue,
                        lambda few: _dot_rows(ctx, inst, epilogue, few))
    if blocked is not None:
        return blocked
    outer, cost = _dot_rows(ctx, inst, epilogue)
    ctx.finish()
    return Kernel(ctx.name, outer, cost)


def _dot_rows(ctx: KernelContext, inst: Instruction, epilogue: Value | None,
              small: DimLike | None = None) -> tuple[DimLike, DimLike]:
    """The code of dot_into's own kernel at the builder's position (without returning);
    returns its split extent and cost. `small`: a symbolic extent that the caller tested to
    be at most 1 at the call; a dimension of that extent then picks the loops that a static
    1 picks, so the code is the one an exact compilation of that size runs."""
    attrs = inst.attrs
    lhs, rhs = inst.operands
    out = inst.results[0]
    lb, rb, lc, rc, lf, rf = dot_axes(lhs.type.rank, rhs.type.rank, attrs)
    nb, nlf, nrf = len(lb), len(lf), len(rf)
    b = ctx.builder
    dtype = out.type.dtype
    row_dims = list(range(nb + nlf))
    col_dims = list(range(nb + nlf, nb + nlf + nrf))
    contract_sizes = [lhs.type.shape[d] for d in lc]

    def operand_index(operand_rank: int, batch: list[int], contract: list[int],
                      free: list[int], out_index: list[ir.Value], k: list[ir.Value],
                      free_offset: int) -> list[ir.Value]:
        return dot_operand_index(_i64(0), operand_rank, batch, contract, free, out_index, k,
                                 free_offset)

    def product(out_index: list[ir.Value], k: list[ir.Value], acc: dtypes.DType) -> ir.Value:
        x = ctx.emitter.value_at(lhs, operand_index(lhs.type.rank, lb, lc, lf, out_index, k,
                                                    nb))
        y = ctx.emitter.value_at(rhs, operand_index(rhs.type.rank, rb, rc, rf, out_index, k,
                                                    nb + nlf))
        x = convert_value(b, x, lhs.type.dtype, acc)
        y = convert_value(b, y, rhs.type.dtype, acc)
        return b.fmul(x, y) if acc.is_float else b.mul(x, y)

    def add(x: ir.Value, y: ir.Value, acc: dtypes.DType) -> ir.Value:
        return b.fadd(x, y) if acc.is_float else b.add(x, y)

    out_ptr = ctx.pointer(out)
    bounds_rows: list[tuple[ir.Value | int, ir.Value | int]] = \
        [(0, out.type.shape[d]) for d in row_dims]
    if bounds_rows:
        bounds_rows[0] = (ctx.begin, ctx.end)

    # A byte product's epilogue may narrow its int32 sums (requantization to int8): the
    # output buffer cannot hold the sums, so each is kept in a register until finished.
    narrowing = epilogue is not None and epilogue.type.dtype is not dtype
    if dtype is dtypes.float16 or narrowing:
        acc_dtype = dtypes.float32 if dtype is dtypes.float16 else dtype

        def element(counters: list[ir.Value]) -> None:
            out_index = counters
            with b.goto_entry_block():
                slot = b.alloca(memory_type(acc_dtype))
            b.store(constant(acc_dtype, 0), slot)

            def step(k: list[ir.Value]) -> None:
                b.store(add(b.load(slot), product(out_index, k, acc_dtype), acc_dtype), slot)
            loop_nest(b, [(0, s) for s in contract_sizes], step, name="k")
            value = convert_value(b, b.load(slot), acc_dtype, dtype)
            if narrowing:
                assert epilogue is not None
                ctx.emitter.registers[id(out)] = value
                finished = ctx.emitter.value_at(epilogue, out_index)
                del ctx.emitter.registers[id(out)]
                indexing.store(b, finished, out_ptr, epilogue.type, out_index)
                return
            indexing.store(b, value, out_ptr, out.type, out_index)
            apply_epilogue(ctx, epilogue, out_ptr, out.type, out_index)
        all_bounds = bounds_rows + [(0, out.type.shape[d]) for d in col_dims]
        if not all_bounds:
            with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                element([])
        elif not bounds_rows:
            with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                loop_nest(b, all_bounds, element)
        else:
            loop_nest(b, all_bounds, element)
    elif len(col_dims) == 1 and contract_sizes and (dtype.is_float or dtype.is_int) and \
            all(_at_most_one(out.type.shape[d], small) for d in row_dims):
        return _vector_times_matrix(ctx, out, product, epilogue, row_dims, contract_sizes)
    elif contract_sizes and (dtype.is_float or dtype.is_int) and \
            all(_at_most_one(out.type.shape[d], small) for d in col_dims):
        # Each output element is a dot of two vectors (A @ x, a batch of q . k): its products
        # accumulate in lanes, which vectorize without reassociating anything, summed
        # pairwise as a reduction is (lanes.py). One running sum was a chain of dependent
        # adds: 1024x768 @ 768 took 8 times numpy's time.
        summed = TensorType(dtype, tuple(contract_sizes))
        order = list(range(len(contract_sizes)))
        count = lane_count([dtype])
        flushes = flush_count(summed, order, count)

        def dot_elements(rows: list[list[ir.Value]]) -> None:
            indices = [r + [ir.Constant(I64, 0)] * len(col_dims) for r in rows]
            sums = [Lanes(b, "sum", dtype, count, flushes) for _ in indices]

            def accumulate(lane: ir.Value, at: dict[int, ir.Value]) -> None:
                k = [at[d] for d in order]
                for index, lanes in zip(indices, sums):
                    lanes.accumulate(lane, product(index, k, dtype))

            def flush() -> None:
                for lanes in sums:
                    lanes.flush()
            reduction_loops(b, summed, order, count, accumulate, flush=flush)
            for index, lanes in zip(indices, sums):
                indexing.store(b, lanes.total(), out_ptr, out.type, index)
                apply_epilogue(ctx, epilogue, out_ptr, out.type, index)

        columns = math.prod(out.type.shape[d] for d in col_dims)
        with b.if_then(b.icmp_signed(">", extents.value(b, columns), ir.Constant(I64, 0))):
            if len(bounds_rows) == 1:
                # DOT_ROWS rows at a time: as many memory streams for the prefetchers, and one
                # load of the vector for all of them (the same sums, row by row).
                begin, end = ctx.begin, ctx.end
                blocked = b.add(begin, b.mul(b.sdiv(b.sub(end, begin), _i64(DOT_ROWS)),
                                             _i64(DOT_ROWS)))
                with for_range(b, begin, blocked, DOT_ROWS, name="m") as first:
                    dot_elements([[b.add(first, _i64(r))] for r in range(DOT_ROWS)])
                with for_range(b, blocked, end, name="m") as row:
                    dot_elements([[row]])
            elif bounds_rows:  # (a symbolic column count tested <= 1 may be 0)
                loop_nest(b, bounds_rows, lambda counters: dot_elements([counters]), name="m")
            else:
                with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                    dot_elements([[]])
    else:
        zero = constant(dtype, 0)

        def row(row_counters: list[ir.Value]) -> None:
            col_bounds = [(0, out.type.shape[d]) for d in col_dims]

            def clear(cols: list[ir.Value]) -> None:
                indexing.store(b, zero, out_ptr, out.type, row_counters + cols)
            loop_nest(b, col_bounds, clear, name="z")

            def contract(k: list[ir.Value]) -> None:
                def accumulate(cols: list[ir.Value]) -> None:
                    index = row_counters + cols
                    current = indexing.load(b, out_ptr, out.type, index)
                    indexing.store(b, add(current, product(index, k, dtype), dtype), out_ptr,
                                   out.type, index)
                loop_nest(b, col_bounds, accumulate, name="n")
            loop_nest(b, [(0, s) for s in contract_sizes], contract, name="k")
            if epilogue is not None:
                def finish_row(cols: list[ir.Value]) -> None:
                    apply_epilogue(ctx, epilogue, out_ptr, out.type, row_counters + cols)
                loop_nest(b, col_bounds, finish_row, name="e")

        if bounds_rows:
            loop_nest(b, bounds_rows, row, name="m")
        else:
            with b.if_then(b.icmp_signed("<", ctx.begin, ctx.end)):
                row([])
    outer = out.type.shape[0] if row_dims else 1
    return outer, extents.positive(out.type.size) * extents.positive(_product(contract_sizes))


# The rows a product of one output column sums at once.
DOT_ROWS = 4


def _i64(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def _at_most_one(extent: DimLike, small: DimLike | None) -> bool:
    if is_static(extent):
        return extent == 1
    return small is not None and extent == small


def _vector_times_matrix(ctx: KernelContext, out: Value,
                         product: Callable[[list[ir.Value], list[ir.Value], dtypes.DType],
                                           ir.Value],
                         epilogue: Value | None, row_dims: list[int],
                         contract_sizes: list[DimLike]) -> tuple[DimLike, DimLike]:
    """A product with one row (x @ W): the threads split its columns into contiguous ranges,
    and each streams the matrix's rows through its range in tiles that stay in the L1 cache:
    out[tile] += x[k] * W[k, tile] for each k, STREAM_STEPS rows of W at a time. Each
    element sums its products in contraction order, so the bits are the row kernel's.

    The matrix comes from memory in its own order, rows after rows, which the hardware
    prefetchers follow: a decode step reads its weights once, so they are rarely in a cache.
    Before, each thread walked the matrix down columns of 64 elements (a 256-byte strip per
    row, a row apart): as fast as numpy while the matrix sat in the cache, but 2.4 to 2.9
    times numpy's time for 768x3072 and 3072x768 read from memory (1.0-1.1 ms against numpy's
    0.38-0.50; one thread was as fast as two).
    """
    b = ctx.builder
    dtype = out.type.dtype
    width = lane_count([dtype])
    columns = out.type.shape[-1]
    blocks = (columns + (width - 1)) // width
    tile = max(width, STREAM_TILE_BYTES // dtype.itemsize // width * width)
    out_ptr = ctx.pointer(out)
    columns_value = extents.value(b, columns)
    first = b.mul(ctx.begin, _i64(width))
    end = b.mul(ctx.end, _i64(width))
    last = b.select(b.icmp_signed("<", end, columns_value), end, columns_value)
    grouped = len(contract_sizes) == 1

    def row(row_counters: list[ir.Value]) -> None:
        with for_range(b, first, last, tile, name="tile") as start:
            stop = b.add(start, _i64(tile), flags=["nsw"])
            stop = b.select(b.icmp_signed("<", stop, last), stop, last)

            def index(column: ir.Value) -> list[ir.Value]:
                return row_counters + [column]
            with for_range(b, start, stop, name="z") as column:
                indexing.store(b, constant(dtype, 0), out_ptr, out.type, index(column))

            def add_rows(k: list[ir.Value], count: int) -> None:
                with for_range(b, start, stop, name="n") as column:
                    at = index(column)
                    total = indexing.load(b, out_ptr, out.type, at)
                    for step in range(count):  # in contraction order, element by element
                        term = product(at, [b.add(k[0], _i64(step), flags=["nsw"])] + k[1:],
                                       dtype)
                        total = b.fadd(total, term) if dtype.is_float else b.add(total, term)
                    indexing.store(b, total, out_ptr, out.type, at)
            if grouped:
                steps = extents.value(b, contract_sizes[0])
                whole = b.mul(b.sdiv(steps, _i64(STREAM_STEPS)), _i64(STREAM_STEPS))
                with for_range(b, 0, whole, STREAM_STEPS, name="k") as k:
                    add_rows([k], STREAM_STEPS)
                with for_range(b, whole, steps, name="k") as k:
                    add_rows([k], 1)
            else:
                loop_nest(b, [(0, s) for s in contract_sizes], lambda k: add_rows(k, 1),
                          name="k")
            if epilogue is not None:
                with for_range(b, start, stop, name="e") as column:
                    apply_epilogue(ctx, epilogue, out_ptr, out.type, index(column))
    loop_nest(b, [(0, out.type.shape[d]) for d in row_dims], row, name="m")
    cost = extents.positive(out.type.size) * extents.positive(_product(contract_sizes))
    return blocks, cost


# A product of one row adds this many rows of its matrix into its output per pass (the
# output tile is loaded and stored once per pass), and keeps a tile of this many bytes of
# output in the L1 cache while the matrix's rows stream through it.
STREAM_STEPS = 4
STREAM_TILE_BYTES = 8192


def _product(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n
