"""The C kernel of a float32 or float64 matrix product with one contracting and one rhs free
dimension (every layer of a transformer or an MLP): cache and register blocked.

The output is cut into panels of TILE_COLUMNS columns; the kernel's outermost loop runs over
(outer index, panel) pairs, so threads split it by panels (kernels.py). Within a panel, for
each run of BLOCK_DEPTH contracting steps (whose rhs rows, BLOCK_DEPTH x TILE_COLUMNS
elements, stay in L1), every tile of TILE_ROWS x TILE_COLUMNS outputs accumulates in a local
array that the C compiler keeps in vector registers, one fused multiply-add per term.

Each output element is the same chain of fused multiply-adds in contracting order as in the
untiled kernel (a partial sum is stored exactly between runs), so the tiling, the panels and
the threads change no result.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from jitc.ir.dtypes import DType
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

from .cgen import extent, literal, register_type

if TYPE_CHECKING:
    from .kernels import KernelContext

# 8 x 32 float32 accumulators are 16 AVX-512 registers (32 AVX2 ones, spilling a little);
# float64 tiles are half as wide, the same bytes.
TILE_ROWS = 8
TILE_BYTES = 128
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
    width = TILE_BYTES * 8 // dtype.bits
    outer = [stop for _, stop in rows[:-1]]
    height = rows[-1][1]
    panels = (columns + width - 1) // width if is_static(columns) else \
        f"(({extent(columns)} + {width - 1}) / {width})"
    outer_count = math.prod(outer)
    alone = is_static(outer_count) and outer_count == 1
    total = panels if alone else f"{extent(outer_count)} * {extent(panels)}"
    w.comment(f"panels of {width} columns; {TILE_ROWS}-row tiles sum {BLOCK_DEPTH} steps at a "
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
            full_rows = height // TILE_ROWS * TILE_ROWS if is_static(height) else \
                f"{extent(height)} / {TILE_ROWS} * {TILE_ROWS}"
            block = w.fresh("i")

            def tiles(row0: str, count: str | int) -> None:
                tile = functools.partial(_tile, ctx, target, out, outer_index, row0, count,
                                         first, steps=steps, last=last, lhs_at=lhs_at,
                                         rhs_column=rhs_column, fused=fused)
                if is_static(columns) and columns % width == 0:
                    tile(width)
                    return
                with w.block(f"if ({first} + {width} <= {extent(columns)})"):
                    tile(width)
                with w.block("else"):
                    tile(f"{extent(columns)} - {first}")

            if not is_static(height) or height >= TILE_ROWS:
                with w.block(f"for (int64_t {block} = 0; {block} < {extent(full_rows)}; "
                             f"{block} += {TILE_ROWS})"):
                    tiles(block, TILE_ROWS)
            if is_static(height) and height % TILE_ROWS:
                tiles(str(full_rows), height - full_rows)
            elif not is_static(height):
                rest = e.let_index(extent(full_rows))
                with w.block(f"if ({rest} < {extent(height)})"):
                    tiles(rest, f"{extent(height)} - {rest}")
        if epilogue is not None:
            with w.loop(0, height) as row, w.loop(0, columns_here) as column:
                epilogue(outer_index + [row, e.let_index(f"{first} + {column}")])


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
          last: str, lhs_at: Operand, rhs_column: Column, fused: str) -> None:
    """One tile of `height` rows from `row0` and `width` columns from `first`: its partial
    sums read, the steps [steps, last) added, stored back."""
    e, w = ctx.e, ctx.w
    acc = w.fresh("a")
    w.line(f"{register_type(out.dtype)} {acc}[{TILE_ROWS}][{TILE_BYTES * 8 // out.dtype.bits}];")

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
