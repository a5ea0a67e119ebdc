"""Throughput of a jitted block-wise model on a Dask cluster of 1, then 2, worker processes.

Run: ``python -m bench.scale_out`` (``--rows``, ``--block-rows``, ``--repeats``, ``--workers``).
The input, float32 rows of 256 features, is made and kept on the workers (`persist`), so the
time is the model's: a two-layer MLP with a GELU and a row normalisation on each block,
`map_blocks(predict).sum(axis=0)`, best of `--repeats` runs after one warm-up run that
compiles on every worker. Each worker has one thread and (Dask's nanny sets OMP_NUM_THREADS=1)
one kernel thread. For reference, the same model on the same rows in this process, as one
jitted call over the whole array with one kernel thread, then with one per CPU.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import jitc

FEATURES = 256
HIDDEN = 256
_weights = np.random.default_rng(1)
W1 = (_weights.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES)).astype(np.float32)
W2 = (_weights.standard_normal((HIDDEN, FEATURES)) / np.sqrt(HIDDEN)).astype(np.float32)


def model(x):
    h = x @ W1
    h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))
    y = h @ W2
    return y / (np.sqrt((y * y).sum(axis=-1, keepdims=True)) + 1.0)


predict = jitc.jit(model)  # a module attribute: workers import bench.scale_out to unpickle it


def best_of(repeats: int, run) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def on_cluster(workers: int, rows: int, block_rows: int, repeats: int) -> float:
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    with LocalCluster(processes=True, n_workers=workers, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        x = da.random.default_rng(0).standard_normal((rows, FEATURES), chunks=(block_rows, -1),
                                                      dtype=np.float32).persist()
        wait(x)
        # `meta` spares the client Dask's probe calls (1x1 and 0x0 arrays), which a matmul
        # by W1 cannot take.
        total = x.map_blocks(predict, meta=np.empty((0, FEATURES), np.float32)).sum(axis=0)
        total.compute()  # compiles on every worker that got a block
        seconds = best_of(repeats, total.compute)
        threads = set(client.run(lambda: predict.options.num_threads).values())
        assert threads == {1}, threads
    return seconds


def in_process(threads: int, rows: int, repeats: int) -> float:
    x = np.random.default_rng(0).standard_normal((rows, FEATURES), dtype=np.float32)
    fast = jitc.jit(model, num_threads=threads)
    fast(x)
    return best_of(repeats, lambda: fast(x).sum(axis=0))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_out", description=__doc__)
    parser.add_argument("--rows", type=int, default=1 << 17)
    parser.add_argument("--block-rows", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    megabytes = args.rows * FEATURES * 4 / 1e6
    print(f"{args.rows} rows x {FEATURES} float32 ({megabytes:.0f} MB), blocks of "
          f"{args.block_rows} rows, best of {args.repeats}; {len(os.sched_getaffinity(0))} CPUs")
    rows_per_second = {}
    for workers in args.workers:
        seconds = on_cluster(workers, args.rows, args.block_rows, args.repeats)
        rows_per_second[workers] = args.rows / seconds
        print(f"dask, {workers} worker process(es) x 1 thread: {seconds * 1e3:8.1f} ms  "
              f"{rows_per_second[workers] / 1e6:6.2f} M rows/s")
    for threads in sorted({1, len(os.sched_getaffinity(0))}):
        seconds = in_process(threads, args.rows, args.repeats)
        print(f"one process, one call, num_threads={threads}:  {seconds * 1e3:8.1f} ms  "
              f"{args.rows / seconds / 1e6:6.2f} M rows/s")
    if 1 in rows_per_second and len(rows_per_second) > 1:
        most = max(rows_per_second)
        speedup = rows_per_second[most] / rows_per_second[1]
        print(f"speed-up of {most} workers over 1: {speedup:.2f}x")


if __name__ == "__main__":
    main()
