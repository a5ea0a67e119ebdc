"""A GPT-2 transformer block in plain numpy, traced by jitc and compared with numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit

import jitc

# -- the model, as it would be written for numpy ------------------------------------------------


def layer_norm(x, g, b, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(variance + eps) + b


# Under NEP 50 `np.sqrt(d)` is a float64 numpy scalar, so with the default `sqrt=np.sqrt` a
# float32 model computes from there on in float64, in numpy and identically in jitc. Passing
# `sqrt=math.sqrt` (a Python float, weakly typed) keeps everything in float32.


def gelu(x, sqrt=np.sqrt):
    return 0.5 * x * (1 + np.tanh(sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def linear(x, w, b):
    return x @ w + b


def split_heads(x, n_head):
    batch, seq, width = x.shape
    return x.reshape(batch, seq, n_head, width // n_head).transpose(0, 2, 1, 3)


def merge_heads(x):
    batch, heads, seq, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * d)


def attention(q, k, v, mask, sqrt=np.sqrt):
    d = q.shape[-1]
    scores = q @ k.swapaxes(-1, -2) / sqrt(d) + mask
    return softmax(scores) @ v


def causal_self_attention(x, attn, n_head, sqrt=np.sqrt):
    qkv = linear(x, attn["w_qkv"], attn["b_qkv"])
    q, k, v = (split_heads(t, n_head) for t in np.split(qkv, 3, axis=-1))
    seq = x.shape[1]
    mask = (1 - np.tri(seq, dtype=x.dtype)) * -1e10
    out = merge_heads(attention(q, k, v, mask, sqrt))
    return linear(out, attn["w_out"], attn["b_out"])


def mlp(x, p, sqrt=np.sqrt):
    return linear(gelu(linear(x, p["w_fc"], p["b_fc"]), sqrt), p["w_proj"], p["b_proj"])


def transformer_block(x, params, n_head=4, sqrt=np.sqrt):
    x = x + causal_self_attention(layer_norm(x, **params["ln_1"]), params["attn"], n_head, sqrt)
    return x + mlp(layer_norm(x, **params["ln_2"]), params["mlp"], sqrt)


def gpt2_logits(tokens, params, n_head=4, sqrt=math.sqrt):
    """Token and position embeddings, two blocks, final layer norm, tied output embedding."""
    seq = tokens.shape[-1]
    x = params["wte"][tokens] + params["wpe"][np.arange(seq)]
    for block in params["blocks"]:
        x = transformer_block(x, block, n_head, sqrt)
    x = layer_norm(x, **params["ln_f"])
    return x @ params["wte"].T


def masked_attention_scores(q, k):
    """The mask written with np.triu and np.where instead of adding -1e10."""
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    seq = scores.shape[-1]
    future = np.triu(np.ones((seq, seq), dtype=bool), k=1)
    return softmax(np.where(future, -1e10, scores))


# -- parameters ---------------------------------------------------------------------------------

WIDTH, HEADS, SEQ, BATCH, VOCAB = 32, 4, 8, 2, 50


def block_params(rng, dtype, width=WIDTH):
    def normal(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(dtype)
    return {
        "ln_1": {"g": 1 + normal(width), "b": normal(width)},
        "attn": {"w_qkv": normal(width, 3 * width), "b_qkv": normal(3 * width),
                 "w_out": normal(width, width), "b_out": normal(width)},
        "ln_2": {"g": 1 + normal(width), "b": normal(width)},
        "mlp": {"w_fc": normal(width, 4 * width), "b_fc": normal(4 * width),
                "w_proj": normal(4 * width, width), "b_proj": normal(width)},
    }


def model_params(rng, dtype):
    return {
        "wte": (rng.standard_normal((VOCAB, WIDTH)) * 0.5).astype(dtype),
        "wpe": (rng.standard_normal((SEQ, WIDTH)) * 0.1).astype(dtype),
        "blocks": [block_params(rng, dtype) for _ in range(2)],
        "ln_f": {"g": np.ones(WIDTH, dtype), "b": np.zeros(WIDTH, dtype)},
    }


DTYPES = [pytest.param(np.float32, 1e-5, id="f32"), pytest.param(np.float64, 1e-11, id="f64")]
GLOBAL_PARAMS = block_params(np.random.default_rng(1), np.float32)


def block_with_global_weights(x):
    return transformer_block(x, GLOBAL_PARAMS, HEADS)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sqrt", [np.sqrt, math.sqrt], ids=["np.sqrt", "math.sqrt"])
@pytest.mark.parametrize("dtype,rtol", DTYPES)
def test_block_weights_as_argument(dtype, rtol, sqrt, backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SEQ, WIDTH)).astype(dtype)
    out = check_jit(transformer_block, x, block_params(rng, dtype), HEADS, sqrt, backend=backend,
                    rtol=rtol, atol=rtol, static_argnames=("n_head", "sqrt"))
    assert out.dtype == (np.float64 if sqrt is np.sqrt else dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_weights_as_globals(backend):
    x = np.random.default_rng(0).standard_normal((BATCH, SEQ, WIDTH)).astype(np.float32)
    check_jit(block_with_global_weights, x, backend=backend, atol=1e-5)
    # The weights are read at each call: implicit parameters after x, nothing baked in.
    jitted = jitc.jit(block_with_global_weights, backend=backend)
    lowered = jitted.lower(x)
    weights = [w for layer in GLOBAL_PARAMS.values() for w in layer.values()]
    assert len(lowered.module.entry.parameters) == 1 + len(weights)
    if backend == "cuda":
        return  # tests/cuda runs this test to check the PTX only
    jitted(x)
    GLOBAL_PARAMS["attn"]["w_out"] *= 2.0  # changed in place between calls: seen
    try:
        np.testing.assert_allclose(jitted(x), block_with_global_weights(x), atol=1e-5,
                                   rtol=1e-5)
    finally:
        GLOBAL_PARAMS["attn"]["w_out"] /= 2.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", DTYPES)
def test_gpt2_logits(dtype, rtol, backend):
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, VOCAB, (BATCH, SEQ))
    logits = check_jit(gpt2_logits, tokens, model_params(rng, dtype), backend=backend,
                       rtol=rtol * 10, atol=rtol * 10, static_argnames="n_head")
    assert logits.shape == (BATCH, SEQ, VOCAB) and logits.dtype == dtype


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,rtol", DTYPES)
def test_masked_scores_with_triu_and_where(dtype, rtol, backend):
    rng = np.random.default_rng(3)
    q, k = (rng.standard_normal((BATCH, HEADS, SEQ, 8)).astype(dtype) for _ in range(2))
    scores = check_jit(masked_attention_scores, q, k, backend=backend, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(scores.sum(-1), 1, rtol=rtol * 10)
    assert (np.triu(scores, k=1) == 0).all()
