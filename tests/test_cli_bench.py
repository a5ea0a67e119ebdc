"""`jitc bench FILE:FUNCTION --input SIG --sweep B=...` (jitc/cli_bench.py)."""

from __future__ import annotations

import html
import json
import re
import sys
import textwrap

import pytest

from jitc.cli import main
from jitc.cli_bench import is_model_target, recommend

MODEL = textwrap.dedent("""\
    import numpy as np

    W = np.linspace(-1, 1, 32 * 4, dtype=np.float32).reshape(32, 4)


    def predict(x, bias):
        logits = x @ W + bias
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


    def stats(x):
        return {"mean": x.mean(axis=1), "max": x.max(axis=1)}
    """)


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def _row(items: int, per_second: float, p90: float) -> dict:
    return {"size": items, "items": items, "items_per_s": per_second, "p90_s": p90}


def test_the_recommendation_is_the_knee_or_the_best_within_the_budget() -> None:
    rows = [_row(1, 100, 1e-5), _row(8, 700, 2e-5), _row(64, 950, 1e-4), _row(512, 1000, 1e-3)]
    assert recommend(rows, None)["size"] == 64      # the first within 90% of 1000
    assert recommend(rows, 5e-4)["size"] == 64
    assert recommend(rows, 5e-5)["size"] == 8
    assert recommend(rows, 2e-3)["size"] == 512
    assert recommend(rows, 1e-6) is None
    assert recommend([_row(4, 10, 1.0)], None)["size"] == 4


def test_only_a_function_target_leaves_the_suite() -> None:
    assert is_model_target(["model.py:predict", "--input", "f32[8]"])
    assert not is_model_target(["--quick", "--only", "dispatch"])
    assert not is_model_target([])


def test_a_sweep_prints_a_row_per_size_and_a_recommendation(model, capsys) -> None:
    assert main(["bench", f"{model}:predict", "--input", "f32[B,32]", "--input", "f32[4]",
                 "--sweep", "B=1,16", "--min-seconds", "0.01"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("predict(f32[B,32], f32[4]) on cpu\n")
    assert re.search(r"^\s+B\s+median\s+p90\s+items/s\s+numpy\s+speedup\s+compile$", out, re.M)
    sizes = re.findall(r"^\s+(\d+)\s+\S+us", out, re.M)
    assert sizes == ["1", "16"]
    assert re.search(r"^recommended: B=(1|16) \(the knee", out, re.M)
    error = float(re.search(r"max \|jitc - numpy\| / max \|numpy\|: (\S+)", out).group(1))
    assert error < 1e-5


def test_json_has_every_figure_and_honours_the_budget(model, capsys) -> None:
    assert main(["bench", f"{model}:predict", "--input", "f32[B,32]", "--input", "f32[4]",
                 "--sweep", "B=2,8", "--min-seconds", "0.01", "--latency-budget-ms", "1e6",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sweep"] == "B" and [r["size"] for r in report["rows"]] == [2, 8]
    for row in report["rows"]:
        assert row["p90_s"] >= row["median_s"] > 0 and row["numpy_median_s"] > 0
        assert row["items_per_s"] == pytest.approx(row["size"] / row["median_s"])
        assert row["speedup"] == pytest.approx(row["numpy_median_s"] / row["median_s"])
        assert row["compile_s"] > 0 and row["calls"] >= 5 and row["max_error"] < 1e-5
    best = max(report["rows"], key=lambda r: r["items_per_s"])
    assert report["recommended"] == best["size"]  # every size is within a huge budget


def test_mistakes_are_one_line_each(model, capsys) -> None:
    target = f"{model}:predict"
    assert main(["bench", target, "--input", "f32[B,32]", "--input", "f32[4]",
                 "--sweep", "N=1,2"]) == 2
    assert "no --input has a dimension named N" in capsys.readouterr().err
    assert main(["bench", target, "--input", "f32[B,32]", "--input", "f32[4]",
                 "--sweep", "B=1,x"]) == 2
    assert "expected NAME=N,N,..." in capsys.readouterr().err
    assert main(["bench", target, "--input", "f32[B,32]", "--input", "f32[4]"]) == 2
    assert "no size for B" in capsys.readouterr().err


def test_results_that_are_pytrees_are_compared_leaf_by_leaf(model, capsys) -> None:
    assert main(["bench", f"{model}:stats", "--input", "f64[B,16]", "--sweep", "B=4",
                 "--min-seconds", "0.01", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["max_error"] < 1e-12


def test_html_writes_a_report_with_the_table_and_the_plot(model, tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib", reason="--html draws with matplotlib (jitc[plot])")
    page = tmp_path / "report.html"
    assert main(["bench", f"{model}:predict", "--input", "f32[B,32]", "--input", "f32[4]",
                 "--sweep", "B=2,8", "--min-seconds", "0.01", "--html", str(page)]) == 0
    table = capsys.readouterr().out
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert "<svg" in text and "items/s" in text
    assert table.splitlines()[0] in text  # the printed table is in the page
    data = re.search(r"<pre id='report'>(.*?)</pre>", text, re.S).group(1)
    report = json.loads(html.unescape(data))
    assert [r["size"] for r in report["rows"]] == [2, 8]


def test_html_without_matplotlib_says_how_to_install_it(model, tmp_path, capsys,
                                                         monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    assert main(["bench", f"{model}:predict", "--input", "f32[B,32]", "--input", "f32[4]",
                 "--sweep", "B=2", "--html", str(tmp_path / "r.html")]) == 2
    assert "pip install 'jitc[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
