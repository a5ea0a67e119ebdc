"""numpy programs built on np.lib.stride_tricks.sliding_window_view, jitc against numpy: a
3x3 convolution (batch 32, 64->64 channels, 32x32, padding 1, float32) as an einsum and as a
tensordot over the windows, and a moving average over 1e6 float32 with k=16.

Run: ``python -m bench.windows_speed [backend]`` (default cpu). Each row is the fastest of a
few calls after the first (whose time, compilation included, is shown too).
"""
from __future__ import annotations

import sys
import time

import numpy as np

import jitc


def conv(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.einsum("bchwij,ocij->bohw", win, w)


def conv_tensordot(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))


def moving_average(x):
    return np.lib.stride_tricks.sliding_window_view(x, 16, axis=-1).mean(axis=-1)


def best(fn, *args, repeat=5):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 64, 32, 32)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    v = rng.standard_normal(1_000_000).astype(np.float32)
    backend = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    rows = [("conv einsum", conv, (x, w)), ("conv tensordot", conv_tensordot, (x, w)),
            ("moving average", moving_average, (v,))]
    for name, fn, args in rows:
        jitted = jitc.jit(fn, backend=backend)
        t = time.perf_counter()
        got = jitted(*args)
        first = (time.perf_counter() - t) * 1e3
        want = fn(*args)
        err = np.abs(np.asarray(got) - want).max()
        reps = 2 if name == "conv einsum" else 5
        print(f"{name:15s} numpy {best(fn, *args, repeat=reps):8.2f} ms  jitc {backend} "
              f"{best(jitted, *args):8.2f} ms  (first call {first:.0f} ms, max err {err:.1e})",
              flush=True)


if __name__ == "__main__":
    main()
