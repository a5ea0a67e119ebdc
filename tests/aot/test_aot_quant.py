"""A jitc.quant function exported with `jitc aot`: its weights are stored as int8 (the library
is about a quarter of the float32 one), it computes what the quantized function computes in
Python, and the header documents the scales and zero points."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from aotkit import build, needs_gcc, write

import jitc.aot

# 784-1024-1024-10: 7.1 MiB of float32 weights, so that the weights dominate the library.
MODEL = """
import numpy as np

import jitc
import jitc.quant

rng = np.random.default_rng(0)
W1 = rng.standard_normal((784, 1024), np.float32) * 0.05
B1 = rng.standard_normal(1024, np.float32) * 0.1
W2 = rng.standard_normal((1024, 1024), np.float32) * 0.03
W3 = rng.standard_normal((1024, 10), np.float32) * 0.1


def mlp(x):
    h = np.maximum(x @ W1 + B1, 0)
    h = np.maximum(h @ W2, 0)
    return h @ W3


if QUANTIZE:
    calibration = [(rng.standard_normal((8, 784), np.float32),) for _ in range(2)]
    quantized = jitc.quant.quantize(mlp, calibration)
    predict = jitc.export("f32[8,784]")(quantized)
else:
    predict = jitc.export("f32[8,784]")(mlp)
"""


@pytest.fixture(scope="module")
def libraries(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("quant")
    built = {}
    for kind, flag in (("int8", True), ("float32", False)):
        model = write(folder / f"model_{kind}.py", f"QUANTIZE = {flag}\n" + MODEL)
        built[kind] = build(model, folder / f"lib{kind}.so")
        built[f"{kind}_model"] = model
    return built


@needs_gcc
def test_int8_library_is_under_thirty_percent_of_the_float_one(libraries):
    int8, float32 = libraries["int8"].stat().st_size, libraries["float32"].stat().st_size
    assert int8 <= 0.30 * float32, (int8, float32)


@needs_gcc
def test_library_computes_what_the_quantized_function_computes(libraries):
    folder = str(libraries["int8_model"].parent)
    sys.path.insert(0, folder)
    try:
        import model_int8  # the same weights and calibration as the library's build
    finally:
        sys.path.remove(folder)
    x = np.random.default_rng(1).standard_normal((8, 784)).astype(np.float32)
    got = jitc.aot.load(libraries["int8"]).mlp(x)
    np.testing.assert_array_equal(got, model_int8.predict(x))
    reference = model_int8.mlp(x)
    assert np.abs(got - reference).max() < 0.05 * np.abs(reference).max()


@needs_gcc
def test_header_documents_scales_and_zero_points(libraries):
    header = libraries["int8"].with_suffix(".h").read_text()
    assert "Quantized by jitc.quant" in header
    for weight in ("W1[784x1024]", "W2[1024x1024]"):
        assert weight in header
    assert "W3[1024x10]: left in float (10 output channels, under min_channels=32)" in header
    assert "static int8 scale" in header and "static uint8 scale" in header
    assert header.count("zero point 0") >= 4
    assert "compensated" in header  # the rounding of the weights, as the Python function
    assert "Quantized" not in libraries["float32"].with_suffix(".h").read_text()
