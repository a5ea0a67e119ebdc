"""The CPU's direct convolution computes a row of outputs at a time (convolution_rows.py): each
layout of row (spatial, feature, batch), rows longer than one tile, taps over padding and holes
skipped, fused epilogues and symbolic batches give numpy's values, float32 bit for bit when
summed in the element order (input feature, then taps)."""

from __future__ import annotations

import numpy as np
import pytest

import jitc
from jitc import lax
from jitc.backends.cpu.convolution_rows import TILE


def _sequential_nchw(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """NCHW by OIHW in float32, each output summed over input features, then taps, each
    product and sum rounded: the order the CPU adds them in."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float32)
    for ci in range(c):
        for i in range(kh):
            for j in range(kw):
                window = padded[:, ci, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out += window[:, None] * w[None, :, ci, i, j, None, None]
    return out


@pytest.mark.parametrize("stride", [1, 2])
def test_a_padded_nchw_convolution_sums_in_the_element_order(stride: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 11), np.float32)
    w = rng.standard_normal((16, 3, 3, 3), np.float32)  # two units of 8 features

    def conv(x, w):
        return lax.conv_general_dilated(x, w, (stride, stride), ((1, 1), (1, 1)))
    np.testing.assert_array_equal(jitc.jit(conv)(x, w), _sequential_nchw(x, w, stride, 1))


CASES = [
    # name, input shape, kernel shape, dim_labels, strides, padding, lhs dil, rhs dil, groups
    ("row_longer_than_a_tile", (2, 2, TILE + 45), (3, 2, 5), "bf0_oi0->bf0", (1,), ((2, 3),),
     (1,), (1,), 1),
    ("strided_tiles", (1, 2, 2 * TILE + 7), (2, 2, 4), "bf0_oi0->bf0", (3,), ((4, 1),), (1,),
     (2,), 1),
    ("blocks_of_grouped_features", (1, 4, TILE + 44), (32, 2, 3), "bf0_oi0->bf0", (1,),
     ((1, 1),), (1,), (1,), 2),
    ("input_dilated_row", (2, 3, 5, 6), (4, 3, 2, 3), "bf01_oi01->bf01", (1, 2),
     ((1, 2), (2, 1)), (2, 3), (1, 1), 1),
    ("cropped_rhs_dilated", (2, 4, 7, 8), (6, 2, 3, 2), "bf01_oi01->bf01", (1, 1),
     ((-1, 2), (1, -2)), (1, 1), (2, 3), 2),
    ("nhwc_padded_groups", (2, 5, 6, 6), (3, 3, 2, 9), "b01f_01io->b01f", (2, 1),
     ((1, 1), (2, 0)), (1, 1), (1, 1), 3),
    ("nhwc_input_dilated", (1, 4, 3, 2), (2, 2, 2, 5), "b01f_01io->b01f", (1, 1),
     ((1, 1), (0, 1)), (2, 1), (1, 2), 1),
    ("batch_innermost", (3, 2, 5, 4), (4, 2, 3, 3), "bf01_oi01->01fb", (1, 1),
     ((1, 1), (1, 1)), (1, 1), (1, 1), 1),
    ("feature_outermost", (2, 3, 5, 6), (4, 3, 3, 2), "bf01_oi01->fb01", (1, 1),
     ((1, 1), (0, 1)), (1, 1), (1, 1), 1),
    ("3d_padded", (1, 2, 4, 3, 5), (3, 2, 2, 3, 3), "bf012_oi012->bf012", (1, 1, 2),
     ((1, 0), (1, 1), (1, 1)), (1, 1, 1), (1, 1, 1), 1),
]


def _conv(labels, strides, padding, lhs_dil, rhs_dil, groups):
    def conv(x, w):
        return lax.conv_general_dilated(x, w, strides, padding, lhs_dil, rhs_dil, labels, groups)
    return conv


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_direct_convolutions_equal_the_interpreter(case, dtype: type) -> None:
    _, x_shape, w_shape, *attrs = case
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(x_shape) * 4).astype(dtype)
    w = (rng.standard_normal(w_shape) * 4).astype(dtype)
    conv = _conv(*attrs)
    result = jitc.jit(conv)(x, w)
    expected = jitc.jit(conv, backend="interpreter")(x, w)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    if dtype == np.int32:
        np.testing.assert_array_equal(result, expected)
    else:
        tolerance = 1e-4 if dtype == np.float32 else 2e-2
        np.testing.assert_allclose(result.astype(np.float64), expected.astype(np.float64),
                                   rtol=tolerance, atol=tolerance * 10)


@pytest.mark.parametrize("labels", ["bf01_oi01->bf01", "b01f_01io->b01f"])
def test_infinite_taps_over_padding_and_holes_add_nothing(labels: str) -> None:
    """Every tap of the kernel is infinite: an output is inf where a tap reads input and 0
    (no nan) where all its taps fall on padding or between dilated inputs."""
    nchw = labels.startswith("bf")
    x = np.ones((1, 2, 3, 3) if nchw else (1, 3, 3, 2), np.float32)
    w = np.full((4, 2, 2, 2) if nchw else (2, 2, 2, 4), np.inf, np.float32)
    conv = _conv(labels, (1, 1), ((2, 2), (2, 2)), (2, 2), (1, 1), 1)
    result = jitc.jit(conv)(x, w)
    expected = jitc.jit(conv, backend="interpreter")(x, w)
    assert not np.isnan(expected).any() and (expected == 0).any()
    np.testing.assert_array_equal(result, expected)


def test_a_fused_epilogue_and_a_symbolic_batch() -> None:
    rng = np.random.default_rng(2)
    w = rng.standard_normal((5, 3, 3, 3), np.float32)
    bias = rng.standard_normal((5, 1, 1), np.float32)

    def layer(x, w, bias):
        y = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))
        return np.maximum(y + bias, 0)
    jitted = jitc.jit(layer, dynamic=True)
    for batch in (1, 3):
        x = rng.standard_normal((batch, 3, 6, 7), np.float32)
        expected = jitc.jit(layer, backend="interpreter")(x, w, bias)
        np.testing.assert_allclose(jitted(x, w, bias), expected, rtol=1e-5, atol=1e-5)
