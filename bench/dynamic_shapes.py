"""Compilations over a sweep of sizes under `jit`'s default dynamic policy (docs/jit.md).

Run: ``python -m bench.dynamic_shapes`` (``--backends cpu c interpreter``; ``--gpt2-max N``:
the GPT-2 block over sequence lengths 1..N, default 64; ``--quick``: fewer sizes;
``--threads N``: the thread count of the per-call rows; with 1 they measure the calling
thread's CPU time, which other processes on a shared machine do not disturb; ``--rounds N``:
the best of N batches of about 3 ms instead of 9 of 20 ms, for a loaded machine, where a
short batch is likelier to find both cores free; ``--persistent-cache``: the sweeps use the
persistent cache, so that a second run of the command measures a restarted process, whose
compilations load from it). One fresh jitted function per workload and backend, the
persistent cache off unless asked for, each size called once: the total includes every trace
and compile. Rows: compilations (of them symbolic), the jitted
total, numpy's total for the same calls, and the reason the second compilation gives (why the
sweep did or did not become one symbolic compilation).

Then, per backend whose sweep compiled symbolically, the per-call time (the best of 9
interleaved batches of calls) at some of the sizes: of the symbolic compilation (as `jit`
calls it, through the general call path) and of an exact compilation of that size
(`dynamic=False`, the C fast path), and their ratio; then the same for the two compilations'
executables called directly (the machine code, and the symbolic one's binding of symbols).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence

import numpy as np

import jitc
from bench.runner import bind_numpy
from bench.workloads import (
    _gpt2_inputs,
    _mlp_inputs,
    gelu,
    gpt2_block,
    layernorm,
    mlp,
    softmax,
)
from jitc.tracing.function import AbstractArray

MLP_BATCHES = (1, 2, 3, 5, 8, 13, 21, 32, 50, 64, 100, 128, 256, 384, 512)


def _sweep(fn: Callable, make: Callable[[int], tuple], sizes: Sequence[int],
           backend: str, persistent_cache: bool = False) -> dict:
    jitted = jitc.jit(fn, backend=backend, disk_cache=persistent_cache)
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


PER_CALL_SIZES = (3, 13, 64, 256)


def _best_per_call(fns: Sequence[Callable], args: tuple, rounds: int = 9,
                   seconds: float = 0.02, clock: Callable[[], float] = time.perf_counter
                   ) -> list[float]:
    """Seconds per call of each of `fns` on `args`: batches of calls lasting about `seconds`,
    the functions taking turns for `rounds` rounds, the best batch of each (other processes
    on a shared machine only ever add time). `clock`: time.thread_time measures the calling
    thread's CPU time, which other processes do not disturb (valid for one thread)."""
    repeats = []
    for fn in fns:
        fn(*args)
        start = time.perf_counter()
        fn(*args)
        repeats.append(max(1, int(seconds / max(time.perf_counter() - start, 1e-7))))
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for n, (fn, repeat) in enumerate(zip(fns, repeats)):
            start = clock()
            for _ in range(repeat):
                fn(*args)
            best[n] = min(best[n], (clock() - start) / repeat)
    return best


def _flat(executable: Callable) -> Callable:
    """`executable` called like the function: positional arrays in, its results out."""
    return lambda *args: executable(list(args))


def _per_call(fn: Callable, make: Callable[[int], tuple], sizes: Sequence[int],
              backend: str, threads: int | None, rounds: int | None = None
              ) -> list[tuple[int, list[float]]]:
    """Per size: seconds per call of the symbolic and the exact compilation through `jit`,
    then of their executables alone (the machine code, with the symbolic one's binding), on
    `threads` threads (None: the default); empty when no symbolic compilation serves them.
    `rounds`: the best of that many short batches (None: 9 of 20 ms).
    The symbolic executable is the first argument's dimension 0 made symbolic."""
    options = {} if threads is None else {"num_threads": threads}
    symbolic = jitc.jit(fn, backend=backend, disk_cache=False, **options)
    symbolic(*make(sizes[0] + 1))
    symbolic(*make(sizes[0] + 2))
    if not any(s["symbolic"] for s in symbolic.compile_stats()):
        return []
    first, *rest = make(sizes[0])
    spec = AbstractArray(("B", *first.shape[1:]), first.dtype)
    code = jitc.jit(fn, backend=backend, disk_cache=False, **options).lower(spec, *rest)
    symbolic_code = code.compile().executable
    rows = []
    for n in sizes:
        args = make(n)
        exact = jitc.jit(fn, backend=backend, disk_cache=False, dynamic=False, **options)
        exact_code = exact.lower(*args).compile().executable
        clock = time.thread_time if threads == 1 else time.perf_counter
        batches = {} if rounds is None else {"rounds": rounds, "seconds": 0.003}
        rows.append((n, _best_per_call([symbolic, exact, _flat(symbolic_code),
                                        _flat(exact_code)], args, clock=clock, **batches)))
    assert sum(s["symbolic"] for s in symbolic.compile_stats()) == 1
    return rows


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


class DecodeOnSelf:
    """A GPT-2 block's decode step as numpy code keeps its state: the KV cache (heads x
    positions x head size) and the position on `self`, the attention over `cache[:, :pos + 1]`
    and `self.pos += 1`. jit makes `self.pos` an extent once it changes: 3 compilations."""

    def __init__(self, weights: tuple, length: int = 256, heads: int = 12) -> None:
        self.weights = weights
        d = weights[0].shape[0]
        self.keys = np.zeros((heads, length, d // heads), np.float32)
        self.values = np.zeros_like(self.keys)
        self.pos = 0

    def step(self, x):
        ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w_fc, b_fc, w_pr, b_pr = self.weights
        d = x.shape[0]
        heads, _, hd = self.keys.shape
        h = layernorm(np, x, ln1_g, ln1_b)
        qkv = h @ w_qkv + b_qkv
        self.keys[:, self.pos] = qkv[d:2 * d].reshape(heads, hd)
        self.values[:, self.pos] = qkv[2 * d:].reshape(heads, hd)
        self.pos += 1
        q = qkv[:d].reshape(heads, hd, 1)
        scores = (self.keys[:, :self.pos] @ q)[..., 0] * (1.0 / math.sqrt(hd))
        attn = (softmax(np, scores)[:, None, :] @ self.values[:, :self.pos])[:, 0, :]
        x = x + attn.reshape(d) @ w_o + b_o
        h = layernorm(np, x, ln2_g, ln2_b)
        return x + gelu(np, h @ w_fc + b_fc) @ w_pr + b_pr

    jitted_step = jitc.jit(step, disk_cache=False)


def _decode_on_self(tokens: int) -> tuple[int, int, float, float, float, float]:
    """(compilations, of them symbolic, jitc seconds, numpy seconds) for `tokens` decode steps
    from an empty cache, then the seconds of one step at the last position (jitc, numpy)."""
    rng = np.random.default_rng(0)
    x, *weights = _gpt2_inputs(rng, False)
    plain, jitted = DecodeOnSelf(tuple(weights)), DecodeOnSelf(tuple(weights))
    DecodeOnSelf.jitted_step.clear_cache()
    start = time.perf_counter()
    y = x[0]
    for _ in range(tokens):
        y = jitted.jitted_step(y)
    jit_total = time.perf_counter() - start
    start = time.perf_counter()
    z = x[0]
    for _ in range(tokens):
        z = plain.step(z)
    numpy_total = time.perf_counter() - start
    np.testing.assert_allclose(y, z, rtol=2e-3, atol=2e-3)
    stats = DecodeOnSelf.jitted_step.compile_stats()

    def again(model: DecodeOnSelf, step: Callable) -> Callable[[], None]:
        def call() -> None:
            model.pos = tokens - 1
            step(x[0])
        return call
    jit_step, numpy_step = _best_per_call(
        [again(jitted, jitted.jitted_step), again(plain, plain.step)], ())
    return (len(stats), sum(s["symbolic"] for s in stats), jit_total, numpy_total,
            jit_step, numpy_step)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["cpu", "c", "interpreter"])
    parser.add_argument("--gpt2-max", type=int, default=64)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of the per-call rows (default: jit's)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="per-call rows: the best of N batches of ~3 ms (default 9 of 20)")
    parser.add_argument("--persistent-cache", action="store_true",
                        help="sweeps use the persistent cache (run twice: a restarted process)")
    args = parser.parse_args(argv)
    mlp_sizes = MLP_BATCHES[::3] if args.quick else MLP_BATCHES
    gpt2_sizes = range(1, (8 if args.quick else args.gpt2_max) + 1)
    per_call: list[tuple[str, str, Callable, Callable[[int], tuple]]] = []
    print(f"{'workload':<28} {'backend':<12} {'compiles':>8} {'symbolic':>8} "
          f"{'jitc s':>8} {'numpy s':>8}  second compilation")
    for name, calls, sizes in (
            (f"MLP, {len(mlp_sizes)} batch sizes", _mlp_calls, mlp_sizes),
            (f"GPT-2 block, seq 1..{max(gpt2_sizes)}", _gpt2_calls, gpt2_sizes)):
        fn, make = calls()
        for backend in args.backends:
            row = _sweep(fn, make, list(sizes), backend, args.persistent_cache)
            print(f"{name:<28} {backend:<12} {row['compiles']:>8} {row['symbolic']:>8} "
                  f"{row['seconds']:>8.2f} {row['numpy_seconds']:>8.3f}  "
                  f"{row['second_reason'][:110]}")
            if row["symbolic"] and backend != "interpreter":
                per_call.append((name.split(",")[0], backend, fn, make))
    if "cpu" in args.backends:
        tokens = 8 if args.quick else 64
        count, symbolic, jit_total, numpy_total, jit_step, numpy_step = _decode_on_self(tokens)
        print(f"{f'GPT-2 decode, self.pos, {tokens}':<28} {'cpu':<12} {count:>8} "
              f"{symbolic:>8} {jit_total:>8.2f} {numpy_total:>8.3f}  one step at pos "
              f"{tokens - 1}: {jit_step * 1e6:.0f} us, numpy {numpy_step * 1e6:.0f} us")
    print(f"\n{'per call (us)':<16} {'backend':<8} {'size':>5} {'jit: symbolic':>14} "
          f"{'exact':>9} {'ratio':>6} {'code: symbolic':>15} {'exact':>9} {'ratio':>6}")
    for name, backend, fn, make in per_call:
        for n, (sym, exact, sym_code, exact_code) in _per_call(fn, make, PER_CALL_SIZES,
                                                               backend, args.threads,
                                                               args.rounds):
            print(f"{name:<16} {backend:<8} {n:>5} {sym * 1e6:>14.1f} {exact * 1e6:>9.1f} "
                  f"{sym / exact:>6.2f} {sym_code * 1e6:>15.1f} {exact_code * 1e6:>9.1f} "
                  f"{sym_code / exact_code:>6.2f}")


if __name__ == "__main__":
    main()
