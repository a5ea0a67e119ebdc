"""softmax and layernorm 4096x1024 (float32) on one thread, against numpy and the memory roofline.

Run: ``python -m bench.row_kernels [--repeats 3]``. Times are the calling thread's CPU time
(the fastest of 20 calls), which other processes on a shared machine do not add to, as wall
time they do. jitc runs with one thread; the roofline is a jitc copy (`x + 1`) moving the same
33.6 MB (16.8 MB each way). Two variants of softmax show where its time goes: `square` in place
of `exp`, and a multiplication by the reciprocal of the sum in place of the division. Each
repetition times everything once; the report gives the median over repetitions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import jitc
from bench.runner import bind_numpy
from bench.workloads import layernorm, softmax

CALLS = 20


def softmax_reciprocal(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e * (1 / e.sum(axis=-1, keepdims=True))


def softmax_square(x: np.ndarray) -> np.ndarray:
    e = np.square(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def copy(x: np.ndarray) -> np.ndarray:
    return x + 1


def cpu_seconds(fn: Callable, args: tuple) -> float:
    """The fastest of CALLS calls in this thread's CPU time."""
    best = float("inf")
    for _ in range(CALLS):
        start = time.thread_time()
        fn(*args)
        best = min(best, time.thread_time() - start)
    return best


def measure(repeats: int) -> dict[str, list[float]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 1024)).astype(np.float32)
    g, b = (rng.standard_normal(1024).astype(np.float32) for _ in range(2))
    moved = np.ones(x.size + g.size // 2, np.float32)  # as many bytes each way as layernorm
    one = {"num_threads": 1}
    cases: dict[str, tuple[Callable, tuple]] = {
        "copy": (jitc.jit(copy, **one), (moved,)),
        "softmax": (jitc.jit(bind_numpy(softmax), **one), (x,)),
        "layernorm": (jitc.jit(bind_numpy(layernorm), **one), (x, g, b)),
        "softmax, square for exp": (jitc.jit(softmax_square, **one), (x,)),
        "softmax, e * (1 / s)": (jitc.jit(softmax_reciprocal, **one), (x,)),
        "numpy softmax": (lambda x: softmax(np, x), (x,)),
        "numpy layernorm": (lambda x, g, b: layernorm(np, x, g, b), (x, g, b)),
    }
    for fn, args in cases.values():
        fn(*args)  # compile
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, (fn, args) in cases.items():
            times[name].append(cpu_seconds(fn, args))
    return times


def report(times: dict[str, list[float]]) -> str:
    copy_time = statistics.median(times["copy"])
    lines = [f"{'one thread, CPU time':26}{'median':>9}{'range':>17}{'copies':>8}"]
    for name, values in times.items():
        median = statistics.median(values)
        lines.append(f"{name:26}{median * 1e3:>7.2f}ms{min(values) * 1e3:>8.2f}-"
                     f"{max(values) * 1e3:.2f}ms{median / copy_time:>8.2f}")
    for name in ("softmax", "layernorm"):
        ratios = [n / j for n, j in zip(times[f"numpy {name}"], times[name])]
        lines.append(f"{name}: numpy / jitc {statistics.median(ratios):.2f}x (each repetition: "
                     + ", ".join(f"{r:.2f}" for r in ratios) + ")")
    lines.append(f"copy of {2 * 4 * (4096 * 1024 + 512) / 1e6:.1f} MB: "
                 f"{2 * 4 * (4096 * 1024 + 512) / copy_time / 1e9:.1f} GB/s on one thread")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.row_kernels", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    print(report(measure(parser.parse_args().repeats)))


if __name__ == "__main__":
    main()
