"""Jitted functions on Dask: in `dask.array.map_blocks` and `blockwise`, `dask.delayed` and
`Client.map`/`submit` on a cluster of two worker processes. Results equal numpy's; each worker
compiles its first block's shape, and a block of another size once more with that dimension
symbolic (the short last block), however many tasks it runs and however its tasks receive
the function. One cluster serves the module."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask[array] is not installed (the test extra)")
distributed = pytest.importorskip("distributed", reason="distributed is not installed")

import dask  # noqa: E402
import dask_models as models  # noqa: E402

import jitc  # noqa: E402

RNG = np.random.default_rng(7)
X = RNG.standard_normal((1050, 64)).astype(np.float32)  # 10 blocks of 100 rows, then one of 50
Y = RNG.standard_normal((1050, 64)).astype(np.float32)
BLOCK_ROWS = 100


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    # Two threads per worker: tasks of one worker also call the jitted functions concurrently.
    # The nannies run in this process and set OMP_NUM_THREADS=1 and others in its environment
    # for the workers they spawn: put it back for the tests that follow.
    saved = dict(os.environ)
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=2,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield client
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def fresh_workers(client: distributed.Client) -> None:
    """Each test counts its own compiles: the workers forget what earlier tests compiled."""
    client.run(models.forget_compiled)


def compiles_per_worker(client: distributed.Client, name: str) -> dict[str, Counter]:
    """Per worker: how many times it traced (compiled) `name` for each argument shape, a
    symbolic dimension written `n`."""
    return {worker: Counter(tuple(d if isinstance(d, int) else "n" for d in shape)
                            for fun, shape in traces if fun == name)
            for worker, traces in client.run(models.traces).items()}


def assert_compiled_once_per_shape(client: distributed.Client, name: str,
                                   shapes: set[tuple[int, ...]]) -> None:
    """Each worker compiled the shapes of its first calls exactly (two threads may start with
    two shapes at once) and, when it met another, one symbolic compilation for the rest:
    never a signature twice, never more than one symbolic compilation."""
    compiles = compiles_per_worker(client, name)
    assert len(compiles) == 2
    symbolic = {(("n",) + shape[1:]) for shape in shapes}
    for worker, counts in compiles.items():
        assert set(counts) <= shapes | symbolic, (worker, counts)
        assert all(count == 1 for count in counts.values()), (worker, counts)
        assert len(set(counts) & symbolic) <= 1, (worker, counts)
    seen = set().union(*compiles.values())
    # Every block ran on some worker: each shape was compiled exactly or served symbolically.
    assert shapes <= seen or seen & symbolic, seen


def test_map_blocks_compiles_once_per_block_shape_on_each_worker(client) -> None:
    result = da.from_array(X, chunks=(BLOCK_ROWS, 64)).map_blocks(models.gelu_rows).compute()
    np.testing.assert_allclose(result, models.gelu_rows_numpy(X), rtol=2e-6, atol=1e-7)
    assert result.dtype == np.float32
    assert_compiled_once_per_shape(client, "gelu_rows", {(100, 64), (50, 64)})


def test_blockwise_over_two_arrays(client) -> None:
    x, y = (da.from_array(a, chunks=(BLOCK_ROWS, 32)) for a in (X, Y))
    result = da.blockwise(models.scaled_add, "ij", x, "ij", y, "ij",
                          dtype=np.float32).compute()
    np.testing.assert_array_equal(result, X * 2.0 + Y)
    assert_compiled_once_per_shape(client, "scaled_add", {(100, 32), (50, 32)})


def test_delayed_calls(client) -> None:
    blocks = [X[i:i + BLOCK_ROWS] for i in range(0, len(X), BLOCK_ROWS)]
    parts = dask.compute(*[dask.delayed(models.gelu_rows)(b) for b in blocks])
    np.testing.assert_allclose(np.concatenate(parts), models.gelu_rows_numpy(X),
                               rtol=2e-6, atol=1e-7)
    assert_compiled_once_per_shape(client, "gelu_rows", {(100, 64), (50, 64)})


def test_client_map_and_submit(client) -> None:
    blocks = [X[i:i + BLOCK_ROWS] for i in range(0, len(X), BLOCK_ROWS)]
    parts = client.gather(client.map(models.gelu_rows, blocks))
    np.testing.assert_allclose(np.concatenate(parts), models.gelu_rows_numpy(X),
                               rtol=2e-6, atol=1e-7)
    assert_compiled_once_per_shape(client, "gelu_rows", {(100, 64), (50, 64)})
    summed = client.submit(models.scaled_add, X, Y).result()
    np.testing.assert_array_equal(summed, X * 2.0 + Y)


def test_a_function_jitted_by_the_client_compiles_once_per_worker(client) -> None:
    """`jitc.jit(fun, ...)` made in the client is no module attribute: every task carries it
    by value, and each worker still makes one jitted function of all of them."""
    affine = jitc.jit(models.affine, static_argnames="scale")
    result = da.from_array(X, chunks=(BLOCK_ROWS, 64)).map_blocks(affine, scale=3.0).compute()
    np.testing.assert_allclose(result, X * 3.0 + 1.0, rtol=1e-6)
    assert_compiled_once_per_shape(client, "affine", {(100, 64), (50, 64)})


def test_an_exported_function(client) -> None:
    x = X[:1024, :16].copy()
    result = da.from_array(x, chunks=(64, 16)).map_blocks(models.exported_norm).compute()
    np.testing.assert_allclose(result, x / (np.abs(x).sum(axis=-1, keepdims=True) + 1.0),
                               rtol=1e-6)
    assert_compiled_once_per_shape(client, "exported_norm", {(64, 16)})


def test_workers_use_one_kernel_thread_and_the_test_cache(client) -> None:
    """Dask's nanny sets OMP_NUM_THREADS=1 in each worker process: jitc's pool honours it, so
    the workers' tasks each keep one core busy rather than each start a pool of all cores."""
    def settings() -> tuple[int, str | None]:
        return jitc.Options().num_threads, os.environ.get("JITC_CACHE_DIR")

    assert list(client.run(settings).values()) == [(1, os.environ["JITC_CACHE_DIR"])] * 2
    assert list(client.run(lambda: models.gelu_rows.options.num_threads).values()) == [1, 1]
