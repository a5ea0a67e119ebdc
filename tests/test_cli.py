"""The `jitc` command line: demo, version and the benchmark entry point."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import jitc
from jitc.cli import demo_model, main


def test_version_and_demo_run(capsys) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip()
    assert main(["demo", "--backend", "interpreter"]) == 0
    assert "max |jitc - numpy|" in capsys.readouterr().out


def test_the_demo_ir_names_the_lines_of_the_demo_model(capsys) -> None:
    assert main(["demo", "--backend", "interpreter"]) == 0
    traced = capsys.readouterr().out.split("and after the optimizer")[0]
    locations = re.findall(r"  # (\S+) \((\w+)\)$", traced, re.MULTILINE)
    assert locations and {file for file, _ in locations} == {"demo_model.py:2",
                                                            "demo_model.py:3",
                                                            "demo_model.py:4",
                                                            "demo_model.py:5"}
    assert {function for _, function in locations} == {"mlp"}


def test_an_error_in_the_demo_model_quotes_its_line() -> None:
    mlp = demo_model()
    with pytest.raises(jitc.JitcError, match=r"demo_model\.py:2 in mlp\n +h = np\.maximum"):
        jitc.jit(mlp, backend="interpreter")(np.ones((4, 8)), np.ones((8, 16)), np.ones(5),
                                             np.ones((16, 3)))


def test_bench_takes_the_suites_own_options(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--help"])
    assert exit_.value.code == 0
    assert "--min-seconds" in capsys.readouterr().out


def test_bench_runs_one_small_workload(tmp_path, capsys, monkeypatch) -> None:
    # The suite re-executes itself to measure numpy without this machine's OpenBLAS
    # overrides; keep this test in-process.
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("OPENBLAS_L2_SIZE", raising=False)
    out = tmp_path / "results.json"
    assert main(["bench", "--quick", "--only", "dispatch", "--min-seconds", "0.01",
                 "--json", str(out)]) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert row["workload"].startswith("dispatch") and row["results"]["jitc"]["seconds"] > 0
    assert "dispatch" in capsys.readouterr().out


def test_bench_from_an_installed_wheel_says_how_to_get_the_suite(tmp_path, capsys,
                                                                 monkeypatch) -> None:
    # Installed from a wheel, jitc sits in site-packages, where a `bench` package (here a
    # stand-in that would fail the test if run) belongs to another project.
    import jitc
    site = tmp_path / "site-packages"
    (site / "jitc").mkdir(parents=True)
    (site / "bench").mkdir()
    (site / "bench" / "__main__.py").write_text("raise AssertionError('another project')\n")
    monkeypatch.setattr(jitc, "__file__", str(site / "jitc" / "__init__.py"))
    assert main(["bench", "--quick"]) == 2
    message = capsys.readouterr().err
    assert "source checkout" in message and "pip install -e '.[bench]'" in message
