"""float32/float64 convolutions equal the op table's numpy reference (a loop over output
positions in float64) to a float tolerance on every backend; those whose patches hold input
values only, with enough output features, run as patches and one float product
(jitc/passes/convolution_products.py) except on the C backend."""

from __future__ import annotations

import numpy as np
import pytest

import jitc
from jitc import lax
from jitc.ir.printer import print_module
from jitc.passes.convolution_products import CPU_FLOAT_FEATURES, CPU_FLOAT_FEATURES_INNERMOST
from tests.ops.cases import _conv

# (name, convolution attributes, input shape, kernel shape, runs as a float product)
CASES = [
    ("nchw_3x3", {}, (2, 5, 6, 7), (8, 5, 3, 3), True),
    ("strided_rhs_dilated", {"strides": (2, 1), "rhs_dilation": (1, 2)}, (2, 3, 7, 6),
     (9, 3, 3, 2), True),
    ("nhwc_cropped", {"labels": "b01f_01io->b01f", "padding": ((-1, 0), (0, -1))},
     (2, 5, 6, 3), (3, 2, 3, 8), True),
    ("size_one_dims", {}, (1, 1, 1, 1), (8, 1, 1, 1), True),
    ("1x1_kernel_nhwc", {"labels": "b01f_01io->b01f"}, (3, 4, 1, 6), (1, 1, 6, 10), True),
    ("1d_strided_dilated", {"labels": "bf0_oi0->bf0", "strides": (2,), "rhs_dilation": (2,)},
     (2, 3, 9), (8, 3, 3), True),
    ("3d", {"labels": "bf012_oi012->bf012"}, (1, 2, 4, 3, 5), (8, 2, 2, 2, 3), True),
    ("groups_as_batched_products", {"groups": 2, "rhs_dilation": (1, 2)}, (2, 6, 5, 6),
     (16, 3, 3, 2), True),
    ("nhwc_groups_strided", {"labels": "b01f_01io->b01f", "strides": (2, 1), "groups": 3},
     (3, 5, 4, 6), (2, 2, 2, 24), True),
    ("mixed_labels", {"labels": "b01f_01io->bf01"}, (2, 5, 4, 3), (2, 2, 3, 8), True),
    # Enough output features for the cpu backend's rule (cpu_convolution_products).
    ("nchw_64_features", {"strides": (1, 2)}, (2, 3, 6, 7), (64, 3, 3, 3), True),
    ("nhwc_grouped_32_features", {"labels": "b01f_01io->b01f", "groups": 2}, (2, 5, 4, 6),
     (2, 2, 3, 64), True),
    # Left to the direct convolution.
    ("padded", {"padding": ((1, 1), (1, 1))}, (2, 5, 6, 7), (8, 5, 3, 3), False),
    ("lhs_dilated", {"lhs_dilation": (2, 1)}, (2, 3, 4, 4), (8, 3, 2, 2), False),
    ("few_output_features", {}, (2, 3, 5, 5), (4, 3, 2, 2), False),
    ("depthwise", {"groups": 4}, (2, 4, 5, 5), (8, 1, 3, 3), False),
    ("empty_batch", {}, (0, 2, 4, 4), (8, 2, 3, 3), False),
    ("empty_output", {}, (1, 2, 2, 2), (8, 2, 3, 3), False),
    ("no_input_features", {}, (2, 0, 4, 4), (8, 0, 3, 3), False),
]


def _check(backend: str, case, dtype: type, seed: int) -> None:
    _, attrs, x_shape, w_shape, as_product = case
    conv, reference = _conv(**attrs)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    jitted = jitc.jit(conv, backend=backend)
    result = jitted(x, w)
    expected = reference(x, w)
    assert result.dtype == dtype and result.shape == expected.shape
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance)
    text = print_module(jitted.lower(x, w).compile().optimized_module)
    # The C backend leaves float convolutions direct, the cpu backend those with few features.
    assert ("dot_general(" in text and "= convolution(" not in text) == \
        (as_product and backend != "c" and not (backend == "cpu" and _direct_on_cpu(case)))


def _direct_on_cpu(case) -> bool:
    """cpu_convolution_products' rule: few output features per group for the output's layout."""
    _, attrs, _, w_shape, _ = case
    labels = attrs.get("labels", "bf01_oi01->bf01")
    per_group = w_shape[labels.split("_")[1].index("o")] // attrs.get("groups", 1)
    innermost = labels.endswith("f")
    return per_group < (CPU_FLOAT_FEATURES_INNERMOST if innermost else CPU_FLOAT_FEATURES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_float_convolutions_equal_numpy_on_the_cpu(case, dtype: type) -> None:
    _check("cpu", case, dtype, seed=1)


@pytest.mark.parametrize("backend", ["interpreter", "c", "cuda-sim"])
@pytest.mark.parametrize("case", [CASES[1], CASES[2], CASES[5], CASES[7], CASES[10],
                                  CASES[14]], ids=lambda c: c[0])
def test_float_convolutions_equal_numpy_on_other_backends(backend: str, case) -> None:
    _check(backend, case, np.float32, seed=2)


def test_an_infinite_tap_over_padding_still_contributes_nothing() -> None:
    """A padded convolution stays direct: its padding is no input, and 0 * inf in patches
    would make nan of the outputs whose window reaches over it."""
    x = np.ones((1, 1, 4, 4), np.float32)
    w = np.ones((8, 1, 3, 3), np.float32)
    w[:, :, 0, 0] = np.inf

    def conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))
    result = jitc.jit(conv)(x, w)
    assert not np.isnan(result).any() and np.isinf(result[:, :, 1:, 1:]).all()
    # The top row's windows reach over the padding with the infinite tap: 2 x 2 or 2 x 3 ones.
    np.testing.assert_array_equal(result[:, :, 0, :], np.broadcast_to([4, 6, 6, 4], (1, 8, 4)))


def test_float16_stays_a_direct_convolution() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float16)
    w = rng.standard_normal((8, 3, 2, 2)).astype(np.float16)
    jitted = jitc.jit(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), ()))
    np.testing.assert_allclose(jitted(x, w), _conv()[1](x, w), rtol=1e-2, atol=1e-2)
    assert "= convolution(" in print_module(jitted.lower(x, w).compile().optimized_module)
