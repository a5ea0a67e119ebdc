"""Programs the symbolic-dimension tests of every backend compile once and call with many
sizes (tests/test_symbolic_passes.py, tests/test_cpu_symbolic.py,
tests/cuda/test_cuda_symbolic.py): one copy, so that the backends are held to the same
programs."""

from __future__ import annotations

import numpy as np


def mlp(x, w1, b1, w2):
    return np.tanh(x @ w1 + b1) @ w2


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, gain):
    centred = x - x.sum(axis=-1, keepdims=True) / x.shape[-1]
    variance = (centred * centred).sum(axis=-1, keepdims=True) / x.shape[-1]
    return centred / np.sqrt(variance + 1e-5) * gain + 1.0
