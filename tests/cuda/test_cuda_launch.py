"""Launch configurations: plain arithmetic on sizes, checked without a GPU."""

from __future__ import annotations

import pytest

from jitc.backends.cuda import launch


@pytest.mark.parametrize("n,grid,block", [
    (1, 1, 32), (5, 1, 32), (32, 1, 32), (33, 1, 64), (256, 1, 256), (257, 2, 256),
    (10_000, 40, 256), (4096 * 256, 4096, 256), (10**9, launch.MAX_ELEMENTWISE_BLOCKS, 256),
])
def test_elementwise_covers_the_output_in_whole_warps(n: int, grid: int, block: int) -> None:
    config = launch.elementwise(n)
    assert (config.grid, config.block) == (grid, block)
    assert config.block % launch.WARP == 0
    # With the grid-stride loop every element gets a thread; no block is wholly idle.
    assert config.threads >= n or config.grid == launch.MAX_ELEMENTWISE_BLOCKS
    assert (config.grid - 1) * config.block < n


@pytest.mark.parametrize("rows,length,group,per_block,grid,block", [
    (1, 1, 1, 32, 1, 32),        # one value: a lone thread does it
    (16, 10, 16, 16, 1, 256),    # rows of 10: half-warps, two rows a warp
    (1000, 3, 4, 64, 16, 256),   # short rows pack 64 to a block
    (7, 32, 32, 7, 1, 224),      # a row per warp, all in one block
    (4, 33, 64, 1, 4, 64),       # longer than a warp: a block per row
    (3, 100_000, 256, 1, 3, 256),
])
def test_row_reduction(rows: int, length: int, group: int, per_block: int, grid: int,
                       block: int) -> None:
    config = launch.row_reduction(rows, length, partial_bytes=8)
    assert (config.group, config.rows_per_block) == (group, per_block)
    assert (config.launch.grid, config.launch.block) == (grid, block)
    assert config.launch.block % launch.WARP == 0
    assert config.group & (config.group - 1) == 0, "butterflies need a power of two"
    assert config.launch.grid * config.rows_per_block >= rows
    # Shared memory only when warps must meet: one partial per warp.
    expected_shared = 8 * (block // launch.WARP) if config.whole_block else 0
    assert config.launch.shared_bytes == expected_shared


def test_column_reduction_tiles_32_outputs_per_block() -> None:
    config = launch.column_reduction(100, partial_bytes=8)
    assert (config.width, config.height) == (32, 8)
    assert (config.launch.grid, config.launch.block) == (4, 256)
    assert config.launch.shared_bytes == 8 * 256


@pytest.mark.parametrize("m,n,k,tiles", [
    (64, 64, 64, (64, 64, 1, 1, 4)),
    (16, 10, 196, (16, 16, 1, 1, 13)),
    (1, 1000, 7, (16, 64, 1, 16, 1)),
    (100, 40, 0, (64, 32, 2, 2, 0)),
])
def test_dot_tiles_fit_the_problem(m: int, n: int, k: int,
                                   tiles: tuple[int, int, int, int, int]) -> None:
    config = launch.dot(3, m, n, k, element_bytes=4)
    assert (config.tile_m, config.tile_n, config.blocks_m, config.blocks_n,
            config.k_steps) == tiles
    assert config.launch.grid == 3 * config.blocks_m * config.blocks_n
    assert config.launch.block == launch.DOT_THREADS_SIDE ** 2
    assert config.per_thread_m * launch.DOT_THREADS_SIDE == config.tile_m
    assert config.launch.shared_bytes == (config.tile_m + config.tile_n) * config.tile_k * 4
    # Each tile load is a whole number of elements per thread.
    assert config.tile_m * config.tile_k % config.launch.block == 0


def test_dot_tiles_in_double_fit_static_shared_memory() -> None:
    config = launch.dot(1, 4096, 4096, 4096, element_bytes=8)
    assert config.launch.shared_bytes <= launch.MAX_SHARED_BYTES


@pytest.mark.parametrize("grid,block,shared", [(0, 32, 0), (1, 0, 0), (1, 2048, 0),
                                               (1, 32, launch.MAX_SHARED_BYTES + 1)])
def test_impossible_launches_are_rejected(grid: int, block: int, shared: int) -> None:
    with pytest.raises(ValueError):
        launch.LaunchConfig(grid, block, shared)
