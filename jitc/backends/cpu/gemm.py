"""Blocked matrix multiplication for dot_general on the CPU, emitted as LLVM IR.

The structure is Goto's: the contracting dimension is cut into blocks of depth `kc` and the
columns into blocks of width `nc`. For each (column block, depth block) the kernel packs the
rhs block into panels `nr` columns wide, then, for each strip of `mr` rows, packs the lhs strip
and runs the register-tile micro-kernel against every panel. The packed strip stays in L1
while the panels stream from L2; packing also turns any operand layout (row-major or a
transposed bitcast) into the unit-stride order the micro-kernel wants, so the tile code never
sees a stride. When a strip's last depth block is done, the fused epilogue rewrites its rows
of the column block in place, while they are still in cache.

Threads split the output into row strips or column panels (whichever balances two threads
better, counting packing): a kernel call computes units [begin, end) of that split for every
batch index they cover. Packing buffers live on the kernel's stack, so the code is reentrant
and allocates nothing.

The micro-kernel and the packing routines are shared by all GEMM kernels of a module
(gemm_routines.py); a kernel here is the loop nest around them plus its epilogue.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from llvmlite import ir

from jitc.backends.cpu.gemm_routines import (
    Tiling,
    at,
    const,
    maximum,
    minimum,
    pack_function,
    packing_kind,
    scaled,
    strip_function,
    tiling_for,
)
from jitc.backends.cpu.kernels import Kernel, KernelContext
from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.types import memory_type
from jitc.ir import dtypes, symbolic
from jitc.ir.core import Instruction, Value
from jitc.ir.ops.linalg import dot_axes
from jitc.ir.symbolic import DimLike, at_most, is_static

# Below this many multiply-adds (over all batch indices) the row kernel in dots.py is
# used: the blocked kernel is faster from about 20^3 up, but under 32^3 that saves less than
# a microsecond, not worth compiling the shared GEMM routines for.
MIN_WORK = 1 << 15
# A kernel's cost is counted in the element operations of an elementwise loop, which the
# threading decision (codegen.PARALLEL_GRAIN per thread) is calibrated for. With the pool's
# workers spinning between the kernels of a call, a parallel section costs about a microsecond
# and a core does some 100 multiply-adds per ns, so a product is split from about 512K
# multiply-adds up: 32x128x128 (+ tanh) takes 5.3 us on one thread and 4.4 us on two,
# 128x128x128 20 us and 13 us.
FMAS_PER_OPERATION = 8
# Products with at most this many rows read a row-major rhs in place instead of packing it,
# when it fits in a core's L2 (products of one row strip always do: each element is read
# once). A larger rhs read in place streams from L3 once per row strip and per thread that
# covers it: packed, 64x768x2304 ran 25% faster on two threads, 64x3072x768 23%,
# 128x768x768 20%, while 64x784x512 (1.6 MB) and 64x512x512 stayed within 5% either way.
DIRECT_ROWS = 128
DIRECT_RHS_BYTES = 2 << 20
# The value a symbol is taken to have where a heuristic needs a number (how threads split).
SYMBOLIC_GUESS = 1024


# Emits the generic kernel's code where the builder is; returns its split extent and cost.
# Its argument: a symbolic extent that is at most 1 where this code runs.
RowKernel = Callable[[DimLike], tuple[DimLike, DimLike]]


# -- which dot_generals become a GEMM ------------------------------------------------------

@dataclass(frozen=True)
class Side:
    """How the micro-kernel's packing reads one operand."""

    value: Value                # the IR value whose buffer holds it
    batch: tuple[int, ...]      # element stride of each batch dimension
    free: int                   # element stride along the (collapsed) free dimension
    contract: int               # element stride along the (collapsed) contracting dimension


@dataclass(frozen=True)
class Form:
    """A dot_general as batched C[m, n] = A[m, k] B[k, n] over strided buffers."""

    batch: tuple[int, ...]                  # sizes of the batch dimensions
    m: int
    n: int
    k: int
    a: Side                                 # the operand indexed by rows
    b: Side                                 # the operand indexed by columns
    c_batch: tuple[int, ...]
    c_row: int                              # output stride between rows (columns are unit)
    rows: tuple[tuple[int, int], ...]       # (output dimension, size) a row index spans
    cols: tuple[tuple[int, int], ...]


def _collapse(sizes: Sequence[int], strides: Sequence[Sequence[int]], tags: Sequence[int]
              ) -> tuple[int, tuple[int, ...], tuple[tuple[int, int], ...]] | None:
    """Merge dimensions into one index when every tensor in `strides` lays them out densely
    in the same order (sorted by the first tensor's strides, major first); None otherwise.
    Returns the merged size, each tensor's stride for it and the (tag, size) of each part."""
    keep = sorted((i for i, s in enumerate(sizes) if s != 1), key=lambda i: -strides[0][i])
    if not keep:
        return 1, tuple(0 for _ in strides), ()
    for x, y in itertools.pairwise(keep):
        if any(st[x] != st[y] * sizes[y] for st in strides):
            return None
    last = keep[-1]
    return (math.prod(sizes[i] for i in keep), tuple(st[last] for st in strides),
            tuple((tags[i], sizes[i]) for i in keep))


def analyse(inst: Instruction, lhs: Value, rhs: Value) -> Form | None:
    """The GEMM view of dot_general `inst` whose operands are read from the buffers of
    `lhs` and `rhs` (values of the operands' shapes, possibly bitcasts), or None when the
    generic kernel should run it."""
    out = inst.results[0].type
    dtype = out.dtype
    attrs = inst.attrs
    # Byte products (`result=i32`) have their own kernel (gemm_bytes.py) on the same view.
    if not attrs.get("result") and (dtype not in (dtypes.float32, dtypes.float64) or
                                    lhs.type.dtype is not dtype or rhs.type.dtype is not dtype):
        return None
    lb, rb, lc, rc, lf, rf = dot_axes(lhs.type.rank, rhs.type.rank, attrs)
    sl, sr, so = lhs.type.strides, rhs.type.strides, out.strides
    nb, nlf = len(lb), len(lf)
    rows = _collapse([lhs.type.shape[d] for d in lf],
                     ([so[nb + j] for j in range(nlf)], [sl[d] for d in lf]),
                     [nb + j for j in range(nlf)])
    cols = _collapse([rhs.type.shape[d] for d in rf],
                     ([so[nb + nlf + j] for j in range(len(rf))], [sr[d] for d in rf]),
                     [nb + nlf + j for j in range(len(rf))])
    depth = _collapse([lhs.type.shape[d] for d in lc], ([sl[d] for d in lc],
                                                         [sr[d] for d in rc]), list(lc))
    if rows is None or cols is None or depth is None:
        return None
    (m, (c_row, a_free), row_parts), (n, (c_col, b_free), col_parts) = rows, cols
    k, (a_depth, b_depth), _ = depth
    batch = tuple(out.shape[:nb])
    a = Side(lhs, tuple(sl[d] for d in lb), a_free, a_depth)
    b = Side(rhs, tuple(sr[d] for d in rb), b_free, b_depth)
    c_batch = tuple(so[:nb])
    # A symbolic extent counts as large (`at_most` is false for it).
    if at_most(m, 1) or at_most(n, 1) or at_most(k, 0) or \
            at_most(math.prod(batch) * m * n * k, MIN_WORK - 1):
        return None
    if c_col == 1:
        return Form(batch, m, n, k, a, b, c_batch, c_row, row_parts, col_parts)
    if c_row == 1:
        # A column-major output is the transposed product: C^T = B^T A^T.
        return Form(batch, n, m, k, b, a, c_batch, c_col, col_parts, row_parts)
    return None


def _split_costs(form: Form, t: Tiling, threads: int = 2, packs_rhs: bool = True
                 ) -> tuple[float, float]:
    """The estimated cycles of the busiest of `threads` threads when they divide row strips,
    and when they divide column panels: multiply-adds (`lanes` per half-cycle) plus packing,
    about half a cycle per element read (the lhs once per column block, the rhs once; both
    mostly come from L3 or memory). Symbolic extents are estimated as SYMBOLIC_GUESS."""
    if not all(is_static(x) for x in (form.m, form.n, form.k, *form.batch)):
        guess = {name: SYMBOLIC_GUESS for name in symbolic.symbols_of(
            (form.m, form.n, form.k, *form.batch))}
        form = replace(form, m=symbolic.evaluate(form.m, guess),
                       n=symbolic.evaluate(form.n, guess), k=symbolic.evaluate(form.k, guess),
                       batch=tuple(symbolic.evaluate(x, guess) for x in form.batch))

    def busiest(split_rows: bool) -> float:
        extent, unit = (form.m, t.mr) if split_rows else (form.n, t.nr)
        per_batch = _ceil(extent, unit)
        units = math.prod(form.batch) * per_batch
        # Every unit is full but the last of each batch index, which is `short` smaller.
        short = per_batch * unit - extent
        worst = 0.0
        for chunk in range(threads):
            lo, hi = units * chunk // threads, units * (chunk + 1) // threads
            own = (hi - lo) * unit - short * (hi // per_batch - lo // per_batch)
            m, n = (own, form.n) if split_rows else (form.m, own)
            packed = m * form.k * _ceil(n, t.nc) + (n * form.k if packs_rhs else 0)
            worst = max(worst, m * n * form.k / (2 * t.lanes) + packed / 2)
        return worst
    return busiest(True), busiest(False)


def _split_rows(form: Form, t: Tiling, threads: int = 2, packs_rhs: bool = True) -> bool:
    """Whether threads should divide row strips (else column panels): whichever leaves the
    busiest thread the fewest cycles (`_split_costs`)."""
    rows, columns = _split_costs(form, t, threads, packs_rhs)
    return rows <= columns


def _split_rows_over(form: Form, t: Tiling, counts: range, packs_rhs: bool) -> bool:
    """`_split_rows` for one variant serving every row count in `counts` (a symbolic row
    count): the split with the fewer cycles summed over them. A single typical count would
    not do: 16 rows split into two strips of 8 evenly, 13 rows unevenly (8 + 5), and most
    counts are like 13."""
    rows = columns = 0.0
    for m in counts:
        by_rows, by_columns = _split_costs(replace(form, m=m), t, packs_rhs=packs_rhs)
        rows, columns = rows + by_rows, columns + by_columns
    return rows <= columns


# -- code ----------------------------------------------------------------------------------

class _Gemm:
    """Emits one GEMM kernel body into a KernelContext."""

    def __init__(self, ctx: KernelContext, inst: Instruction, form: Form,
                 epilogue: Value | None, t: Tiling) -> None:
        self.ctx, self.form, self.epilogue, self.t = ctx, form, epilogue, t
        self.b = ctx.builder
        self.out = inst.results[0]
        self.elem = memory_type(self.out.type.dtype)
        module, dtype = ctx.module, self.out.type.dtype
        self.strip = strip_function(module, dtype, t, packing_kind(form.a.free, form.a.contract))
        self.pack_rhs = pack_function(module, dtype, t, packing_kind(form.b.free, form.b.contract))
        # Equal blocks no larger than the limits: 784 deep is 4 x 196, not 3 x 256 + 16.
        # A symbolic depth: blocks of the full depth, the last one shorter.
        self.k_blocks: int | None = None
        self.kc = t.kc
        if is_static(form.k):
            self.k_blocks = _ceil(form.k, t.kc)
            self.kc = _ceil(form.k, self.k_blocks)
        # A short product reads a row-major rhs in place: packing it would cost a pass over
        # memory not overlapped with arithmetic, which a few row strips cannot amortise. Not
        # when its rows are a multiple of 4 KiB apart: every row of a panel would then fall
        # into the same cache sets (64x768x3072 ran 17% slower in place).
        itemsize = self.out.type.dtype.itemsize
        row_bytes = form.b.contract * itemsize
        in_place = form.b.free == 1 and is_static(form.n) and form.n % t.nr == 0 and \
            is_static(row_bytes) and row_bytes % 4096 != 0
        fits = in_place and is_static(form.k) and form.k * form.n * itemsize <= DIRECT_RHS_BYTES
        # (the most rows it is for, None: any; in place; threads split rows), fewest first.
        self.variants: list[tuple[int | None, bool, bool]]
        if is_static(form.m):
            direct = in_place and (form.m <= t.mr or (fits and form.m <= DIRECT_ROWS))
            self.variants = [(None, direct, _split_rows(form, t, packs_rhs=not direct))]
        else:
            # A symbolic row count: the call chooses the variant for its count: one row strip,
            # up to DIRECT_ROWS rows (in place when it can be), more (packed). Each is split
            # the way that serves the counts of its range best, the last one as an exact
            # compilation of SYMBOLIC_GUESS rows would be.
            candidates = [(t.mr, in_place, range(1, t.mr + 1)),
                          (DIRECT_ROWS, fits, range(t.mr + 1, DIRECT_ROWS + 1)),
                          (None, False, range(SYMBOLIC_GUESS, SYMBOLIC_GUESS + 1))]
            self.variants = []
            for bound, direct, counts in candidates:
                variant = (bound, direct, _split_rows_over(form, t, counts,
                                                           packs_rhs=not direct))
                if self.variants and self.variants[-1][1:] == variant[1:]:
                    self.variants[-1] = variant  # the same code serves both ranges
                else:
                    self.variants.append(variant)
        self._configure(*self.variants[-1][1:])

    def _configure(self, direct: bool, split_rows: bool) -> None:
        t, form = self.t, self.form
        self.direct, self.split_rows = direct, split_rows
        if not is_static(form.n):
            self.nc = t.nc
            return
        # The columns one thread covers (of two, when they split the columns), cut into equal
        # blocks: 1152 is 3 x 384, not 2 x 512 + 128.
        width = _ceil(form.n, t.nr)
        if not self.split_rows and math.prod(form.batch) == 1:
            width = _ceil(width, 2)
        width *= t.nr
        self.nc = _ceil(_ceil(width, _ceil(width, t.nc)), t.nr) * t.nr

    def emit(self, rows: RowKernel | None = None,
             generic: Sequence[tuple[DimLike, int]] = ()) -> Kernel:
        """The kernel; with `generic` tests (`extent <= bound`), the code of `rows` (the
        generic kernel) runs instead when one of them holds at the call."""
        b, t, form = self.b, self.t, self.form
        packing = [v for v in self.variants if not v[1]]
        if packing:
            widest = 0
            for variant in packing:
                self._configure(*variant[1:])
                widest = max(widest, self.nc)
            with b.goto_entry_block():
                # Slack for the whole-vector stores of a transposed copy: up to a block of
                # depth steps past kc, and a vector past the last step.
                slack = t.lanes + 1
                self.packed_b = self._stack_buffer((self.kc + slack) * widest, "bpack")
        batches = math.prod(form.batch)
        fmas = batches * form.m * form.n * form.k
        cost: DimLike | extents.Choice = max(fmas // FMAS_PER_OPERATION, 1) \
            if is_static(fmas) else fmas // FMAS_PER_OPERATION
        if not generic:
            outer = self._emit_variants(self.variants)
            self.ctx.finish()
            return Kernel(self.ctx.name, outer, cost)
        assert rows is not None
        outer, cost = self._generic_or_blocked(rows, generic, cost)
        self.ctx.finish()
        return Kernel(self.ctx.name, outer, cost)

    def _generic_or_blocked(self, rows: RowKernel, generic: Sequence[tuple[DimLike, int]],
                            cost: DimLike | extents.Choice
                            ) -> tuple[DimLike | extents.Choice, DimLike | extents.Choice]:
        """The generic kernel for the first test of `generic` that holds at the call (one
        copy per test: one row and one column take different loops), else the GEMM."""
        if not generic:
            return self._emit_variants(self.variants), cost
        (extent, bound), rest = generic[0], generic[1:]
        b = self.b
        with b.if_else(b.icmp_signed("<=", self._value(extent), const(bound))) as (few, more):
            with few:
                row_outer, row_cost = rows(extent)
            with more:
                outer, cost = self._generic_or_blocked(rows, rest, cost)
        return (extents.Choice(extent, bound, row_outer, outer),
                extents.Choice(extent, bound, row_cost, cost))

    def _emit_variants(self, variants: list[tuple[int | None, bool, bool]]
                       ) -> DimLike | extents.Choice:
        """The first variant for row counts up to its bound, the rest beyond (chosen at the
        call); returns the units of the split, an expression of the choice."""
        bound, direct, split_rows = variants[0]
        if bound is None:
            self._configure(direct, split_rows)
            return self._emit_variant()
        b = self.b
        few = b.icmp_signed("<=", self._value(self.form.m), const(bound))
        with b.if_else(few) as (small, large):
            with small:
                self._configure(direct, split_rows)
                few_units = self._emit_variant()
            with large:
                many_units = self._emit_variants(variants[1:])
        return extents.Choice(self.form.m, bound, few_units, many_units)

    def _emit_variant(self) -> DimLike:
        """The units [begin, end) of the configured split; returns how many units there are."""
        b, t, form = self.b, self.t, self.form
        extent, unit = (form.m, t.mr) if self.split_rows else (form.n, t.nr)
        per_batch = _ceil(extent, unit)
        batches = math.prod(form.batch)
        begin, end = self.ctx.begin, self.ctx.end
        if batches == 1:
            self._units(const(0), begin, end)
        else:
            units = self._value(per_batch)
            first = b.sdiv(begin, units)
            last = b.sdiv(b.sub(end, const(1)), units)
            with for_range(b, first, b.add(last, const(1)), name="batch") as batch:
                base = b.mul(batch, units)
                lo = maximum(b, b.sub(begin, base), const(0))
                hi = minimum(b, b.sub(end, base), units)
                self._units(batch, lo, hi)
        return batches * per_batch

    def _value(self, extent: DimLike) -> ir.Value:
        return extents.value(self.b, extent)

    @staticmethod
    def _scaled(b: ir.IRBuilder, x: ir.Value, stride: DimLike) -> ir.Value:
        return scaled(b, x, stride if is_static(stride) else extents.value(b, stride))

    def _stack_buffer(self, elements: int, name: str) -> ir.Value:
        buffer = self.b.alloca(self.elem, size=const(elements), name=name)
        buffer.align = 64
        return buffer

    def _units(self, batch: ir.Value, lo: ir.Value, hi: ir.Value) -> None:
        """Units [lo, hi) of the split in batch `batch`."""
        b, t, form = self.b, self.t, self.form
        m, n = self._value(form.m), self._value(form.n)
        if self.split_rows:
            rows = (b.mul(lo, const(t.mr)), minimum(b, b.mul(hi, const(t.mr)), m))
            cols = (const(0), n)
        else:
            rows = (const(0), m)
            cols = (b.mul(lo, const(t.nr)), minimum(b, b.mul(hi, const(t.nr)), n))
        self._region(batch, rows, cols)

    def _region(self, batch: ir.Value, rows: tuple[ir.Value, ir.Value],
                cols: tuple[ir.Value, ir.Value]) -> None:
        """Output rows [m0, m1) x columns [n0, n1) of one batch index."""
        b, t, form = self.b, self.t, self.form
        batch_index = _unflatten(b, batch, form.batch)
        scaled = self._scaled

        def base(pointer: ir.Value, strides: Sequence[DimLike]) -> ir.Value:
            offset: ir.Value = const(0)
            for i, stride in zip(batch_index, strides):
                offset = b.add(offset, scaled(b, i, stride), flags=["nsw"])
            return at(b, pointer, offset, self.elem)

        buffers = self.ctx.emitter.buffers
        a_base = base(buffers[id(form.a.value)], form.a.batch)
        b_base = base(buffers[id(form.b.value)], form.b.batch)
        c_base = base(self.ctx.pointer(self.out), form.c_batch)
        (m0, m1), (n0, n1) = rows, cols
        a, rhs = form.a, form.b
        def blocks() -> None:
            with for_range(b, n0, n1, self.nc, name="jc") as jc:
                nc = minimum(b, const(self.nc), b.sub(n1, jc))

                def depth_block(pc: ir.Value, kc: ir.Value, last: ir.Value | None) -> None:
                    source = at(b, b_base, b.add(scaled(b, jc, rhs.free),
                                                 scaled(b, pc, rhs.contract)), self.elem)
                    if self.direct:
                        panels, step, ldb = source, const(1), const(rhs.contract)
                    else:
                        b.call(self.pack_rhs, [self.packed_b, source, kc, nc,
                                               self._value(rhs.free), self._value(rhs.contract)])
                        panels, step, ldb = self.packed_b, kc, const(t.nr)
                    accumulate = b.icmp_signed("!=", pc, const(0))
                    with for_range(b, m0, m1, t.mr, name="ic") as ic:
                        mr = minimum(b, const(t.mr), b.sub(m1, ic))
                        source = at(b, a_base, b.add(scaled(b, ic, a.free),
                                                     scaled(b, pc, a.contract)), self.elem)
                        rows = at(b, c_base, b.add(scaled(b, ic, form.c_row), jc), self.elem)
                        b.call(self.strip, [kc, source, mr, self._value(a.free),
                                            self._value(a.contract), panels, step, ldb, nc, rows,
                                            self._value(form.c_row), accumulate])
                        if self.epilogue is not None:
                            if last is None:
                                self._apply_epilogue(batch_index, ic, mr, jc, nc)
                            else:
                                with b.if_then(last):
                                    self._apply_epilogue(batch_index, ic, mr, jc, nc)

                k = self._value(form.k)
                if self.k_blocks == 1:
                    depth_block(const(0), k, None)
                else:
                    # A symbolic depth runs at least one block: with k = 0 it clears the output.
                    stop = k if self.k_blocks is not None else maximum(b, k, const(1))
                    with for_range(b, 0, stop, self.kc, name="pc") as pc:
                        kc = minimum(b, const(self.kc), b.sub(k, pc))
                        last = b.icmp_signed(">=", b.add(pc, const(self.kc)), k)
                        depth_block(pc, kc, last)

        if self.k_blocks is not None:
            blocks()
            return
        # The micro-kernel runs at least one depth step: a call whose k is 0 clears the
        # region (and applies the epilogue) instead.
        with b.if_else(b.icmp_signed("==", self._value(form.k), const(0))) as (empty, full):
            with empty:
                with for_range(b, m0, m1, name="zi") as i, \
                        for_range(b, n0, n1, name="zj") as j:
                    row = at(b, c_base, b.add(scaled(b, i, form.c_row), j), self.elem)
                    b.store(ir.Constant(self.elem, 0.0), row)
                if self.epilogue is not None:
                    self._apply_epilogue(batch_index, m0, b.sub(m1, m0), n0, b.sub(n1, n0))
            with full:
                blocks()

    def _apply_epilogue(self, batch_index: list[ir.Value], ic: ir.Value, mr: ir.Value,
                        jc: ir.Value, nc: ir.Value) -> None:
        """Rewrite finished rows [ic, ic + mr) x columns [jc, jc + nc) with the fused
        epilogue, in place: it reads the product from the output buffer."""
        b, form, out = self.b, self.form, self.out
        assert self.epilogue is not None
        with for_range(b, ic, b.add(ic, mr), name="ei") as i, \
                for_range(b, jc, b.add(jc, nc), name="ej") as j:
            index: list[ir.Value] = [const(0)] * out.type.rank
            for d, x in enumerate(batch_index):
                index[d] = x
            for parts, linear in ((form.rows, i), (form.cols, j)):
                for (d, _), x in zip(parts, _unflatten(b, linear, [s for _, s in parts])):
                    index[d] = x
            value = self.ctx.emitter.value_at(self.epilogue, index)
            indexing.store(b, value, self.ctx.pointer(out), out.type, index)


def _ceil(x: int, y: int) -> int:
    return -(-x // y)


def _unflatten(b: ir.IRBuilder, linear: ir.Value, sizes: Sequence[DimLike]
               ) -> list[ir.Value]:
    """The index of each dimension (major first) of a linear index over `sizes`."""
    result: list[ir.Value] = []
    rest = linear
    for n, size in enumerate(reversed(sizes)):
        if n == len(sizes) - 1:
            result.append(rest)
        elif size == 1:
            result.append(const(0))
        else:
            result.append(b.urem(rest, extents.value(b, size)))
            rest = b.udiv(rest, extents.value(b, size))
    return list(reversed(result))


def _buffer_value(ctx: KernelContext, value: Value) -> Value | None:
    """The value whose buffer holds `value` in this kernel (through fusion parameters)."""
    emitter = ctx.emitter
    while id(value) in emitter.aliases:
        value = emitter.aliases[id(value)]
    return value if id(value) in emitter.buffers else None


def gemm_form(inst: Instruction, lhs: Value | None, rhs: Value | None) -> Form | None:
    """The GEMM view of dot_general `inst` reading its operands from the buffers of `lhs`
    and `rhs` (None: not a buffer of the kernel), or None when the generic kernel runs it."""
    if lhs is None or rhs is None:
        return None
    if lhs.type.shape != inst.operands[0].type.shape or \
            rhs.type.shape != inst.operands[1].type.shape:
        return None
    return analyse(inst, lhs, rhs)


def generic_tests(form: Form, known: Sequence[symbolic.Constraint]
                ) -> list[tuple[DimLike, int]]:
    """For a product with symbolic extents, the tests (`extent <= bound`) under which it runs
    the generic kernel, as an exact compilation would: one row or one column (a matrix-vector
    product, 38 us against the GEMM's 66 for 1x784x512), unless the program's constraints
    (`known`) rule that out. A small product with more rows and columns keeps the GEMM,
    although an exact compilation below MIN_WORK multiply-adds takes the generic kernel: that
    saves compiling the GEMM routines, which a symbolic compilation compiles anyway, and the
    GEMM is much faster there for narrow outputs (calls of 3x512x10: 7 us against 14; of 12
    6x64x6 attention products: 8 against 36), within a microsecond for wide ones."""
    tests = [(form.m, 1), (form.n, 1)]
    return [(extent, bound) for extent, bound in tests if not is_static(extent) and
            not symbolic.implied(symbolic.at_least(extent, bound + 1), known)]


def emit(ctx: KernelContext, inst: Instruction, epilogue: Value | None = None,
         rows: RowKernel | None = None) -> Kernel | None:
    """The GEMM kernel for dot_general `inst` in `ctx`, or None (nothing emitted) when the
    generic kernel should compute it. `rows` emits the generic kernel's code (and returns its
    split extent and cost): a product whose size is known only at the call runs it for one
    row or column (`generic_tests`)."""
    lhs, rhs = (_buffer_value(ctx, v) for v in inst.operands)
    form = gemm_form(inst, lhs, rhs) if id(inst.results[0]) in ctx.emitter.buffers else None
    if form is None:
        # packed_weights.py packs a constant only for products that reach gemm_bytes.
        assert not any(v is not None and id(v) in ctx.packed for v in (lhs, rhs)), \
            "a packed constant left to the generic kernel"
        return None
    if inst.attrs.get("result"):
        from jitc.backends.cpu import gemm_bytes
        return gemm_bytes.emit(ctx, inst, form, epilogue)
    blocked = _Gemm(ctx, inst, form, epilogue, tiling_for(inst.results[0].type.dtype))
    generic = generic_tests(form, ctx.constraints) if rows is not None else []
    return blocked.emit(rows, generic)
