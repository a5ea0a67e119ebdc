"""First calls of model workloads in a fresh process: cold, then from the persistent compile
cache.

Run: ``python -m bench.cache_speed`` (``--runs N``: cached runs per workload, default 3). Each
first call runs in a process of its own with a temporary JITC_CACHE_DIR: one with the folder
empty (trace, optimize, compile, store), then `--runs` with the entry it left (trace, look up,
load). The time is the first call; imports and `jit(...)` (which imports the backend, 70-85 ms
once per process here) are left out. The cached time is split
into tracing and the rest (key, read, verify, link) from `compile_stats()`. The first call
includes running the function once; the compile columns leave it out. A cached result must
equal the cold one bit for bit (the same machine code).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One process's first call of workload argv[1]; prints a JSON object.
FIRST_CALL = """
import hashlib, json, sys, time
import numpy as np
import jitc
from bench.runner import bind_numpy
from bench.workloads import CACHE_WORKLOADS
workload = next(w for w in CACHE_WORKLOADS if w.name == sys.argv[1])
args = workload.make(np.random.default_rng(0), False)
fast = jitc.jit(bind_numpy(workload.fn))  # imports the backend: once per process, untimed
start = time.perf_counter()
out = fast(*args)
seconds = time.perf_counter() - start
[stats] = fast.compile_stats()
print(json.dumps({"seconds": seconds, "trace": stats["trace_seconds"],
                  "compile": stats["total_seconds"] - stats["trace_seconds"],
                  "cached": stats["cached"], "bits": hashlib.sha256(out.tobytes()).hexdigest()}))
"""


def first_call(name: str, cache: str) -> dict:
    env = {**os.environ, "JITC_CACHE_DIR": cache,
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    run = subprocess.run([sys.executable, "-c", FIRST_CALL, name], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"{name}: {run.stderr}")
    return json.loads(run.stdout.splitlines()[-1])


def measure(name: str, runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="jitc-cache-bench-") as cache:
        cold = first_call(name, cache)
        cached = [first_call(name, cache) for _ in range(runs)]
    assert not cold["cached"] and all(c["cached"] for c in cached)
    # The loaded machine code is the compiled one: the same result, bit for bit.
    assert all(c["bits"] == cold["bits"] for c in cached), f"{name}: results differ"
    median = statistics.median
    return {"workload": name, "cold": cold["seconds"],
            "cached": median(c["seconds"] for c in cached),
            "cold_compile": cold["trace"] + cold["compile"],
            "cached_trace": median(c["trace"] for c in cached),
            "cached_load": median(c["compile"] for c in cached)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cache_speed", description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="cached runs per workload")
    parser.add_argument("--only", default="", help="workloads whose name contains this")
    args = parser.parse_args(argv)
    from bench.workloads import CACHE_WORKLOADS
    print(f"{'':18}{'first call (run included)':>26}  {'compile (run excluded)':>38}")
    print(f"{'workload':18}{'cold':>9}{'cached':>9}{'ratio':>8}  {'cold':>9}"
          f"{'cached = trace + lookup/load':>31}{'ratio':>7}")
    for workload in CACHE_WORKLOADS:
        if args.only.lower() not in workload.name.lower():
            continue
        row = measure(workload.name, args.runs)
        cached_compile = row["cached_trace"] + row["cached_load"]
        ms = f"{cached_compile * 1e3:.0f}ms = {row['cached_trace'] * 1e3:.0f} + " \
             f"{row['cached_load'] * 1e3:.0f}"
        print(f"{row['workload']:18}{row['cold'] * 1e3:7.0f}ms{row['cached'] * 1e3:7.0f}ms"
              f"{row['cached'] / row['cold']:8.1%}  {row['cold_compile'] * 1e3:7.0f}ms"
              f"{ms:>31}{cached_compile / row['cold_compile']:7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
