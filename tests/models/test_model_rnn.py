"""An LSTM and a tanh RNN unrolled over time by tracing a Python loop, in plain numpy."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit

import jitc


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def lstm_cell(x_t, h, c, w, b):
    """Gates from one matmul of [x_t, h]; split with np.split."""
    z = np.hstack([x_t, h]) @ w + b
    i, f, g, o = np.split(z, 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    return h, c


def lstm(xs, h0, c0, w, b):
    """xs: (time, batch, features). Returns every hidden state and the final (h, c)."""
    h, c = h0, c0
    outputs = []
    for t in range(xs.shape[0]):
        h, c = lstm_cell(xs[t], h, c, w, b)
        outputs.append(h)
    return np.stack(outputs), (h, c)


def lstm_sliced_gates(xs, params):
    """The same recurrence with separate weights, concatenate and gate slicing."""
    batch, hidden = xs.shape[1], params["u"].shape[0]
    h = np.zeros((batch, hidden), xs.dtype)
    c = np.zeros_like(h)
    for x_t in xs:
        z = np.concatenate([x_t, h], axis=1) @ np.vstack([params["w"], params["u"]])
        z = z + params["b"]
        i = sigmoid(z[:, :hidden])
        f = sigmoid(z[:, hidden:2 * hidden])
        g = np.tanh(z[:, 2 * hidden:3 * hidden])
        o = sigmoid(z[:, 3 * hidden:])
        c = f * c + i * g
        h = o * np.tanh(c)
    return h


def rnn(xs, h, w_xh, w_hh, b):
    for t in range(len(xs)):
        h = np.tanh(xs[t] @ w_xh + h @ w_hh + b)
    return h


def char_rnn_logits(tokens, params):
    """Embedding lookup per step, a tanh RNN, output projection of the last state."""
    h = np.zeros(params["w_hh"].shape[0], params["w_hh"].dtype)
    for t in range(tokens.shape[0]):
        h = np.tanh(params["embed"][tokens[t]] + h @ params["w_hh"])
    return h @ params["w_out"]


T, BATCH, FEATURES, HIDDEN = 6, 3, 5, 8
DTYPES = [pytest.param(np.float32, 1e-5, id="f32"), pytest.param(np.float64, 1e-12, id="f64")]


def _normal(rng, dtype, *shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", DTYPES)
def test_lstm(dtype, rtol, backend):
    rng = np.random.default_rng(0)
    xs = _normal(rng, dtype, T, BATCH, FEATURES, scale=1)
    h0, c0 = _normal(rng, dtype, BATCH, HIDDEN), _normal(rng, dtype, BATCH, HIDDEN)
    w = _normal(rng, dtype, FEATURES + HIDDEN, 4 * HIDDEN)
    b = _normal(rng, dtype, 4 * HIDDEN)
    outputs, (h, _) = check_jit(lstm, xs, h0, c0, w, b, backend=backend, rtol=rtol, atol=rtol)
    assert outputs.shape == (T, BATCH, HIDDEN) and h.dtype == dtype


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", DTYPES)
def test_lstm_sliced_gates(dtype, rtol, backend):
    rng = np.random.default_rng(1)
    xs = _normal(rng, dtype, T, BATCH, FEATURES, scale=1)
    params = {"w": _normal(rng, dtype, FEATURES, 4 * HIDDEN),
              "u": _normal(rng, dtype, HIDDEN, 4 * HIDDEN), "b": _normal(rng, dtype, 4 * HIDDEN)}
    check_jit(lstm_sliced_gates, xs, params, backend=backend, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", DTYPES)
def test_rnn(dtype, rtol, backend):
    rng = np.random.default_rng(2)
    xs = _normal(rng, dtype, T, BATCH, FEATURES, scale=1)
    args = (xs, np.zeros((BATCH, HIDDEN), dtype), _normal(rng, dtype, FEATURES, HIDDEN),
            _normal(rng, dtype, HIDDEN, HIDDEN), _normal(rng, dtype, HIDDEN))
    check_jit(rnn, *args, backend=backend, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_char_rnn_with_traced_tokens(backend):
    rng = np.random.default_rng(3)
    params = {"embed": _normal(rng, np.float32, 20, HIDDEN),
              "w_hh": _normal(rng, np.float32, HIDDEN, HIDDEN),
              "w_out": _normal(rng, np.float32, HIDDEN, 20)}
    tokens = rng.integers(0, 20, T)
    check_jit(char_rnn_logits, tokens, params, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unrolled_length_is_part_of_the_signature(backend):
    rng = np.random.default_rng(4)
    w_xh, w_hh = _normal(rng, np.float32, FEATURES, HIDDEN), _normal(rng, np.float32, HIDDEN,
                                                                     HIDDEN)
    b, h = np.zeros(HIDDEN, np.float32), np.zeros((BATCH, HIDDEN), np.float32)
    f = jitc.jit(rnn, backend=backend)
    for steps in (2, 5, 2):
        xs = _normal(rng, np.float32, steps, BATCH, FEATURES)
        np.testing.assert_allclose(f(xs, h, w_xh, w_hh, b), rnn(xs, h, w_xh, w_hh, b),
                                   rtol=1e-5, atol=1e-6)
    assert f.cache_size == 2
