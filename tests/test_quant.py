"""jitc.quant: products with weights become byte products whose result is the quantization
arithmetic computed by numpy, and the quantized function stays an ordinary jitted function."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import jitc
import jitc.quant
from jitc.ir.printer import print_module

rng = np.random.default_rng(0)
W1 = (rng.standard_normal((48, 64)) * 0.2).astype(np.float32)
B1 = (rng.standard_normal(64) * 0.1).astype(np.float32)
W2 = (rng.standard_normal((64, 32)) * 0.2).astype(np.float32)
SAMPLES = [(rng.standard_normal((32, 48)).astype(np.float32),) for _ in range(3)]


def mlp(x):
    h = np.maximum(x @ W1 + B1, 0)
    return h @ W2


def optimized_text(fn, *args) -> str:
    return print_module(fn.lower(*args).compile().optimized_module)


def float_products(text: str) -> int:
    return sum(1 for line in text.splitlines()
               if "dot_general" in line and "result=i32" not in line)


def test_static_products_are_numpys_quantization_arithmetic():
    q = jitc.quant.quantize(mlp, SAMPLES)
    first, second = q.products
    assert first.static and first.activation_dtype == np.int8      # x has negative values
    assert second.activation_dtype == np.uint8                      # after the ReLU
    assert [p.weight for p in q.products] == ["W1", "W2"]
    x = SAMPLES[0][0]

    def layer(a, product):
        lo, hi = (0, 255) if product.activation_dtype == np.uint8 else (-127, 127)
        inverse = np.float32(1 / product.activation_scale)
        aq = np.clip(np.round(a * inverse), lo, hi).astype(product.activation_dtype)
        acc = aq.astype(np.int32) @ product.quantized.values.astype(np.int32)
        scale = (product.quantized.output_scales * np.float32(product.activation_scale)
                 ).astype(np.float32)
        return acc.astype(np.float32) * scale

    want = layer(np.maximum(layer(x, first) + B1, 0), second)
    np.testing.assert_allclose(q(x), want, rtol=1e-6, atol=1e-6)
    text = optimized_text(q, x)
    assert text.count("result=i32") == 2 and float_products(text) == 0
    assert np.abs(q(x) - mlp(x)).max() < 0.03 * np.abs(mlp(x)).max()


def test_weights_are_symmetric_int8_per_output_channel():
    q = jitc.quant.quantize(mlp, SAMPLES)
    weight = q.products[0].quantized
    assert weight.values.dtype == np.int8 and weight.values.shape == W1.shape
    np.testing.assert_allclose(weight.scales, np.abs(W1).max(axis=0) / 127, rtol=1e-6)
    assert np.abs(weight.values).max(axis=0).min() == 127      # each column uses its range
    np.testing.assert_allclose(weight.values * weight.scales, W1, atol=weight.scales.max())


def test_dynamic_scales_follow_each_row():
    q = jitc.quant.quantize(mlp, activations="dynamic")
    x = SAMPLES[0][0].copy()
    x[0] *= 1000  # a row far larger than the others keeps the others' precision
    got, want = q(x), mlp(x)
    for row in range(x.shape[0]):
        assert np.abs(got[row] - want[row]).max() <= 0.03 * np.abs(want[row]).max()
    assert not q.products[0].static


@pytest.mark.parametrize("spelling", ["transposed", "left", "einsum", "vector", "batched"])
def test_products_spelled_every_way_are_quantized(spelling):
    V = (rng.standard_normal((40, 48)) * 0.3).astype(np.float32)
    functions = {
        "transposed": lambda x: x @ V.T,
        "left": lambda x: V @ x.T,
        "einsum": lambda x: np.einsum("ij,kj->ik", x, V),
        "vector": lambda x: x[0] @ V.T,
        "batched": lambda x: x.reshape(2, 16, 48) @ V.T,
    }
    fn = functions[spelling]
    q = jitc.quant.quantize(fn, SAMPLES, activations="dynamic")
    x = SAMPLES[1][0]
    got, want = q(x), fn(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.abs(got - want).max() < 0.03 * np.abs(want).max()
    assert "result=i32" in optimized_text(q, x)


def test_weights_chosen_by_name_or_identity():
    by_name = jitc.quant.quantize(mlp, SAMPLES, weights=["W2"])
    by_identity = jitc.quant.quantize(mlp, SAMPLES, weights=[W2])
    for q in (by_name, by_identity):
        assert [p.weight for p in q.products] == ["W2"]
        assert optimized_text(q, SAMPLES[0][0]).count("result=i32") == 1
    with pytest.raises(ValueError, match=r"'W9'.*float arrays it reads: B1, W1, W2"):
        jitc.quant.quantize(mlp, SAMPLES, weights=["W9"])


def test_narrow_products_stay_float_unless_asked():
    logits = (rng.standard_normal((64, 10)) * 0.2).astype(np.float32)

    def classify(x):
        return np.maximum(x @ W1 + B1, 0) @ logits

    x = SAMPLES[0][0]
    default = jitc.quant.quantize(classify, SAMPLES)
    assert [p.weight for p in default.products] == ["W1"]
    note = "logits[64x10]: left in float (10 output channels, under min_channels=32)"
    assert note in str(default.report()) and note in default.header_notes()
    assert optimized_text(default, x).count("result=i32") == 1
    every = jitc.quant.quantize(classify, SAMPLES, min_channels=1)
    assert [p.weight for p in every.products] == ["W1", "logits"]
    assert optimized_text(every, x).count("result=i32") == 2


def test_refusals_say_what_to_do():
    with pytest.raises(ValueError, match=r"calibration=.*activations='dynamic'"):
        jitc.quant.quantize(mlp, activations="static")
    with pytest.raises(ValueError, match="no product with a weight"):
        jitc.quant.quantize(lambda x: x * B1[:48], SAMPLES)
    with pytest.raises(ValueError, match="'minmax', 'percentile' or 'mse'"):
        jitc.quant.quantize(mlp, SAMPLES, observer="entropy")
    with pytest.raises(ValueError, match="report\\(\\[\\(x1,\\), \\(x2,\\)\\]\\)"):
        jitc.quant.quantize(mlp, activations="dynamic").report()


def test_an_ordinary_jitted_function():
    q = jitc.quant.quantize(mlp, SAMPLES)
    x = SAMPLES[2][0]
    y = q(x)
    np.testing.assert_array_equal(jitc.jit(q)(x), y)

    @jitc.jit
    def twice(x):
        return q(x) * 2

    np.testing.assert_array_equal(twice(x), y * 2)
    assert "result=i32" in optimized_text(twice, x)
    assert q.__name__ == "mlp" and q.float_function is mlp
    assert inspect.signature(q) == inspect.signature(mlp)


def test_report_against_the_float_function():
    q = jitc.quant.quantize(mlp, SAMPLES)
    report = q.report()
    assert report.samples == 3 and len(report.products) == 2
    errors = [np.abs(q(x) - mlp(x)) for (x,) in SAMPLES]
    assert report.max_abs_error == pytest.approx(max(e.max() for e in errors), rel=1e-6)
    agree = np.mean([np.argmax(q(x), -1) == np.argmax(mlp(x), -1) for (x,) in SAMPLES])
    assert report.top1_agreement == pytest.approx(agree)
    assert report.int8_bytes < 0.3 * report.float_bytes
    text = str(report)
    assert "W1[48x64]" in text and "top-1 agreement" in text and "uint8" in text
    other = q.report([SAMPLES[0][0]])  # one array per sample for a one-argument function
    assert other.samples == 1


def test_percentile_observer_ignores_outliers():
    x = SAMPLES[0][0].copy()
    x[0, 0] = 500.0
    minmax = jitc.quant.quantize(mlp, [(x,)])
    percentile = jitc.quant.quantize(mlp, [(x,)], observer="percentile", percentile=99.9)
    assert minmax.products[0].activation_scale == pytest.approx(500 / 127)
    assert percentile.products[0].activation_scale < 5 / 127
    ordinary = SAMPLES[1][0]
    assert np.abs(percentile(ordinary) - mlp(ordinary)).max() < \
        np.abs(minmax(ordinary) - mlp(ordinary)).max()


def layer(x, w, b):
    return np.maximum(x @ w + b, 0)


def test_weights_taken_as_arguments():
    samples = [(x, W1, B1) for (x,) in SAMPLES]
    q = jitc.quant.quantize(layer, samples, weights=["w"])
    assert [p.weight for p in q.products] == ["w"]
    x = SAMPLES[0][0]
    got, want = q(x, W1, B1), layer(x, W1, B1)
    assert np.abs(got - want).max() < 0.03 * np.abs(want).max()
    assert "result=i32" in optimized_text(q, x, W1, B1)
    other = B1 + 1  # not a weight: it stays an ordinary argument
    shifted = q(x, W1, other)
    assert np.abs(shifted - layer(x, W1, other)).max() < 0.03 * np.abs(want).max()
    assert not np.allclose(shifted, got)
    with pytest.raises(ValueError, match=r"argument 'w' must be the array it was quantized "
                                         r"with \(got another array, float32\[48, 64\]\)"):
        q(x, W1.copy(), B1)

    @jitc.jit
    def outer(x):
        return q(x, W1, B1)

    with pytest.raises(ValueError, match="got a traced value"):
        outer(x)
    with pytest.raises(jitc.aot.ExportError, match="takes its weights \\(w\\) as arguments"):
        jitc.export("f32[32,48]", "f32[48,64]", "f32[64]")(q)
    with pytest.raises(ValueError, match="same array for the weight argument 'w'"):
        jitc.quant.quantize(layer, [(x, W1, B1), (x, W1.copy(), B1)], weights=["w"])
    with pytest.raises(ValueError, match="pass calibration samples that hold them"):
        jitc.quant.quantize(layer, weights=["w"], activations="dynamic")


def test_products_inside_lax_loops_keep_dynamic_scales():
    # An activation inside a loop body is a value of the body's trace: calibration cannot
    # return it (it used to fail with "a tracer leaked"), so that product scales per row.
    W = (rng.standard_normal((48, 48)) * 0.2).astype(np.float32)

    def recurrent(x):
        def body(i, h):
            return np.tanh(h @ W + x[i])
        return jitc.lax.fori_loop(0, x.shape[0], body, np.zeros(48, np.float32)) @ W1

    def unrolled(x):
        h = np.zeros(48, np.float32)
        for i in range(x.shape[0]):
            h = np.tanh(h @ W + x[i])
        return h @ W1

    q = jitc.quant.quantize(recurrent, SAMPLES[:2])
    inner, outer = q.products
    assert (inner.weight, inner.static) == ("W", False)
    assert (outer.weight, outer.static) == ("W1", True)
    x = SAMPLES[2][0][:6]
    assert np.abs(q(x) - unrolled(x)).max() < 0.03 * np.abs(unrolled(x)).max()
    assert optimized_text(q, x).count("result=i32") == 2


@pytest.mark.parametrize("backend", ["interpreter", "c", "cuda-sim"])
def test_every_backend_computes_the_same_quantized_function(backend):
    x = SAMPLES[0][0]
    want = jitc.quant.quantize(mlp, SAMPLES)(x)
    got = jitc.quant.quantize(mlp, SAMPLES, backend=backend)(x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


class Net:
    def __init__(self) -> None:
        self.fc1 = (rng.standard_normal((48, 64)) * 0.2).astype(np.float32)
        self.fc2 = (rng.standard_normal((64, 32)) * 0.2).astype(np.float32)

    def forward(self, x):
        return np.maximum(x @ self.fc1, 0) @ self.fc2


def test_a_method_and_the_arrays_of_its_object():
    net = Net()
    q = jitc.quant.quantize(net.forward, SAMPLES)
    assert [p.weight for p in q.products] == ["self.fc1", "self.fc2"]
    x = SAMPLES[0][0]
    assert np.abs(q(x) - net.forward(x)).max() < 0.03 * np.abs(net.forward(x)).max()
    only = jitc.quant.quantize(net.forward, SAMPLES, weights=["self.fc2"])
    assert [p.weight for p in only.products] == ["self.fc2"]
    with pytest.raises(TypeError, match="expected a Python function or method, got int"):
        jitc.quant.quantize(3, SAMPLES)


def test_interceptors_see_ops_before_they_are_emitted():
    from jitc.ir import ops
    from jitc.tracing.state import emit, intercepting
    seen = []

    def tanh_to_sin(op, operands, attrs):
        seen.append(op.name)
        if op is ops.TANH:  # the interceptor's own ops are not intercepted again
            return (emit(ops.SIN, operands), )
        return None

    def fn(x):
        with intercepting(tanh_to_sin):
            y = np.tanh(x) + 1
        return np.tanh(y)  # outside the block: emitted as it is

    x = np.linspace(-1, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(jitc.jit(fn)(x), np.tanh(np.sin(x) + 1), rtol=1e-6)
    assert "tanh" in seen and "sin" not in seen


def test_dynamic_scales_use_uint8_after_a_relu():
    x = SAMPLES[0][0]
    q = jitc.quant.quantize(mlp, activations="dynamic")
    text = optimized_text(q, x)
    assert " : u8[32,64]" in text and " : i8[32,48]" in text  # x itself may be negative
    assert np.abs(q(x) - mlp(x)).max() < 0.02 * np.abs(mlp(x)).max()
