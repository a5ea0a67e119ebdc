"""A library built for the baseline CPU (no VNNI) runs byte products on the widening kernel
(gemm_bytes.py without vpdpbusd) and equals numpy."""

from __future__ import annotations

import subprocess

import numpy as np
from aotkit import build, needs_gcc, write

import jitc.aot

MODEL = """
import numpy as np
import jitc


@jitc.export("i8[40,70]", "u8[70,50]", "f32[50]")
def layer(x, w, scale):
    acc = x.astype(np.int32) @ w.astype(np.int32)
    return acc, np.clip(np.round(acc * scale), -128, 127).astype(np.int8)
"""


@needs_gcc
def test_byte_products_without_vnni_equal_numpy(tmp_path):
    library = build(write(tmp_path / "model.py", MODEL), tmp_path / "libbytes.so")
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (40, 70)).astype(np.int8)
    w = rng.integers(0, 256, (70, 50)).astype(np.uint8)
    scale = (rng.random(50) * 0.002).astype(np.float32)
    acc, quantized = jitc.aot.load(library).layer(x, w, scale)
    want = x.astype(np.int32) @ w.astype(np.int32)
    np.testing.assert_array_equal(acc, want)
    np.testing.assert_array_equal(quantized,
                                  np.clip(np.round(want * scale), -128, 127).astype(np.int8))
    assembly = subprocess.run(["objdump", "-d", str(library)], capture_output=True,
                              text=True).stdout
    assert "vpdpbusd" not in assembly and "pmaddwd" in assembly
