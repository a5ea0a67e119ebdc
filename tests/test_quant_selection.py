"""jitc.quant's `agreement`: products are kept float32, most sensitive first, until the top-1
agreement on held-out calibration rows reaches the target; the report says which and why."""

from __future__ import annotations

import numpy as np
import pytest

import jitc
import jitc.quant
from jitc.ir.printer import print_module

rng = np.random.default_rng(1)
W1 = (rng.standard_normal((64, 96)) * 0.15).astype(np.float32)
W2 = (rng.standard_normal((96, 96)) * 0.12).astype(np.float32)
W3 = (rng.standard_normal((96, 10)) * 0.2).astype(np.float32)


def inputs(generator: np.random.Generator, rows: int) -> np.ndarray:
    x = generator.standard_normal((rows, 64)).astype(np.float32)
    x[::16, 0] = 40  # a rare spike on one feature spends the first product's static range
    return x


def mlp(x):
    h = np.maximum(x @ W1, 0)
    h = np.maximum(h @ W2, 0)
    return h @ W3


CALIBRATION = [(inputs(rng, 64),) for _ in range(4)]
TESTS = [inputs(rng, 64) for _ in range(8)]


@pytest.fixture(scope="module")
def every():
    return jitc.quant.quantize(mlp, CALIBRATION, min_channels=1)


@pytest.fixture(scope="module")
def sensitive_float():
    return jitc.quant.quantize(mlp, CALIBRATION, min_channels=1, agreement=0.95)


def agreement(fn) -> float:
    return float(np.mean([np.mean(np.argmax(fn(x), 1) == np.argmax(mlp(x), 1))
                          for x in TESTS]))


def test_the_most_sensitive_product_stays_float_until_the_target_is_met(every,
                                                                        sensitive_float):
    q = sensitive_float
    selection = q.selection
    assert selection.kept == [("W1", 0)]     # its input's range is spent on one spike
    assert selection.agreements[0] < 0.95 <= selection.agreement
    assert selection.rows == 4 * 64          # every calibration row, held out once
    assert [p.weight for p in q.products] == ["W2", "W3"]
    # On inputs neither calibration saw, keeping W1 float is what lifts the agreement.
    assert agreement(every) < 0.95 <= agreement(q)
    report = str(q.report())
    assert "W1[64x96] (use 0): kept float32 for agreement=0.95 (held-out top-1" in report
    text = print_module(q.lower(TESTS[0]).compile().optimized_module)
    assert text.count("result=i32") == 2


def test_a_kept_product_is_numpys_float_product(sensitive_float):
    second, third = sensitive_float.products
    x = TESTS[0]

    def layer(a, product):
        inverse = np.float32(1 / product.activation_scale)
        aq = np.clip(np.round(a * inverse), 0, 255).astype(np.uint8)
        acc = aq.astype(np.int32) @ product.quantized.values.astype(np.int32)
        scale = (product.quantized.output_scales * np.float32(product.activation_scale)
                 ).astype(np.float32)
        return acc.astype(np.float32) * scale

    want = layer(np.maximum(layer(np.maximum(x @ W1, 0), second), 0), third)
    np.testing.assert_allclose(sensitive_float(x), want, rtol=1e-5, atol=1e-5)


def test_a_met_target_keeps_every_product_int8(every):
    q = jitc.quant.quantize(mlp, CALIBRATION, min_channels=1, agreement=0.5)
    assert q.selection.kept == [] and len(q.selection.agreements) == 1
    assert [p.weight for p in q.products] == ["W1", "W2", "W3"]
    assert np.array_equal(q(TESTS[0]), every(TESTS[0]))   # calibrated on the same samples
    assert every.selection is None


def test_a_target_only_float_meets_keeps_every_product_float():
    q = jitc.quant.quantize(mlp, CALIBRATION, min_channels=1, agreement=1.0)
    assert sorted(q.selection.kept) == [("W1", 0), ("W2", 0), ("W3", 0)]
    assert q.products == [] and q.selection.agreement == 1.0
    assert np.array_equal(q(TESTS[0]), jitc.jit(mlp)(TESTS[0]))
    assert str(q.report()).startswith("jitc.quant: 0 product(s) in int8")


@pytest.mark.parametrize("target, samples, message", [
    (1.5, CALIBRATION, r"agreement=1\.5 needs a fraction in \(0, 1\]"),
    (0.99, CALIBRATION[:1], r"at least 2 calibration samples \(got 1\)"),
])
def test_agreement_needs_a_fraction_and_two_samples(target, samples, message):
    with pytest.raises(ValueError, match=message):
        jitc.quant.quantize(mlp, samples, agreement=target)


def test_agreement_needs_results_with_classes():
    def total(x):
        return np.sum(mlp(x), axis=1, keepdims=True)

    with pytest.raises(ValueError, match="no axis of two or more entries; leave agreement"):
        jitc.quant.quantize(total, CALIBRATION, agreement=0.99)
