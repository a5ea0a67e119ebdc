"""Reduction accumulators with a fixed number of lanes, and the loops that fill them.

Lane k of a reduction accumulates the elements whose innermost reduced index is k modulo the
lane count; at the end the lanes are combined in a fixed pairwise tree. The lanes live in a
small stack array and the innermost loop runs over them, so LLVM's loop vectorizer turns that
loop into whole-register operations (16 f32 lanes per AVX-512 register, 8 per AVX2 register)
without reassociating anything: the result is the same bits on every target, vector width and
thread count. Unrolling the lanes by hand instead left the vectorization to the SLP vectorizer,
which packed them into 128-bit registers with shuffles (softmax ran at a sixth of this speed).

Float sums are pairwise, as numpy's are: a lane never adds more than BLOCK_STEPS elements in a
row. When it has, `reduction_loops` flushes the lanes into a cascade, a binary counter of
partial sums (level j holds the sum of 2^j flushed blocks; pushing a block adds it into the
occupied levels below the first free one), so a sum of n elements has an error bound of about
(BLOCK_STEPS + log2(n / (count * BLOCK_STEPS)) + log2(count)) ulps of the sum of magnitudes,
not n / count. Where every lane stays within BLOCK_STEPS (short rows) the code is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from llvmlite import ir

from jitc.backends.llvm import extents
from jitc.backends.llvm.loops import for_range, loop_nest
from jitc.backends.llvm.reductions import combine
from jitc.backends.llvm.types import I32, I64, constant, declare, pointer_to, value_type
from jitc.ir import dtypes
from jitc.ir.ops.reduce import reduce_identity
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

# Four 512-bit registers of partial results: enough independent chains to hide the add latency.
LANE_BYTES = 256
MAX_LANES = 64
# Elements a lane of a float sum adds in sequence before its partial sum joins the cascade:
# numpy's pairwise sum adds 16 in sequence per accumulator; a flush costs about one block.
BLOCK_STEPS = 32
# The flushes a row of symbolic length may need: 2^32 blocks of BLOCK_STEPS elements per lane.
SYMBOLIC_FLUSHES = (1 << 32) - 1


def is_pairwise(kind: str, dtype: dtypes.DType) -> bool:
    """Float sums go through the cascade; other reductions are exact or gain nothing."""
    return kind == "sum" and dtype.is_float


def lane_count(types: Sequence[dtypes.DType]) -> int:
    widest = max((t.itemsize for t in types), default=4)
    return min(MAX_LANES, LANE_BYTES // widest)


class Lanes:
    """The partial results of one reduction operand: `count` accumulators in a stack array.

    Setting and combining the lanes are whole-vector operations (one store, then halving
    shuffles), which keeps the IR, and LLVM's time on it, small; bool lanes, which a vector
    would pack into bits, go one by one.
    """

    def __init__(self, b: ir.IRBuilder, kind: str, dtype: dtypes.DType, count: int,
                 flushes: int = 0) -> None:
        """`flushes`: how many times the loops may call `flush` (see `flush_count`)."""
        self.b, self.kind, self.dtype, self.count = b, kind, dtype, count
        element = value_type(dtype)
        self.vector = None if element == ir.IntType(1) else ir.VectorType(element, count)
        self.levels = flushes.bit_length() if is_pairwise(kind, dtype) else 0
        with b.goto_entry_block():
            self.array = b.alloca(ir.ArrayType(element, count))
            self.array.align = 64
            if self.levels:
                assert self.vector is not None
                self.cascade = b.alloca(ir.ArrayType(ir.ArrayType(element, count),
                                                     self.levels))
                self.cascade.align = 64
                self.pushed = b.alloca(I64)
        identity = constant(dtype, reduce_identity(kind, dtype.numpy))  # type: ignore[arg-type]
        if self.vector is not None:
            self.identity = ir.Constant(self.vector, [identity.constant] * count)
            b.store(self.identity, self._whole())
            if self.levels:
                b.store(ir.Constant(I64, 0), self.pushed)
            return
        with for_range(b, 0, count, name="lane0") as lane:
            b.store(identity, self._slot(lane))

    def _whole(self) -> ir.Value:
        assert self.vector is not None
        return pointer_to(self.b, self.array, self.vector)

    def _slot(self, lane: ir.Value) -> ir.Value:
        return self.b.gep(self.array, [ir.Constant(I64, 0), lane], inbounds=True)

    def accumulate(self, lane: ir.Value, x: ir.Value) -> None:
        slot = self._slot(lane)
        self.b.store(combine(self.b, self.kind, self.dtype, self.b.load(slot), x), slot)

    def _cell(self, array: ir.Value, lane: ir.Value, level: ir.Value | None = None
              ) -> ir.Value:
        zero = ir.Constant(I64, 0)
        return self.b.gep(array, [zero, lane] if level is None else [zero, level, lane],
                          inbounds=True)

    def flush(self) -> None:
        """Push the lanes' partial sums into the cascade and restart them from zero: with
        p blocks pushed before, the new block absorbs the levels below the lowest clear bit
        of p (older partial sums first) and lands on that level.

        Every step is a loop over the lanes, like `accumulate`, so that LLVM gives it the
        same vector width: a wide store read back by narrower loads (or the reverse) misses
        store forwarding, and that stall cost as much as the whole block it follows."""
        if not self.levels:
            return
        b, kind, dtype = self.b, self.kind, self.dtype
        pushed = b.load(self.pushed)
        cttz = declare(b.module, "llvm.cttz.i64", ir.FunctionType(I64, [I64, ir.IntType(1)]))
        level = b.call(cttz, [b.not_(pushed), ir.Constant(ir.IntType(1), 0)])
        with for_range(b, 0, level, name="level") as j, \
                for_range(b, 0, self.count, name="merge") as lane:
            older = b.load(self._cell(self.cascade, lane, j))
            b.store(combine(b, kind, dtype, older, b.load(self._slot(lane))), self._slot(lane))
        with for_range(b, 0, self.count, name="land") as lane:
            b.store(b.load(self._slot(lane)), self._cell(self.cascade, lane, level))
            b.store(self.identity.constant[0], self._slot(lane))  # type: ignore[index]
        b.store(b.add(pushed, ir.Constant(I64, 1)), self.pushed)

    def _add_cascade(self) -> None:
        """Add the occupied cascade levels into the lanes (the open block), smallest first."""
        b = self.b
        pushed = b.load(self.pushed)
        bits = [b.trunc(b.lshr(pushed, ir.Constant(I64, j)), ir.IntType(1))
                for j in range(self.levels)]
        with for_range(b, 0, self.count, name="gather") as lane:
            v = b.load(self._slot(lane))
            for j, bit in enumerate(bits):
                older = b.load(self._cell(self.cascade, lane, ir.Constant(I64, j)))
                v = b.select(bit, combine(b, self.kind, self.dtype, older, v), v)
            b.store(v, self._slot(lane))

    def total(self) -> ir.Value:
        """The lanes combined in a fixed tree: lane k with lane k + count/2, and so on."""
        b = self.b
        if self.vector is None:
            values = [b.load(self._slot(ir.Constant(I64, k))) for k in range(self.count)]
            while len(values) > 1:
                half = len(values) // 2
                values = [combine(b, self.kind, self.dtype, values[i], values[i + half])
                          for i in range(half)]
            return values[0]
        if self.levels:
            self._add_cascade()
        v = b.load(self._whole(), typ=self.vector, align=64)
        width = self.count
        while width > 1:
            half = width // 2
            undefined = ir.Constant(v.type, ir.Undefined)
            low = b.shuffle_vector(v, undefined, ir.Constant(
                ir.VectorType(I32, half), list(range(half))))
            high = b.shuffle_vector(v, undefined, ir.Constant(
                ir.VectorType(I32, half), list(range(half, width))))
            v = combine(b, self.kind, self.dtype, low, high)
            width = half
        return b.extract_element(v, ir.Constant(I32, 0))


def _steps(t: TensorType, order: list[int], count: int) -> tuple[int, int]:
    """(rows, steps per row): the iterations of the outer reduced dimensions, and the elements
    one lane takes from each row of the innermost."""
    rows = math.prod(t.shape[d] for d in order[:-1])
    return rows, -(-t.shape[order[-1]] // count)


def flush_count(t: TensorType, order: list[int], count: int) -> int:
    """How often `reduction_loops` flushes the lanes over `order` of `t` (at most). With a
    symbolic extent the rows count as long: SYMBOLIC_FLUSHES bounds the flushes of any
    row that fits in memory."""
    if not order:
        return 0
    rows, steps = _steps(t, order, count)
    if not (is_static(rows) and is_static(steps)):
        return SYMBOLIC_FLUSHES
    if steps > BLOCK_STEPS:  # long rows: every BLOCK_STEPS blocks, and at each row's end
        return rows * (steps // BLOCK_STEPS + (rows > 1))
    if rows * steps > BLOCK_STEPS:  # short rows: every BLOCK_STEPS // steps rows
        return rows // (BLOCK_STEPS // steps) + 1
    return 0


def reduction_loops(b: ir.IRBuilder, t: TensorType, order: list[int], count: int,
                    accumulate: Callable[[ir.Value, dict[int, ir.Value]], None],
                    each_block: Callable[[dict[int, ir.Value]], None] | None = None,
                    flush: Callable[[], None] | None = None) -> None:
    """Loops over the reduced dimensions `order` of `t` (outermost first), calling
    accumulate(lane, index) for every element; the innermost dimension runs in blocks of
    `count` lanes, the remainder in the first lanes. `each_block(index)` runs once before
    each full block, with the index of its first element. `flush()` runs whenever a lane may
    have taken BLOCK_STEPS elements since the last flush (`flush_count` times at most)."""
    zero = ir.Constant(I64, 0)
    if not order:
        accumulate(zero, {})
        return
    outer, inner = order[:-1], order[-1]
    n = t.shape[inner]
    main = n - n % count if is_static(n) else n // count * count
    rows, steps = _steps(t, order, count)
    if not flush_count(t, order, count):
        flush = None
    # A row of symbolic length is taken as long.
    long_rows = not is_static(steps) or steps > BLOCK_STEPS
    chunk = count * BLOCK_STEPS if flush is not None and long_rows else 0
    pending = None
    if flush is not None and not chunk:
        with b.goto_entry_block():
            pending = b.alloca(I64)
        b.store(zero, pending)

    def blocks(fixed: dict[int, ir.Value], start: ir.Value | DimLike, stop: ir.Value | DimLike,
               flush_chunks: bool = False) -> None:
        with for_range(b, start, stop, count, name="block") as first:
            if each_block is not None:
                each_block({**fixed, inner: first})
            with for_range(b, 0, count, name="lane") as lane:
                accumulate(lane, {**fixed, inner: b.add(first, lane, flags=["nsw"])})
            if flush_chunks:  # after each `chunk` elements, as the chunk loop flushes
                end = b.add(first, ir.Constant(I64, count), flags=["nsw"])
                with b.if_then(b.icmp_signed("==", b.urem(end, ir.Constant(I64, chunk)),
                                             zero)):
                    assert flush is not None
                    flush()

    def innermost(counters: list[ir.Value]) -> None:
        fixed = dict(zip(outer, counters))
        if chunk and not is_static(main):
            # One block loop that flushes every `chunk` elements, not a chunk loop and a loop
            # for the blocks after the last chunk: the same sums, one copy of the element
            # code for LLVM to optimize instead of two.
            blocks(fixed, 0, main, flush_chunks=True)
        else:
            chunked = main - main % chunk if chunk else 0
            if chunked:
                with for_range(b, 0, chunked, chunk, name="chunk") as first:
                    blocks(fixed, first, b.add(first, ir.Constant(I64, chunk), flags=["nsw"]))
                    assert flush is not None
                    flush()
            # A symbolic bound emits the loop; its trip count may be zero at the call.
            if not is_static(main) or chunked < main:
                blocks(fixed, chunked, main)
        if not is_static(n) or main < n:
            with for_range(b, 0, n - main, name="rest") as lane:
                position = b.add(extents.value(b, main), lane, flags=["nsw"])
                accumulate(lane, {**fixed, inner: position})
        if chunk and (not is_static(rows) or rows > 1):
            assert flush is not None
            flush()
        if pending is not None:
            # Flush before the next row could take a lane past BLOCK_STEPS.
            taken = b.add(b.load(pending), ir.Constant(I64, steps))
            full = b.icmp_signed(">", taken, ir.Constant(I64, BLOCK_STEPS - steps))
            b.store(b.select(full, zero, taken), pending)
            with b.if_then(full):
                assert flush is not None
                flush()

    loop_nest(b, [(0, t.shape[d]) for d in outer], innermost, name="ro")
