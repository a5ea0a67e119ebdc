"""`jitc.profile`: the Chrome trace-event file of compiles and calls (docs/profiling.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import jitc
from jitc.cli import demo_model
from jitc.ir import analysis


def _arguments() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in [(4, 8), (8, 16), (16,), (16, 3)]]


def _spans(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def _parent(spans: list[dict], child: dict) -> dict | None:
    """The innermost span of the child's thread that contains it."""
    around = [s for s in spans if s is not child and s["tid"] == child["tid"]
              and s["ts"] <= child["ts"] and child["ts"] + child["dur"] <= s["ts"] + s["dur"]
              + 1e-3]
    return min(around, key=lambda s: s["dur"], default=None)


def _assert_nested(spans: list[dict]) -> None:
    """On each thread, two spans are either disjoint or one holds the other."""
    for thread in {s["tid"] for s in spans}:
        open_ends: list[float] = []
        for s in sorted((s for s in spans if s["tid"] == thread),
                        key=lambda s: (s["ts"], -s["dur"])):
            while open_ends and open_ends[-1] <= s["ts"] + 1e-3:
                open_ends.pop()
            end = s["ts"] + s["dur"]
            assert not open_ends or end <= open_ends[-1] + 1e-3, f"{s['name']} overlaps"
            open_ends.append(end)


def test_a_profile_holds_nested_compile_spans_and_calls_with_their_kernels(tmp_path) -> None:
    mlp = demo_model()
    fast = jitc.jit(mlp, disk_cache=False)
    args = _arguments()
    path = tmp_path / "trace.json"
    with jitc.profile(path):
        results = [fast(*args) for _ in range(3)]
    for got in results:
        np.testing.assert_allclose(got, mlp(*args), rtol=1e-5, atol=1e-6)
    trace = json.loads(path.read_text())
    spans = _spans(trace)
    _assert_nested(spans)
    names = [s["name"] for s in spans]
    for name in ("trace mlp", "reroll", "compile mlp", "optimize", "fusion", "codegen",
                 "lower to LLVM IR", "LLVM module"):
        assert name in names, name
    assert _parent(spans, next(s for s in spans if s["name"] == "fusion"))["name"] == "optimize"
    cse = next(s for s in spans if s["name"] == "simplification.cse")
    assert _parent(spans, cse)["name"] == "simplification"
    assert _parent(spans, next(s for s in spans if s["name"] == "codegen"))["name"] == \
        "compile mlp"

    calls = [s for s in spans if s["name"] == "call mlp"]
    assert [c["args"]["signature_cache"] for c in calls] == ["miss", "hit", "hit"]
    assert [c["args"]["path"] for c in calls] == ["general", "C fast path", "C fast path"]
    compiled = fast.lower(*args).compile()
    want = analysis.kernel_costs(compiled.optimized_module)
    assert want and all(c["args"]["kernels"] == want for c in calls)
    total = compiled.cost_analysis()
    assert sum(k["flops"] for k in want) == total["flops"]
    assert sum(k["bytes"] for k in want) == total["bytes_accessed"]
    assert {k["op"] for k in want} >= {"dot_general"}
    assert all(k["source"].startswith("demo_model.py:") for k in want)
    threads = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {s["tid"] for s in spans} <= threads


def test_the_fast_path_is_the_c_dispatcher_again_after_a_profile(tmp_path) -> None:
    fast = jitc.jit(lambda x: x + 1, disk_cache=False)
    x = np.arange(4.0)
    fast(x)
    untimed = type(fast._fast)
    with jitc.profile(tmp_path / "t.json"):
        np.testing.assert_array_equal(fast(x), x + 1)  # general path: it installs the timing
        assert type(fast._fast) is not untimed
        np.testing.assert_array_equal(fast(x), x + 1)
    np.testing.assert_array_equal(fast(x), x + 1)
    assert type(fast._fast) is untimed
    calls = [s for s in _spans(json.loads((tmp_path / "t.json").read_text()))
             if s["name"] == "call <lambda>"]
    assert [c["args"]["path"] for c in calls] == ["general", "C fast path"]


def test_keyword_calls_are_timed_through_their_call_form(tmp_path) -> None:
    def scale(x, factor=2.0):
        return x * factor

    fast = jitc.jit(scale, disk_cache=False)
    x = np.arange(4.0)
    with jitc.profile(tmp_path / "t.json"):
        for _ in range(2):
            np.testing.assert_array_equal(fast(x, factor=np.float64(3)), x * 3)
    calls = [s for s in _spans(json.loads((tmp_path / "t.json").read_text()))
             if s["name"] == "call scale"]
    assert [c["args"]["path"] for c in calls] == ["general", "call form"]


def test_persistent_cache_hits_and_misses_are_events(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path / "cache"))
    x = np.arange(6.0)
    with jitc.profile(tmp_path / "t.json"):
        for _ in range(2):  # two jitted functions of one body: the second loads the first's code
            np.testing.assert_array_equal(jitc.jit(lambda x: x * 2 - 1)(x), x * 2 - 1)
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [e["name"] for e in events if e.get("cat") == "cache"] == \
        ["disk cache miss", "disk cache hit"]
    compiles = [e for e in events if e["name"] == "compile <lambda>"]
    assert [c["args"]["disk_cache"] for c in compiles] == ["miss", "hit"]


def test_one_profile_at_a_time(tmp_path) -> None:
    with jitc.profile(tmp_path / "a.json"), pytest.raises(RuntimeError, match="already"):
        jitc.profiling.start(tmp_path / "b.json")
    assert (tmp_path / "a.json").exists() and not (tmp_path / "b.json").exists()


def test_jitc_profile_in_the_environment_profiles_the_process(tmp_path) -> None:
    path = tmp_path / "whole.json"
    program = "import jitc, os; print(os.getpid())"
    env = {**os.environ, "JITC_PROFILE": str(tmp_path / "p-{pid}.json")}
    pid = subprocess.run([sys.executable, "-c", program], check=True, env=env, text=True,
                         capture_output=True, cwd=Path(jitc.__file__).parent.parent).stdout
    assert json.loads((tmp_path / f"p-{pid.strip()}.json").read_text())["traceEvents"] == []

    program = ("import numpy as np, jitc\n"
               "f = jitc.jit(lambda x: np.exp(x).sum())\n"
               "f(np.ones(8, np.float32)); f(np.ones(8, np.float32))\n")
    env = {**os.environ, "JITC_PROFILE": str(path)}
    subprocess.run([sys.executable, "-c", program], check=True, env=env,
                   cwd=Path(jitc.__file__).parent.parent)
    spans = _spans(json.loads(path.read_text()))
    _assert_nested(spans)
    calls = [s for s in spans if s["name"] == "call <lambda>"]
    assert len(calls) == 2
    assert calls[0]["args"]["kernels"][0]["transcendentals"] == 8


def _kernel_spans(spans: list[dict], call: dict) -> list[dict]:
    return [s for s in spans if s.get("cat") == "kernel" and _parent(spans, s) is call]


def test_each_call_holds_a_timed_span_per_kernel_with_its_cost_figures(tmp_path) -> None:
    mlp = demo_model()
    fast = jitc.jit(mlp, disk_cache=False)
    args = _arguments()
    with jitc.profile(tmp_path / "t.json"):
        results = [fast(*args) for _ in range(3)]
    for got in results:
        np.testing.assert_allclose(got, mlp(*args), rtol=1e-5, atol=1e-6)
    trace = json.loads((tmp_path / "t.json").read_text())
    spans = _spans(trace)
    _assert_nested(spans)
    want = fast.lower(*args).compile().kernel_costs
    calls = [s for s in spans if s["name"] == "call mlp"]
    assert len(calls) == 3
    for call in calls:
        kernels = _kernel_spans(spans, call)
        assert [k["args"]["kernel"] for k in kernels] == [k["kernel"] for k in want]
        for kernel, figures in zip(kernels, want):
            assert kernel["name"] == f"{figures['kernel']} {figures['op']}"
            assert kernel["args"].items() >= figures.items()
            assert kernel["args"]["function"] == "mlp"
            assert kernel["dur"] > 0
            seconds = kernel["dur"] * 1e-6
            assert kernel["args"]["GB/s"] == pytest.approx(figures["bytes"] / seconds * 1e-9,
                                                           rel=0.01, abs=1e-3)
            assert kernel["args"]["GFLOP/s"] == pytest.approx(
                figures["flops"] / seconds * 1e-9, rel=0.01, abs=1e-3)
    assert {s["name"] for s in spans} >= {"compile mlp (kernels timed)"}


def test_pool_chunks_are_spans_on_the_threads_that_ran_them(tmp_path) -> None:
    fast = jitc.jit(lambda x: np.exp(x) * 2.0, disk_cache=False, num_threads=2)
    x = np.linspace(-1, 1, 256 * 1024, dtype=np.float32).reshape(256, 1024)
    with jitc.profile(tmp_path / "t.json"):
        for _ in range(2):
            np.testing.assert_allclose(fast(x), np.exp(x) * 2, rtol=1e-6)
    trace = json.loads((tmp_path / "t.json").read_text())
    spans = _spans(trace)
    _assert_nested(spans)
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    kernels = [s for s in spans if s.get("cat") == "kernel"]
    assert len(kernels) == 2
    for kernel in kernels:
        # The chunks split the kernel's rows and run within its time, on the caller's thread
        # or a pool worker's.
        chunks = [s for s in spans if s.get("cat") == "chunk"
                  and kernel["ts"] - 1 <= s["ts"] <= kernel["ts"] + kernel["dur"]]
        assert sorted(s["name"] for s in chunks) == \
            [f"{kernel['name']} [0:128]", f"{kernel['name']} [128:256]"]
        for chunk in chunks:
            assert chunk["args"]["rows"] == 128
            assert chunk["tid"] == kernel["tid"] or names[chunk["tid"]] == "jitc pool worker"
            if chunk["tid"] == kernel["tid"]:
                assert _parent(spans, chunk) is kernel


def test_only_the_profiled_variant_reads_the_clock(tmp_path) -> None:
    fast = jitc.jit(lambda x: x * 2 + 1, disk_cache=False)
    x = np.arange(8.0)
    compiled = fast.lower(x).compile()
    assert "jitc_profile" not in compiled.as_text()
    with jitc.profile(tmp_path / "t.json"):
        fast(x)
        timed = jitc.profiling.kernels_timed(compiled)
    assert timed is not compiled and "@jitc_profile_record" in timed.as_text()
    assert "jitc_profile" not in fast.lower(x).compile().as_text()
    for backend in ("c", "interpreter"):  # untimed: their calls list kernels without times
        other = jitc.jit(lambda x: x * 2 + 1, backend=backend, disk_cache=False)
        other_compiled = other.lower(x).compile()
        assert jitc.profiling.kernels_timed(other_compiled) is other_compiled


def test_a_profile_can_draw_each_kernels_time(tmp_path) -> None:
    pytest.importorskip("matplotlib", reason="the chart is drawn with matplotlib (jitc[plot])")
    fast = jitc.jit(demo_model(), disk_cache=False)
    with jitc.profile(tmp_path / "t.json", chart=tmp_path / "kernels.png"):
        for _ in range(2):
            fast(*_arguments())
    assert (tmp_path / "kernels.png").read_bytes().startswith(b"\x89PNG")
    from jitc import plots
    totals = plots.kernel_totals(json.loads((tmp_path / "t.json").read_text()))
    assert {t["kernel"] for t in totals} == \
        {f"{k['kernel']} {k['op']}" for k in fast.lower(*_arguments()).compile().kernel_costs}
    assert all(t["calls"] == 2 and t["total_us"] > 0 for t in totals)
    plots.kernel_chart(json.loads((tmp_path / "t.json").read_text()), tmp_path / "k.svg")
    assert "<svg" in (tmp_path / "k.svg").read_text()


def test_a_chart_without_matplotlib_fails_before_profiling(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    with pytest.raises(ImportError, match=r"pip install 'jitc\[plot\]'"), \
            jitc.profile(tmp_path / "t.json", chart=tmp_path / "k.png"):
        pass
    assert jitc.profiling.active() is None


def test_calls_from_threads_that_end_keep_their_kernels_on_their_own_tracks(tmp_path) -> None:
    fast = jitc.jit(lambda x, y: np.tanh(x @ y), disk_cache=False)
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    fast(x, x)
    with jitc.profile(tmp_path / "t.json"):
        for _ in range(2):  # each round's threads end: the runtime frees their logs once read
            with ThreadPoolExecutor(3) as pool:
                results = list(pool.map(lambda _: fast(x, x), range(12)))
            for got in results:
                np.testing.assert_allclose(got, np.tanh(x @ x), rtol=1e-5, atol=1e-6)
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["otherData"]["dropped_kernel_records"] == 0
    spans = _spans(trace)
    _assert_nested(spans)
    calls = [s for s in spans if s["name"] == "call <lambda>"]
    assert len(calls) == 24 and len({c["tid"] for c in calls}) >= 2
    kernels = fast.lower(x, x).compile().kernel_costs
    for call in calls:
        assert [k["args"]["kernel"] for k in _kernel_spans(spans, call)] == \
            [k["kernel"] for k in kernels]


def test_a_call_with_complex_arguments_is_profiled(tmp_path) -> None:
    """The timed variant takes complex arguments and results as float pairs, as the compiled
    function does (it raised 'compiled for (float64[8, 2]), called with (float64[8])')."""
    rotate = jitc.jit(lambda z, w: z * w + 1j)
    z = np.arange(8) * (1 + 2j)
    w = np.exp(1j * np.linspace(0, 3, 8))
    rotate(z, w)
    with jitc.profile(tmp_path / "trace.json"):
        got = rotate(z, w)
    np.testing.assert_allclose(got, z * w + 1j, rtol=1e-14)
    assert got.dtype == np.complex128
    names = [s["name"] for s in _spans(json.loads((tmp_path / "trace.json").read_text()))]
    assert any("kernels timed" in name for name in names), names
