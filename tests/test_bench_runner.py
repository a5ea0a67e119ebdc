"""bench/runner.py's torch.compile column, with a stand-in `torch` module: the suite's tests
run without torch installed (it is in the optional `bench` extra)."""

from __future__ import annotations

import sys
import time
import types

import numpy as np
import pytest

from bench import runner
from bench.__main__ import _fmt_time, _print_tables, select
from bench.workloads import WORKLOADS, Workload, softmax

COMPILE_SECONDS = 0.2


class FakeTorch(types.ModuleType):
    """torch.compile as Dynamo behaves to a caller: compiling happens at the first call of
    each compiled function (here a sleep), later calls run the function."""

    def __init__(self, refuse: str = "") -> None:
        super().__init__("torch")
        self.compiled: list[tuple[str, dict]] = []
        self.refuse = refuse

    def compile(self, fn, **options):
        self.compiled.append((fn.__name__, options))
        first = [True]

        def compiled(*args):
            if self.refuse and fn.__name__ != "_warm_up":
                raise RuntimeError(f"Unsupported: {self.refuse}\n  (and a long explanation)")
            if first[0]:
                time.sleep(COMPILE_SECONDS)
                first[0] = False
            return fn(*args)
        return compiled


def _rows(rng, quick):
    return (rng.standard_normal((8, 16)).astype(np.float32),)


SOFTMAX = Workload("softmax 8x16", softmax, _rows, "fusion")


def _run_with(monkeypatch, torch: types.ModuleType | None) -> dict:
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(runner, "implementations", lambda: {
        "numpy": lambda w: (lambda *a: w.fn(np, *a)), runner.TORCH: runner.torch_compiler()})
    monkeypatch.setattr(runner, "QUIET_MAX", 0.02)
    (row,) = runner.run([SOFTMAX], quick=True, min_seconds=0.05)
    return row


def test_without_torch_the_column_says_how_to_install_it(monkeypatch) -> None:
    results = _run_with(monkeypatch, None)["results"]  # `import torch` raises ImportError
    assert results[runner.TORCH] == {"skipped": "not installed (pip install -e '.[bench]')"}
    assert "ratio" not in results["numpy"] or results["numpy"]["ratio"] == 1.0


def test_torch_compile_compiles_the_whole_numpy_function_outside_the_timed_calls(
        monkeypatch) -> None:
    torch = FakeTorch()
    results = _run_with(monkeypatch, torch)["results"]
    # The warm-up first (Inductor's start-up), then the workload, each as one graph.
    assert [name for name, _ in torch.compiled] == ["_warm_up", "softmax"]
    assert all(options == {"fullgraph": True} for _, options in torch.compiled)
    cell = results[runner.TORCH]
    assert cell["first_call"] >= COMPILE_SECONDS > 10 * cell["seconds"]
    assert cell["error"] < 1e-6 and cell["ratio"] > 0


def test_a_function_dynamo_cannot_compile_is_na_with_its_reason(monkeypatch, capsys) -> None:
    results = _run_with(monkeypatch, FakeTorch(refuse="data-dependent branching"))["results"]
    assert results[runner.TORCH] == {
        "skipped": "RuntimeError: Unsupported: data-dependent branching"}
    _print_tables([{"workload": SOFTMAX.name, "group": "fusion", "results": results}])
    out = capsys.readouterr().out
    assert "torch.compile" in out.splitlines()[0]
    assert "n/a (see notes)" in out
    assert ("note: torch.compile on softmax 8x16\n"
            "      n/a: RuntimeError: Unsupported: data-dependent branching") in out


def test_rows_of_other_jitc_backends_are_not_for_torch(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", FakeTorch())
    factory = runner.torch_compiler()
    assert callable(factory)
    with pytest.raises(TypeError, match="c backend"):
        factory(Workload("softmax, c", softmax, _rows, "fusion", backend="c"))


def test_memory_bound_rows_are_timed_beside_a_copy_of_their_bytes(monkeypatch, capsys) -> None:
    row = _run_with(monkeypatch, None)
    roofline = row["roofline"]
    assert roofline["bytes"] == 2 * 8 * 16 * 4  # the argument and the result, float32
    assert len(roofline["rounds"]) == runner.ROUNDS
    assert roofline["seconds"] == min(roofline["rounds"]) > 0
    _print_tables([row])
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("softmax 8x16") and "MB" in ln)
    numpy_multiple = row["results"]["numpy"]["seconds"] / roofline["seconds"]
    assert line.split()[2:4] == ["0.0MB", _fmt_time(roofline["seconds"])]
    assert f"{numpy_multiple:.1f}" in line.split()


def _matmul(xp, a, b):
    return a @ b


def _layers(xp, x, weights):
    for (w,) in weights:
        x = x @ w
    return x


def _product_rows(rng, quick):
    return (rng.standard_normal((16, 24)).astype(np.float32),
            rng.standard_normal((24, 8)).astype(np.float32))


def test_arithmetic_bound_rows_are_timed_beside_the_peak_product(monkeypatch, capsys) -> None:
    monkeypatch.setattr(runner, "implementations", lambda: {
        "numpy": lambda w: (lambda *a: w.fn(np, *a))})
    monkeypatch.setattr(runner, "QUIET_MAX", 0.02)
    monkeypatch.setattr(runner, "PEAK_SIZE", 32)
    product = Workload("matmul 16x24x8", _matmul, _product_rows, "matmul")
    integers = Workload("int matmul", _matmul,
                        lambda rng, quick: (np.ones((4, 4), np.int32),) * 2, "matmul")
    layers = Workload("layers", _layers, lambda rng, quick: (
        np.ones((2, 4), np.float32), [(np.ones((4, 4), np.float32),)] * 2), "model")
    row, integer_row, layers_row = runner.run([product, integers, layers], quick=True,
                                              min_seconds=0.05)
    assert "compute" not in integer_row  # integer products are not float arithmetic
    assert layers_row["compute"]["flops"] == 2 * (2 * 2 * 4 * 4)  # arrays nested in lists
    compute = row["compute"]
    assert compute["flops"] == 2 * 16 * 24 * 8 and compute["peak_flops"] == 2 * 32 ** 3
    peaks = [compute[runner.PEAK_JITC]["seconds"], compute[runner.PEAK_NUMPY]["seconds"]]
    assert compute["peak_seconds"] == min(peaks) > 0
    assert compute["peak_by"] == ("jitc" if peaks[0] <= peaks[1] else "numpy")
    _print_tables([row])
    out = capsys.readouterr().out
    line = out.splitlines()[out.splitlines().index(next(
        ln for ln in out.splitlines() if ln.startswith("compute roofline"))) + 2]
    peak = compute["peak_flops"] / compute["peak_seconds"]
    max_ratio = row["results"]["numpy"]["seconds"] * peak / compute["flops"]
    assert line.startswith("matmul 16x24x8") and f"{max_ratio:.1f}x" in line
    assert f"{peak / 1e9:.0f} ({compute['peak_by']})" in line


def test_only_given_several_times_selects_each_match() -> None:
    names = [w.name for w in select(WORKLOADS, ["softmax", "mlp 784-512"])]
    assert names == ["softmax 4096x1024", "MLP 784-512-512-10"]
    assert select(WORKLOADS, []) == WORKLOADS


def test_a_reduction_s_roofline_is_a_read_of_its_input() -> None:
    x = np.ones((64, 2 * runner.READ_ROW), np.float32)
    sums = runner.roofline_copy((x,), x.sum(axis=1))
    fn, (source,) = sums["call"]
    assert sums["kind"] == "read" and sums["bytes"] == x.nbytes + 64 * 4
    assert source.nbytes == x.nbytes and fn(source).sum() == x.size
    copy = runner.roofline_copy((x,), x * 2)
    assert copy["kind"] == "copy" and copy["call"][1][0].nbytes == x.nbytes


def test_a_compile_only_row_times_jitc_s_compile_and_nothing_else(monkeypatch, capsys) -> None:
    monkeypatch.setattr(runner, "QUIET_MAX", 0.02)
    monkeypatch.setattr(runner, "implementations", lambda: {
        "numpy": lambda w: (lambda *a: w.fn(np, *a)), "jitc": lambda w: None})
    ptx = Workload("softmax PTX", softmax, _rows, runner.COMPILE_ONLY, backend="cuda")
    (row,) = runner.run([ptx], quick=True, min_seconds=0.05)
    assert row["results"]["numpy"] == {"skipped": "a compile only row"}
    jitc_cell = row["results"]["jitc"]
    assert set(jitc_cell) == {"first_call"} and jitc_cell["first_call"] > 0
    _print_tables([row])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:3] == ["softmax", "PTX", "-"]  # no time, no ratio
    first = lines[lines.index("first call (compile included)") + 2]
    assert _fmt_time(jitc_cell["first_call"]) in first
