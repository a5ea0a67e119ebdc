"""`jitc bench FILE:FUNCTION --input 'f32[B,784]' --sweep B=1,8,64,512`: one function of the
user's, jitted and with numpy, at each size of a swept dimension; then the batch size that
gives the most throughput for the latency (docs/profiling.md).

Without FILE:FUNCTION, `jitc bench` is the project's benchmark suite (jitc/cli.py).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jitc.cli_model import CommandError, InputSpec, load_function, parse_sizes, random_inputs
from jitc.tracing import pytree

# Without a latency budget, the recommendation is the smallest size whose throughput is at
# least this share of the best measured: past it, a bigger batch buys little throughput for
# its latency (the knee of the throughput curve).
KNEE_SHARE = 0.9
MAX_CALLS = 100_000


def is_model_target(arguments: Sequence[str]) -> bool:
    """Whether `jitc bench ARGS` names a function (`model.py:predict`) rather than running the
    suite, whose own arguments are all options."""
    return bool(arguments) and not arguments[0].startswith("-") and ":" in arguments[0]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jitc bench", description="Time a function of a Python file, jitted and with "
        "numpy, at each size of a swept dimension, and recommend a batch size.")
    parser.add_argument("target", metavar="FILE:FUNCTION", help="the function, in a Python file")
    parser.add_argument("--input", action="append", default=[], metavar="SIG", required=True,
                        help="an argument's dtype and shape, such as 'f32[B,784]' (once per "
                             "argument, in order)")
    parser.add_argument("--sweep", default=None, metavar="NAME=N,N,...",
                        help="the sizes of one named dimension, such as B=1,8,64,512")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=N",
                        help="the size of another named dimension")
    parser.add_argument("--latency-budget-ms", type=float, default=None,
                        help="recommend the size with the most throughput whose p90 latency "
                             "is within this (default: the knee of the throughput curve)")
    parser.add_argument("--min-seconds", type=float, default=0.2,
                        help="time spent measuring each size and implementation")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                        help="the results as JSON, to PATH or (without one) to stdout "
                             "instead of the table")
    parser.add_argument("--html", default=None, metavar="PATH",
                        help="also write a report with the table and a plot of throughput and "
                             "latency per size to PATH (needs matplotlib: jitc[plot])")
    return parser


def _sweep(text: str | None) -> tuple[str | None, list[int]]:
    if text is None:
        return None, [0]
    name, _, values = text.partition("=")
    try:
        sizes = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        sizes = []
    if not name.strip().isidentifier() or not sizes or min(sizes) < 1:
        raise CommandError(f"--sweep {text!r}: expected NAME=N,N,... such as B=1,8,64,512")
    return name.strip(), sizes


def _latencies(function: Callable, args: Sequence[np.ndarray], min_seconds: float
               ) -> np.ndarray:
    """Seconds of each of repeated calls (at least 5), for about `min_seconds`."""
    times: list[float] = []
    deadline = time.perf_counter() + min_seconds
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < MAX_CALLS):
        start = time.perf_counter_ns()
        function(*args)
        times.append((time.perf_counter_ns() - start) * 1e-9)
    return np.asarray(times)


def _max_error(got: Any, want: Any) -> float:
    """max |jitc - numpy| / max |numpy| over the results."""
    gots, _ = pytree.flatten(got)
    wants, _ = pytree.flatten(want)
    worst = 0.0
    for g, w in zip(gots, wants, strict=True):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        difference = float(np.max(np.abs(g - w))) if w.size else 0.0
        worst = max(worst, difference / scale if scale else difference)
    return worst


def measure(jitted: Callable, plain: Callable, args: Sequence[np.ndarray], items: int,
            min_seconds: float) -> dict[str, Any]:
    """One row: the first call (trace and compile included), then steady-state latencies of
    the jitted function and of numpy."""
    start = time.perf_counter()
    got = jitted(*args)
    first_call = time.perf_counter() - start
    stats = jitted.compile_stats()[-1] if hasattr(jitted, "compile_stats") else {}
    compiled = _latencies(jitted, args, min_seconds)
    reference = _latencies(plain, args, min_seconds)
    median, p90 = float(np.median(compiled)), float(np.percentile(compiled, 90))
    numpy_median = float(np.median(reference))
    return {"items": items, "median_s": median, "p90_s": p90,
            "items_per_s": items / median, "numpy_median_s": numpy_median,
            "numpy_items_per_s": items / numpy_median, "speedup": numpy_median / median,
            "compile_s": stats.get("total_seconds", first_call),
            "compile_cached": bool(stats.get("cached", False)), "first_call_s": first_call,
            "calls": len(compiled), "max_error": _max_error(got, plain(*args))}


def recommend(rows: Sequence[dict[str, Any]], budget_s: float | None) -> dict[str, Any] | None:
    """The row to run at: the most throughput within the p90 latency budget, or without one
    the knee (the smallest size within KNEE_SHARE of the best throughput). None when no size
    meets the budget."""
    if budget_s is not None:
        within = [r for r in rows if r["p90_s"] <= budget_s]
        return max(within, key=lambda r: r["items_per_s"], default=None)
    best = max(r["items_per_s"] for r in rows)
    return min((r for r in rows if r["items_per_s"] >= KNEE_SHARE * best),
               key=lambda r: r["items"])


def _time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f}us"
    return f"{seconds * 1e3:.2f}ms" if seconds < 1 else f"{seconds:.2f}s"


def _rate(per_second: float) -> str:
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.1f}{suffix}"
    return f"{per_second:.1f}"


def _table(report: dict[str, Any]) -> str:
    name = report["sweep"] or "-"
    lines = [f"{report['function']}({', '.join(report['inputs'])}) on {report['backend']}",
             f"{name:>6} {'median':>9} {'p90':>9} {'items/s':>9} {'numpy':>9} {'speedup':>8} "
             f"{'compile':>9}"]
    for row in report["rows"]:
        size = row["size"] if report["sweep"] else "-"
        compile_text = _time(row["compile_s"]) + (" (cached)" if row["compile_cached"] else "")
        lines.append(f"{size:>6} {_time(row['median_s']):>9} {_time(row['p90_s']):>9} "
                     f"{_rate(row['items_per_s']):>9} {_time(row['numpy_median_s']):>9} "
                     f"{row['speedup']:>7.2f}x {compile_text:>9}")
    worst = max(r["max_error"] for r in report["rows"])
    lines.append(f"max |jitc - numpy| / max |numpy|: {worst:.1e}")
    chosen, budget = report["recommended"], report["latency_budget_ms"]
    if not report["sweep"]:
        return "\n".join(lines)
    if chosen is None:
        lines.append(f"no {name} meets the p90 latency budget of {budget} ms")
    elif budget is not None:
        lines.append(f"recommended: {name}={chosen} (the most items/s with p90 latency "
                     f"within {budget} ms)")
    else:
        lines.append(f"recommended: {name}={chosen} (the knee: the smallest {name} within "
                     f"{KNEE_SHARE:.0%} of the highest items/s; --latency-budget-ms to bound "
                     "latency instead)")
    return "\n".join(lines)


def html_report(report: dict[str, Any]) -> str:
    """A self-contained page: the machine, the table, the plot (inline SVG) and the JSON, to
    compare runs on several machines side by side."""
    from jitc import __version__, plots
    svg = plots.sweep_chart(report, "svg").decode()
    svg = svg[svg.index("<svg"):]  # the XML prologue is not allowed inside HTML
    machine = (f"{platform.machine()}, {os.cpu_count()} cpus, {platform.platform()}; "
               f"python {platform.python_version()}, numpy {np.__version__}, jitc {__version__}")
    title = html.escape(f"jitc bench {report['function']}({', '.join(report['inputs'])})")
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title>"
            "</head>\n<body style='font-family: sans-serif'>\n"
            f"<h1>{title}</h1>\n<p>{html.escape(machine)}; measured "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}</p>\n"
            f"<pre>{html.escape(_table(report))}</pre>\n{svg}\n"
            "<h2>Data</h2>\n<pre id='report'>"
            f"{html.escape(json.dumps(report, indent=1))}</pre>\n</body></html>\n")


def run(arguments: Sequence[str]) -> int:
    args = _parser().parse_args(list(arguments))
    try:
        return _run(args)
    except CommandError as exc:
        print(f"jitc bench: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.html is not None:  # before minutes of measuring, not after
        from jitc import plots
        try:
            plots.require_matplotlib("jitc bench --html")
        except ImportError as exc:
            raise CommandError(str(exc)) from None
    jitted, plain = load_function(args.target)
    specs = [InputSpec.parse(text) for text in args.input]
    sizes = parse_sizes(args.size)
    name, values = _sweep(args.sweep)
    if name is not None and not any(name in s.symbols() for s in specs):
        raise CommandError(f"--sweep {name}: no --input has a dimension named {name}")
    rows = []
    for value in values:
        these = {**sizes, name: value} if name is not None else sizes
        row = measure(jitted, plain, random_inputs(specs, these), value or 1, args.min_seconds)
        rows.append({"size": value if name is not None else None, **row})
    budget = args.latency_budget_ms
    chosen = recommend(rows, None if budget is None else budget / 1e3)
    report = {"function": args.target.rpartition(":")[2], "inputs": list(args.input),
              "backend": getattr(getattr(jitted, "options", None), "backend", "?"),
              "sweep": name, "latency_budget_ms": budget, "rows": rows,
              "recommended": None if chosen is None or name is None else chosen["size"]}
    if args.html is not None:
        with open(args.html, "w") as f:
            f.write(html_report(report))
    if args.json is None:
        print(_table(report))
    elif args.json == "-":
        print(json.dumps(report, indent=1))
    else:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(_table(report))
    return 0
