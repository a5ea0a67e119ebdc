"""Reduction accumulators with a fixed number of lanes, and the loops that fill them.

Lane k of a reduction accumulates the elements whose innermost reduced index is k modulo the
lane count; at the end the lanes are combined in a fixed pairwise tree. The lanes live in a
small stack array and the innermost loop runs over them, so LLVM's loop vectorizer turns that
loop into whole-register operations (16 f32 lanes per AVX-512 register, 8 per AVX2 register)
without reassociating anything: the result is the same bits on every target, vector width and
thread count. Unrolling the lanes by hand instead left the vectorization to the SLP vectorizer,
which packed them into 128-bit registers with shuffles (softmax ran at a sixth of this speed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from jitc.backends.llvm.loops import for_range, loop_nest
from jitc.backends.llvm.reductions import combine
from jitc.backends.llvm.types import I32, I64, constant, pointer_to, value_type
from jitc.ir import dtypes
from jitc.ir.ops.reduce import reduce_identity
from jitc.ir.types import TensorType

# Four 512-bit registers of partial results: enough independent chains to hide the add latency.
LANE_BYTES = 256
MAX_LANES = 64


def lane_count(types: Sequence[dtypes.DType]) -> int:
    widest = max((t.itemsize for t in types), default=4)
    return min(MAX_LANES, LANE_BYTES // widest)


class Lanes:
    """The partial results of one reduction operand: `count` accumulators in a stack array.

    Setting and combining the lanes are whole-vector operations (one store, then halving
    shuffles), which keeps the IR, and LLVM's time on it, small; bool lanes, which a vector
    would pack into bits, go one by one.
    """

    def __init__(self, b: ir.IRBuilder, kind: str, dtype: dtypes.DType, count: int) -> None:
        self.b, self.kind, self.dtype, self.count = b, kind, dtype, count
        element = value_type(dtype)
        self.vector = None if element == ir.IntType(1) else ir.VectorType(element, count)
        with b.goto_entry_block():
            self.array = b.alloca(ir.ArrayType(element, count))
            self.array.align = 64
        identity = constant(dtype, reduce_identity(kind, dtype.numpy))  # type: ignore[arg-type]
        if self.vector is not None:
            b.store(ir.Constant(self.vector, [identity.constant] * count), self._whole())
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


def reduction_loops(b: ir.IRBuilder, t: TensorType, order: list[int], count: int,
                    accumulate: Callable[[ir.Value, dict[int, ir.Value]], None],
                    each_block: Callable[[dict[int, ir.Value]], None] | None = None) -> None:
    """Loops over the reduced dimensions `order` of `t` (outermost first), calling
    accumulate(lane, index) for every element; the innermost dimension runs in blocks of
    `count` lanes, the remainder in the first lanes. `each_block(index)` runs once before
    each full block, with the index of its first element."""
    zero = ir.Constant(I64, 0)
    if not order:
        accumulate(zero, {})
        return
    outer, inner = order[:-1], order[-1]
    n = t.shape[inner]
    main = n - n % count

    def innermost(counters: list[ir.Value]) -> None:
        fixed = dict(zip(outer, counters))
        if main:
            with for_range(b, 0, main, count, name="block") as start:
                if each_block is not None:
                    each_block({**fixed, inner: start})
                with for_range(b, 0, count, name="lane") as lane:
                    accumulate(lane, {**fixed, inner: b.add(start, lane, flags=["nsw"])})
        if main < n:
            with for_range(b, 0, n - main, name="rest") as lane:
                position = b.add(ir.Constant(I64, main), lane, flags=["nsw"])
                accumulate(lane, {**fixed, inner: position})

    loop_nest(b, [(0, t.shape[d]) for d in outer], innermost, name="ro")
