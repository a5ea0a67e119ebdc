"""jitc.lax.conv_general_dilated takes JAX's spellings: three layout strings for
`dimension_numbers` and "VALID"/"SAME"/"SAME_LOWER" for `padding`, each the same convolution as
the IR's dim_labels and explicit (low, high) pairs (tests/ops/cases.py's numpy loop)."""

from __future__ import annotations

import numpy as np
import pytest

import jitc
from jitc import lax
from tests.ops.cases import _conv

RNG = np.random.default_rng(3)

# (JAX's layout strings, the IR's dim_labels, input shape, kernel shape)
LAYOUTS = [
    (("NCHW", "OIHW", "NCHW"), "bf01_oi01->bf01", (2, 3, 5, 6), (4, 3, 3, 2)),
    (("NHWC", "HWIO", "NHWC"), "b01f_01io->b01f", (2, 5, 6, 3), (3, 2, 3, 4)),
    (("NHWC", "OIHW", "NCHW"), "b01f_oi01->bf01", (2, 5, 6, 3), (4, 3, 3, 2)),
    # Spatial dimensions are numbered in the kernel's order: W before H here.
    (("CHWN", "IOWH", "NWHC"), "f10b_io01->b01f", (3, 5, 6, 2), (3, 4, 2, 3)),
    (("NCH", "OIH", "NCH"), "bf0_oi0->bf0", (2, 3, 7), (4, 3, 3)),
]


@pytest.mark.parametrize("specs, labels, x_shape, w_shape", LAYOUTS)
def test_layout_strings_are_dim_labels(specs, labels, x_shape, w_shape) -> None:
    x, w = RNG.standard_normal(x_shape), RNG.standard_normal(w_shape)
    _, expected = _conv(labels, strides=(2,) * (len(x_shape) - 2))

    def f(x, w):
        return lax.conv_general_dilated(x, w, (2,) * (x.ndim - 2), dimension_numbers=specs)

    np.testing.assert_allclose(jitc.jit(f)(x, w), expected(x, w), rtol=1e-12)
    np.testing.assert_allclose(f(x, w), expected(x, w), rtol=1e-12)  # eagerly too


# (padding, input extent, kernel extent, stride, rhs dilation, (low, high))
NAMED = [
    ("VALID", 7, 3, 1, 1, (0, 0)),
    ("SAME", 7, 3, 1, 1, (1, 1)),
    ("SAME", 5, 3, 2, 1, (1, 1)),
    ("SAME", 6, 2, 1, 1, (0, 1)),      # an odd total: the extra one high
    ("SAME_LOWER", 6, 2, 1, 1, (1, 0)),  # ... or low
    ("same", 6, 3, 2, 2, (1, 2)),      # the dilated kernel spans 5
    ("SAME", 4, 1, 3, 1, (0, 0)),      # the window never reaches past the input
]


@pytest.mark.parametrize("padding, size, k, stride, dilation, pads", NAMED)
def test_named_padding(padding, size, k, stride, dilation, pads) -> None:
    x, w = RNG.standard_normal((2, 3, size, 4)), RNG.standard_normal((5, 3, k, 1))
    _, expected = _conv(strides=(stride, 1), padding=(pads, (0, 0)),
                        rhs_dilation=(dilation, 1))
    got = jitc.jit(lambda x, w: lax.conv_general_dilated(
        x, w, (stride, 1), padding, rhs_dilation=(dilation, 1)))(x, w)
    want = expected(x, w)
    assert got.shape == want.shape
    if padding.upper().startswith("SAME"):
        assert got.shape[2] == -(-size // stride)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_bad_spellings_name_the_expected_form() -> None:
    x, w = np.ones((1, 2, 4, 4)), np.ones((3, 2, 2, 2))
    with pytest.raises(ValueError, match="three layout"):
        lax.conv_general_dilated(x, w, dimension_numbers=("NCHW", "OIHW"))
    with pytest.raises(ValueError, match="N, C and the kernel's spatial letters"):
        lax.conv_general_dilated(x, w, dimension_numbers=("NCHW", "OIHW", "NCXY"))
    with pytest.raises(ValueError, match="'VALID', 'SAME'"):
        lax.conv_general_dilated(x, w, (1, 1), "FULL")
    with pytest.raises(ValueError, match="lhs_dilation"):
        lax.conv_general_dilated(x, w, (1, 1), "SAME", lhs_dilation=(2, 2))
