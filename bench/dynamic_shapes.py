"""Compilations over a sweep of sizes under `jit`'s default dynamic policy (docs/jit.md).

Run: ``python -m bench.dynamic_shapes`` (``--backends cpu c interpreter``; ``--gpt2-max N``:
the GPT-2 block over sequence lengths 1..N, default 48; ``--quick``: fewer sizes). One fresh
jitted function per workload and backend, the persistent cache off, each size called once:
the total includes every trace and compile. Rows: compilations (of them symbolic), the jitted
total, numpy's total for the same calls, and the reason the second compilation gives (why the
sweep did or did not become one symbolic compilation).

Then, per backend that takes symbolic extents, the MLP's time per call at a few batch sizes:
one compilation with a symbolic batch against a compilation for each exact size (both called
as `Compiled` objects, the median of repeated calls).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np

import jitc
from bench.runner import bind_numpy
from bench.workloads import _gpt2_inputs, _mlp_inputs, gpt2_block, mlp
from jitc.backends import get_backend
from jitc.tracing.function import AbstractArray

MLP_BATCHES = (1, 2, 3, 5, 8, 13, 21, 32, 50, 64, 100, 128, 256)
PER_CALL_BATCHES = (2, 7, 64, 256)


def _sweep(fn: Callable, make: Callable[[int], tuple], sizes: Sequence[int],
           backend: str) -> dict:
    jitted = jitc.jit(fn, backend=backend, disk_cache=False)
    calls = [make(n) for n in sizes]
    start = time.perf_counter()
    for args in calls:
        jitted(*args)
    total = time.perf_counter() - start
    start = time.perf_counter()
    for args in calls:
        fn(*args)
    numpy_total = time.perf_counter() - start
    stats = jitted.compile_stats()
    # The reason that says what became of the symbolic compilation, else any later one.
    reasons = sorted((s["reason"] for s in stats if s["reason"] != "first call"),
                     key=lambda r: "symbolic" not in r)
    return {"compiles": len(stats), "symbolic": sum(s["symbolic"] for s in stats),
            "seconds": total, "numpy_seconds": numpy_total,
            "second_reason": reasons[0].splitlines()[0] if reasons else ""}


def _mlp_calls() -> tuple[Callable, Callable[[int], tuple]]:
    rng = np.random.default_rng(0)
    x, *weights = _mlp_inputs(rng, False)

    def make(batch: int) -> tuple:
        return (rng.standard_normal((batch, x.shape[1])).astype(np.float32), *weights)
    return bind_numpy(mlp), make


def _gpt2_calls() -> tuple[Callable, Callable[[int], tuple]]:
    rng = np.random.default_rng(0)
    x, *weights = _gpt2_inputs(rng, False)

    def make(seq: int) -> tuple:
        return (rng.standard_normal((seq, x.shape[1])).astype(np.float32), *weights)
    return bind_numpy(gpt2_block), make


def _median_call_seconds(call: Callable, args: tuple, budget: float = 0.2) -> float:
    call(*args)
    times: list[float] = []
    deadline = time.perf_counter() + budget
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 2000):
        start = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _per_call(backend: str, sizes: Sequence[int]) -> None:
    """The MLP per call: one symbolic compilation against exact ones, at each size."""
    fn, make = _mlp_calls()
    x, *weights = make(2)
    jitted = jitc.jit(fn, backend=backend, disk_cache=False)
    symbolic = jitted.lower(AbstractArray(f"f32[B,{x.shape[1]}]"), *weights).compile()
    for n in sizes:
        args = make(n)
        exact = jitted.lower(*args).compile()
        np.testing.assert_allclose(symbolic(*args), exact(*args), rtol=1e-4, atol=1e-4)
        exact_s = _median_call_seconds(exact, args)
        symbolic_s = _median_call_seconds(symbolic, args)
        print(f"{'MLP per call, batch ' + str(n):<28} {backend:<12} {exact_s * 1e6:>10.1f} "
              f"{symbolic_s * 1e6:>10.1f} {symbolic_s / exact_s:>8.2f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["cpu", "c", "interpreter"])
    parser.add_argument("--gpt2-max", type=int, default=48)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    mlp_sizes = MLP_BATCHES[::3] if args.quick else MLP_BATCHES
    gpt2_sizes = range(1, (8 if args.quick else args.gpt2_max) + 1)
    print(f"{'workload':<28} {'backend':<12} {'compiles':>8} {'symbolic':>8} "
          f"{'jitc s':>8} {'numpy s':>8}  second compilation")
    for name, calls, sizes in (
            (f"MLP, {len(mlp_sizes)} batch sizes", _mlp_calls, mlp_sizes),
            (f"GPT-2 block, seq 1..{max(gpt2_sizes)}", _gpt2_calls, gpt2_sizes)):
        fn, make = calls()
        for backend in args.backends:
            row = _sweep(fn, make, list(sizes), backend)
            print(f"{name:<28} {backend:<12} {row['compiles']:>8} {row['symbolic']:>8} "
                  f"{row['seconds']:>8.2f} {row['numpy_seconds']:>8.3f}  "
                  f"{row['second_reason'][:110]}")
    symbolic_backends = [b for b in args.backends
                         if getattr(get_backend(b), "symbolic_extents", False)]
    if symbolic_backends:
        print(f"\n{'':<28} {'backend':<12} {'exact us':>10} {'symbolic us':>10} {'ratio':>8}")
    for backend in symbolic_backends:
        _per_call(backend, PER_CALL_BATCHES[:2] if args.quick else PER_CALL_BATCHES)


if __name__ == "__main__":
    main()
