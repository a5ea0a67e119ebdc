"""Module-level state for the programs that keep it in globals (reset by each program)."""

import numpy as np

W1 = np.zeros(0)
B1 = np.zeros(0)
GRAD_W = np.zeros(0)
GRAD_B = np.zeros(0)
STATS: dict = {}
STEP = 0
EPS = 1e-5


def reset(rng: np.random.Generator) -> None:
    global W1, B1, GRAD_W, GRAD_B, STATS, STEP, EPS
    W1 = rng.standard_normal((6, 4))
    B1 = rng.standard_normal(4)
    GRAD_W = np.zeros((3, 5))
    GRAD_B = np.zeros(5)
    STATS = {"mean": np.zeros(4), "count": 0}
    STEP = 0
    EPS = 1e-5


def mlp(x):
    return np.tanh(x @ W1 + B1)


def rnn_accumulate(x, h, w, u):
    """One RNN step that accumulates gradients into module globals with +=."""
    global STEP
    h_new = np.tanh(x @ w + h @ u)
    delta = 1.0 - h_new ** 2
    GRAD_W[...] += x.T @ delta[:, :5] if delta.shape[1] >= 5 else 0.0
    GRAD_B[:] += delta[:, :5].sum(axis=0)
    STEP += 1
    return h_new


def running_stats(batch):
    n = STATS["count"]
    total = n + batch.shape[0]
    STATS["mean"] = (STATS["mean"] * n + batch.sum(axis=0)) / total
    STATS["count"] = total
    return STATS["mean"] / (batch.std() + EPS)
