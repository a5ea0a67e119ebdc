"""Byte products whose rhs is an array constant (jitc.quant's weights) read it packed when the
function was compiled (jitc/backends/cpu/packed_weights.py) instead of packing it at every
call, with numpy's results bit for bit; a constant anything else reads stays as it is."""

from __future__ import annotations

import re

import numpy as np
import pytest

import jitc
import jitc.quant
from jitc.backends.cpu import codegen, gemm_bytes
from jitc.tracing.state import current_trace

BYTES = [(np.int8, np.int8), (np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8)]
# A kernel that packs its rhs at every call defines this routine (gemm_bytes.py).
BLOCK_PACKER = re.compile(r"jitc\.gemm\.bytes\.\S+\.block")


def _bytes(rng: np.random.Generator, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _as_constant(array: np.ndarray):
    """`array` as an IR constant of the function being traced (a captured array would be an
    argument): what jitc.quant does with a weight."""
    data, dtype, shape = array.tobytes(), array.dtype, array.shape
    return lambda: current_trace().constant(np.frombuffer(data, dtype).reshape(shape))


def _widened_product(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (x.astype(np.int64) @ w.astype(np.int64)).astype(np.int32)


def _product(weight, fused: bool):
    def product(x):
        y = x.astype(np.int32) @ weight().astype(np.int32)
        return y * 3 + 1 if fused else y
    return product


@pytest.mark.parametrize("dtypes", BYTES, ids=lambda d: f"{d[0].__name__}x{d[1].__name__}")
def test_a_constant_rhs_is_packed_once_and_the_product_is_exact(dtypes) -> None:
    rng = np.random.default_rng(7)
    # Depths and widths no multiple of 4 or 32, rows no multiple of 8; two depth blocks
    # (KC = 4096), with and without a fused epilogue (which takes one depth block at most).
    for m, k, n, fused in [(33, 37, 65, True), (64, 768, 100, True), (9, 4099, 40, False)]:
        x, w = _bytes(rng, dtypes[0], (m, k)), _bytes(rng, dtypes[1], (k, n))
        compiled = jitc.jit(_product(_as_constant(w), fused)).lower(x).compile()
        want = _widened_product(x, w)
        np.testing.assert_array_equal(compiled(x), want * 3 + 1 if fused else want)
        assert "jitc.gemm.bytes" in compiled.as_text()
        assert not BLOCK_PACKER.search(compiled.as_text())
        (packed,) = compiled.executable.constants
        assert packed.dtype == np.uint8 and packed.ctypes.data % 64 == 0


@pytest.mark.parametrize("threads", [1, 2])
def test_column_blocks_of_a_constant_or_an_argument_rhs_share_each_packed_strip(threads) -> None:
    # 768 deep: column blocks of 672 (gemm_bytes.nc), so 1500 columns are three blocks that
    # read the strips packed once (WHOLE_LHS_BYTES); 61 rows end in a short strip.
    rng = np.random.default_rng(13)
    x, w = _bytes(rng, np.uint8, (61, 768)), _bytes(rng, np.int8, (768, 1500))
    want = _widened_product(x, w)
    fused = jitc.jit(_product(_as_constant(w), True), num_threads=threads)
    np.testing.assert_array_equal(fused(x), want * 3 + 1)

    def argument(x, w):
        return x.astype(np.int32) @ w.astype(np.int32)

    np.testing.assert_array_equal(jitc.jit(argument, num_threads=threads)(x, w), want)


def test_a_constant_that_is_also_read_otherwise_is_left_unpacked() -> None:
    rng = np.random.default_rng(8)
    x, w = _bytes(rng, np.uint8, (20, 70)), _bytes(rng, np.int8, (70, 50))
    signed = _bytes(rng, np.int8, (20, 70))
    weight = _as_constant(w)

    def product_and_sum(x, signed):
        c = weight()
        return x.astype(np.int32) @ c.astype(np.int32), c.astype(np.int32).sum(axis=0)

    def signed_and_unsigned(x, signed):  # two products would pack it differently
        c = weight().astype(np.int32)
        return x.astype(np.int32) @ c, signed.astype(np.int32) @ c

    for fn, want in [(product_and_sum, (_widened_product(x, w), w.astype(np.int32).sum(0))),
                     (signed_and_unsigned, (_widened_product(x, w),
                                            _widened_product(signed, w)))]:
        compiled = jitc.jit(fn).lower(x, signed).compile()
        for got, expected in zip(compiled(x, signed), want, strict=True):
            np.testing.assert_array_equal(got, expected)
        assert BLOCK_PACKER.search(compiled.as_text())
        (constant,) = compiled.executable.constants
        np.testing.assert_array_equal(constant, w)


def test_equal_products_of_a_packed_and_a_plain_rhs_do_not_share_a_kernel() -> None:
    # Kernels computing the same thing on other buffers share one body; a packed constant
    # is read differently from an argument of the same type.
    rng = np.random.default_rng(9)
    x, w, v = (_bytes(rng, np.int8, (40, 64)), _bytes(rng, np.int8, (64, 48)),
               _bytes(rng, np.int8, (64, 48)))
    weight = _as_constant(w)

    def two_products(x, v):
        return (x.astype(np.int32) @ weight().astype(np.int32),
                x.astype(np.int32) @ v.astype(np.int32))

    got = jitc.jit(two_products)(x, v)
    np.testing.assert_array_equal(got[0], _widened_product(x, w))
    np.testing.assert_array_equal(got[1], _widened_product(x, v))


def test_packed_constants_reloaded_from_the_disk_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(10)
    x, w = _bytes(rng, np.uint8, (24, 96)), _bytes(rng, np.int8, (96, 80))
    weight = _as_constant(w)

    def product(x):
        return x.astype(np.int32) @ weight().astype(np.int32)

    first = jitc.jit(product).lower(x).compile()
    loaded = jitc.jit(product).lower(x).compile()
    assert loaded.stats.cached and not first.stats.cached
    (constant,) = loaded.executable.constants
    assert constant.ctypes.data % 64 == 0
    np.testing.assert_array_equal(constant, first.executable.constants[0])
    np.testing.assert_array_equal(loaded(x), _widened_product(x, w))


def test_jitc_quant_weights_are_packed_at_compile_time(monkeypatch) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", "off")
    rng = np.random.default_rng(11)
    w1 = rng.standard_normal((96, 128)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((128, 64)).astype(np.float32) * 0.1

    def mlp(x):
        return np.maximum(x @ w1, 0) @ w2

    calibration = [(rng.standard_normal((32, 96)).astype(np.float32),) for _ in range(2)]
    x = rng.standard_normal((32, 96)).astype(np.float32)
    quantized = jitc.quant.quantize(mlp, calibration, rounding="nearest")
    compiled = quantized.lower(x).compile()
    assert not BLOCK_PACKER.search(compiled.as_text())
    assert sum(c.dtype == np.uint8 for c in compiled.executable.constants) == 2
    # The same function with its weights packed at every call: the same bits (the float
    # epilogues are the same code; the interpreter's rounding of them may differ by an ulp).
    monkeypatch.setattr(codegen, "pack_constants", lambda fn, program, plan: None)
    per_call = jitc.quant.quantize(mlp, calibration, rounding="nearest")
    assert BLOCK_PACKER.search(per_call.lower(x).compile().as_text())
    np.testing.assert_array_equal(quantized(x), per_call(x))


def test_the_packed_bytes_are_the_ones_the_kernel_packs() -> None:
    # pack_rhs lays a constant out as pack_block does at run time: for an uint8 lhs, the int8
    # rhs is offset by +128 and the column corrections are 128 times the column sums.
    rng = np.random.default_rng(12)
    w = _bytes(rng, np.int8, (6, 33))
    layout = gemm_bytes.PackedRhs(6, 33, free=1, contract=33, a_unsigned=True, b_signed=True)
    packed = gemm_bytes.pack_rhs(w, layout)
    assert layout.width == 64 and layout.kc == 6
    panels = packed[:layout.block_bytes].reshape(2, 2, 32, 4)   # panel, group, column, step
    offset = (w.view(np.uint8) ^ 0x80)
    np.testing.assert_array_equal(panels[0, 0, :, :], offset[0:4, :32].T)
    np.testing.assert_array_equal(panels[1, 1, :1, :2], offset[4:6, 32:].T)
    assert not panels[1, 1, :, 2:].any() and not panels[1, :, 1:, :].any()
    sums = packed[layout.sums_offset:].view(np.int32)
    np.testing.assert_array_equal(sums[:33], 128 * w.astype(np.int32).sum(axis=0))
    assert not sums[33:].any()
