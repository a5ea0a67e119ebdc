"""A small classifier for the examples of docs/profiling.md: two dense layers and a softmax,
with weights the module holds (jitc captures them as constants of the compiled code)."""

import numpy as np

rng = np.random.default_rng(0)
W1 = rng.standard_normal((784, 256), np.float32) * 0.05
b1 = np.zeros(256, np.float32)
W2 = rng.standard_normal((256, 10), np.float32) * 0.05
b2 = np.zeros(10, np.float32)


def classify(x):
    hidden = np.maximum(x @ W1 + b1, 0)
    logits = hidden @ W2 + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
