"""Draw the pictures of docs/profiling.md and docs/passes.md from a real run.

    python docs/pictures.py            # needs matplotlib (jitc[plot]) and Graphviz's `dot`

It profiles the classifier of docs/examples/classifier.py (two dense layers and a softmax) on
a batch of 256, eight calls, then draws:

- profile-timeline.png: the whole profile (trace, passes, codegen, the calls) as Perfetto
  shows it, each span of the trace file a bar on its thread's rows (jitc/plots.py `timeline`);
- profile-call.png: one call close up (one in which a pool worker ran chunks, when one did):
  its kernels and their thread-pool chunks;
- profile-kernels.png: each kernel's total time (`jitc.profile(chart=...)`);
- classifier-graph.svg: `as_dot(optimized=True)` of the classifier, drawn by `dot -Tsvg`.

It prints each call's and each kernel's time; the trace file goes to a temporary folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import jitc
from jitc import plots

HERE = Path(__file__).resolve().parent


sys.path.insert(0, str(HERE / "examples"))
from classifier import classify as plain_classify  # noqa: E402

classify = jitc.jit(plain_classify, disk_cache=False)  # compiled under the profile


def _worker_ran_chunks(trace: dict, call: dict) -> bool:
    return any(e.get("cat") == "chunk" and e["tid"] != call["tid"]
               and call["ts"] <= e["ts"] <= call["ts"] + call["dur"]
               for e in trace["traceEvents"])


def main() -> None:
    args = [np.random.default_rng(1).standard_normal((256, 784), np.float32)]
    trace_path = Path(tempfile.mkdtemp()) / "profile-trace.json"
    with jitc.profile(trace_path, chart=HERE / "profile-kernels.png"):
        for _ in range(8):
            classify(*args)
    trace = json.loads(trace_path.read_text())
    plots.timeline(trace, HERE / "profile-timeline.png",
                   title="jitc.profile of classify(f32[256,784]): compile, then 8 calls")
    calls = [e for e in trace["traceEvents"] if e["name"] == "call classify"]
    # The close-up shows a call in which a pool worker ran chunks, when one did (on a busy
    # machine the caller often claims them all before the worker is scheduled), of median
    # duration among those (one call in five is often descheduled for milliseconds there).
    helped = [call for call in calls[1:] if _worker_ran_chunks(trace, call)] or calls[1:]
    typical = sorted(helped, key=lambda call: call["dur"])[len(helped) // 2]
    margin = typical["dur"] * 0.03
    plots.timeline(trace, HERE / "profile-call.png", typical["ts"] - margin,
                   typical["ts"] + typical["dur"] + margin,
                   title="one call of classify: its kernels, and their chunks on the pool")
    dot = classify.lower(*args).as_dot(optimized=True)
    subprocess.run(["dot", "-Tsvg", "-o", str(HERE / "classifier-graph.svg")], input=dot,
                   text=True, check=True)
    for call in calls:
        print(f"call {call['args']['signature_cache']:4} {call['args']['path']:12} "
              f"{call['dur']:8.1f} us")
    for total in plots.kernel_totals(trace):
        print(f"{total['kernel']:32} {total['median_us']:8.1f} us {total['GB/s']:7.1f} GB/s "
              f"{total['GFLOP/s']:7.1f} GFLOP/s")
    np.testing.assert_allclose(classify(*args), plain_classify(*args), rtol=1e-5, atol=1e-7)


if __name__ == "__main__":
    sys.exit(main())
