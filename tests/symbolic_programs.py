"""Programs the symbolic-dimension tests of every backend compile once and call with many
sizes (tests/test_symbolic_passes.py, tests/test_cpu_symbolic.py, tests/test_symbolic_writes.py,
tests/cuda/test_cuda_symbolic.py, tests/cuda/test_cuda_gpu.py): one copy, so that the backends
are held to the same programs."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import jitc


def mlp(x, w1, b1, w2):
    return np.tanh(x @ w1 + b1) @ w2


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, gain):
    centred = x - x.sum(axis=-1, keepdims=True) / x.shape[-1]
    variance = (centred * centred).sum(axis=-1, keepdims=True) / x.shape[-1]
    return centred / np.sqrt(variance + 1e-5) * gain + 1.0


# A program that writes into its arguments and a local array, whole-array writes only
# (tests/test_symbolic_writes.py, and on a GPU tests/cuda/test_cuda_gpu.py).
def normalize_in_place(x, gain, out):
    x -= x.mean(axis=0)
    x *= gain
    np.copyto(out, x * 2.0)
    np.add(out, 1.0, out=out)
    scratch = np.zeros_like(x)
    scratch[...] = x
    scratch += 0.5
    return scratch.sum(axis=1)


def normalize_arguments(n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(n)
    return (rng.standard_normal((n, 4)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32), np.zeros((n, 4), np.float32))


def agree_in_place(f, n: int) -> None:
    """`f` (normalize_in_place compiled) called with fresh arguments of `n` rows gives numpy's
    result and leaves every argument as numpy leaves it."""
    want_args, got_args = normalize_arguments(n), normalize_arguments(n)
    # numpy's mean over 0 rows warns (the mean of nothing); the compiled code does not.
    with np.errstate(invalid="ignore"), \
            pytest.warns(RuntimeWarning) if n == 0 else contextlib.nullcontext():
        want = normalize_in_place(*want_args)
    with np.errstate(invalid="ignore"):
        got = np.asarray(f(*got_args))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    for g, w in zip(got_args, want_args, strict=True):  # the side effects on every argument
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


RNG = np.random.default_rng(5)
W1 = RNG.standard_normal((48, 32)).astype(np.float32)
B1 = RNG.standard_normal(32).astype(np.float32)
W2 = RNG.standard_normal((32, 10)).astype(np.float32)
GAIN = RNG.standard_normal(16).astype(np.float32)
ROWS = RNG.standard_normal((6, 48)).astype(np.float32)


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def attention(q, k, v):
    scores = q @ k.T
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def _while(x):
    return jitc.lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * 2.0 + 1.0, c[1] + 1),
                               (x, 0))[0]


def _cond(x):
    return jitc.lax.cond(x.sum() > 0, lambda a: a * 2.0,
                         lambda a: a - a.sum(axis=1, keepdims=True), x)


# name: (program, argument specs, the arguments for a size). Every backend with symbolic
# extents runs all of them (on cuda: tests/cuda/symbolic_cases.py).
PROGRAMS = {
    "elementwise with broadcasting": (
        lambda x, y: np.tanh(x * 2.0 + y) - x.sum(axis=1, keepdims=True), ("f32[B,10]", "f32[10]"),
        lambda n: (floats(n, 10), floats(10))),
    "elementwise with a broadcast column": (
        lambda x, y, z: np.tanh(x * 2.0 + y) - z, ("f32[B,10]", "f32[10]", "f32[B,1]"),
        lambda n: (floats(n, 10), floats(10), floats(n, 1))),
    "two symbols": (
        lambda x, y: x.reshape(-1, 1) * y.reshape(1, -1) + 1.0, ("f32[n]", "f32[m]"),
        lambda n: (floats(n), floats(n % 5 + 3))),
    "transpose and flatten": (lambda x: (x.T * 3.0).reshape(-1), ("f32[B,16]",),
                              lambda n: (floats(n, 16),)),
    "concatenate along the symbolic axis": (
        lambda x: np.concatenate([x, x * 2.0]) + 1.0, ("f32[B,16]",),
        lambda n: (floats(n, 16),)),
    "concatenate along a static axis": (
        lambda x, y: np.concatenate([x, y], axis=1) * 2.0, ("f32[B,3]", "f32[B,5]"),
        lambda n: (floats(n, 3), floats(n, 5))),
    "pad (reads an operand that may be empty only inside it)": (
        lambda x: np.pad(x, 1) * 2.0, ("f32[B,3]",), lambda n: (floats(n, 3),)),
    "sum over the symbolic axis": (lambda x: x.sum(axis=0) * 2.0, ("f32[B,16]",),
                                   lambda n: (floats(n, 16),)),
    "sum over a static axis": (lambda x: x.sum(axis=1) + 1.0, ("f32[B,16]",),
                               lambda n: (floats(n, 16),)),
    "sum over a long static axis": (lambda x: x.sum(axis=1) + 1.0, ("f32[B,100]",),
                                    lambda n: (floats(n, 100),)),
    "long symbolic rows": (lambda x: x.sum(axis=-1) - x.min(axis=-1, initial=9.0),
                           ("f32[3,S]",), lambda n: (floats(3, 41 * n),)),
    "symbolic rows of a symbolic length": (lambda x: x.max(axis=-1, initial=-9.0),
                                           ("f32[n,m]",), lambda n: (floats(n, n % 4 + 1),)),
    "sum over a static major axis": (lambda x: x.sum(axis=0) - 1.0, ("f32[5,B]",),
                                     lambda n: (floats(5, n * 3),)),
    "whole sum": (lambda x: x.sum() + 1.0, ("f32[B,16]",), lambda n: (floats(n, 16),)),
    "argmax over a static axis": (lambda x: np.argmax(x, axis=1), ("f32[B,5]",),
                                  lambda n: (floats(n, 5),)),
    "softmax over a symbolic batch": (softmax, ("f32[B,10]",), lambda n: (floats(n, 10),)),
    "softmax along a symbolic axis": (softmax, ("f32[4,S]",), lambda n: (floats(4, n),)),
    "layernorm": (layernorm, ("f32[B,16]", "f32[16]"), lambda n: (floats(n, 16), GAIN)),
    "matmul, M symbolic": (lambda x, w: x @ w, ("f32[M,48]", "f32[48,32]"),
                           lambda n: (floats(n, 48), W1)),
    "matmul, N symbolic": (lambda x, y: x @ y, ("f32[6,48]", "f32[48,N]"),
                           lambda n: (ROWS, floats(48, n))),
    "matmul, K symbolic": (lambda x, y: x @ y, ("f32[6,K]", "f32[K,40]"),
                           lambda n: (floats(6, n), floats(n, 40))),
    "matmul, M, N and K symbolic": (lambda x, y: x @ y, ("f32[M,K]", "f32[K,N]"),
                                    lambda n: (floats(n, 2 * n + 1), floats(2 * n + 1, 70))),
    "batched matmul, batch symbolic": (lambda x, y: x @ y, ("f32[B,5,7]", "f32[B,7,3]"),
                                       lambda n: (floats(n, 5, 7), floats(n, 7, 3))),
    "attention": (attention, ("f32[S,64]", "f32[S,64]", "f32[S,64]"),
                  lambda n: (floats(n, 64), floats(n, 64), floats(n, 64))),
    "mlp": (mlp, ("f32[B,48]", "f32[48,32]", "f32[32]", "f32[32,10]"),
            lambda n: (floats(n, 48), W1, B1, W2)),
    "sort and argsort rows": (
        lambda x: np.sort(x, axis=-1) * 2.0 + np.argsort(x, axis=-1), ("f32[B,16]",),
        lambda n: (floats(n, 16),)),
    "while loop": (_while, ("f32[B,3]",), lambda n: (floats(n, 3),)),
    "conditional": (_cond, ("f32[B,3]",), lambda n: (floats(n, 3) + 0.2 * (n % 2),)),
}
