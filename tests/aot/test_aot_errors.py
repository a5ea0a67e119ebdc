"""Every way `jitc aot` can fail: one line naming the file, the function and the problem,
exit status 2, and nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from aotkit import jitc_aot, needs_gcc, write

GOOD = """
import numpy as np
import jitc


@jitc.export("f32[8]", "f32[8]")
def add(x, y):
    return x + y
"""


def assert_fails(folder: Path, model: Path, *options: str, expect: list[str],
                 output: str = "out.o") -> str:
    """An object file by default: writing one needs no C compiler, so every failure but the
    linker's shows up even where gcc is missing."""
    before = set(folder.iterdir())
    run = jitc_aot(model, "-o", folder / output, *options)
    assert run.status == 2
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("jitc aot: "), lines[0]
    for text in expect:
        assert text in lines[0], lines[0]
    assert set(folder.iterdir()) == before, "a failed build left files behind"
    return lines[0]


def test_no_exports(tmp_path):
    model = write(tmp_path / "plain.py", "import numpy as np\nX = np.zeros(3)\n")
    assert_fails(tmp_path, model, expect=["plain.py", "no exported functions"])


@pytest.mark.parametrize("signature,problem", [
    ('"f33[8]"', "unknown dtype 'f33'"),
    ('"f32[8"', "expected ','"),
    ('"f32[8,2*x]"', "the dimension 2*x uses x, which is not a whole dimension"),
    ('"f32[8,]"', "expected an integer"),
    ('"f32[2,3]{0,1}"', "row-major"),
    ('"f32[-1]"', "negative"),
    ("3.5", "expected a type string"),
])
def test_bad_signature(tmp_path, signature, problem):
    model = write(tmp_path / "model.py", f"""
import jitc


@jitc.export({signature})
def predict(x):
    return x
""")
    line = assert_fails(tmp_path, model, expect=["model.py:5: predict: bad signature", problem])
    assert "argument 0" in line


def test_signature_count_does_not_match_parameters(tmp_path):
    model = write(tmp_path / "model.py", GOOD.replace('("f32[8]", "f32[8]")', '("f32[8]")'))
    assert_fails(tmp_path, model, expect=["model.py:6: add:", "1 signature(s) for 2 "
                                                                "parameter(s) (x, y)"])


def test_function_fails_to_trace(tmp_path):
    model = write(tmp_path / "model.py", GOOD.replace('"f32[8]", "f32[8]"', '"f32[8]", "f32[9]"'))
    assert_fails(tmp_path, model, expect=["model.py:8: add: failed to trace",
                                          "cannot broadcast f32[8] with f32[9]"])


def test_python_control_flow_on_a_traced_value(tmp_path):
    model = write(tmp_path / "model.py", """
import jitc


@jitc.export("f32[4]")
def relu_all(x):
    if x.sum() > 0:
        return x
    return -x
""")
    assert_fails(tmp_path, model, expect=["model.py:7: relu_all: failed to trace",
                                          "truth value of a traced array"])


def test_model_file_fails_to_import(tmp_path):
    model = write(tmp_path / "model.py", GOOD + "W = np.load('missing-weights.npy')\n")
    assert_fails(tmp_path, model, expect=["model.py:9: failed to import", "FileNotFoundError"])


def test_model_file_does_not_exist(tmp_path):
    assert_fails(tmp_path, tmp_path / "nothing.py", expect=["nothing.py: no such file"])


def test_c_name_collides_with_the_c_library(tmp_path):
    model = write(tmp_path / "model.py", GOOD.replace("def add(", "def exp("))
    assert_fails(tmp_path, model, expect=["model.py:6: exp:", "also a function of the C library"])


def test_generated_names_collide(tmp_path):
    model = write(tmp_path / "model.py", GOOD + """

@jitc.export("f32[8]", "f32[8]")
def add_with_workspace(x, y):
    return x - y
""")
    assert_fails(tmp_path, model, expect=["model.py: add_with_workspace: the generated name "
                                          "add_with_workspace is also used by add"])


@pytest.mark.parametrize("options,problem", [
    (("--name", "3d"), "--name '3d' is not a valid C name"),
    (("--prefix", "my-"), "--prefix 'my-' is not a valid start of a C name"),
    (("--threads", "0"), "--threads must be at least 1"),
    (("--target", "nonsense-triple"), "unknown --target 'nonsense-triple'"),
    (("--target-cpu", "no-such-cpu"), "--target-cpu 'no-such-cpu' is not a CPU"),
    (("--target", "aarch64-unknown-linux-gnu", "--threads", "2"),
     "pass --cc with a C compiler for that target"),
    (("--target", "aarch64-unknown-linux-gnu", "--target-cpu", "host"),
     "--target-cpu host describes this machine"),
])
def test_bad_options(tmp_path, options, problem):
    model = write(tmp_path / "model.py", GOOD)
    assert_fails(tmp_path, model, *options, expect=["model.py", problem])


def test_shared_library_for_another_architecture_needs_its_compiler(tmp_path):
    model = write(tmp_path / "model.py", GOOD)
    assert_fails(tmp_path, model, "--target", "aarch64-unknown-linux-gnu", output="libout.so",
                 expect=["cannot link libout.so for aarch64-unknown-linux-gnu: pass --cc"])


def test_unknown_output_kind(tmp_path):
    model = write(tmp_path / "model.py", GOOD)
    before = set(tmp_path.iterdir())
    run = jitc_aot(model, "-o", tmp_path / "model.dll")
    assert run.status == 2 and "must end in .so, .a or .o" in run.stderr
    assert set(tmp_path.iterdir()) == before


def test_missing_c_compiler(tmp_path, monkeypatch):
    model = write(tmp_path / "model.py", GOOD)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert_fails(tmp_path, model, output="libout.so",
                 expect=["model.py: cannot link libout.so",
                         "no C compiler (gcc or cc) found on PATH"])
    assert_fails(tmp_path, model, "--cc", "/no/such/gcc", output="libout.so",
                 expect=["no C compiler (/no/such/gcc)"])
    assert_fails(tmp_path, model, "--threads", "2",
                 expect=["model.py: cannot build the thread pool: no C compiler"])


def test_failing_linker_leaves_nothing(tmp_path):
    model = write(tmp_path / "model.py", GOOD)
    fake = write(tmp_path / "fake-cc", "#!/bin/sh\necho 'ld: cannot find -lm' >&2\nexit 1\n")
    fake.chmod(0o755)
    line = assert_fails(tmp_path, model, "--cc", str(fake), output="libout.so",
                        expect=["model.py: linking libout.so failed", "cannot find -lm"])
    assert "fake-cc exited with 1" in line


@needs_gcc
def test_console_exit_status(tmp_path):
    """The real process: exit status 2 on failure, 0 and both files on success."""
    model = write(tmp_path / "model.py", GOOD)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    bad = subprocess.run([sys.executable, "-m", "jitc", "aot", str(model), "-o",
                          str(tmp_path / "x.so"), "--threads", "0"], capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    good = subprocess.run([sys.executable, "-m", "jitc", "aot", str(model), "-o",
                           str(tmp_path / "libadd.so")], capture_output=True, text=True,
                          env=env)
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "libadd.so").exists() and (tmp_path / "libadd.h").exists()
