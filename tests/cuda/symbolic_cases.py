"""The symbolic programs the cuda tests run (tests/cuda/test_cuda_symbolic.py on the grid
simulator, tests/cuda/test_cuda_gpu.py on a GPU): one table, so that the simulator and the
device are held to the same programs and sizes."""

from __future__ import annotations

import numpy as np
from symbolic_programs import mlp, softmax

RNG = np.random.default_rng(13)
SIZES = (0, 1, 2, 7, 33)
W1 = RNG.standard_normal((48, 32)).astype(np.float32)
B1 = RNG.standard_normal(32).astype(np.float32)
W2 = RNG.standard_normal((32, 10)).astype(np.float32)
ROWS = RNG.standard_normal((6, 48)).astype(np.float32)


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# name: (program, argument specs, the arguments for a size)
PROGRAMS = {
    "elementwise with broadcasting": (
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
    "pad": (lambda x: np.pad(x, 1) * 2.0, ("f32[B,3]",), lambda n: (floats(n, 3),)),
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
    "mlp": (mlp, ("f32[B,48]", "f32[48,32]", "f32[32]", "f32[32,10]"),
            lambda n: (floats(n, 48), W1, B1, W2)),
}
