"""The complete example of docs/aot.md builds, compiles with -Wall -Werror, runs without
Python and prints what numpy computes; its Python half runs too."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np
from aotkit import ALLOWED_NEEDED, build, compile_c, needed, needs_gcc, run_clean

import jitc

DOC = Path(__file__).resolve().parents[2] / "docs" / "aot.md"


def named_blocks() -> dict[str, str]:
    """The fenced blocks whose info string names them: ```c app.c → {"app.c": code}."""
    text = DOC.read_text()
    return {m.group(2): m.group(3)
            for m in re.finditer(r"^```(\w+) (\S+)\n(.*?)^```", text, re.M | re.S)}


@needs_gcc
def test_documented_example(tmp_path, monkeypatch):
    blocks = named_blocks()
    assert {"model.py", "app.c", "load"} <= set(blocks)
    model = tmp_path / "model.py"
    model.write_text(blocks["model.py"])
    library = build(model, tmp_path / "libmodel.so")
    assert needed(library) <= ALLOWED_NEEDED
    app = tmp_path / "app.c"
    app.write_text(blocks["app.c"])
    binary = compile_c(app, tmp_path / "app", "-L", tmp_path, "-lmodel", "-Wl,-rpath,$ORIGIN")
    lines = run_clean(binary).splitlines()

    namespace = runpy.run_path(str(model))
    images = (np.arange(8 * 784) % 256).astype(np.float32).reshape(8, 784) / np.float32(255)
    probs = namespace["predict"].__wrapped__(images)
    for row in range(8):
        match = re.fullmatch(r"image (\d): class (\d) \(p = ([0-9.]+)\)", lines[row])
        assert match and int(match[1]) == row, lines[row]
        assert int(match[2]) == probs[row].argmax()
        assert abs(float(match[3]) - probs[row].max()) < 1e-4
    assert lines[8] == "sum = 12475.0"
    assert lines[9] == f"built by jitc {jitc.__version__} for x86-64-v3"

    monkeypatch.chdir(tmp_path)
    (tmp_path / "load.py").write_text(blocks["load"])
    loaded = runpy.run_path(str(tmp_path / "load.py"))
    np.testing.assert_allclose(loaded["total"], 12475.0)
    np.testing.assert_allclose(loaded["probs"],
                               namespace["predict"].__wrapped__(np.zeros((8, 784), np.float32)),
                               rtol=1e-5)

