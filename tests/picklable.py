"""Module-level functions for the pickling tests: pickle refers to functions by module and
name, so a process that unpickles them imports this module (tests/ on its path)."""

from __future__ import annotations

import numpy as np

import jitc


@jitc.jit
def decorated(x, y):
    return np.tanh(x) * y + 1.0


def normalize(x, axis):
    return x / np.abs(x).sum(axis=axis, keepdims=True)
