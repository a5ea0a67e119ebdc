"""A small conv net: jitc.lax.conv_general_dilated for the convolutions, numpy for the rest."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit

from jitc import lax


def conv2d_reference(x, w, stride=1, padding=0):
    """NCHW x OIHW cross-correlation with numpy alone (the eager meaning of the lax call)."""
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out_h = (x.shape[2] - w.shape[2]) // stride + 1
    out_w = (x.shape[3] - w.shape[3]) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], out_h, out_w), x.dtype)
    for i in range(w.shape[2]):
        for j in range(w.shape[3]):
            patch = x[:, :, i:i + stride * out_h:stride, j:j + stride * out_w:stride]
            out += np.einsum("bchw,oc->bohw", patch, w[:, :, i, j])
    return out


def conv2d(x, w, stride=1, padding=0):
    return lax.conv_general_dilated(x, w, window_strides=(stride, stride),
                                    padding=[(padding, padding)] * 2)


def max_pool_2x2(x):
    b, c, h, w = x.shape
    return x.reshape(b, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def convnet(images, params):
    x = np.maximum(conv2d(images, params["conv1"], padding=1) + params["b1"][:, None, None], 0)
    x = max_pool_2x2(x)
    x = np.maximum(conv2d(x, params["conv2"], stride=2) + params["b2"].reshape(1, -1, 1, 1), 0)
    x = x.mean(axis=(2, 3))  # global average pool
    logits = x @ params["fc"]
    return logits - logits.max(axis=-1, keepdims=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-5), (np.float64, 1e-12)], ids=["f32",
                                                                                      "f64"])
def test_convnet(dtype, rtol, backend):
    rng = np.random.default_rng(0)
    params = {"conv1": rng.standard_normal((4, 1, 3, 3)).astype(dtype),
              "b1": rng.standard_normal(4).astype(dtype),
              "conv2": (rng.standard_normal((6, 4, 3, 3)) * 0.3).astype(dtype),
              "b2": rng.standard_normal(6).astype(dtype),
              "fc": rng.standard_normal((6, 10)).astype(dtype)}
    images = rng.random((2, 1, 8, 8)).astype(dtype)
    np.testing.assert_allclose(conv2d(images, params["conv1"], padding=1),
                               conv2d_reference(images, params["conv1"], padding=1),
                               rtol=rtol * 10, atol=rtol * 10)
    check_jit(convnet, images, params, backend=backend, rtol=rtol, atol=rtol)
