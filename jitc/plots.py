"""Charts of profiles and benchmarks, drawn with matplotlib (the optional `plot` extra:
`pip install 'jitc[plot]'`).

- `kernel_chart`: each kernel's total time in a profile (`jitc.profile(path, chart=...)`);
- `timeline`: a profile's spans on their threads, the picture Perfetto shows (docs/pictures.py
  draws the one in docs/profiling.md with it);
- `sweep_chart`: `jitc bench --sweep`'s throughput and latency per size (its `--html` report).

Figures are made with matplotlib's object API (no pyplot), so drawing one changes nothing in
a program that uses matplotlib itself. The format follows the file's suffix (.png, .svg, .pdf).
"""

from __future__ import annotations

import io
import os
import statistics
from typing import Any

EXTRA = "pip install 'jitc[plot]'  (or: pip install matplotlib)"
_CATEGORY_COLOURS = {"compile": "#8da0cb", "codegen": "#a6d854", "pass": "#e5c494",
                     "call": "#fc8d62", "kernel": "#66c2a5", "chunk": "#b3b3b3"}


def require_matplotlib(what: str) -> None:
    """Raise ImportError naming `what` and how to install matplotlib when it is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(f"{what} draws with matplotlib, which is not installed: "
                          f"{EXTRA}") from None


def _figure(width: float, height: float) -> Any:
    require_matplotlib("this chart")
    from matplotlib.figure import Figure
    return Figure(figsize=(width, height), layout="constrained")


def kernel_totals(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Per kernel of a profile (function and kernel name): its calls, total and median
    microseconds, and the GB/s and GFLOP/s achieved at the median (robust to a call the OS
    interrupted), the most time first."""
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for event in trace["traceEvents"]:
        if event.get("cat") != "kernel":
            continue
        args = event["args"]
        key = (args.get("function", ""), event["name"])
        total = totals.setdefault(key, {"function": key[0], "kernel": key[1], "calls": 0,
                                        "total_us": 0.0, "bytes": args["bytes"],
                                        "flops": args["flops"], "times": []})
        total["calls"] += 1
        total["total_us"] += event["dur"]
        total["times"].append(event["dur"])
    for total in totals.values():
        total["median_us"] = statistics.median(total.pop("times"))
        seconds = max(total["median_us"], 1e-3) * 1e-6
        total["GB/s"] = total["bytes"] / seconds * 1e-9
        total["GFLOP/s"] = total["flops"] / seconds * 1e-9
    return sorted(totals.values(), key=lambda t: -t["total_us"])


def kernel_chart(trace: dict[str, Any], path: str | os.PathLike[str], most: int = 30) -> None:
    """A horizontal bar per kernel (the `most` slowest): its total time in the profile,
    labelled with its calls, mean time and achieved throughput."""
    totals = kernel_totals(trace)[:most]
    figure = _figure(10, 1.2 + 0.38 * max(len(totals), 1))
    axes = figure.add_subplot()
    if not totals:
        axes.text(0.5, 0.5, "no timed kernels in this profile (the cpu backend times them)",
                  ha="center", va="center", transform=axes.transAxes)
        axes.set_axis_off()
    else:
        labels = [f"{t['function']}: {t['kernel']}" if t["function"] else t["kernel"]
                  for t in totals]
        times = [t["total_us"] / 1000 for t in totals]
        bars = axes.barh(range(len(totals)), times, color=_CATEGORY_COLOURS["kernel"])
        axes.set_yticks(range(len(totals)), labels, fontsize=8)
        axes.invert_yaxis()
        axes.set_xlabel("total time (ms)")
        for bar, t in zip(bars, totals):
            note = (f"  {t['calls']} calls, median {t['median_us']:.1f} us, "
                    f"{t['GB/s']:.1f} GB/s, {t['GFLOP/s']:.1f} GFLOP/s")
            axes.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, note,
                      va="center", fontsize=7)
        axes.set_xlim(0, max(times) * 1.9)
    axes.set_title("time per kernel (jitc.profile)")
    figure.savefig(os.fspath(path))


def timeline(trace: dict[str, Any], path: str | os.PathLike[str],
             start_us: float | None = None, end_us: float | None = None,
             title: str = "jitc.profile timeline") -> None:
    """The complete spans between `start_us` and `end_us` (the trace's clock; default all),
    one band per thread, nested spans stacked below their parents, coloured by category."""
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    if start_us is not None:
        spans = [e for e in spans if e["ts"] + e["dur"] >= start_us]
    if end_us is not None:
        spans = [e for e in spans if e["ts"] <= end_us]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    threads = sorted({e["tid"] for e in spans}, key=lambda t: min(
        e["ts"] for e in spans if e["tid"] == t))
    rows: list[tuple[int, int]] = []  # (thread, depth), top to bottom
    depth_of: dict[int, int] = {}
    for tid in threads:
        open_ends: list[float] = []
        for e in sorted((e for e in spans if e["tid"] == tid),
                        key=lambda e: (e["ts"], -e["dur"])):
            while open_ends and open_ends[-1] <= e["ts"]:
                open_ends.pop()
            depth_of[id(e)] = len(open_ends)
            open_ends.append(e["ts"] + e["dur"])
        deepest = max((depth_of[id(e)] for e in spans if e["tid"] == tid), default=0)
        rows += [(tid, d) for d in range(deepest + 1)]
    row_of = {row: n for n, row in enumerate(rows)}
    left = start_us if start_us is not None else min(e["ts"] for e in spans)
    right = end_us if end_us is not None else max(e["ts"] + e["dur"] for e in spans)
    scale, unit = (1000, "ms") if right - left > 5000 else (1, "us")
    figure = _figure(12, 1.0 + 0.32 * len(rows))
    axes = figure.add_subplot()
    for e in spans:
        row = row_of[(e["tid"], depth_of[id(e)])]
        begin = (max(e["ts"], left) - left) / scale
        width = (min(e["ts"] + e["dur"], right) - max(e["ts"], left)) / scale
        axes.barh(row, width, left=begin, height=0.85, edgecolor="white", linewidth=0.3,
                  color=_CATEGORY_COLOURS.get(e.get("cat", ""), "#cccccc"))
        if width > (right - left) / scale * 0.06:
            axes.text(begin + width / 2, row, e["name"], ha="center", va="center",
                      fontsize=6, clip_on=True)
    axes.set_yticks(range(len(rows)), [names.get(t, str(t)) if d == 0 else ""
                                       for t, d in rows], fontsize=7)
    axes.invert_yaxis()
    axes.set_xlim(0, (right - left) / scale)
    axes.set_xlabel(f"time ({unit}) from {left / 1000:.1f} ms into the profile")
    axes.set_title(title)
    from matplotlib.patches import Patch
    used = sorted({e.get("cat", "") for e in spans})
    axes.legend(handles=[Patch(color=_CATEGORY_COLOURS.get(c, "#cccccc"), label=c)
                         for c in used], fontsize=7, loc="upper left",
                bbox_to_anchor=(1.0, 1.0))
    figure.savefig(os.fspath(path), dpi=110)


def sweep_chart(report: dict[str, Any], image_format: str = "svg") -> bytes:
    """`jitc bench --sweep`'s items/s and latency (median, p90, numpy) per size, as image
    bytes in `image_format`."""
    rows = report["rows"]
    sizes = [r["size"] or 1 for r in rows]
    figure = _figure(9, 3.6)
    throughput, latency = figure.subplots(1, 2)
    throughput.plot(sizes, [r["items_per_s"] for r in rows], "o-", label="jitc")
    throughput.plot(sizes, [r["numpy_items_per_s"] for r in rows], "s--", label="numpy")
    latency.plot(sizes, [r["median_s"] * 1e3 for r in rows], "o-", label="jitc median")
    latency.plot(sizes, [r["p90_s"] * 1e3 for r in rows], "o:", label="jitc p90")
    latency.plot(sizes, [r["numpy_median_s"] * 1e3 for r in rows], "s--", label="numpy median")
    recommended = report.get("recommended")
    latency.set_yscale("log")
    throughput.set_ylim(bottom=0)  # linear: the knee reads as where the curve flattens
    for axes, ylabel in ((throughput, "items/s"), (latency, "latency (ms)")):
        axes.set_xscale("log", base=2)
        axes.set_xticks(sizes, [str(size) for size in sizes])
        axes.minorticks_off()
        axes.set_xlabel(report.get("sweep") or "size")
        axes.set_ylabel(ylabel)
        if recommended is not None:
            axes.axvline(recommended, color="grey", linewidth=0.8,
                         label=f"recommended {report['sweep']}={recommended}")
        axes.legend(fontsize=7)
    figure.suptitle(f"{report['function']} on {report['backend']}")
    out = io.BytesIO()
    figure.savefig(out, format=image_format)
    return out.getvalue()


__all__ = ["kernel_chart", "kernel_totals", "require_matplotlib", "sweep_chart", "timeline"]
