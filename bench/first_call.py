"""The first call of the GPT-2 forward (d=768, 64 tokens) at a given depth: wall and CPU time.

Run: ``python -m bench.first_call [--layers 12] [--backend cpu] [--runs 3]``. Each run is a
fresh process compiling with the persistent cache off. CPU time is the process's (its compile
threads included): on a shared machine it is the steadier figure, since waiting for a core adds
wall time only. The first call includes running the function once.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_RUN = """
import json, sys, time
import numpy as np
import jitc
from bench.runner import bind_numpy
from bench.workloads import _gpt2_stack_inputs, gpt2_forward
backend, layers = sys.argv[1], int(sys.argv[2])
args = _gpt2_stack_inputs(layers)(np.random.default_rng(0), False)
fast = jitc.jit(bind_numpy(gpt2_forward), backend=backend, disk_cache=False)
wall, cpu = time.perf_counter(), time.process_time()
fast(*args)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
[stats] = fast.compile_stats()
phases = {k: stats[k] for k in ("trace_seconds", "optimize_seconds", "codegen_seconds")}
print(json.dumps({"wall": wall, "cpu": cpu, **phases}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.first_call", description=__doc__)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    for _ in range(args.runs):
        done = subprocess.run([sys.executable, "-c", ONE_RUN, args.backend, str(args.layers)],
                              cwd=ROOT, capture_output=True, text=True, check=True)
        run = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{args.layers} layers on {args.backend}: first call {run['wall']:.2f} s wall, "
              f"{run['cpu']:.2f} s cpu (trace {run['trace_seconds']:.2f}, optimize "
              f"{run['optimize_seconds']:.2f}, codegen {run['codegen_seconds']:.2f} s wall)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
