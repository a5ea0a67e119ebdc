"""`jitc aot` end to end: a model file becomes a .so, .a or .o that C programs built with
gcc -Wall -Werror call without Python; results match numpy."""

from __future__ import annotations

import runpy
import subprocess
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest
from aotkit import (
    ALLOWED_NEEDED,
    build,
    compile_c,
    defined_dynamic_symbols,
    fill,
    generic_client,
    library_symbols,
    manifest,
    needed,
    needs_gcc,
    parse_sections,
    run_clean,
    split_results,
    write,
)

import jitc.aot
from jitc.ir import dtypes

MODEL = """
import numpy as np
import jitc
from jitc import lax

rng = np.random.default_rng(7)
W1 = (rng.standard_normal((64, 32)) * 0.2).astype(np.float32)
B1 = rng.standard_normal(32).astype(np.float32)
W2 = (rng.standard_normal((32, 10)) * 0.3).astype(np.float32)
KERNEL = (rng.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32)


@jitc.export("f32[8,64]")
def mlp(x):
    h = np.maximum(x @ W1 + B1, 0)
    logits = h @ W2
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@jitc.export("f32[100]", "f32[100]")
def axpy_stats(a, b):
    y = 2.5 * a + b
    return y, y.sum()


@jitc.export("u8[16,16,3]", "i64[]", "i64[16]")
def integers(img, k, v):
    channels = img.astype(np.int32).sum(axis=2)
    return channels, (img > 128).sum(), v * k - (v // 3), np.max(v)


@jitc.export("i16[40]", "u16[40]", "u32[40]", "u64[40]")
def widths(a, b, c, d):
    return (a * 3 - 1, b + 60000, c * c, d - 1, b.sum(), a.astype(np.int64) < d,
            np.maximum(a, b), c // 7 % 5, d >> 3)


@jitc.export("f64[4,16]", "f64[16]")
def doubles(a, b):
    return np.tanh(a) * b + np.sqrt(np.abs(a)), a @ b, a > b


@jitc.export("f32[2,3,10,10]")
def conv(images):
    out = lax.conv_general_dilated(images, KERNEL, window_strides=(1, 1),
                                   padding=[(1, 1), (1, 1)])
    return np.maximum(out, 0)
"""

LIB = "model"


def conv2d_reference(x: np.ndarray, w: np.ndarray, padding: int) -> np.ndarray:
    """NCHW x OIHW cross-correlation with numpy alone."""
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out_h, out_w = x.shape[2] - w.shape[2] + 1, x.shape[3] - w.shape[3] + 1
    out = np.zeros((x.shape[0], w.shape[0], out_h, out_w), np.float64)
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            patch = x[:, :, i:i + out_h, j:j + out_w]
            out += np.einsum("bchw,oc->bohw", patch, w[:, :, i, j])
    return out


def reference(model: dict, name: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    if name == "conv":
        out = conv2d_reference(inputs[0].astype(np.float64),
                               model["KERNEL"].astype(np.float64), 1)
        return [np.maximum(out, 0).astype(np.float32)]
    out = model[name].__wrapped__(*inputs)
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("aot")
    model = write(folder / "model.py", MODEL)
    return build(model, folder / "libmodel.so"), runpy.run_path(str(model))


@needs_gcc
def test_shared_library_needs_only_libc_and_libm(built):
    library, _ = built
    assert library.with_suffix(".h").exists()
    assert needed(library) <= ALLOWED_NEEDED, needed(library)
    # Kernels, entry functions, constants and the thread pool stay inside the library.
    exports = ["mlp", "axpy_stats", "integers", "widths", "doubles", "conv"]
    assert defined_dynamic_symbols(library) == library_symbols(LIB, exports)


@needs_gcc
def test_weights_are_baked_read_only(built):
    library, model = built
    sections = subprocess.run(["readelf", "-S", "-W", str(library)], capture_output=True,
                              text=True, check=True).stdout
    rodata = [line for line in sections.splitlines() if " .rodata" in line]
    size = int(rodata[0].split()[5], 16)
    assert size >= model["W1"].nbytes + model["KERNEL"].nbytes
    data = [line for line in sections.splitlines() if " .data " in line or " .bss " in line]
    # No writable global big enough to hold any state of the exports.
    assert all(int(line.split()[5], 16) < 64 for line in data), data


@pytest.fixture(scope="module")
def c_results(built) -> dict[str, list[np.ndarray]]:
    library, _ = built
    exports = manifest(library, LIB)["exports"]
    client = write(library.parent / "client.c", generic_client("libmodel.h", LIB, exports))
    binary = compile_c(client, library.parent / "client", "-L", library.parent, "-lmodel",
                       f"-Wl,-rpath,{library.parent}")
    sections = parse_sections(run_clean(binary))
    return {e["name"]: split_results(sections[e["name"]], e["results"]) for e in exports}


def _inputs(library: Path, name: str) -> tuple[list[np.ndarray], dict]:
    export = next(e for e in manifest(library, LIB)["exports"] if e["name"] == name)
    inputs = [fill(a["dtype"], tuple(a["shape"]), i) for i, a in enumerate(export["args"])]
    return inputs, export


@needs_gcc
@pytest.mark.parametrize("name,rtol", [("mlp", 1e-5), ("axpy_stats", 1e-5),
                                       ("integers", 0), ("widths", 0), ("doubles", 1e-13),
                                       ("conv", 1e-5)])
def test_c_client_matches_numpy(built, c_results, name, rtol):
    library, model = built
    inputs, export = _inputs(library, name)
    want = reference(model, name, inputs)
    got = c_results[name]
    assert [list(w.shape) for w in want] == [r["shape"] for r in export["results"]]
    assert [dtypes.from_numpy(w.dtype).name for w in want] == \
        [r["dtype"] for r in export["results"]]
    for g, w in zip(got, want, strict=True):
        if rtol == 0:  # integers: exactly, at every width
            np.testing.assert_array_equal(g, w, strict=True)
        else:
            np.testing.assert_allclose(g, w.astype(np.float64), rtol=rtol, atol=rtol)


@needs_gcc
def test_status_codes_and_library_strings(built):
    library, _ = built
    client = write(library.parent / "status.c", """\
        #include <stdint.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include "libmodel.h"

        int main(void) {
            static float x[MLP_ARG0_SIZE], y[MLP_RES0_SIZE];
            _Static_assert(MLP_NUM_ARGS == 1 && MLP_NUM_RESULTS == 1, "counts");
            _Static_assert(MLP_ARG0_DTYPE == JITC_F32 && MLP_ARG0_RANK == 2, "dtype, rank");
            _Static_assert(MLP_WORKSPACE_BYTES % JITC_WORKSPACE_ALIGNMENT == 0, "aligned");
            const int64_t shape[] = MLP_ARG0_SHAPE;
            unsigned char *ws = aligned_alloc(JITC_WORKSPACE_ALIGNMENT, MLP_WORKSPACE_BYTES);
            printf("%lld %lld\\n", (long long)shape[0], (long long)shape[1]);
            printf("%d\\n", mlp(NULL, y));
            printf("%d\\n", mlp(x, NULL));
            printf("%d\\n", mlp(x, x));
            printf("%d\\n", mlp_with_workspace(x, y, NULL));
            printf("%d\\n", mlp_with_workspace(x, y, ws + 16));
            printf("%d\\n", mlp_with_workspace(x, y, ws));
            printf("%d\\n", axpy_stats_with_workspace(x, x + 100, y, y + 100, NULL));
            printf("%d\\n", axpy_stats(x, x, y, y + 50));
            for (int code = 0; code <= 6; code++) printf("%s\\n", model_error_string(code));
            printf("%s\\n", model_error_string(-1));
            printf("%d %d\\n", strcmp(model_jitc_version(), MODEL_JITC_VERSION),
                   strcmp(model_target_cpu(), MODEL_TARGET_CPU));
            free(ws);
            return 0;
        }
        """)
    binary = compile_c(client, library.parent / "status", "-L", library.parent, "-lmodel",
                       f"-Wl,-rpath,{library.parent}")
    lines = run_clean(binary).splitlines()
    assert lines[:9] == ["8 64", "1", "1", "4", "3", "3", "0", "0", "4"]
    assert lines[9] == "success"
    assert "NULL" in lines[10] and "allocated" in lines[11] and "aligned" in lines[12]
    assert "overlaps" in lines[13] and "dimension" in lines[14]
    assert lines[15] == lines[16] == "unknown jitc status code"
    assert lines[17] == "0 0"


THREADS_CLIENT = """\
    #include <pthread.h>
    #include <stdio.h>
    #include <string.h>
    #include "libmodel.h"

    #define THREADS 8
    #define ROUNDS 40

    static float inputs[THREADS][MLP_ARG0_SIZE];
    static float expected[THREADS][MLP_RES0_SIZE];

    static void *worker(void *arg) {
        long t = (long)arg, failures = 0;
        float out[MLP_RES0_SIZE];
        for (int round = 0; round < ROUNDS; round++) {
            if (mlp(inputs[t], out) != JITC_OK || memcmp(out, expected[t], sizeof out) != 0)
                failures++;
        }
        return (void *)failures;
    }

    int main(void) {
        for (long t = 0; t < THREADS; t++) {
            for (long i = 0; i < MLP_ARG0_SIZE; i++)
                inputs[t][i] = (float)((i * 37 + t) % 101) / 50.0f - 1.0f;
            if (mlp(inputs[t], expected[t]) != JITC_OK) return 1;
        }
        pthread_t threads[THREADS];
        for (long t = 0; t < THREADS; t++)
            pthread_create(&threads[t], NULL, worker, (void *)t);
        long failures = 0;
        for (long t = 0; t < THREADS; t++) {
            void *result;
            pthread_join(threads[t], &result);
            failures += (long)result;
        }
        printf("failures %ld\\n", failures);
        for (long t = 0; t < THREADS; t++)
            for (long i = 0; i < MLP_RES0_SIZE; i++) printf("%.9g\\n", expected[t][i]);
        return 0;
    }
"""


@needs_gcc
@pytest.mark.parametrize("threads", [1, 2])
def test_many_threads_call_one_export(tmp_path, threads):
    """Reentrancy: threads share the export (and, when threaded, its pool) at once."""
    model = write(tmp_path / "model.py", MODEL.replace('@jitc.export("f32[8,64]")',
                                                       '@jitc.export("f32[1024,64]")'))
    library = build(model, tmp_path / "libmodel.so", "--threads", str(threads))
    assert manifest(library, LIB)["threads"] == threads
    assert needed(library) <= ALLOWED_NEEDED
    client = write(tmp_path / "threads.c", THREADS_CLIENT)
    binary = compile_c(client, tmp_path / "threads", "-pthread", "-L", tmp_path, "-lmodel",
                       f"-Wl,-rpath,{tmp_path}")
    first, *values = run_clean(binary).splitlines()
    assert first == "failures 0"
    got = np.array(values, dtype=np.float64).reshape(8, 1024, 10)
    mlp = runpy.run_path(str(model))["mlp"].__wrapped__
    for t in range(8):
        np.testing.assert_allclose(got[t], mlp(fill("f32", (1024, 64), t)), rtol=1e-5,
                                   atol=1e-6)


@needs_gcc
@pytest.mark.parametrize("kind,options", [(".a", ()), (".o", ("--threads", "2"))])
def test_static_library_and_object(built, tmp_path, kind, options):
    shared, model = built
    exports = manifest(shared, LIB)["exports"]  # the same model file, so the same exports
    output = build(shared.parent / "model.py", tmp_path / f"libmodel{kind}", *options)
    client = write(tmp_path / "client.c", generic_client("libmodel.h", LIB, exports))
    binary = compile_c(client, tmp_path / "client", output, "-lm", "-pthread")
    assert not any("model" in n for n in needed(binary))
    sections = parse_sections(run_clean(binary))
    for e in exports:
        inputs = [fill(a["dtype"], tuple(a["shape"]), i) for i, a in enumerate(e["args"])]
        for g, w in zip(split_results(sections[e["name"]], e["results"]),
                        reference(model, e["name"], inputs), strict=True):
            np.testing.assert_allclose(g, w.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_aarch64_object(tmp_path):
    model = write(tmp_path / "model.py", MODEL)
    output = build(model, tmp_path / "model_arm64.o", "--target", "aarch64-unknown-linux-gnu",
                   "--name", LIB)
    elf = subprocess.run(["readelf", "-h", str(output)], capture_output=True, text=True,
                         check=True).stdout
    assert "AArch64" in elf and "REL (Relocatable file)" in elf
    header = (tmp_path / "model_arm64.h").read_text()
    assert '#define MODEL_TARGET_TRIPLE "aarch64-unknown-linux-gnu"' in header
    assert '#define MODEL_TARGET_CPU    "generic"' in header


@needs_gcc
def test_name_prefix_and_header_options(built, tmp_path):
    shared, _ = built
    include = tmp_path / "include"
    include.mkdir()
    library = build(shared.parent / "model.py", tmp_path / "libnet.so", "--name", "net",
                    "--prefix", "net_", "--header", include / "net_api.h")
    assert not (tmp_path / "libnet.h").exists()
    header = (include / "net_api.h").read_text()
    assert "#ifndef NET_H\n" in header and "#define NET_MLP_WORKSPACE_BYTES" in header
    assert "int net_mlp(const float *x, float *res0);" in header
    assert "const char *net_error_string(int status);" in header
    symbols = defined_dynamic_symbols(library)
    assert {"net_mlp", "net_conv_with_workspace", "net_error_string"} <= symbols
    assert not {"mlp", "model_error_string"} & symbols
    # Two libraries' headers in one translation unit: the shared ABI part is guarded.
    client = write(tmp_path / "both.c", f"""\
        #include <stdio.h>
        #include "{shared.with_suffix('.h')}"
        #include "net_api.h"

        int main(void) {{
            static float x[NET_MLP_ARG0_SIZE], a[MLP_RES0_SIZE], b[NET_MLP_RES0_SIZE];
            int status = mlp(x, a) | net_mlp(x, b);
            printf("%d %d\\n", status, a[3] == b[3]);
            return 0;
        }}
        """)
    binary = compile_c(client, tmp_path / "both", "-I", include, "-L", tmp_path, "-L",
                       shared.parent, "-lnet", "-lmodel", f"-Wl,-rpath,{tmp_path}",
                       f"-Wl,-rpath,{shared.parent}")
    assert run_clean(binary) == "0 1\n"


@needs_gcc
def test_the_loader_passes_unaligned_arrays_aligned(built):
    shared, model = built
    a, b = fill("f64", (4, 16), 0), fill("f64", (16,), 1)
    raw = np.zeros(a.nbytes + 1, np.uint8)[1:]
    shifted = raw.view(np.float64).reshape(a.shape)
    shifted[...] = a
    doubles = jitc.aot.load(shared).doubles
    # x86 forgives unaligned loads; the C ABI (and other hosts) do not.
    assert doubles._convert(0, shifted).flags.aligned
    got = doubles(shifted, b)
    for g, w in zip(got, reference(model, "doubles", [a, b]), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@needs_gcc
def test_host_cpu(built, tmp_path):
    shared, model = built
    library = build(shared.parent / "model.py", tmp_path / "libmodel.so", "--target-cpu",
                    "host")
    assert manifest(library, LIB)["cpu"] == llvm.get_host_cpu_name()
    x = fill("f32", (8, 64), 0)
    np.testing.assert_allclose(jitc.aot.load(library).mlp(x), model["mlp"].__wrapped__(x),
                               rtol=1e-5, atol=1e-6)
