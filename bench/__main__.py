"""`python -m bench`: jitc against numpy (and JAX, numba and torch.compile when installed),
side by side.

Every figure is measured in one run on one machine; ratios are numpy time / implementation
time (above 1 is faster than numpy). Results go to a printed table and a JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.json"
ERROR_NOTE = 1e-4  # output errors above this are listed under the table
NOISY = 1.5  # a time whose slowest round is this much over its fastest is marked ~


def _blas_note() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed: BLAS kernel unknown"
    infos = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} "
             f"threads={i.get('num_threads')}" for i in threadpool_info()]
    return "; ".join(infos) or "no BLAS found"


def _fmt_time(seconds: float) -> str:
    value, unit = ((seconds * 1e6, "us") if seconds < 1e-3 else (seconds * 1e3, "ms")
                   if seconds < 1 else (seconds, "s"))
    return f"{value:.{2 if value < 10 else 1 if value < 100 else 0}f}{unit}"


def _noisy(result: dict) -> bool:
    rounds = result.get("rounds") or [1.0]
    return max(rounds) > NOISY * min(rounds)


def _busy_seconds() -> tuple[float, float]:
    """(CPU seconds the whole machine has been busy, CPU seconds this process has used)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(t) for t in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    busy = sum(ticks[:3]) + sum(ticks[5:8])  # user nice system, irq softirq steal
    mine = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), mine.user + mine.system


def _print_tables(rows: list[dict]) -> None:
    """Time and ratio per implementation side by side, then first-call times, then notes:
    skipped cells (grouped by reason), output errors above ERROR_NOTE and dtype changes."""
    names = list(rows[0]["results"]) if rows else []
    peers = [n for n in names if n != "numpy"]
    print(f"{'workload':20}{'numpy':>9} " + "".join(f"{n:>17} " for n in peers))
    for row in rows:
        res = row["results"]
        numpy_time = _fmt_time(res["numpy"]["seconds"]) if "seconds" in res["numpy"] else "-"
        cells = [f"{numpy_time:>9}" + ("~" if _noisy(res["numpy"]) else " ")]
        for n in peers:
            r = res[n]
            cell = (f"{_fmt_time(r['seconds'])} {r['ratio']:6.2f}x" if "ratio" in r
                    else _fmt_time(r["seconds"]) if "seconds" in r
                    else "-" if "first_call" in r else "n/a (see notes)")
            cells.append(f"{cell:>17}" + ("~" if _noisy(r) else " "))
        print(f"{row['workload'][:19]:20}" + "".join(cells))
    widths = [max(11, len(n) + 2) for n in names]
    print(f"\nfirst call (compile included)\n{'workload':20}"
          + "".join(f"{n:>{w}}" for n, w in zip(names, widths)))
    for row in rows:
        cells = [_fmt_time(r["first_call"]) if "first_call" in r else "-"
                 for r in row["results"].values()]
        print(f"{row['workload'][:19]:20}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
    _print_roofline(rows)
    _print_compute_roofline(rows)
    worst = {n: max((row["results"][n].get("error", 0.0) for row in rows), default=0.0)
             for n in names}
    print("\nmax output error (max |diff| / max |numpy|): "
          + ", ".join(f"{n} {e:.1e}" for n, e in worst.items() if n != "numpy"))
    notes: dict[str, dict[str, list[str]]] = {}  # note -> workload -> implementations
    for row in rows:
        for n, r in row["results"].items():
            whys = [f"n/a: {r['skipped']}"] if "skipped" in r else []
            if r.get("error", 0.0) > ERROR_NOTE:
                whys.append(f"output error {r['error']:.1e} > {ERROR_NOTE:.0e}")
            if "dtype" in r:
                whys.append(f"returns {r['dtype']}, not numpy's dtype")
            for why in whys:
                notes.setdefault(why, {}).setdefault(row["workload"], []).append(n)
    for why, cells in notes.items():
        by_impls: dict[str, list[str]] = {}
        for workload, impls in cells.items():
            by_impls.setdefault(", ".join(impls), []).append(workload)
        where = "; ".join(f"{i} on {', '.join(ws)}" for i, ws in by_impls.items())
        print(f"note: {where}\n      {why}")


def _measured(rows: list[dict], section: str, field: str) -> tuple[list[dict], list[str]]:
    """The rows whose `section` (a roofline) was timed (has `field`), and the implementations
    to give columns (all but numpy)."""
    measured = [row for row in rows if field in row.get(section, {})]
    return measured, [n for n in measured[0]["results"] if n != "numpy"] if measured else []


def _print_roofline(rows: list[dict]) -> None:
    """Per memory-bound row: the bytes it must move (arguments and result), a jitc copy of as
    many bytes (a read, marked r, for reductions) timed in the same rounds, and each time as a
    multiple of it. numpy's multiple is the highest ratio to numpy any implementation can reach
    without moving fewer bytes."""
    measured, names = _measured(rows, "roofline", "seconds")
    if not measured:
        return
    print("\nmemory roofline: a jitc copy (or a read, for reductions) moving the same bytes, "
          "in the same rounds; time / its time\n"
          + f"{'workload':20}{'bytes':>9}{'copy':>9}{'GB/s':>7}"
          + f"{'numpy (max ratio)':>19}" + "".join(f"{n:>15}" for n in names))
    for row in measured:
        copy = row["roofline"]
        cells = [f"{row['results'][n]['seconds'] / copy['seconds']:.2f}"
                 if "seconds" in row["results"][n] else "-" for n in names]
        numpy_time = row["results"]["numpy"].get("seconds")
        numpy_cell = f"{numpy_time / copy['seconds']:.1f}" if numpy_time else "-"
        mark = "" if copy["kind"] == "copy" else "r"
        print(f"{row['workload'][:19]:20}{copy['bytes'] / 1e6:>7.1f}MB"
              f"{_fmt_time(copy['seconds']) + mark:>9}{copy['bytes'] / copy['seconds'] / 1e9:>7.1f}"
              f"{numpy_cell:>19}" + "".join(f"{c:>15}" for c in cells))


def _print_compute_roofline(rows: list[dict]) -> None:
    """Per float row of the matmul and model groups: its flops (jitc's cost model), the peak
    (the faster of jitc's and numpy's float32 512^3 product, timed in the same rounds), the
    highest ratio to numpy any implementation can reach at that peak, and each implementation's
    GFLOP/s with its share of the peak. A target above the highest ratio asks for more
    arithmetic than the machine does."""
    measured, names = _measured(rows, "compute", "peak_seconds")
    if not measured:
        return
    print("\ncompute roofline: flops by jitc's cost model; peak = the faster float32 512^3 "
          "product (jitc's or numpy's) in the same rounds; GFLOP/s (% of peak)\n"
          + f"{'workload':20}{'GFLOP':>8}{'peak GFLOP/s':>16}{'numpy (max ratio)':>19}"
          + "".join(f"{n:>15}" for n in names))
    for row in measured:
        compute = row["compute"]
        peak = compute["peak_flops"] / compute["peak_seconds"]
        flops = compute["flops"]
        cells = [_gflops(row["results"][n], flops, peak) for n in names]
        numpy_time = row["results"]["numpy"].get("seconds")
        numpy_cell = (f"{_gflops(row['results']['numpy'], flops, peak)}, "
                      f"{numpy_time * peak / flops:.1f}x") if numpy_time and flops else "-"
        peak_cell = f"{peak / 1e9:.0f} ({compute['peak_by']})"
        print(f"{row['workload'][:19]:20}{flops / 1e9:>8.2f}{peak_cell:>16}{numpy_cell:>19}"
              + "".join(f"{c:>15}" for c in cells))


def _gflops(result: dict, flops: int, peak: float) -> str:
    """GFLOP/s of a timed result and its share of `peak` (flops per second)."""
    if "seconds" not in result or not flops:
        return "-"
    rate = flops / result["seconds"]
    return f"{rate / 1e9:.0f} ({rate / peak:.0%})"


def select(workloads: list, only: list[str]) -> list:
    """The workloads whose name contains any of `only` (case-insensitive); all without one."""
    return [w for w in workloads if not only or any(o.lower() in w.name.lower() for o in only)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--only", action="append", default=[],
                        help="run workloads whose name contains this (repeat for several)")
    parser.add_argument("--json", default=str(RESULTS), help="where to write results")
    parser.add_argument("--min-seconds", type=float, default=0.5,
                        help="time spent measuring each workload and implementation")
    arguments = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(arguments)
    if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("OPENBLAS_L2_SIZE"):
        # numpy's baseline with this machine's OpenBLAS overrides runs a slower kernel:
        # measure in a child process without them (tests and CI leave them alone).
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        # The child finds this package from anywhere (`jitc bench` may run outside the
        # checkout).
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        os.execve(sys.executable, [sys.executable, "-m", "bench", *arguments], env)
    # First calls are compiles: an empty compile cache of this run's own, so that a workload
    # run before is not loaded from the user's cache (bench/cache_speed.py times that).
    cache = tempfile.TemporaryDirectory(prefix="jitc-bench-cache-")
    os.environ["JITC_CACHE_DIR"] = cache.name
    # The same for torch.compile: Inductor would otherwise load kernels compiled by an earlier
    # run from its cache on disk.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache.name, "torchinductor")
    from bench.runner import ROUNDS, run
    from bench.workloads import WORKLOADS
    selected = select(WORKLOADS, args.only)
    began, (busy, mine) = time.perf_counter(), _busy_seconds()
    rows = run(selected, args.quick, args.min_seconds)
    wall, (busy_end, mine_end) = time.perf_counter() - began, _busy_seconds()
    others = max(0.0, (busy_end - busy) - (mine_end - mine)) / wall
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; "
          f"{_blas_note()}")
    print(f"time = best of {ROUNDS} interleaved rounds (each a median, each started from an idle "
          "process); ratio = numpy time / implementation time (>1 is faster)")
    _print_tables(rows)
    print(f"took {wall:.0f}s; other processes kept {others:.2f} of the {os.cpu_count()} cpus busy"
          f" meanwhile; ~ marks a time whose rounds differ by over {NOISY}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.platform(), "blas": _blas_note(), "rounds": ROUNDS,
                       "min_seconds": args.min_seconds, "wall_seconds": wall,
                       "other_processes_cpus": others, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
