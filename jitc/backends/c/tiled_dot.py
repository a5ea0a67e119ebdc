"""The C kernel of a float32 or float64 matrix product with one contracting and one rhs free
dimension (every layer of a transformer or an MLP): cache and register blocked.

The output is cut into panels of columns; the kernel's outermost loop runs over (outer
index, panel) pairs, so threads split it by panels (kernels.py). Within a panel, for each run
of BLOCK_DEPTH contracting steps (whose rhs rows stay in L1), every tile of rows x panel
columns (tile_shape) accumulates in a local array that the C compiler keeps in vector
registers, one fused multiply-add per term.

Each output element is the same chain of fused multiply-adds in contracting order as in the
untiled kernel (a partial sum is stored exactly between runs), so the tiling, the panels and
the threads change no result.

A product with one output column has no panel to share: `dot_per_element` sums each element
in vector-register lanes instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from jitc.ir.dtypes import DType
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

from .build import host_identity
from .cgen import extent, literal, loop_nest, register_type

if TYPE_CHECKING:
    from .kernels import KernelContext

# Tiles as (rows, bytes of a row), the widest first: with AVX-512, 8 x 48 float32 sums are
# 24 of the 32 registers (8 x 48 took a 64x768 by 768x3072 product to 1.15-1.2x the CPU
# backend's time, 8 x 32 1.35x, 8 x 64 1.3x, 12 x 32 1.35x, 4 x 64 1.6x); a panel as wide as
# 32 divides the columns where 48 does not (attention's 64), rather than a narrower remainder
# panel of run-time width. Without AVX-512, 6 x 16 float32 sums are 12 of 16 registers.
# float64 tiles are half as wide, the same bytes.
AVX512_TILES = ((8, 192), (8, 128))
AVX2_TILES = ((6, 64),)
BLOCK_DEPTH = 256

Operand = Callable[[list[str], str], str]   # (output index, contracting index) -> element
Column = Callable[[str, str], str]  # (column in the panel, contracting index) -> rhs element


def tiled_dot(ctx: KernelContext, target: str, out: TensorType,
              rows: list[tuple[int, DimLike]], columns: DimLike, depth: DimLike,
              lhs_at: Operand, rhs_at: Operand, fused: str,
              epilogue: Callable[[list[str]], None] | None, pack: bool = False) -> None:
    """target[outer..., row, column] = sum over k of lhs * rhs; `lhs_at` and `rhs_at` give
    the operands' elements for an output index and a contracting index, `fused` names the
    fused multiply-add (fmaf or fma) and `epilogue(index)` finishes each element. With
    `pack` (an rhs whose columns are not adjacent in memory: a transposed operand) each run
    of steps first copies its rhs rows of the panel into a local array, read along the
    contracting dimension, so the tiles read adjacent columns."""
    e, w = ctx.e, ctx.w
    dtype = out.dtype
    tile_rows, width = tile_shape(dtype, columns)
    outer = [stop for _, stop in rows[:-1]]
    height = rows[-1][1]
    panels = (columns + width - 1) // width if is_static(columns) else \
        f"(({extent(columns)} + {width - 1}) / {width})"
    outer_count = math.prod(outer)
    alone = is_static(outer_count) and outer_count == 1
    total = panels if alone else f"{extent(outer_count)} * {extent(panels)}"
    w.comment(f"panels of {width} columns; {tile_rows}-row tiles sum {BLOCK_DEPTH} steps at a "
              "time in registers")
    with w.loop(0, total) as task:
        outer_index = ["0"] * len(outer) if alone else \
            _unflatten(ctx, f"{task} / {extent(panels)}", outer)
        first = e.let_index(f"{task} * {width}" if alone else
                            f"{task} % {extent(panels)} * {width}")
        # The panel starts at zero and every tile adds to what it reads: one form of tile for
        # every run of steps.
        columns_here = e.let_index(f"{first} + {width} <= {extent(columns)} ? {width} : "
                                   f"{extent(columns)} - {first}")
        with w.loop(0, height) as row, w.loop(0, columns_here) as column:
            e.store(literal(dtype, 0), target, out,
                    outer_index + [row, e.let_index(f"{first} + {column}")])
        steps = w.fresh("i")
        with w.block(f"for (int64_t {steps} = 0; {steps} < {extent(depth)}; "
                     f"{steps} += {BLOCK_DEPTH})"):
            last = e.let_index(f"{steps} + {BLOCK_DEPTH} < {extent(depth)} ? "
                               f"{steps} + {BLOCK_DEPTH} : {extent(depth)}")

            def rhs_column(j: str, k: str) -> str:
                return rhs_at(outer_index + ["0", e.let_index(f"{first} + {j}")], k)
            if pack:
                rhs_column = _pack(ctx, rhs_column, columns_here, width, steps, last, dtype)
            full_rows = height // tile_rows * tile_rows if is_static(height) else \
                f"{extent(height)} / {tile_rows} * {tile_rows}"
            block = w.fresh("i")

            def tiles(row0: str, count: str | int) -> None:
                tile = functools.partial(_tile, ctx, target, out, outer_index, row0, count,
                                         first, steps=steps, last=last, lhs_at=lhs_at,
                                         rhs_column=rhs_column, fused=fused,
                                         tile_rows=tile_rows, panel_width=width)
                if is_static(columns) and columns % width == 0:
                    tile(width)
                    return
                with w.block(f"if ({first} + {width} <= {extent(columns)})"):
                    tile(width)
                with w.block("else"):
                    tile(f"{extent(columns)} - {first}")

            if not is_static(height) or height >= tile_rows:
                with w.block(f"for (int64_t {block} = 0; {block} < {extent(full_rows)}; "
                             f"{block} += {tile_rows})"):
                    tiles(block, tile_rows)
            if is_static(height) and height % tile_rows:
                tiles(str(full_rows), height - full_rows)
            elif not is_static(height):
                rest = e.let_index(extent(full_rows))
                with w.block(f"if ({rest} < {extent(height)})"):
                    tiles(rest, f"{extent(height)} - {rest}")
        if epilogue is not None:
            with w.loop(0, height) as row, w.loop(0, columns_here) as column:
                epilogue(outer_index + [row, e.let_index(f"{first} + {column}")])


def tile_shape(dtype: DType, columns: DimLike) -> tuple[int, int]:
    """(rows, columns) of a tile for this host's vector registers (the library is built for
    it, -march=native) and `columns` output columns."""
    tiles = AVX512_TILES if "avx512f" in host_identity() else AVX2_TILES
    shapes = [(rows, row_bytes * 8 // dtype.bits) for rows, row_bytes in tiles]
    return next((shape for shape in shapes if is_static(columns) and columns % shape[1] == 0),
                shapes[0])


def _unflatten(ctx: KernelContext, flat: str, extents: list[DimLike]) -> list[str]:
    """The counters of the loops over `extents` (outermost first) at position `flat`."""
    index, stride = [], 1
    for size in reversed(extents):
        quotient = flat if is_static(stride) and stride == 1 else f"{flat} / {extent(stride)}"
        index.append(ctx.e.let_index(f"{quotient} % {extent(size)}"))
        stride = stride * size
    return index[::-1]


def _pack(ctx: KernelContext, rhs_column: Column, columns_here: str, width: int,
          steps: str, last: str, dtype: DType) -> Column:
    """Copies the panel's rhs elements of the steps [steps, last) into a local array; the
    column reader that reads them there."""
    w = ctx.w
    packed = w.fresh("p")
    w.line(f"{register_type(dtype)} {packed}[{BLOCK_DEPTH}][{width}];")
    with w.loop(0, columns_here) as j, w.loop(steps, last) as k:
        w.line(f"{packed}[{k} - {steps}][{j}] = {rhs_column(j, k)};")
    return lambda j, k: f"{packed}[{k} - {steps}][{j}]"


def _tile(ctx: KernelContext, target: str, out: TensorType, outer: list[str],
          row0: str, height: str | int, first: str, width: str | int, *, steps: str,
          last: str, lhs_at: Operand, rhs_column: Column, fused: str, tile_rows: int,
          panel_width: int) -> None:
    """One tile of `height` rows from `row0` and `width` columns from `first`: its partial
    sums read, the steps [steps, last) added, stored back."""
    e, w = ctx.e, ctx.w
    acc = w.fresh("a")
    w.line(f"{register_type(out.dtype)} {acc}[{tile_rows}][{panel_width}];")

    def index(r: str, j: str) -> list[str]:
        return outer + [e.let_index(f"{row0} + {r}"), e.let_index(f"{first} + {j}")]

    with w.loop(0, height) as r, w.loop(0, width) as j:
        w.line(f"{acc}[{r}][{j}] = {e.load(target, out, index(r, j))};")
    with w.loop(steps, last) as k, w.loop(0, height) as r:
        x = lhs_at(outer + [e.let_index(f"{row0} + {r}"), "0"], k)
        x = x if x.isidentifier() else e.let(out.dtype, x)
        with w.loop(0, width) as j:
            y = rhs_column(j, k)
            w.line(f"{acc}[{r}][{j}] = {fused}({x}, {y}, {acc}[{r}][{j}]);")
    with w.loop(0, height) as r, w.loop(0, width) as j:
        e.store(f"{acc}[{r}][{j}]", target, out, index(r, j))


# The bytes of partial sums of a dot of two vectors: four AVX-512 registers, enough
# independent chains to hide the latency of the multiply-adds.
DOT_LANE_BYTES = 256


def dot_per_element(ctx: KernelContext, rows: list[tuple[int, DimLike]], columns: int,
                     depth: DimLike, factors: Callable[..., tuple[str, str]], fused: str,
                     dtype: DType, store: Callable[[list[str], str], object]) -> None:
    """A product with one output column (A @ x, a batch of q . k): each element is a dot of
    two vectors, summed in DOT_LANE_BYTES of partial sums that the C compiler keeps in vector
    registers (lane l takes the steps l, l + lanes, ...), then combined pairwise. One
    running sum is a chain of dependent adds, and the column tiles had one column to share:
    1024x768 @ 768 took 35 times numpy's time."""
    e, w = ctx.e, ctx.w
    ctype = register_type(dtype)
    lanes = DOT_LANE_BYTES // dtype.itemsize
    main = f"({extent(depth)} / {lanes} * {lanes})"

    def element(row_counters: list[str]) -> None:
        index = row_counters + ["0"] * columns
        sums = w.fresh("lanes")
        w.line(f"{ctype} {sums}[{lanes}] = {{0}};")
        start = w.fresh("k")
        with w.block(f"for (int64_t {start} = 0; {start} < {main}; {start} += {lanes})"), \
                w.loop(0, lanes) as lane:
            x, y = factors(index, [e.let_index(f"{start} + {lane}")], dtype)
            w.line(f"{sums}[{lane}] = {fused}({x}, {y}, {sums}[{lane}]);")
        with w.loop(main, depth) as k:
            x, y = factors(index, [k], dtype)
            lane = f"{sums}[{k} - {main}]"
            w.line(f"{lane} = {fused}({x}, {y}, {lane});")
        half = lanes // 2
        while half:
            with w.loop(0, half) as lane:
                w.line(f"{sums}[{lane}] += {sums}[{lane} + {half}];")
            half //= 2
        store(index, f"{sums}[0]")
    loop_nest(w, rows, element)
