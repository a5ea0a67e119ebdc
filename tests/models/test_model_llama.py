"""A LLaMA-style block in plain numpy: RMSNorm, rotary embeddings, SwiGLU, -inf masking."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit


def rms_norm(x, weight, eps=1e-6):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rotary(x, base=10000.0):
    seq, d = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    angles = np.outer(np.arange(seq), inv_freq).astype(x.dtype)
    cos, sin = np.cos(angles), np.sin(angles)
    even, odd = x[..., ::2], x[..., 1::2]
    return np.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1).reshape(x.shape)


def silu(x):
    return x / (1 + np.exp(-x))


def heads(x, n):
    b, s, d = x.shape
    return x.reshape(b, s, n, d // n).transpose(0, 2, 1, 3)


def llama_block(x, p, n_head=4):
    h = rms_norm(x, p["attn_norm"])
    q, k, v = rotary(heads(h @ p["wq"], n_head)), rotary(heads(h @ p["wk"], n_head)), \
        heads(h @ p["wv"], n_head)
    b, s, d = x.shape
    scores = q @ k.transpose(0, 1, 3, 2) * (d // n_head) ** -0.5
    scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    x = x + (weights @ v).transpose(0, 2, 1, 3).reshape(b, s, d) @ p["wo"]
    h = rms_norm(x, p["mlp_norm"])
    return x + (silu(h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-5), (np.float64, 1e-12)],
                         ids=["f32", "f64"])
def test_llama_block(dtype, rtol, backend):
    rng = np.random.default_rng(0)
    width, hidden = 16, 32

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(dtype)
    params = {"wq": normal(width, width), "wk": normal(width, width),
              "wv": normal(width, width), "wo": normal(width, width),
              "w_gate": normal(width, hidden), "w_up": normal(width, hidden),
              "w_down": normal(hidden, width), "attn_norm": 1 + normal(width),
              "mlp_norm": 1 + normal(width)}
    x = rng.standard_normal((2, 6, width)).astype(dtype)
    out = check_jit(llama_block, x, params, backend=backend, rtol=rtol, atol=rtol)
    assert out.dtype == dtype
