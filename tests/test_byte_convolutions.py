"""int8/uint8 convolutions written the numpy way (widen to int32, then convolve) equal numpy's
bit for bit on every backend, and those with enough output features run as one byte product
over patches (jitc/passes/convolution_products.py)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import jitc
from jitc import lax
from jitc.ir.printer import print_module
from tests.ops.cases import _conv
from tests.test_byte_products import BYTES, _bytes

# (name, convolution attributes, input shape, kernel shape, runs as a byte product)
CASES = [
    ("nchw_3x3_padded", {"padding": ((1, 1), (1, 1))}, (2, 5, 6, 7), (8, 5, 3, 3), True),
    ("strided_rhs_dilated", {"strides": (2, 1), "padding": ((1, 2), (0, 1)),
                             "rhs_dilation": (1, 2)}, (2, 3, 7, 6), (9, 3, 3, 2), True),
    ("nhwc_lhs_dilated_cropped", {"labels": "b01f_01io->b01f", "padding": ((-1, 0), (1, 1)),
                                  "lhs_dilation": (2, 1)}, (2, 5, 6, 3), (3, 2, 3, 8), True),
    ("size_one_dims", {}, (1, 1, 1, 1), (8, 1, 1, 1), True),
    ("1x1_kernel_nhwc", {"labels": "b01f_01io->b01f"}, (3, 4, 1, 6), (1, 1, 6, 10), True),
    ("1d", {"labels": "bf0_oi0->bf0", "strides": (2,), "padding": ((2, 1),),
            "lhs_dilation": (2,), "rhs_dilation": (2,)}, (2, 3, 9), (8, 3, 3), True),
    ("3d", {"labels": "bf012_oi012->bf012", "padding": ((0, 1), (1, 0), (0, 0))},
     (1, 2, 4, 3, 5), (8, 2, 2, 2, 3), True),
    ("feature_groups_as_batched_products", {"padding": ((1, 1), (0, 2)), "groups": 2,
                                            "rhs_dilation": (1, 2)},
     (2, 6, 5, 4), (16, 3, 3, 2), True),
    ("nhwc_groups_strided", {"labels": "b01f_01io->b01f", "strides": (2, 1), "groups": 3},
     (3, 5, 4, 6), (2, 2, 2, 24), True),
    # Left to the generic convolution, which must be exact too.
    ("empty_batch", {}, (0, 2, 4, 4), (8, 2, 3, 3), False),
    ("empty_output", {}, (1, 2, 2, 2), (8, 2, 3, 3), False),
    ("no_input_features", {}, (2, 0, 4, 4), (8, 0, 3, 3), False),
    ("feature_groups", {"padding": ((1, 1), (1, 1)), "groups": 2}, (1, 4, 5, 5), (8, 2, 3, 3),
     False),
    ("few_output_features", {}, (2, 3, 5, 5), (4, 3, 2, 2), False),
]


def _widened(attrs: dict):
    traced, expected = _conv(**attrs)

    def conv(x, w):
        return traced(x.astype(np.int32), w.astype(np.int32))

    def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """A loop over output positions summing in int64, then wrapped to int32 as numpy's
        int32 sum does."""
        return expected(x.astype(np.int32), w.astype(np.int32))
    return conv, reference


def _check(backend: str, attrs: dict, x: np.ndarray, w: np.ndarray, as_bytes: bool) -> None:
    conv, reference = _widened(attrs)
    jitted = jitc.jit(conv, backend=backend)
    result, expected = jitted(x, w), reference(x, w)
    assert result.dtype == np.int32 and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)
    text = print_module(jitted.lower(x, w).compile().optimized_module)
    assert ("result=i32" in text and "= convolution(" not in text) == as_bytes


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtypes", BYTES, ids=lambda d: f"{d[0].__name__}x{d[1].__name__}")
def test_byte_convolutions_equal_numpy_on_the_cpu(case, dtypes: tuple[type, type]) -> None:
    _, attrs, x_shape, w_shape, as_bytes = case
    rng = np.random.default_rng(3)
    _check("cpu", attrs, _bytes(rng, dtypes[0], x_shape), _bytes(rng, dtypes[1], w_shape),
           as_bytes)


@pytest.mark.parametrize("backend", ["interpreter", "c", "cuda-sim"])
@pytest.mark.parametrize("case", [CASES[1], CASES[2], CASES[5], CASES[7], CASES[12]],
                         ids=lambda c: c[0])
def test_byte_convolutions_equal_numpy_on_other_backends(backend: str, case) -> None:
    _, attrs, x_shape, w_shape, as_bytes = case
    rng = np.random.default_rng(4)
    _check(backend, attrs, _bytes(rng, np.uint8, x_shape), _bytes(rng, np.int8, w_shape),
           as_bytes)


def test_a_small_cnn_layer_with_constant_weights_runs_on_bytes() -> None:
    """Weights the function closes over fold to an int32 constant; its values fit a byte, so
    the convolution still multiplies bytes (NHWC with stride 2, as a downsampling layer)."""
    rng = np.random.default_rng(5)
    w = _bytes(rng, np.int8, (3, 3, 16, 32))
    x = _bytes(rng, np.uint8, (4, 9, 9, 16))

    def layer(x):
        y = lax.conv_general_dilated(x.astype(np.int32), w.astype(np.int32), (2, 2),
                                     [(1, 1), (1, 1)], dimension_numbers="b01f_01io->b01f")
        return np.maximum(y, 0)
    jitted = jitc.jit(layer)
    _, reference = _widened({"labels": "b01f_01io->b01f", "strides": (2, 2),
                             "padding": ((1, 1), (1, 1))})
    np.testing.assert_array_equal(jitted(x), np.maximum(reference(x, w), 0))
    text = print_module(jitted.lower(x).compile().optimized_module)
    assert "result=i32" in text and "= convolution(" not in text


def test_np_convolve_of_widened_bytes_stays_exact() -> None:
    """np.convolve has one output feature: it stays a direct convolution, exact."""
    rng = np.random.default_rng(6)
    a, v = _bytes(rng, np.int8, (50,)), _bytes(rng, np.uint8, (7,))
    for mode in ("full", "same", "valid"):
        def convolve(a, v, mode=mode):
            return np.convolve(a.astype(np.int32), v.astype(np.int32), mode)
        np.testing.assert_array_equal(jitc.jit(convolve)(a, v), convolve(a, v))


@pytest.mark.parametrize("backend", ["cpu", "c"])
def test_a_batch_split_into_chunks_equals_numpy(backend: str, monkeypatch) -> None:
    """Patches over MAX_PATCH_BYTES are made and multiplied a few batch entries at a time."""
    module = sys.modules["jitc.passes.convolution_products"]
    attrs = {"labels": "b01f_01io->b01f", "strides": (1, 2), "padding": ((1, 1), (0, 0))}
    conv, reference = _widened(attrs)
    rng = np.random.default_rng(7)
    x, w = _bytes(rng, np.uint8, (5, 4, 6, 3)), _bytes(rng, np.int8, (2, 3, 3, 8))
    # One entry's patches: 5 x 2 positions x 6 taps x 3 features = 180 bytes; two per chunk.
    monkeypatch.setattr(module, "MAX_PATCH_BYTES", 2 * 180)
    jitted = jitc.jit(conv, backend=backend, disk_cache=False)
    np.testing.assert_array_equal(jitted(x, w), reference(x, w))
    assert print_module(jitted.lower(x, w).compile().optimized_module).count("result=i32") == 3
