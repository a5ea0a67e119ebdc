"""Exports with symbolic dimensions: `@jitc.export("f32[n,16]")` becomes a C function that takes
`int64_t n`, checks it against the constraints the trace recorded, sizes its workspace from it
(`NAME_workspace_bytes(n)`), and is called from C and from Python for every size."""

from __future__ import annotations

import numpy as np
import pytest
from aotkit import build, compile_c, fill, needs_gcc, run_clean, write

import jitc
import jitc.aot
from jitc.aot import abi
from jitc.aot.export import ExportError

MODEL = """
import numpy as np
import jitc

W1 = (np.arange(16 * 32, dtype=np.float32).reshape(16, 32) % 7 - 3) / 8
W2 = (np.arange(32 * 10, dtype=np.float32).reshape(32, 10) % 5 - 2) / 4


@jitc.export("f32[n,16]")
def predict(x):
    h = np.maximum(x @ W1, 0)
    z = h @ W2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@jitc.export("f32[b,s,8]", "f32[b]")
def pool(x, scale):
    return x.max(axis=1).sum(axis=1) * scale, x.sum(axis=(1, 2))
"""

W1 = (np.arange(16 * 32, dtype=np.float32).reshape(16, 32) % 7 - 3) / 8
W2 = (np.arange(32 * 10, dtype=np.float32).reshape(32, 10) % 5 - 2) / 4


def numpy_predict(x):
    h = np.maximum(x @ W1, 0)
    z = h @ W2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def numpy_pool(x, scale):
    return x.max(axis=1).sum(axis=1) * scale, x.sum(axis=(1, 2))


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    folder = tmp_path_factory.mktemp("symbolic")
    model = write(folder / "model.py", MODEL)
    return build(model, folder / "libmodel.so")


@needs_gcc
def test_header_takes_the_symbols_first(library):
    text = library.with_suffix(".h").read_text()
    assert "int predict(int64_t n, const float *x, float *res0);" in text
    assert "int64_t predict_workspace_bytes(int64_t n);" in text
    assert "int pool(int64_t b, int64_t s, const float *x, const float *scale, float *res0," \
        in text
    assert "#define PREDICT_ARG0_SHAPE(n) {((int64_t)(n)), 16}" in text
    assert "#define POOL_RES0_SIZE(b, s)  ((int64_t)(b))" in text
    # The constraint the trace recorded (max over the symbolic axis s needs s >= 1).
    comments = " ".join(line.removeprefix(" *").strip() for line in text.splitlines())
    assert "b, s, passed first as int64_t, must be >= 0 and satisfy s >= 1;" in comments
    assert "PREDICT_WORKSPACE_BYTES" not in text


@needs_gcc
@pytest.mark.parametrize("n", [0, 1, 2, 7, 33, 130])
def test_loader_runs_every_size(library, n):
    lib = jitc.aot.load(library)
    x = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
    np.testing.assert_allclose(lib.predict(x), numpy_predict(x), rtol=2e-6, atol=1e-7)
    if n:
        x3 = np.random.default_rng(n).standard_normal((n, n % 5 + 1, 8)).astype(np.float32)
        scale = np.linspace(-1, 1, n, dtype=np.float32)
        for got, want in zip(lib.pool(x3, scale), numpy_pool(x3, scale), strict=True):
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@needs_gcc
def test_loader_checks_shapes_and_the_library_checks_constraints(library):
    lib = jitc.aot.load(library)
    with pytest.raises(TypeError, match=r"argument 1 must have shape \[b\], b=3"):
        lib.pool(np.zeros((3, 2, 8), np.float32), np.zeros(4, np.float32))
    with pytest.raises(jitc.aot.AotCallError, match="breaks a constraint") as caught:
        lib.pool(np.zeros((3, 0, 8), np.float32), np.zeros(3, np.float32))
    assert caught.value.status == abi.BAD_DIMENSION
    x = np.ones((5, 16), np.float32)
    size = lib.predict.workspace_size(x)
    assert size > 0 and size % abi.WORKSPACE_ALIGNMENT == 0
    assert lib.predict.workspace_size(np.ones((50, 16), np.float32)) > size
    buffer = np.zeros(size + abi.WORKSPACE_ALIGNMENT, np.uint8)
    start = (-buffer.ctypes.data) % abi.WORKSPACE_ALIGNMENT
    np.testing.assert_allclose(lib.predict(x, workspace=buffer[start:start + size]),
                               numpy_predict(x), rtol=2e-6)
    with pytest.raises(ValueError, match=f"at least {size} bytes"):
        lib.predict(x, workspace=buffer[:size - 1])


CLIENT = r"""
#include <stdio.h>
#include <stdlib.h>
#include "libmodel.h"

static void run(int64_t n) {
    float *x = malloc((size_t)(PREDICT_ARG0_SIZE(n) + 1) * sizeof(float));
    float *y = malloc((size_t)(PREDICT_RES0_SIZE(n) + 1) * sizeof(float));
    for (int64_t i = 0; i < PREDICT_ARG0_SIZE(n); i++) { int seed = 3; x[i] = FILL; }
    int status = predict(n, x, y);
    printf("status %d\n", status);
    for (int64_t i = 0; i < PREDICT_RES0_SIZE(n); i++) printf("%.9g\n", (double)y[i]);
    free(x);
    free(y);
}

int main(void) {
    run(0);
    run(1);
    run(37);
    float x[8], scale[1] = {1}, out[8], total[1];
    printf("negative %d\n", predict(-1, x, out));
    printf("constraint %d\n", pool(1, 0, x, scale, out, total));
    printf("workspace %d\n", predict_workspace_bytes(-1) == 0 &&
           predict_workspace_bytes(64) >= predict_workspace_bytes(8) &&
           predict_workspace_bytes(8) % JITC_WORKSPACE_ALIGNMENT == 0);
    return 0;
}
"""


@needs_gcc
def test_c_client_passes_the_size(library, tmp_path):
    from aotkit import C_FILLS
    source = write(tmp_path / "client.c", CLIENT.replace("FILL", C_FILLS["f32"]))
    (tmp_path / "libmodel.h").write_text(library.with_suffix(".h").read_text())
    binary = compile_c(source, tmp_path / "client", library, f"-Wl,-rpath,{library.parent}")
    lines = run_clean(binary).split("\n")
    position = 0
    for n in (0, 1, 37):
        assert lines[position] == "status 0"
        want = numpy_predict(fill("f32", (n, 16), 3)).ravel()
        got = np.array(lines[position + 1:position + 1 + want.size], np.float32)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
        position += 1 + want.size
    assert lines[position:position + 3] == [f"negative {abi.BAD_DIMENSION}",
                                            f"constraint {abi.BAD_DIMENSION}", "workspace 1"]


def test_a_symbol_must_be_a_whole_dimension():
    with pytest.raises(ExportError, match="not a whole dimension of any argument"):
        jitc.export("f32[2*n,4]")(lambda x: x)
    exported = jitc.export("f32[n,4]", "f32[4]", name="mv")(lambda x, w: x @ w)
    assert exported.symbols == ("n",)


@needs_gcc
def test_threads_split_a_run_time_extent(tmp_path):
    model = write(tmp_path / "model.py", MODEL)
    lib = jitc.aot.load(build(model, tmp_path / "libmt.so", "--threads", "2"))
    for n in (1, 3, 4099):
        x = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
        np.testing.assert_allclose(lib.predict(x), numpy_predict(x), rtol=2e-6, atol=1e-7)
