"""isposinf and isneginf, composed from numpy's ufuncs as numpy composes them (iscomplex,
isreal and their `obj` forms are with the complex functions, jitc/numpy/complexes.py)."""

from __future__ import annotations

import numpy as np

from jitc.numpy._core import implements, lift, unsupported
from jitc.tracing.tracer import Tracer


def _infinite_with_sign(x: object, negative: bool, name: str, out: object) -> Tracer:
    if out is not None:
        raise unsupported(f"numpy.{name}(..., out=...)",
                          "Traced arrays are immutable: use the returned value instead.")
    t = lift(x)
    try:
        sign = np.signbit(t)
    except TypeError:
        raise TypeError(f"This operation is not supported for {t.dtype} values because it "
                        "would be ambiguous.") from None
    return np.logical_and(np.isinf(t), sign if negative else np.logical_not(sign))


@implements(np.isposinf)
def isposinf(x, out=None):
    return _infinite_with_sign(x, False, "isposinf", out)


@implements(np.isneginf)
def isneginf(x, out=None):
    return _infinite_with_sign(x, True, "isneginf", out)


__all__ = ["isneginf", "isposinf"]
