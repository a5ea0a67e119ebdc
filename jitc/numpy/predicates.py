"""Tests of values and of types: isposinf, isneginf, iscomplex, isreal, iscomplexobj and
isrealobj, composed from numpy's ufuncs as numpy composes them."""

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


def _constant_flags(x: Tracer, value: bool) -> Tracer:
    return lift(np.full(x.shape, value), trace=x.trace)


@implements(np.iscomplex)
def iscomplex(x):
    t = lift(x)
    if t.dtype.kind == "c":
        return np.not_equal(np.imag(t), 0)
    return _constant_flags(t, False)


@implements(np.isreal)
def isreal(x):
    t = lift(x)
    if t.dtype.kind == "c":
        return np.equal(np.imag(t), 0)
    return _constant_flags(t, True)


# The answer depends on the dtype alone, which tracing knows: a Python bool, as in numpy.
@implements(np.iscomplexobj)
def iscomplexobj(x):
    return bool(lift(x).dtype.kind == "c")


@implements(np.isrealobj)
def isrealobj(x):
    return not iscomplexobj(x)


__all__ = ["iscomplex", "iscomplexobj", "isneginf", "isposinf", "isreal", "isrealobj"]
