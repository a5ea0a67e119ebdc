"""jitc.quant's compensated rounding: the weights' int8 levels chosen for the product's error on
the calibration inputs (jitc/quant/rounding.py), against nearest rounding and against the
optimal-brain-quantization steps written out with explicit inverses."""

from __future__ import annotations

import numpy as np
import pytest

import jitc.quant
from jitc.quant.observers import make_observer
from jitc.quant.rounding import (
    BLOCK,
    SMALL_INVERSE,
    InputStatistics,
    compensated_values,
    inverse_factor,
    nearest_values,
)

rng = np.random.default_rng(1)
W1 = (rng.standard_normal((64, 256)) * 0.15).astype(np.float32)
B1 = (rng.standard_normal(256) * 0.1).astype(np.float32)
W2 = (rng.standard_normal((256, 256)) * 0.08).astype(np.float32)
B2 = (rng.standard_normal(256) * 0.1).astype(np.float32)
W3 = (rng.standard_normal((256, 10)) * 0.2).astype(np.float32)
CALIBRATION = [(rng.standard_normal((128, 64)).astype(np.float32),) for _ in range(4)]
TEST = rng.standard_normal((4096, 64)).astype(np.float32)
SAMPLES_RELU = CALIBRATION


def mlp(x):
    h = np.maximum(x @ W1 + B1, 0)
    h = np.maximum(h @ W2 + B2, 0)
    return h @ W3


@pytest.fixture(scope="module")
def quantized() -> dict[str, jitc.quant.Quantized]:
    return {rounding: jitc.quant.quantize(mlp, CALIBRATION, rounding=rounding, min_channels=1)
            for rounding in ("nearest", "compensated")}


def rounded(product: jitc.quant.Product) -> np.ndarray:
    return product.quantized.values * product.quantized.scales.astype(np.float64)


def test_compensation_is_the_default_with_calibration_and_nearest_rounds_each_weight(
        quantized):
    default = jitc.quant.quantize(mlp, CALIBRATION, min_channels=1)
    for mine, compensated in zip(default.products, quantized["compensated"].products):
        np.testing.assert_array_equal(mine.quantized.values, compensated.quantized.values)
        assert "compensated rounding" in mine.describe()
    for product, weight in zip(quantized["nearest"].products, (W1, W2, W3)):
        scales = np.abs(weight.astype(np.float64)).max(axis=0) / 127
        np.testing.assert_array_equal(product.quantized.values,
                                      np.rint(weight / scales).astype(np.int8))
    dynamic = jitc.quant.quantize(mlp, activations="dynamic")
    assert all(p.rounding == "nearest" for p in dynamic.products)


def test_compensated_weights_reduce_each_products_error_on_its_inputs(quantized):
    """||X W - X Wq|| on the float model's activations: after a ReLU (a mean the errors add up
    through) far smaller than with nearest rounding, on the calibration inputs and on others;
    on independent inputs, where nearest rounding is already the best, the same."""
    def inputs(x: np.ndarray) -> list[np.ndarray]:
        h1 = np.maximum(x @ W1 + B1, 0)
        return [x, h1, np.maximum(h1 @ W2 + B2, 0)]

    calibration = np.concatenate([sample[0] for sample in CALIBRATION])
    for data, bounds in ((calibration, (1.001, 0.6, 0.5)), (TEST, (1.001, 0.7, 0.6))):
        for x, weight, bound, near, comp in zip(inputs(data), (W1, W2, W3), bounds,
                                                quantized["nearest"].products,
                                                quantized["compensated"].products):
            x = x.astype(np.float64)
            errors = [np.linalg.norm(x @ (weight - rounded(p))) for p in (near, comp)]
            assert errors[1] < bound * errors[0], (weight.shape, errors)


def test_the_quantized_function_is_closer_to_the_float_one(quantized):
    want = mlp(TEST)
    near, comp = (quantized[r](TEST) for r in ("nearest", "compensated"))
    rms = [np.sqrt(np.mean((got - want) ** 2)) for got in (near, comp)]
    assert rms[1] < 0.92 * rms[0], rms
    agreement = [np.mean(got.argmax(1) == want.argmax(1)) for got in (near, comp)]
    assert agreement[1] >= agreement[0], agreement


def explicit_steps(weight: np.ndarray, scales: np.ndarray, hessian: np.ndarray) -> np.ndarray:
    """Optimal brain quantization as derived: round the first free row, move its error onto the
    free rows by the inverse Hessian's column, drop the row from the inverse (its Schur
    complement), again."""
    free, inverse = weight.astype(np.float64), np.linalg.inv(hessian)
    levels = []
    while len(free):
        level = nearest_values(free[0], scales)
        error = free[0] - level * scales
        free = free[1:] - np.outer(inverse[1:, 0] / inverse[0, 0], error)
        inverse = inverse[1:, 1:] - np.outer(inverse[1:, 0], inverse[0, 1:]) / inverse[0, 0]
        levels.append(level)
    return np.array(levels)


def test_blocked_cholesky_form_equals_the_explicit_steps():
    width = BLOCK + 17  # two blocks, the second partial
    x = np.maximum(rng.standard_normal((300, width)) + 0.5, 0)
    weight = rng.standard_normal((width, 24)) * 0.1
    scales = np.abs(weight).max(axis=0) / 127
    hessian = x.T @ x / len(x) + 0.01 * np.eye(width)
    got = compensated_values(weight, scales, hessian)
    np.testing.assert_array_equal(got, explicit_steps(weight, scales, hessian))
    assert not np.array_equal(got, nearest_values(weight, scales))


def test_inverse_factor_is_the_upper_cholesky_factor_of_the_inverse():
    width = 2 * SMALL_INVERSE + 37  # inverted by halves, twice
    x = np.maximum(rng.standard_normal((2 * width, width)) + 0.3, 0)
    hessian = x.T @ x / len(x) + 0.01 * np.eye(width)
    factor = inverse_factor(hessian)
    assert np.array_equal(factor, np.triu(factor)) and factor.flags.c_contiguous
    np.testing.assert_allclose(factor, np.linalg.cholesky(np.linalg.inv(hessian)).T,
                               rtol=1e-9, atol=1e-9)


def test_running_statistics_equal_the_sample_estimates():
    x = np.maximum(rng.standard_normal((700, 40)) @ rng.standard_normal((40, 40)) + 1, 0)
    statistics = InputStatistics(40)
    for part in np.array_split(x, 3):
        statistics.update(part)
    mean = x.mean(axis=0)
    centred = x - mean
    covariance = centred.T @ centred / len(x)
    level = np.trace(covariance) / 40
    distance = np.sum((covariance - level * np.eye(40)) ** 2)
    spread = sum(np.sum((np.outer(r, r) - covariance) ** 2) for r in centred) / len(x) ** 2
    weight = min(1.0, spread / distance)
    assert statistics.shrinkage() == pytest.approx(weight, rel=1e-9)
    want = np.outer(mean, mean) + (1 - weight) * covariance + weight * level * np.eye(40)
    want += 0.01 * np.mean(np.diag(want)) * np.eye(40)
    np.testing.assert_allclose(statistics.hessian(), want, rtol=1e-9, atol=1e-12)


def test_independent_inputs_shrink_to_the_identity():
    statistics = InputStatistics(64)
    statistics.update(rng.standard_normal((256, 64)))
    assert statistics.shrinkage() > 0.9


def test_rounding_refusals_say_what_to_do():
    with pytest.raises(ValueError, match="rounding must be 'nearest' or 'compensated'"):
        jitc.quant.quantize(mlp, CALIBRATION, rounding="stochastic")
    with pytest.raises(ValueError, match=r"pass calibration=.*or rounding='nearest'"):
        jitc.quant.quantize(mlp, rounding="compensated")


V = (rng.standard_normal((48, 40)) * 0.3).astype(np.float32)
SPELLINGS = {
    "left": (lambda x: (V.T @ x.T).T, lambda values: values.T),
    "einsum": (lambda x: np.einsum("ij,jk->ik", x, V), lambda values: values),
    "two contracted dimensions": (
        lambda x: np.einsum("iab,abk->ik", x.reshape(-1, 6, 8), V.reshape(6, 8, 40)),
        lambda values: values.reshape(48, 40)),
    "batched activation": (lambda x: x.reshape(2, -1, 48) @ V, lambda values: values[1]),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_spelling_of_a_product_rounds_its_weight_alike(spelling):
    """The rows (contracted dimensions) and channels are found whatever the spelling: the same
    inputs in the same order give the same levels as `x @ V` (a 3-d activation times V makes
    V a broadcast weight with a batch dimension, each entry rounded alike)."""
    samples = [(np.maximum(rng.standard_normal((32, 48)) + 0.3, 0).astype(np.float32),)
               for _ in range(3)]
    plain = jitc.quant.quantize(lambda x: x @ V, samples).products[0]
    function, layout = SPELLINGS[spelling]
    product = jitc.quant.quantize(function, samples).products[0]
    assert product.rounding == plain.rounding == "compensated"
    np.testing.assert_array_equal(layout(product.quantized.values), plain.quantized.values)
    if spelling == "batched activation":
        np.testing.assert_array_equal(product.quantized.values[0], product.quantized.values[1])
    assert not np.array_equal(plain.quantized.values,
                              nearest_values(V, np.abs(V.astype(np.float64)).max(axis=0) / 127))


def test_a_weight_different_in_each_batch_entry_is_rounded_to_nearest():
    batched = (rng.standard_normal((2, 48, 40)) * 0.3).astype(np.float32)
    samples = [(np.maximum(rng.standard_normal((2, 16, 48)) + 0.3, 0).astype(np.float32),)
               for _ in range(3)]
    product = jitc.quant.quantize(lambda x: x @ batched, samples).products[0]
    scales = np.abs(batched.astype(np.float64)).max(axis=1, keepdims=True) / 127
    assert product.rounding == "nearest"
    np.testing.assert_array_equal(product.quantized.values,
                                  nearest_values(batched, scales).astype(np.int8))


def test_inputs_that_were_always_zero_leave_nearest_rounding():
    def masked(x):
        return (x * 0) @ V + x @ V.T.T

    product = jitc.quant.quantize(masked, [(rng.standard_normal((8, 48)).astype(np.float32),)])
    first, second = product.products
    assert first.rounding == "nearest" and first.inputs.hessian() is None
    assert second.rounding == "compensated"


def quantization_error(values: np.ndarray, bound: float, levels: int) -> float:
    step = bound / levels
    rounded = np.clip(np.rint(values / step), -levels, levels) * step
    return float(np.mean((rounded - values) ** 2))


@pytest.mark.parametrize("signed", [True, False])
def test_mean_squared_observer_loses_less_than_the_other_ranges(signed):
    values = rng.standard_normal(200_000)
    values = values if signed else np.maximum(values, 0)
    values[7] = 12.0  # one outlier
    observers = {kind: make_observer(kind, 99.99) for kind in ("minmax", "percentile", "mse")}
    for observer in observers.values():
        for part in np.array_split(values, 4):
            observer.update(part)
    levels = 127 if signed else 255
    errors = {kind: quantization_error(values, observer.bound(), levels)
              for kind, observer in observers.items()}
    assert errors["mse"] < errors["minmax"] and errors["mse"] <= errors["percentile"], errors
    if signed:  # 127 levels: clipping the outlier costs less than rounding to its range
        assert 2.5 < observers["mse"].bound() < 7, observers["mse"].bound()


def test_mean_squared_observer_keeps_the_range_of_uniform_values():
    observer = make_observer("mse", 99.99)
    observer.update(rng.uniform(-1, 1, 100_000))
    assert observer.bound() > 0.97


def test_quantize_with_the_mean_squared_observer():
    x = SAMPLES_RELU[0][0]
    minmax = jitc.quant.quantize(mlp, SAMPLES_RELU)
    mse = jitc.quant.quantize(mlp, SAMPLES_RELU, observer="mse")
    assert mse.products[0].activation_scale < minmax.products[0].activation_scale
    want = mlp(TEST)
    errors = [np.sqrt(np.mean((q(TEST) - want) ** 2)) for q in (minmax, mse)]
    assert errors[1] < errors[0], errors
    assert np.isfinite(mse(x)).all()
