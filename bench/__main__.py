"""`python -m bench`: jitc against numpy (and JAX and numba when installed), side by side.

Every figure is measured in one run on one machine; ratios are numpy time / implementation
time (above 1 is faster than numpy). Results go to a printed table and a JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys


def _blas_note() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed: BLAS kernel unknown"
    infos = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} "
             f"threads={i.get('num_threads')}" for i in threadpool_info()]
    return "; ".join(infos) or "no BLAS found"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--only", default="", help="run workloads whose name contains this")
    parser.add_argument("--json", default="bench/results.json", help="where to write results")
    parser.add_argument("--min-seconds", type=float, default=0.5,
                        help="time spent measuring each workload and implementation")
    args = parser.parse_args(argv)
    if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
        # numpy's baseline with this machine's OpenBLAS overrides runs a slower kernel:
        # measure in a child process without them (tests and CI leave them alone).
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        os.execve(sys.executable, [sys.executable, "-m", "bench", *sys.argv[1:]], env)
    from bench.runner import run
    from bench.workloads import WORKLOADS
    selected = [w for w in WORKLOADS if args.only.lower() in w.name.lower()]
    rows = run(selected, args.quick, args.min_seconds)
    names = list(rows[0]["results"]) if rows else []
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; "
          f"{_blas_note()}")
    print("ratio = numpy time / implementation time (>1 is faster); first call in ms; "
          "error = max |diff| / max |numpy|")
    header = f"{'workload':24}" + "".join(f"{n:>26}" for n in names)
    print(header)
    for row in rows:
        cells = []
        for n in names:
            r = row["results"][n]
            if "seconds" not in r:
                cells.append(f"{'skipped':>26}")
                continue
            unit = f"{r['seconds'] * 1e6:.2f}us" if row["group"] == "dispatch" \
                else f"{r['seconds'] * 1e3:.2f}ms"
            cells.append(f"{unit:>10} {r.get('ratio', 1):5.2f}x {r['first_call'] * 1e3:6.0f}ms"
                         .rjust(26))
        print(f"{row['workload']:24}" + "".join(cells))
    skipped = {n: r["skipped"] for row in rows for n, r in row["results"].items()
               if "skipped" in r}
    for n, why in sorted(skipped.items()):
        print(f"note: {n}: {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.platform(), "blas": _blas_note(), "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
