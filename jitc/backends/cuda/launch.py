"""Launch configurations: how many blocks of how many threads each kernel kind runs with.

Plain Python on sizes known at compile time, so the GPU runtime and the simulator launch
exactly the same grid, and the rules are unit-tested without a GPU. Grids and blocks are
one-dimensional; kernels derive 2-D thread positions from the linear thread index.

A kernel of a symbolic program (docs/dynamic-shapes.md) has a static block size and a block
count that is an expression of the symbols (`grid_extent`): the host evaluates it with each
call's symbol values, clamped to [1, grid]; the kernel reads the count it was launched with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jitc.ir.symbolic import Dim, DimLike, ceil_divide, evaluate

WARP = 32
# The block size of memory-bound kernels: large enough to hide latency, small enough that
# several blocks fit on one SM.
BLOCK = 256
# Elementwise kernels stop growing the grid here and loop over the rest (grid-stride):
# roughly eight resident blocks on each SM of the largest current GPUs.
MAX_ELEMENTWISE_BLOCKS = 4096
# Static shared memory every target from sm_80 on provides without opting in.
MAX_SHARED_BYTES = 48 * 1024
# A CUDA grid's x dimension holds at most 2**31 - 1 blocks.
MAX_GRID = 2**31 - 1


@dataclass(frozen=True)
class LaunchConfig:
    grid: int                     # the block count; the most blocks when `grid_extent` is set
    block: int
    shared_bytes: int = 0
    grid_extent: Dim | None = None  # the wanted block count of a symbolic launch
    # Whether the kernel's threads loop over what more blocks would take (grid-stride), so
    # that fewer blocks than `grid_extent` asks for still cover the work.
    strided: bool = False


    def __post_init__(self) -> None:
        if not 1 <= self.grid <= MAX_GRID:
            raise ValueError(f"grid of {self.grid} blocks is outside [1, {MAX_GRID}]")
        if not 1 <= self.block <= 1024:
            raise ValueError(f"block of {self.block} threads is outside [1, 1024]")
        if self.shared_bytes > MAX_SHARED_BYTES:
            raise ValueError(f"{self.shared_bytes} bytes of shared memory exceed "
                             f"{MAX_SHARED_BYTES}")

    @property
    def threads(self) -> int:
        return self.grid * self.block

    def blocks(self, symbols: Mapping[str, int]) -> int:
        """The block count of a launch with these symbol values; 0 when the call has no work
        for it (an empty result), so that the host skips it."""
        if self.grid_extent is None:
            return self.grid
        wanted = evaluate(self.grid_extent, symbols)
        if wanted > self.grid and not self.strided:
            raise ValueError(f"a launch of {wanted} blocks exceeds the {self.grid} a CUDA "
                             f"grid holds")
        return min(wanted, self.grid)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


def next_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def elementwise(n: int) -> LaunchConfig:
    """One thread per element up to MAX_ELEMENTWISE_BLOCKS blocks, then a grid-stride loop.

    Small outputs get one block of whole warps rather than 256 mostly idle threads.
    """
    block = min(BLOCK, round_up(max(n, 1), WARP))
    return LaunchConfig(min(ceil_div(max(n, 1), block), MAX_ELEMENTWISE_BLOCKS), block)


def symbolic_elementwise(n: Dim) -> LaunchConfig:
    """`elementwise` for a size known only at the call: full blocks, as many as the size
    needs up to MAX_ELEMENTWISE_BLOCKS (the kernel's grid-stride loop takes the rest)."""
    return LaunchConfig(MAX_ELEMENTWISE_BLOCKS, BLOCK, grid_extent=_as_dim(ceil_divide(n, BLOCK)),
                        strided=True)


def _as_dim(extent: int | Dim) -> Dim:
    assert isinstance(extent, Dim), "a symbolic launch of a static size"
    return extent


def block_per_item(count: DimLike, block: int, shared_bytes: int = 0) -> LaunchConfig:
    """`count` blocks, each of whose work is its own (no grid-stride loop: a row, a tile):
    static when the count is, else evaluated per call (and at most MAX_GRID)."""
    if isinstance(count, int):
        return LaunchConfig(max(count, 1), block, shared_bytes)
    return LaunchConfig(MAX_GRID, block, shared_bytes, grid_extent=_as_dim(count))


@dataclass(frozen=True)
class RowReduction:
    """A reduction whose reduced elements of one output are contiguous (a row).

    `group` threads share one row: up to a warp (several rows per block, combined with warp
    shuffles only) or, for rows longer than a warp, the whole block (one row per block, warp
    shuffles and then one value per warp through shared memory).
    """

    launch: LaunchConfig
    group: int
    rows_per_block: int

    @property
    def whole_block(self) -> bool:
        return self.group > WARP

    @property
    def warps(self) -> int:
        return self.launch.block // WARP


def row_reduction(rows: int, length: int, partial_bytes: int = 0) -> RowReduction:
    """Launch for `rows` reductions of `length` contiguous elements each.

    `partial_bytes` is the shared memory one warp's partial results take (whole-block mode).
    """
    if length > WARP:
        block = min(BLOCK, next_power_of_two(length))
        shared = partial_bytes * (block // WARP)
        return RowReduction(LaunchConfig(max(rows, 1), block, shared), block, 1)
    group = next_power_of_two(max(length, 1))
    threads = max(rows, 1) * group
    block = min(BLOCK, round_up(threads, WARP))
    per_block = block // group
    return RowReduction(LaunchConfig(ceil_div(max(rows, 1), per_block), block), group,
                        per_block)


def symbolic_row_reduction(rows: DimLike, length: DimLike, partial_bytes: int = 0
                           ) -> RowReduction:
    """`row_reduction` where the count or the length of the rows is known only at the call:
    blocks of BLOCK threads unless a static length picks a smaller one, as many blocks as the
    rows need. A thread's row may then not exist (the kernel checks it against `rows`)."""
    if isinstance(length, int) and length <= WARP:
        group = next_power_of_two(max(length, 1))
        per_block = BLOCK // group
        return RowReduction(block_per_item(ceil_divide(rows, per_block), BLOCK), group,
                            per_block)
    block = min(BLOCK, next_power_of_two(length)) if isinstance(length, int) else BLOCK
    return RowReduction(block_per_item(rows, block, partial_bytes * (block // WARP)), block, 1)


@dataclass(frozen=True)
class ColumnReduction:
    """A reduction over major dimensions: a tile of `width` consecutive outputs (consecutive
    in memory, so loads coalesce) per block, `height` rows of threads splitting the reduced
    elements, their partial results combined through shared memory."""

    launch: LaunchConfig
    width: int
    height: int


def column_reduction(outputs: DimLike, partial_bytes: int) -> ColumnReduction:
    width, height = WARP, BLOCK // WARP
    shared = partial_bytes * width * height
    if not isinstance(outputs, int):
        return ColumnReduction(block_per_item(ceil_divide(outputs, width), width * height,
                                              shared), width, height)
    return ColumnReduction(LaunchConfig(ceil_div(max(outputs, 1), width), width * height,
                                        shared), width, height)


@dataclass(frozen=True)
class DotTiles:
    """A block computes a `tile_m` x `tile_n` output tile of one batch, walking the
    contraction `tile_k` at a time through shared memory; each of its 16 x 16 threads owns
    `tile_m / 16` x `tile_n / 16` outputs, strided by 16 so stores coalesce."""

    launch: LaunchConfig
    tile_m: int
    tile_n: int
    tile_k: int
    blocks_m: DimLike
    blocks_n: DimLike
    k_steps: DimLike

    @property
    def per_thread_m(self) -> int:
        return self.tile_m // DOT_THREADS_SIDE

    @property
    def per_thread_n(self) -> int:
        return self.tile_n // DOT_THREADS_SIDE


DOT_THREADS_SIDE = 16
DOT_TILE_K = 16


def _dot_tile(extent: int) -> int:
    return 64 if extent >= 64 else 32 if extent >= 32 else 16


def dot(batch: DimLike, m: DimLike, n: DimLike, k: DimLike, element_bytes: int) -> DotTiles:
    """Tiles sized to the problem: 64 where a dimension allows it, down to 16 for skinny
    operands (a matrix-vector product wastes little of a 16-wide tile)."""
    if not all(isinstance(e, int) for e in (batch, m, n, k)):
        return _symbolic_dot(batch, m, n, k, element_bytes)
    assert isinstance(batch, int) and isinstance(m, int) and isinstance(n, int) and \
        isinstance(k, int)
    tile_m, tile_n = _dot_tile(m), _dot_tile(n)
    blocks_m, blocks_n = ceil_div(m, tile_m), ceil_div(n, tile_n)
    shared = (tile_m + tile_n) * DOT_TILE_K * element_bytes
    launch = LaunchConfig(max(batch, 1) * blocks_m * blocks_n, DOT_THREADS_SIDE ** 2, shared)
    return DotTiles(launch, tile_m, tile_n, DOT_TILE_K, blocks_m, blocks_n,
                    ceil_div(k, DOT_TILE_K))


def _symbolic_dot(batch: DimLike, m: DimLike, n: DimLike, k: DimLike,
                  element_bytes: int) -> DotTiles:
    """`dot` where an extent is known only at the call: 64-wide tiles along it, and the
    block and k-step counts evaluated per call."""
    tile_m = _dot_tile(m) if isinstance(m, int) else 64
    tile_n = _dot_tile(n) if isinstance(n, int) else 64
    blocks_m, blocks_n = ceil_divide(m, tile_m), ceil_divide(n, tile_n)
    shared = (tile_m + tile_n) * DOT_TILE_K * element_bytes
    launch = block_per_item(batch * blocks_m * blocks_n, DOT_THREADS_SIDE ** 2, shared)
    return DotTiles(launch, tile_m, tile_n, DOT_TILE_K, blocks_m, blocks_n,
                    ceil_divide(k, DOT_TILE_K))
