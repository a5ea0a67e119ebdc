"""An MNIST-style MLP classifier and standalone softmax / layer norm, in plain numpy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit


def relu(x):
    return np.maximum(x, 0)


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    sigma = x.std(axis=-1, keepdims=True)
    return gamma * (x - mu) / (sigma + eps) + beta


def mlp_forward(params, images):
    """784-512-512-10 in shape (smaller here): flatten, two relu layers, logits."""
    x = images.reshape(images.shape[0], -1)
    for w, b in params[:-1]:
        x = relu(x @ w + b)
    w, b = params[-1]
    logits = x @ w + b
    return {"probs": softmax(logits), "pred": np.argmax(logits, axis=-1),
            "confidence": softmax(logits).max(axis=1)}


def cross_entropy(params, images, labels):
    logits = mlp_forward(params, images)["probs"]
    picked = logits[np.arange(labels.shape[0]), labels]
    return -np.mean(np.log(picked))


def one_hot_accuracy(params, images, labels):
    pred = mlp_forward(params, images)["pred"]
    one_hot = (labels[:, None] == np.arange(10)).astype(np.float32)
    return np.mean(one_hot[np.arange(len(labels)), pred])


def init_mlp(rng, sizes, dtype):
    return [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype),
             (rng.standard_normal(n) * 0.1).astype(dtype))
            for m, n in itertools.pairwise(sizes)]


DTYPES = [pytest.param(np.float32, 1e-5, id="f32"), pytest.param(np.float64, 1e-12, id="f64")]
SIZES = [14 * 14, 64, 64, 10]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", DTYPES)
def test_mlp(dtype, rtol, backend):
    rng = np.random.default_rng(0)
    params = init_mlp(rng, SIZES, dtype)
    images = rng.random((16, 14, 14)).astype(dtype)
    labels = rng.integers(0, 10, 16)
    out = check_jit(mlp_forward, params, images, backend=backend, rtol=rtol, atol=rtol)
    assert out["pred"].dtype == np.int64
    check_jit(cross_entropy, params, images, labels, backend=backend, rtol=rtol, atol=rtol)
    check_jit(one_hot_accuracy, params, images, labels, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", DTYPES)
@pytest.mark.parametrize("shape", [(10,), (4, 7), (2, 3, 16)], ids=str)
def test_softmax_and_layer_norm(shape, dtype, rtol, backend):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    gamma, beta = rng.standard_normal(shape[-1:]).astype(dtype), np.zeros(shape[-1], dtype)
    check_jit(softmax, x, backend=backend, rtol=rtol, atol=rtol)
    check_jit(log_softmax, x, backend=backend, rtol=rtol, atol=rtol)
    check_jit(layer_norm, x, gamma, beta, backend=backend, rtol=rtol, atol=rtol)
    if x.ndim > 1:
        check_jit(lambda x: softmax(x, axis=0), x, backend=backend, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_of_large_logits_is_stable(backend):
    x = np.array([[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4]], np.float32)
    probs = check_jit(softmax, x, backend=backend)
    assert np.isfinite(probs).all()
