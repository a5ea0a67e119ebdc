"""The C backend's threads and matrix products: large kernels run on the runtime's thread pool
through the file's own `jitc_pool_for` hook (serial on its own), products accumulate with one
fused multiply-add per term, and neither the tiles nor the thread count change a result."""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest
from ops.backends import require

import jitc
from jitc.backends.c import build
from jitc.backends.c.parallel import POOL
from jitc.backends.cpu.runtime import runtime_library
from jitc.tracing.function import AbstractArray

pytestmark = pytest.mark.usefixtures("c_backend")


@pytest.fixture
def c_backend() -> str:
    return require("c")


def layer(x, w, b):
    return np.tanh(x @ w + b)


def layer_args(rows: int, depth: int, columns: int, dtype=np.float32) -> list[np.ndarray]:
    rng = np.random.default_rng(rows * depth + columns)
    return [rng.standard_normal(s).astype(dtype)
            for s in [(rows, depth), (depth, columns), (columns,)]]


def cancelling_operands(rows: int, columns: int, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Every output element is (1 + 2^-22) * -1 + x * x with x = 1 + 2^-23: exactly 2^-46,
    which float32 holds, while rounding x * x to float32 before adding gives 0."""
    x = np.float32(1 + 2.0 ** -23)
    lhs = np.zeros((rows, depth), np.float32)
    rhs = np.zeros((depth, columns), np.float32)
    lhs[:, 0], lhs[:, 1] = np.float32(1 + 2.0 ** -22), x
    rhs[0, :], rhs[1, :] = -1, x
    return lhs, rhs


@pytest.mark.parametrize("shape", [(3, 4, 5), (64, 16, 64)], ids=["plain", "tiled"])
def test_float32_products_fuse_each_multiply_add(shape) -> None:
    rows, depth, columns = shape
    lhs, rhs = cancelling_operands(rows, columns, depth)
    exact = (lhs.astype(np.float64) @ rhs.astype(np.float64)).astype(np.float32)
    assert exact[0, 0] == 2.0 ** -46
    result = jitc.jit(lambda a, b: a @ b, backend="c")(lhs, rhs)
    np.testing.assert_array_equal(result, exact)


@pytest.mark.parametrize("shape", [(64, 768, 256), (13, 300, 70), (100, 40, 33), (20, 100, 96)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tiled_products_match_numpy_and_every_thread_count(shape, dtype) -> None:
    """Row and column remainders of the tiles, the fused epilogue; one thread and two give
    the same bits."""
    args = layer_args(*shape, dtype=dtype)
    one = jitc.jit(layer, backend="c", num_threads=1)
    two = jitc.jit(layer, backend="c", num_threads=2)
    tolerance = 2e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(two(*args), layer(*args), rtol=tolerance, atol=tolerance)
    np.testing.assert_array_equal(one(*args), two(*args))
    batched = np.random.default_rng(1).standard_normal((3, *shape[:2])).astype(dtype)
    np.testing.assert_allclose(two(batched, *args[1:]), layer(batched, *args[1:]),
                               rtol=tolerance, atol=tolerance)


def test_batched_products_split_batches_and_panels() -> None:
    rng = np.random.default_rng(2)
    lhs = rng.standard_normal((12, 64, 64)).astype(np.float32)
    rhs = rng.standard_normal((12, 64, 64)).astype(np.float32)
    jitted = jitc.jit(lambda a, b: a @ b, backend="c", num_threads=2)
    np.testing.assert_allclose(jitted(lhs, rhs), lhs @ rhs, rtol=1e-5, atol=1e-5)
    assert POOL + "(" in jitted.lower(lhs, rhs).compile().as_text()


@pytest.mark.parametrize("shape", [(12, 64, 64, 64), (1, 37, 300, 45)])
def test_products_with_a_transposed_rhs_pack_it(shape) -> None:
    """Attention's q @ k.T reads k across its rows: each run of steps copies the panel's rhs
    into a local array first."""
    batch, rows, depth, columns = shape
    rng = np.random.default_rng(4)
    q = rng.standard_normal((batch, rows, depth)).astype(np.float32)
    k = rng.standard_normal((batch, columns, depth)).astype(np.float32)
    jitted = jitc.jit(lambda q, k: q @ k.transpose(0, 2, 1), backend="c", num_threads=2)
    np.testing.assert_allclose(jitted(q, k), q @ k.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)
    single = jitc.jit(lambda q, k: q @ k.transpose(0, 2, 1), backend="c", num_threads=1)
    np.testing.assert_array_equal(jitted(q, k), single(q, k))
    assert re.search(r"float p\d+\[256\]\[\d+\];", jitted.lower(q, k).compile().as_text())


def test_large_kernels_run_on_the_runtime_pool() -> None:
    runtime = runtime_library()
    if runtime is None:
        pytest.skip("jitc's runtime extension is not built")
    args = layer_args(64, 256, 128)
    compiled = jitc.jit(layer, backend="c", num_threads=2).lower(*args).compile()
    source = compiled.as_text()
    assert f"{POOL}(k" in source and "_part(void *jitc_frame" in source
    hook = ctypes.c_void_p.in_dll(compiled.executable.library, POOL).value
    assert hook == ctypes.cast(runtime.jitc_parallel_for, ctypes.c_void_p).value
    np.testing.assert_allclose(compiled(*args), layer(*args), rtol=1e-5, atol=1e-6)
    single = jitc.jit(layer, backend="c", num_threads=1).lower(*args).compile().as_text()
    assert f"{POOL}(" not in single
    small = jitc.jit(layer, backend="c", num_threads=2).lower(*layer_args(4, 8, 8))
    assert f"{POOL}(" not in small.compile().as_text()


def test_symbolic_kernels_choose_their_threads_at_run_time() -> None:
    weight = np.random.default_rng(3).standard_normal((96, 80)).astype(np.float32)
    bias = np.zeros(80, np.float32)
    compiled = jitc.jit(layer, backend="c", num_threads=2).lower(
        AbstractArray("f32[B,96]"), weight, bias).compile()
    assert "d_B" in compiled.as_text().split(f"{POOL}(k")[1].splitlines()[0]
    for batch in (0, 1, 7, 300):
        x = np.random.default_rng(batch).standard_normal((batch, 96)).astype(np.float32)
        np.testing.assert_allclose(compiled(x, weight, bias), layer(x, weight, bias),
                                   rtol=1e-5, atol=1e-6)


def test_threaded_source_stays_standalone_and_strict_c99(tmp_path) -> None:
    """Built on its own, the file's pool hook runs the chunks serially, with the results of
    the threaded library; it compiles without warnings."""
    args = layer_args(40, 200, 96)
    compiled = jitc.jit(layer, backend="c", num_threads=2).lower(*args).compile()
    path = tmp_path / "layer.c"
    path.write_text(compiled.as_text())
    strict = ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
    result = subprocess.run([build.find_compiler(), *strict, str(path)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[:4000]
    library_path = tmp_path / "liblayer.so"
    subprocess.run([build.find_compiler(), *build.FLAGS, "-o", str(library_path), str(path),
                    "-lm"], check=True)
    library = ctypes.CDLL(str(library_path))
    result_array = np.empty((40, 96), np.float32)
    workspace = np.empty(compiled.executable.workspace_bytes + 64, np.uint8)
    pointers = [a.ctypes.data for a in (*args, result_array,
                                        *compiled.executable.constants, workspace)]
    library.jitc_entry((ctypes.c_void_p * len(pointers))(*pointers))
    np.testing.assert_array_equal(result_array, compiled(*args))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("length", [3, 17, 64, 200])
def test_row_sums_of_computed_values_compute_them_a_chunk_at_a_time(length) -> None:
    """softmax's sum of exponentials: a loop the compiler vectorizes fills a chunk, another
    adds it in order (one loop doing both was not vectorized); rows shorter than 16 keep one
    plain loop."""
    x = np.random.default_rng(length).standard_normal((12, 9, length)).astype(np.float32)
    jitted = jitc.jit(softmax, backend="c")
    np.testing.assert_allclose(jitted(x), softmax(x), rtol=1e-6, atol=1e-7)
    source = jitted.lower(x).compile().as_text()
    assert bool(re.search(r"float s\d+\[\d+\];", source)) == (length >= 16)
    symbolic = jitc.jit(softmax, backend="c").lower(AbstractArray("f32[B,N]")).compile()
    np.testing.assert_allclose(symbolic(x[0]), softmax(x[0]), rtol=1e-6, atol=1e-7)


def test_hosts_without_avx512_get_narrower_tiles(monkeypatch) -> None:
    from jitc.backends.c import tiled_dot
    monkeypatch.setattr(tiled_dot, "host_identity", lambda: "flags: avx2 fma")
    args = layer_args(37, 90, 50)
    jitted = jitc.jit(layer, backend="c", num_threads=2)
    np.testing.assert_allclose(jitted(*args), layer(*args), rtol=2e-4, atol=2e-4)
    assert re.search(r"float a\d+\[6\]\[16\];", jitted.lower(*args).compile().as_text())
