"""The shared pieces of the CPU GEMM: the register-tile micro-kernel, the lhs strip routine
(pack a strip, run the tile against every packed panel) and the rhs packing routine.

They take sizes and strides as arguments, so one copy per LLVM module, element type and tiling
serves every GEMM kernel in it (a transformer block or an unrolled RNN has dozens): the
kernels themselves (gemm.py) are only loops around calls to these, which keeps compile time
flat in the number of products.

In-process JIT code does not carry them: `declare_externally` makes a module declare them
instead, and `routine_module` builds the definition of one on its own, which the CPU backend
compiles once per process and links into every engine that calls it (objects.py). `jitc aot`
keeps them in its module, since its object must stand alone.

Packed layouts: an lhs strip is `kc` groups of `mr` row elements (row index fastest); an rhs
block is panels of `nr` columns, each `kc` rows of `nr` elements. Rows or columns past the
valid ones hold zeros or copies of valid elements: the tile computes them and never stores
them.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

from llvmlite import ir

from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.target import host_has
from jitc.backends.llvm.types import I1, I32, I64, PTR, VOID, declare, memory_type, pointer_to
from jitc.ir.dtypes import DType


@dataclass(frozen=True)
class Tiling:
    lanes: int      # elements per vector register
    mr: int         # rows of the register tile
    nv: int         # vectors across the register tile
    kc: int         # largest contracting depth of a packed block
    nc: int         # largest width of a packed rhs block (a multiple of nr)

    @property
    def nr(self) -> int:
        return self.lanes * self.nv


# One packed depth step of a panel, in bytes (kc * itemsize): an 8-row lhs strip is then
# 8 KiB and a 32-column rhs panel 32 KiB, together inside a 48 KiB L1.
DEPTH_BYTES = 1024
# One packed rhs block (kc x nc): within L2 next to the strip and the output rows.
RHS_BLOCK_BYTES = 512 << 10


@functools.cache
def host_vector_bytes() -> int:
    """The widest vector register of the host: 64 with AVX-512, 32 with AVX, else 16."""
    if host_has("avx512f"):
        return 64
    if host_has("avx"):
        return 32
    return 16


def tiling_for(dtype: DType, vector_bytes: int | None = None) -> Tiling:
    """Tile sizes for `dtype` with `vector_bytes`-wide registers (default: the host's).

    With AVX-512, 8 rows x 2 vectors: 16 accumulators are enough to cover the FMA latency
    on two pipes, and 8 rows divide the batch sizes that matter (a 12-row tile, as fast on
    square products, wastes an eighth of a 64-row one). With 16 registers, 6 x 2.
    """
    width = vector_bytes or host_vector_bytes()
    lanes = max(width // dtype.itemsize, 1)
    mr, nv = (8, 2) if width >= 64 else (6, 2)
    kc = DEPTH_BYTES // dtype.itemsize
    nr = lanes * nv
    nc = max(RHS_BLOCK_BYTES // (kc * dtype.itemsize) // nr, 1) * nr
    return Tiling(lanes, mr, nv, kc, nc)


def const(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


def minimum(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def maximum(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def at(b: ir.IRBuilder, base: ir.Value, offset: ir.Value | int, etype: ir.Type) -> ir.Value:
    offset = const(offset) if isinstance(offset, int) else offset
    return b.gep(base, [offset], source_etype=etype, inbounds=True)


def scaled(b: ir.IRBuilder, x: ir.Value, stride: int | ir.Value) -> ir.Value:
    if isinstance(stride, int):
        return x if stride == 1 else b.mul(x, const(stride), flags=["nsw"])
    return b.mul(x, stride, flags=["nsw"])


def _splat(b: ir.IRBuilder, x: ir.Value, vec: ir.VectorType) -> ir.Value:
    one = b.insert_element(ir.Constant(vec, ir.Undefined), x, ir.Constant(I32, 0))
    mask = ir.Constant(ir.VectorType(I32, vec.count), [0] * vec.count)
    return b.shuffle_vector(one, ir.Constant(vec, ir.Undefined), mask)


def _transpose(b: ir.IRBuilder, rows: list[ir.Value], vec: ir.VectorType) -> list[ir.Value]:
    """Up to `lanes` row vectors as `lanes` column vectors (missing rows undefined).

    Round s exchanges bit s of the row index with bit s of the lane index between rows r
    and r + 2^s: for bits 1 and up that is one unpack or 128/256-bit lane shuffle per
    output, which is what x86 does fastest.
    """
    lanes = vec.count
    vectors = list(rows) + [ir.Constant(vec, ir.Undefined)] * (lanes - len(rows))
    mask_type = ir.VectorType(I32, lanes)
    s = 1
    while s < lanes:
        low = ir.Constant(mask_type, [c if not c & s else lanes + (c ^ s) for c in range(lanes)])
        high = ir.Constant(mask_type, [c ^ s if not c & s else lanes + c for c in range(lanes)])
        for r in range(lanes):
            if not r & s:
                x, y = vectors[r], vectors[r | s]
                vectors[r] = b.shuffle_vector(x, y, low)
                vectors[r | s] = b.shuffle_vector(x, y, high)
        s <<= 1
    return vectors


def packing_kind(s_p: int, s_k: int) -> str:
    """How a strip or panel is packed from a source with element strides s_p along its rows
    (or columns) and s_k along the depth: "rows" when contiguous along p (vector copies),
    "columns" when contiguous along k (a transpose in registers), else "strided"."""
    if s_p == 1:
        return "rows"
    return "columns" if s_k == 1 else "strided"


# Argument types of each routine, shared by its definition and its declarations.
_TILE_ARGS = [I64, PTR, PTR, I64, PTR, I64, I64, I64, I1]
_STRIP_ARGS = [I64, PTR, I64, I64, I64, PTR, I64, I64, I64, PTR, I64, I1]
_PACK_ARGS = [PTR, PTR, I64, I64, I64, I64]

# Modules whose strip and pack routines are declarations, defined by `routine_module`.
_EXTERNAL: weakref.WeakSet[ir.Module] = weakref.WeakSet()


@dataclass(frozen=True)
class Routine:
    """What one strip or pack routine is specialized on: its definition is a function of
    these alone (and of the host's vector instructions, through the tiling)."""

    name: str
    dtype: DType
    tiling: Tiling
    role: str           # "strip" or "pack"
    kind: str           # see packing_kind


# Every routine declared so far, by symbol name: what the backend links for a declaration.
_DECLARED: dict[str, Routine] = {}


def declare_externally(module: ir.Module) -> None:
    """Make strip_function and pack_function declare their routines in `module` (external
    symbols, see `declared_routines`) rather than define them."""
    _EXTERNAL.add(module)


def declared_routines(module: ir.Module) -> list[Routine]:
    """The routines `module` declares and calls, for the linker to supply."""
    return [_DECLARED[name] for name, value in module.globals.items()
            if name in _DECLARED and isinstance(value, ir.Function) and value.is_declaration]


def routine_module(routine: Routine) -> ir.Module:
    """A module that defines `routine` as an external symbol (its tile internal), to be
    compiled once and linked wherever a module declares it."""
    module = ir.Module(name=routine.name)
    if routine.role == "strip":
        fn = strip_function(module, routine.dtype, routine.tiling, routine.kind)
    else:
        fn = pack_function(module, routine.dtype, routine.tiling, routine.kind)
    fn.linkage = ""
    return module


def _declare(module: ir.Module, routine: Routine, args: list[ir.Type]) -> ir.Function:
    # Two specializations under one name in one process would link the wrong code.
    assert _DECLARED.setdefault(routine.name, routine) == routine, routine.name
    return ir.Function(module, ir.FunctionType(VOID, args), routine.name)


def tile_function(module: ir.Module, dtype: DType, t: Tiling) -> ir.Function:
    """`tile(kc, a, b, ldb, c, ldc, mr, nr, accumulate)`: C[0:mr, 0:nr] (+)= A B for a packed
    strip `a` and a panel `b` of nr columns with `ldb` elements between its depth rows (nr
    when packed), with `ldc` elements between output rows."""
    name = f"jitc.gemm.{dtype.name}.{t.mr}x{t.nr}.tile"
    if name not in module.globals:
        _Code(module, dtype, t).tile(name)
    return module.get_global(name)


def strip_function(module: ir.Module, dtype: DType, t: Tiling, kind: str) -> ir.Function:
    """`strip(kc, src, rows, s_p, s_k, panels, step, ldb, columns, c, ldc, accumulate)`:
    packs a strip of `rows` <= mr lhs rows, element (p, k) at src[p * s_p + k * s_k], and
    multiplies it into output rows `c` against the rhs `panels` ([0, columns) of them): the
    panel of column j starts at panels[j * step] and has `ldb` elements between depth rows
    (packed: step kc, ldb nr; read in place from a row-major rhs: step 1, ldb its row
    stride). Only the packing `kind` (see packing_kind) the caller's strides need is
    generated."""
    name = f"jitc.gemm.{dtype.name}.{t.mr}x{t.nr}.strip_{kind}"
    if name not in module.globals and module in _EXTERNAL:
        return _declare(module, Routine(name, dtype, t, "strip", kind), _STRIP_ARGS)
    if name not in module.globals:
        _Code(module, dtype, t).strip(name, tile_function(module, dtype, t), kind)
    return module.get_global(name)


def pack_function(module: ir.Module, dtype: DType, t: Tiling, kind: str) -> ir.Function:
    """`pack(dest, src, kc, columns, s_p, s_k)`: the rhs columns [0, columns) of depth
    [0, kc), element (p, k) at src[p * s_p + k * s_k], as panels of nr columns."""
    name = f"jitc.gemm.{dtype.name}.{t.mr}x{t.nr}.pack_{kind}"
    if name not in module.globals and module in _EXTERNAL:
        return _declare(module, Routine(name, dtype, t, "pack", kind), _PACK_ARGS)
    if name not in module.globals:
        _Code(module, dtype, t).pack(name, kind)
    return module.get_global(name)


class _Code:
    def __init__(self, module: ir.Module, dtype: DType, t: Tiling) -> None:
        self.module, self.dtype, self.t = module, dtype, t
        self.elem = memory_type(dtype)
        self.vec = ir.VectorType(self.elem, t.lanes)
        self.size = dtype.itemsize
        self.suffix = f"{'f32' if self.size == 4 else 'f64'}"

    def _function(self, name: str, args: list[ir.Type], noalias: tuple[int, ...]
                  ) -> tuple[ir.Function, ir.IRBuilder]:
        fn = ir.Function(self.module, ir.FunctionType(VOID, args), name)
        fn.linkage = "internal"
        # Inlined into every kernel that calls it, each copy would be compiled again. The
        # code is vectorized by hand: optsize spares the vectorizers' and unroller's time
        # (a tenth of the compile) without changing the loops.
        fn.attributes.add("noinline")
        fn.attributes.add("optsize")
        for n in noalias:
            fn.args[n].add_attribute("noalias")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def _intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        return declare(self.module, name, ir.FunctionType(ret, args))

    def _masked(self, b: ir.IRBuilder, vec: ir.VectorType, count: ir.Value) -> ir.Value:
        """The mask of the first `count` lanes of `vec`."""
        lanes = ir.VectorType(I64, vec.count)
        limit = b.insert_element(ir.Constant(lanes, ir.Undefined), count, ir.Constant(I32, 0))
        limit = b.shuffle_vector(limit, ir.Constant(lanes, ir.Undefined),
                                 ir.Constant(ir.VectorType(I32, vec.count), [0] * vec.count))
        return b.icmp_signed("<", ir.Constant(lanes, list(range(vec.count))), limit)

    def _masked_load(self, b: ir.IRBuilder, vec: ir.VectorType, p: ir.Value, mask: ir.Value
                     ) -> ir.Value:
        mask_type = ir.VectorType(I1, vec.count)
        fn = self._intrinsic(f"llvm.masked.load.v{vec.count}{self.suffix}.p0", vec,
                             [PTR, I32, mask_type, vec])
        return b.call(fn, [p, ir.Constant(I32, self.size), mask, ir.Constant(vec, None)])

    def _masked_store(self, b: ir.IRBuilder, x: ir.Value, p: ir.Value, mask: ir.Value) -> None:
        vec = x.type
        mask_type = ir.VectorType(I1, vec.count)
        fn = self._intrinsic(f"llvm.masked.store.v{vec.count}{self.suffix}.p0", VOID,
                             [vec, PTR, I32, mask_type])
        b.call(fn, [x, p, ir.Constant(I32, self.size), mask])

    def tile(self, name: str) -> None:
        t, elem, vec = self.t, self.elem, self.vec
        fn, b = self._function(name, _TILE_ARGS, (1, 2, 4))
        kc, a, bp, ldb, c, ldc, mr, nr, accumulate = fn.args
        fmuladd = self._intrinsic(f"llvm.fmuladd.v{t.lanes}{self.suffix}", vec, [vec] * 3)
        entry = b.block
        loop = fn.append_basic_block("k")
        done = fn.append_basic_block("store")
        b.branch(loop)
        # One outer product per depth step; the tile stays in registers (phis).
        b.position_at_end(loop)
        k = b.phi(I64, name="k")
        k.add_incoming(const(0), entry)
        accs = [[b.phi(vec) for _ in range(t.nv)] for _ in range(t.mr)]
        for row in accs:
            for acc in row:
                acc.add_incoming(ir.Constant(vec, None), entry)
        pa = at(b, a, b.mul(k, const(t.mr), flags=["nsw"]), elem)
        pb = at(b, bp, b.mul(k, ldb, flags=["nsw"]), elem)
        rhs = [b.load(at(b, pb, v * t.lanes, elem), typ=vec, align=self.size)
               for v in range(t.nv)]
        tile = []
        for i in range(t.mr):
            x = _splat(b, b.load(at(b, pa, i, elem), typ=elem), vec)
            tile.append([b.call(fmuladd, [x, rhs[v], accs[i][v]]) for v in range(t.nv)])
        following = b.add(k, const(1), flags=["nsw"])
        k.add_incoming(following, loop)
        for row, new in zip(accs, tile):
            for acc, value in zip(row, new):
                acc.add_incoming(value, loop)
        b.cbranch(b.icmp_signed("<", following, kc), loop, done)

        b.position_at_end(done)
        # A partial tile goes to a scratch tile first, then its valid part to the output
        # through lane masks: one short loop instead of a masked copy of every row.
        with b.goto_entry_block():
            scratch = b.alloca(elem, size=const(t.mr * t.nr), name="scratch")
            scratch.align = 64
        full = b.and_(b.icmp_signed("==", mr, const(t.mr)), b.icmp_signed("==", nr, const(t.nr)))
        target = b.select(full, c, scratch)
        stride = b.select(full, ldc, const(t.nr))
        merge = b.and_(accumulate, full)
        for i in range(t.mr):
            row = at(b, target, b.mul(const(i), stride), elem)
            for v in range(t.nv):
                p = pointer_to(b, at(b, row, v * t.lanes, elem), vec)
                old = b.load(p, typ=vec, align=self.size)
                b.store(b.select(merge, b.fadd(tile[i][v], old), tile[i][v]), p,
                        align=self.size)
        with b.if_then(b.not_(full)):
            masks = [self._masked(b, vec, b.sub(nr, const(v * t.lanes))) for v in range(t.nv)]
            with for_range(b, 0, mr, name="i") as i:
                row = at(b, c, b.mul(i, ldc), elem)
                partial = at(b, scratch, b.mul(i, const(t.nr)), elem)
                for v in range(t.nv):
                    p = at(b, row, v * t.lanes, elem)
                    x = b.load(pointer_to(b, at(b, partial, v * t.lanes, elem), vec), typ=vec,
                               align=self.size)
                    old = self._masked_load(b, vec, p, masks[v])
                    self._masked_store(b, b.select(accumulate, b.fadd(x, old), x), p, masks[v])
        b.ret_void()

    def strip(self, name: str, tile: ir.Function, kind: str) -> None:
        t = self.t
        fn, b = self._function(name, _STRIP_ARGS, (1, 5, 9))
        kc, src, rows, s_p, s_k, panels, step, ldb, columns, c, ldc, accumulate = fn.args
        # Slack for the whole-vector stores of a transposed copy: up to a block of depth
        # steps past kc, and a vector past the last step.
        packed = b.alloca(self.elem, size=const((t.kc + t.lanes + 1) * t.mr), name="strip")
        packed.align = 64
        self._panel(b, kind, packed, src, t.mr, rows, kc, s_p, s_k)
        with for_range(b, 0, columns, t.nr, name="j") as j:
            b.call(tile, [kc, packed, at(b, panels, b.mul(j, step), self.elem), ldb,
                          at(b, c, j, self.elem), ldc, rows,
                          minimum(b, const(t.nr), b.sub(columns, j)), accumulate])
        b.ret_void()

    def pack(self, name: str, kind: str) -> None:
        width = self.t.nr
        fn, b = self._function(name, _PACK_ARGS, (0, 1))
        dest, src, kc, count, s_p, s_k = fn.args
        if kind == "rows":
            self._rows_into_panels(b, dest, src, width, count, kc, s_k)
        else:
            step = b.mul(kc, const(width))
            panel_count = b.sdiv(b.add(count, const(width - 1)), const(width))
            with for_range(b, 0, panel_count, name="p") as p:
                first = b.mul(p, const(width))
                self._panel(b, kind, at(b, dest, b.mul(p, step), self.elem),
                            at(b, src, b.mul(first, s_p), self.elem), width,
                            minimum(b, const(width), b.sub(count, first)), kc, s_p, s_k)
        b.ret_void()

    def _panel(self, b: ir.IRBuilder, kind: str, dest: ir.Value, src: ir.Value, width: int,
               count: ir.Value, kc: ir.Value, s_p: ir.Value, s_k: ir.Value) -> None:
        """dest[k * width + p] = src[p * s_p + k * s_k] for p < count; later lanes hold
        anything finite-or-not that the tile computes with and never stores."""
        elem = self.elem
        if kind == "rows":
            vec = ir.VectorType(elem, width)
            mask = self._masked(b, vec, count)
            with for_range(b, 0, kc, name="k") as k:
                x = self._masked_load(b, vec, at(b, src, b.mul(k, s_k), elem), mask)
                b.store(x, pointer_to(b, at(b, dest, b.mul(k, const(width)), elem), vec),
                        align=self.size)
        elif kind == "columns":
            self._transposed(b, dest, src, width, count, kc, s_p)
        else:
            last = b.sub(count, const(1))
            with for_range(b, 0, kc, name="k") as k:
                step = at(b, dest, b.mul(k, const(width)), elem)
                row = at(b, src, b.mul(k, s_k), elem)
                with for_range(b, 0, width, name="p") as p:
                    x = b.load(at(b, row, b.mul(minimum(b, p, last), s_p), elem), typ=elem)
                    b.store(x, at(b, step, p, elem))

    def _rows_into_panels(self, b: ir.IRBuilder, dest: ir.Value, src: ir.Value, width: int,
                          count: ir.Value, kc: ir.Value, s_k: ir.Value) -> None:
        """Contiguous source rows: each depth row is read once, left to right, and cut into
        the panels; a partial last panel is loaded through a mask."""
        elem = self.elem
        vec = ir.VectorType(elem, width)
        step = b.mul(kc, const(width))
        full = b.sdiv(count, const(width))
        rest = b.sub(count, b.mul(full, const(width)))
        mask = self._masked(b, vec, rest)
        align = self.t.lanes * self.size
        with for_range(b, 0, kc, name="k") as k:
            row = at(b, src, b.mul(k, s_k), elem)
            out = at(b, dest, b.mul(k, const(width)), elem)
            with for_range(b, 0, full, name="p") as p:
                x = b.load(at(b, row, b.mul(p, const(width)), elem), typ=vec, align=self.size)
                b.store(x, pointer_to(b, at(b, out, b.mul(p, step), elem), vec), align=align)
            with b.if_then(b.icmp_signed(">", rest, const(0))):
                x = self._masked_load(b, vec, at(b, row, b.mul(full, const(width)), elem), mask)
                b.store(x, pointer_to(b, at(b, out, b.mul(full, step), elem), vec),
                        align=align)

    def _transposed(self, b: ir.IRBuilder, dest: ir.Value, src: ir.Value, width: int,
                    count: ir.Value, kc: ir.Value, s_p: ir.Value) -> None:
        """Rows contiguous along the depth: `lanes` depth steps at a time, one vector load
        per row (rows past `count` re-read the last; depth past kc reads nothing), transposed
        in registers. Whole vectors are stored: a group of fewer than `lanes` rows writes
        past its end into the next step's slots (rewritten next), and a last block of fewer
        than `lanes` steps writes whole steps past kc (into the next panel, packed later, or
        the buffer's slack)."""
        lanes, elem, vec = self.t.lanes, self.elem, self.vec
        last = b.sub(count, const(1))
        starts = [at(b, src, b.mul(minimum(b, const(p), last), s_p), elem)
                  for p in range(width)]
        with for_range(b, 0, kc, lanes, name="k") as k0:
            mask = self._masked(b, vec, b.sub(kc, k0))
            rows = [self._masked_load(b, vec, at(b, s, k0, elem), mask) for s in starts]
            groups = [_transpose(b, rows[g:g + lanes], vec) for g in range(0, width, lanes)]
            for kk in range(lanes):
                step = at(b, dest, b.mul(b.add(k0, const(kk)), const(width)), elem)
                for g, columns in enumerate(groups):
                    b.store(columns[kk], pointer_to(b, at(b, step, g * lanes, elem), vec),
                            align=self.size)
