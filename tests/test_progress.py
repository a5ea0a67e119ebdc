"""Progress lines of long compiles (jitc/progress.py)."""

from __future__ import annotations

import io
import re
import sys
import time

import numpy as np
import pytest

import jitc
from jitc import progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def quick_reports(monkeypatch):
    """Every compile counts as long."""
    monkeypatch.setattr(progress, "FIRST_REPORT_SECONDS", 0.0)
    monkeypatch.setattr(progress, "REPORT_EVERY_SECONDS", 60.0)


def _compile_one(scale: float) -> None:
    x = np.arange(6.0).reshape(2, 3)
    got = jitc.jit(lambda x: np.tanh(x * scale).sum(axis=0), disk_cache=False)(x)
    np.testing.assert_allclose(got, np.tanh(x * scale).sum(axis=0))


def test_a_long_stage_is_named_while_it_runs(monkeypatch, capsys) -> None:
    monkeypatch.setenv("JITC_LOG", "info")
    monkeypatch.setattr(progress, "FIRST_REPORT_SECONDS", 0.05)
    monkeypatch.setattr(progress, "REPORT_EVERY_SECONDS", 0.1)
    with progress.watch("step", "f32[64,784]"):
        progress.stage("pass fusion")
        time.sleep(0.3)
    lines = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"jitc: compiling step\(f32\[64,784\]\): 0\.\d s, in pass fusion",
                        lines[0])
    assert 2 <= len(lines) - 1 <= 4  # the first report, then one every 0.1 s
    assert re.fullmatch(r"jitc: compiled step in 0\.\d s", lines[-1])


def test_with_jitc_log_info_a_long_compile_reports(monkeypatch, capsys, quick_reports) -> None:
    monkeypatch.setenv("JITC_LOG", "info")
    _compile_one(0.5)
    err = capsys.readouterr().err
    # One watch for the whole compile, though Lowered.compile inside the call watches too.
    assert len(re.findall(r"^jitc: compiled <lambda> in \d+\.\d s$", err, re.M)) == 1
    for stage in re.findall(r"^jitc: compiling <lambda>\(f64\[2,3\]\): \S+ s, in (.+)$", err,
                            re.M):
        assert stage == "tracing" or stage.startswith(("pass ", "codegen", "the persistent"))


def test_a_terminal_gets_progress_without_jitc_log(monkeypatch, quick_reports) -> None:
    monkeypatch.delenv("JITC_LOG", raising=False)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    _compile_one(0.25)
    assert "jitc: compiled <lambda> in" in terminal.getvalue()


def test_nothing_is_printed_off_a_terminal_or_with_jitc_log_off(monkeypatch, capsys,
                                                                quick_reports) -> None:
    monkeypatch.delenv("JITC_LOG", raising=False)
    _compile_one(0.75)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("JITC_LOG", "off")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    _compile_one(1.5)
    assert terminal.getvalue() == ""
