"""int8/uint8 products written the numpy way (widen to int32, then multiply) equal numpy's bit
for bit on every backend, including sums that wrap around int32, and run as byte products."""

from __future__ import annotations

import numpy as np
import pytest

import jitc
from jitc.backends.llvm.target import host_has
from jitc.ir.printer import print_module

BACKENDS = ["interpreter", "cpu", "c", "cuda-sim"]
BYTES = [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)]


def _bytes(rng: np.random.Generator, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.int32) @ b.astype(np.int32)


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.dot(a.astype(np.int32), b.astype(np.int32))


def einsum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,jk->ik", a.astype(np.int32), b.astype(np.int32))


def batched(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(np.int32), b.astype(np.int32))


def _check(fn, a: np.ndarray, b: np.ndarray, backend: str, sums: bool = False) -> None:
    """`fn` equals numpy and runs as a byte product; with `sums` (zero points) the row or
    column sums still read widened bytes."""
    jitted = jitc.jit(fn, backend=backend)
    result = jitted(a, b)
    expected = fn(a, b)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)
    if backend != "interpreter" and result.size and a.size:
        text = print_module(jitted.lower(a, b).compile().optimized_module)
        assert "result=i32" in text and (sums or "convert" not in text)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtypes", BYTES, ids=lambda d: f"{d[0].__name__}x{d[1].__name__}")
def test_byte_products_equal_numpy(backend: str, dtypes: tuple[type, type]) -> None:
    rng = np.random.default_rng(1)
    a, b = _bytes(rng, dtypes[0], (5, 7)), _bytes(rng, dtypes[1], (7, 3))
    for fn in (matmul, dot, einsum):
        _check(fn, a, b, backend)
    _check(batched, _bytes(rng, dtypes[0], (2, 3, 9)), _bytes(rng, dtypes[1], (2, 9, 4)),
           backend)
    # Vectors: a matrix-vector product and an inner product.
    _check(matmul, _bytes(rng, dtypes[0], (9,)), _bytes(rng, dtypes[1], (9, 4)), backend)
    _check(dot, _bytes(rng, dtypes[0], (9,)), _bytes(rng, dtypes[1], (9,)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(0, 4, 3), (3, 0, 4), (1, 1, 1), (3, 5, 0)])
def test_empty_and_single_element_products(backend: str, shape: tuple[int, int, int]) -> None:
    m, k, n = shape
    rng = np.random.default_rng(2)
    _check(matmul, _bytes(rng, np.int8, (m, k)), _bytes(rng, np.uint8, (k, n)), backend)


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "c"])
def test_sums_that_wrap_around_int32_wrap_as_in_numpy(backend: str) -> None:
    # 2^31 / (128 * 128) = 131072 products of -128 * -128 reach int32's limit: 140000 wrap.
    depth = 140_000
    a = np.full((2, depth), -128, np.int8)
    b = np.full((depth, 3), -128, np.int8)
    b[:5, 1] = 127
    expected = matmul(a, b)
    assert (expected[:, 0] < 0).all(), "the sum must wrap for this test to mean anything"
    _check(matmul, a, b, backend)
    if backend == "cpu" and host_has("avx512vnni"):  # 35 depth blocks of vpdpbusd sums
        assembly = jitc.jit(matmul).lower(a, b).compile().as_text(assembly=True)
        assert "vpdpbusd" in assembly


needs_vnni = pytest.mark.skipif(not host_has("avx512vnni"),
                                reason="the host CPU has no AVX512-VNNI: the generic kernel runs")


def _transposed_lhs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.T.astype(np.int32) @ b.astype(np.int32)


def _transposed_rhs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,kj->ik", a.astype(np.int32), b.astype(np.int32))


def _transposed_result(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.int32) @ b.astype(np.int32)).T + 1


def _with_bias(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.int32) @ b.astype(np.int32)) * 3 + np.arange(b.shape[1], dtype=np.int32)


@needs_vnni
@pytest.mark.parametrize("dtypes", BYTES, ids=lambda d: f"{d[0].__name__}x{d[1].__name__}")
def test_the_cpu_runs_byte_products_on_vnni_exactly(dtypes: tuple[type, type]) -> None:
    rng = np.random.default_rng(3)
    # Depths and widths that are no multiple of 4, 16 or 32; rows no multiple of 8; a depth
    # of two blocks (KC = 4096).
    for m, k, n in [(33, 37, 65), (9, 4099, 40)]:
        a, b = _bytes(rng, dtypes[0], (m, k)), _bytes(rng, dtypes[1], (k, n))
        _check(matmul, a, b, "cpu")
    assembly = jitc.jit(matmul).lower(a, b).compile().as_text(assembly=True)
    assert "vpdpbusd" in assembly


@needs_vnni
def test_vnni_layouts_batches_and_epilogues() -> None:
    # uint8 x int8 needs every correction of the offset trick (row, column and constant).
    rng = np.random.default_rng(5)
    lhs, rhs = np.uint8, np.int8
    a, b = _bytes(rng, lhs, (100, 130)), _bytes(rng, rhs, (130, 70))
    _check(_with_bias, a, b, "cpu")
    _check(batched, _bytes(rng, lhs, (3, 20, 37)), _bytes(rng, rhs, (3, 37, 50)), "cpu")
    _check(_transposed_lhs, _bytes(rng, lhs, (45, 40)), _bytes(rng, rhs, (45, 33)), "cpu")
    _check(_transposed_rhs, _bytes(rng, lhs, (45, 40)), _bytes(rng, rhs, (33, 40)), "cpu")
    _check(_transposed_result, _bytes(rng, lhs, (45, 40)), _bytes(rng, rhs, (40, 33)), "cpu")
    # Shallow and wide: the column blocks are capped (MAX_NC), not sized by the depth.
    _check(_with_bias, _bytes(rng, lhs, (8, 4)), _bytes(rng, rhs, (4, 5000)), "cpu")


def _zero_points(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.int32) - 77) @ (b.astype(np.int32) - np.int32(-2**30))


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_points_equal_numpy_including_wrap_around(backend: str) -> None:
    rng = np.random.default_rng(4)
    for shape in [(5, 7, 3), (40, 70, 50)]:
        m, k, n = shape
        with np.errstate(over="ignore"):
            _check(_zero_points, _bytes(rng, np.uint8, (m, k)), _bytes(rng, np.int8, (k, n)),
                   backend, sums=True)


@pytest.mark.parametrize("dtypes", BYTES, ids=lambda d: f"{d[0].__name__}x{d[1].__name__}")
def test_the_widening_tile_for_hosts_without_vnni(dtypes: tuple[type, type],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from jitc.backends.cpu import gemm_bytes
    monkeypatch.setattr(gemm_bytes, "use_vnni", lambda module: None)
    rng = np.random.default_rng(6)
    a, b = _bytes(rng, dtypes[0], (33, 37)), _bytes(rng, dtypes[1], (37, 65))
    jitted = jitc.jit(matmul, disk_cache=False)
    np.testing.assert_array_equal(jitted(a, b), matmul(a, b))
    assembly = jitted.lower(a, b).compile().as_text(assembly=True)
    assert "vpdpbusd" not in assembly
    if host_has("avx2"):  # the pairwise sums of int16 products, as x86 selects them
        assert "pmaddwd" in assembly


SMALL_WEIGHTS = np.arange(-60, 60, dtype=np.int8).reshape(12, 10)
SMALL_UNSIGNED = np.arange(200, 250, dtype=np.uint8).reshape(10, 5)


@pytest.mark.parametrize("weights", [SMALL_WEIGHTS, SMALL_UNSIGNED], ids=["int8", "uint8"])
def test_small_byte_constants_folded_to_int32_stay_byte_products(weights) -> None:
    # Constant folding widens a small constant's `.astype(np.int32)` before integer_dots
    # sees it: the int32 constant, whose values fit in bytes, is narrowed back.
    def product(x):
        return x.astype(np.int32) @ weights.astype(np.int32)

    x = _bytes(np.random.default_rng(3), np.int8, (7, weights.shape[0]))
    compiled = jitc.jit(product).lower(x).compile()
    assert "result=i32" in print_module(compiled.optimized_module)
    np.testing.assert_array_equal(compiled(x), product(x))
