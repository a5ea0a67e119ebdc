"""Draw the pictures of docs/profiling.md and docs/passes.md from a real run.

    python docs/pictures.py            # needs matplotlib (jitc[plot]) and Graphviz's `dot`

It profiles the classifier of docs/examples/classifier.py (two dense layers and a softmax) on
a batch of 256, eight calls, then draws:

- profile-timeline.png: the whole profile (trace, passes, codegen, the calls) as Perfetto
  shows it, each span of the trace file a bar on its thread's rows (jitc/plots.py `timeline`);
- profile-call.png: one call (of median time) close up: its kernels and their thread-pool
  chunks;
- profile-kernels.png: each kernel's total time (`jitc.profile(chart=...)`);
- profile-pool.png: one call of a large elementwise kernel (one in which the pool's worker
  ran a chunk, when one did), its chunks on the calling thread and a pool worker's track;
- classifier-graph.svg: `as_dot(optimized=True)` of the classifier, drawn by `dot -Tsvg`.

It prints each call's and each kernel's time; the trace file goes to a temporary folder.
"""

from __future__ import annotations

import collections
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


def draw_pool_call() -> None:
    """profile-pool.png: one call of a kernel big enough that the pool's worker is scheduled
    while the caller still runs its own chunk (4M elements of tanh, about 10 ms)."""
    squash = jitc.jit(lambda x: np.tanh(x) * 2.0, disk_cache=False)
    x = np.random.default_rng(2).standard_normal((2048, 2048), np.float32)
    squash(x)
    trace_path = Path(tempfile.mkdtemp()) / "pool-trace.json"
    with jitc.profile(trace_path):
        for _ in range(20):
            squash(x)
    trace = json.loads(trace_path.read_text())
    calls = [e for e in trace["traceEvents"] if e["name"] == "call <lambda>"]
    # A call in which the worker ran a chunk, when one did: on a busy machine the caller often
    # claims both before the worker is scheduled (the other calls show that instead).
    call = next((c for c in calls if any(
        e.get("cat") == "chunk" and e["tid"] != c["tid"] and c["ts"] <= e["ts"] <= c["ts"]
        + c["dur"] for e in trace["traceEvents"])), calls[-1])
    margin = call["dur"] * 0.03
    plots.timeline(trace, HERE / "profile-pool.png", call["ts"] - margin,
                   call["ts"] + call["dur"] + margin,
                   title="one call of tanh(x) * 2 on f32[2048,2048]: two chunks, two threads")


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
    # The close-up shows the call of median duration: on a shared machine a call is now and
    # then descheduled for milliseconds, which the whole-profile picture shows instead.
    typical = sorted(calls[1:], key=lambda call: call["dur"])[len(calls[1:]) // 2]
    margin = typical["dur"] * 0.03
    plots.timeline(trace, HERE / "profile-call.png", typical["ts"] - margin,
                   typical["ts"] + typical["dur"] + margin,
                   title="one call of classify: its kernels, and their chunks on the pool")
    draw_pool_call()
    dot = classify.lower(*args).as_dot(optimized=True)
    subprocess.run(["dot", "-Tsvg", "-o", str(HERE / "classifier-graph.svg")], input=dot,
                   text=True, check=True)
    for call in calls:
        print(f"call {call['args']['signature_cache']:4} {call['args']['path']:12} "
              f"{call['dur']:8.1f} us")
    threads = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    chunks = collections.Counter(threads[e["tid"]] for e in trace["traceEvents"]
                                 if e.get("cat") == "chunk")
    print("pool chunks run by", dict(chunks))
    for total in plots.kernel_totals(trace):
        print(f"{total['kernel']:32} {total['median_us']:8.1f} us {total['GB/s']:7.1f} GB/s "
              f"{total['GFLOP/s']:7.1f} GFLOP/s")
    np.testing.assert_allclose(classify(*args), plain_classify(*args), rtol=1e-5, atol=1e-7)


if __name__ == "__main__":
    sys.exit(main())
