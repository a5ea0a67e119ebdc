"""jitc.quant on convolutions: a float convolution with a weight kernel runs as an int8 (or
uint8) by int8 convolution, which the convolution_products pass makes a byte product."""

from __future__ import annotations

import numpy as np
import pytest

import jitc
import jitc.quant
from jitc import lax
from jitc.ir.printer import print_module
from tests.ops.cases import _conv

rng = np.random.default_rng(0)
K1 = (rng.standard_normal((32, 3, 3, 3)) * 0.3).astype(np.float32)       # OIHW
B1 = (rng.standard_normal((32, 1, 1)) * 0.1).astype(np.float32)
K2 = (rng.standard_normal((3, 3, 32, 40)) * 0.08).astype(np.float32)     # HWIO
SAMPLES = [(rng.standard_normal((4, 3, 9, 8)).astype(np.float32),) for _ in range(3)]
FIRST = {"strides": (1, 1), "padding": ((1, 1), (1, 1))}
SECOND = {"labels": "b01f_01io->b01f", "strides": (2, 2), "padding": ((1, 0), (0, 1))}


def cnn(x):
    h = lax.conv_general_dilated(x, K1, FIRST["strides"], FIRST["padding"])
    h = np.maximum(h + B1, 0).transpose(0, 2, 3, 1)                       # NCHW -> NHWC
    return lax.conv_general_dilated(h, K2, SECOND["strides"], SECOND["padding"],
                                    dimension_numbers=SECOND["labels"])


def optimized_text(fn, *args) -> str:
    return print_module(fn.lower(*args).compile().optimized_module)


def _static_layer(x: np.ndarray, product, attrs: dict, feature_axis: int) -> np.ndarray:
    """numpy's arithmetic for one quantized convolution with a static activation scale."""
    lo, hi = (0, 255) if product.activation_dtype == np.uint8 else (-127, 127)
    inverse = np.float32(1 / product.activation_scale)
    xq = np.clip(np.round(x * inverse), lo, hi).astype(product.activation_dtype)
    _, reference = _conv(**attrs)
    acc = reference(xq.astype(np.int32), product.quantized.values.astype(np.int32))
    shape = [1] * acc.ndim
    shape[feature_axis] = -1
    scale = (product.quantized.scales.reshape(shape) * np.float32(product.activation_scale)
             ).astype(np.float32)
    return acc.astype(np.float32) * scale


def test_static_convolutions_are_numpys_quantization_arithmetic():
    q = jitc.quant.quantize(cnn, SAMPLES)
    first, second = q.products
    assert [p.weight for p in q.products] == ["K1", "K2"]
    assert first.activation_dtype == np.int8 and second.activation_dtype == np.uint8
    x = SAMPLES[0][0]
    h = np.maximum(_static_layer(x, first, FIRST, 1) + B1, 0).transpose(0, 2, 3, 1)
    want = _static_layer(h, second, SECOND, 3)
    np.testing.assert_allclose(q(x), want, rtol=1e-5, atol=1e-5)
    text = optimized_text(q, x)
    assert text.count("result=i32") == 2 and "= convolution(" not in text
    assert np.abs(q(x) - cnn(x)).max() < 0.03 * np.abs(cnn(x)).max()


def test_kernels_are_symmetric_int8_per_output_feature():
    q = jitc.quant.quantize(cnn, SAMPLES)
    for product, kernel, out_axis in zip(q.products, (K1, K2), (0, 3)):
        weight = product.quantized
        others = tuple(d for d in range(4) if d != out_axis)
        assert weight.values.dtype == np.int8 and weight.values.shape == kernel.shape
        np.testing.assert_allclose(weight.scales, np.abs(kernel).max(axis=others) / 127,
                                   rtol=1e-6)
        assert np.abs(weight.values).max(axis=others).min() == 127
        assert product.rounding == "nearest" and "nearest rounding" in product.describe()


def test_dynamic_scales_follow_each_batch_entry():
    q = jitc.quant.quantize(cnn, activations="dynamic")
    x = SAMPLES[1][0].copy()
    x[0] *= 1000  # an entry far larger than the others keeps the others' precision
    got, want = q(x), cnn(x)
    for entry in range(x.shape[0]):
        assert np.abs(got[entry] - want[entry]).max() <= 0.03 * np.abs(want[entry]).max()
    assert not q.products[0].static and "per batch entry" in q.products[0].describe()
    assert optimized_text(q, x).count("result=i32") == 2


def test_grouped_convolutions_with_enough_features_per_group_are_quantized():
    grouped = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)

    def model(x):
        h = np.maximum(lax.conv_general_dilated(x, K1, padding=[(1, 1), (1, 1)]), 0)
        return lax.conv_general_dilated(h, grouped, (1, 2), feature_group_count=2)
    q = jitc.quant.quantize(model, SAMPLES)
    assert [p.weight for p in q.products] == ["K1", "grouped"]
    x = SAMPLES[1][0]
    assert np.abs(q(x) - model(x)).max() < 0.03 * np.abs(model(x)).max()
    text = optimized_text(q, x)
    assert text.count("result=i32") == 2 and "= convolution(" not in text


def test_depthwise_and_narrow_convolutions_stay_float():
    grouped = (rng.standard_normal((32, 1, 3, 3)) * 0.3).astype(np.float32)
    narrow = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)

    def model(x):
        h = lax.conv_general_dilated(x, K1, padding=[(1, 1), (1, 1)])
        h = lax.conv_general_dilated(h, grouped, feature_group_count=32)
        return h.sum() + lax.conv_general_dilated(x, narrow).sum()
    q = jitc.quant.quantize(model, SAMPLES)
    assert [p.weight for p in q.products] == ["K1"]
    assert any("narrow" in note and "4 output channels" in note
               for note in q.plan.float_notes())
    assert [p.weight for p in jitc.quant.quantize(model, SAMPLES, min_channels=1).products] \
        == ["K1", "narrow"]
    x = SAMPLES[0][0]
    np.testing.assert_allclose(q(x), model(x), rtol=0.03)


def test_a_float64_convolution_stays_float64():
    x = SAMPLES[2][0].astype(np.float64)
    q = jitc.quant.quantize(cnn, activations="dynamic")
    got = q(x)
    assert got.dtype == np.float64 and [p.weight for p in q.products] == ["K1", "K2"]
    assert np.abs(got - cnn(x)).max() < 0.03 * np.abs(cnn(x)).max()


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_other_backends_compute_the_same_quantized_convolutions(backend):
    x = SAMPLES[0][0]
    on_cpu = jitc.quant.quantize(cnn, SAMPLES)(x)
    np.testing.assert_allclose(jitc.quant.quantize(cnn, SAMPLES, backend=backend)(x), on_cpu,
                               rtol=1e-6, atol=1e-6)
