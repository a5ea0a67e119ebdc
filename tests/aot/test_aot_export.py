"""`jitc.export` in Python, `jitc.aot.load`, and the ABI tables shared with runtime/."""

from __future__ import annotations

import re

import numpy as np
import pytest
from aotkit import build, needs_gcc, write

import jitc
import jitc.aot
from jitc.aot import abi
from jitc.aot.export import ExportError
from jitc.ir import dtypes


def test_signature_forms():
    @jitc.export("f32[8,784]", jitc.ShapeDtype((3,), np.int64), np.zeros((2, 2), np.uint8),
                 "i64[]")
    def f(a, b, c, d):
        return a.sum() + b.sum() + c.sum() + d

    assert [t.short() for t in f.arg_types] == ["f32[8,784]", "i64[3]", "u8[2,2]", "i64[]"]
    assert f.export_name == "f" and f.arg_names == ("a", "b", "c", "d")


def test_an_export_is_still_a_jit_function():
    def scale(x, factor=3.0):
        return x * factor

    exported = jitc.export("f32[4]")(scale)
    assert isinstance(exported, jitc.Jitted)
    assert exported.__wrapped__ is scale and exported.__name__ == "scale"
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(exported(x), x * 3)
    # Other signatures compile too, as with jitc.jit.
    np.testing.assert_array_equal(exported(np.ones((2, 2))), np.full((2, 2), 3.0))


@pytest.mark.parametrize("signature,problem", [
    (("f32[8]", "f32[8]"), r"2 signature\(s\) for 1 parameter\(s\)"),
    (("bf16[8]",), "unknown dtype 'bf16'"),
    ((np.zeros(3, np.longdouble),), "not supported by jitc"),
    ((object(),), "expected a type string"),
])
def test_bad_export_raises_at_decoration(signature, problem):
    def predict(x):
        return x

    with pytest.raises(ExportError, match=problem) as info:
        jitc.export(*signature)(predict)
    assert re.search(r"test_aot_export.py:\d+: predict: ", str(info.value))


def test_export_needs_a_c_name():
    with pytest.raises(ExportError, match="not a valid C name"):
        jitc.export("f32[2]")(lambda x: x)
    renamed = jitc.export("f32[2]", name="identity")(lambda x: x)
    assert renamed.export_name == "identity"


def test_abi_header_matches_python_tables():
    header = abi.ABI_HEADER.read_text()
    for code, (enumerator, _) in abi.STATUS.items():
        assert re.search(rf"\b{enumerator} = {code}\b", header), enumerator
    for enumerator, code, _ in abi.DTYPES.values():
        assert re.search(rf"\b{enumerator} = {code}\b", header), enumerator
    # Complex buffers are float pairs in the C interface: no dtype code of their own.
    assert set(abi.DTYPES) == {d for d in dtypes.ALL if not d.is_complex}
    assert f"#define JITC_WORKSPACE_ALIGNMENT {abi.WORKSPACE_ALIGNMENT}\n" in header
    assert f"#define JITC_AOT_ABI_VERSION {abi.ABI_VERSION}\n" in header


MODEL = """
import numpy as np
import jitc

TABLE = np.linspace(-1, 1, 48, dtype=np.float32).reshape(16, 3)


@jitc.export("f32[5,16]", "i32[]")
def project(x, shift):
    y = x @ TABLE + shift
    return y, np.argmax(y, axis=1), (y > 0).all()
"""


@needs_gcc
def test_load_calls_the_library_from_python(tmp_path):
    model = write(tmp_path / "model.py", MODEL)
    library = build(model, tmp_path / "libproj.so", "--name", "proj_lib", "--prefix", "p_")
    lib = jitc.aot.load(library, name="proj_lib")
    assert lib.jitc_version == jitc.__version__ and lib.target_cpu == "x86-64-v3"
    project = lib.p_project
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    got = project(x, np.int32(2))
    namespace: dict = {}
    exec(MODEL, namespace)
    want = namespace["project"](x, np.int32(2))
    assert [g.dtype for g in got] == [w.dtype for w in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    # The caller-workspace variant, then the status for a misaligned workspace.
    assert project.workspace_bytes > 0
    workspace = np.zeros(project.workspace_bytes + 128, np.uint8)
    offset = -workspace.ctypes.data % abi.WORKSPACE_ALIGNMENT
    np.testing.assert_array_equal(project(x, 2, workspace=workspace[offset:])[0], got[0])
    with pytest.raises(jitc.aot.AotCallError, match="aligned") as info:
        project(x, 2, workspace=workspace[offset + 8:])
    assert info.value.status == abi.BAD_WORKSPACE
    with pytest.raises(TypeError, match=r"shape \[5, 16\]"):
        project(x[:4], 2)
    with pytest.raises(ValueError, match="pass load"):
        jitc.aot.load(library)


SORT_MODEL = """
import numpy as np
import jitc


@jitc.export("f32[4,1000]")
def order(x):
    return np.sort(x, axis=1), np.argsort(x, axis=0), np.median(x, axis=1)
"""


@needs_gcc
def test_sort_kernels_run_in_a_library(tmp_path):
    """The sort kernels' scratch is part of the workspace a library function asks for."""
    library = build(write(tmp_path / "model.py", SORT_MODEL), tmp_path / "libsort.so",
                    "--name", "sort_lib")
    order = jitc.aot.load(library, name="sort_lib").order
    x = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32)
    x[0, 5], x[1, 7] = np.nan, -0.0
    want = (np.sort(x, axis=1, kind="stable"), np.argsort(x, axis=0, kind="stable"),
            np.median(x, axis=1))
    for got, expected in zip(order(x), want, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert order.workspace_bytes >= 4 * 2 * 1000 * 8
