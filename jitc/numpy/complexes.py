"""Complex numbers in traced code: the parts of a complex array, and the ufuncs whose complex
loops jitc traces.

The IR has complex dtypes and the ops that numpy defines on them (jitc/ir/ops/complex.py);
`COMPLEX_UFUNCS` lists the ufuncs traced with complex operands. Any other ufunc given complex
values is refused by name (see `call_ufunc`), never computed on a part of the value.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from jitc.ir import ops
from jitc.numpy._core import implements, lift, unsupported
from jitc.numpy.ufuncs import compare
from jitc.tracing.errors import user_location
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def is_complex(x: Tracer) -> bool:
    return x.dtype.kind == "c"


def parts(x: Tracer) -> tuple[Tracer, Tracer]:
    return emit(ops.REAL, [x]), emit(ops.IMAG, [x])


def make(re: Tracer, im: Tracer) -> Tracer:
    return emit(ops.COMPLEX, [re, im])


@implements(np.real)
def real(val):
    x = lift(val)
    return emit(ops.REAL, [x]) if is_complex(x) else x


@implements(np.imag)
def imag(val):
    x = lift(val)
    if is_complex(x):
        return emit(ops.IMAG, [x])
    return emit(ops.BROADCAST_IN_DIM, [lift(np.zeros((), x.dtype), trace=x.trace)],
                {"dims": []}, x.aval)


def conj(x):
    """ndarray.conj and numpy.conjugate: the imaginary part negated (real arrays as they are)."""
    x = lift(x)
    if not is_complex(x):
        return x
    re, im = parts(x)
    return make(re, emit(ops.NEG, [im]))


@implements(np.angle)
def angle(z, deg=False):
    x = lift(z)
    if not is_complex(x):
        x = lift(x, np.result_type(x.dtype, np.float64) if x.dtype.kind != "f" else None)
        zero = lift(np.zeros((), x.dtype), trace=x.trace)
        result = emit(ops.ATAN2, [zero, x])
    else:
        re, im = parts(x)
        result = emit(ops.ATAN2, [im, re])
    if deg:
        result = emit(ops.MUL, [result, lift(np.asarray(180 / np.pi, result.dtype),
                                             trace=result.trace)])
    return result


@implements(np.iscomplex)
def iscomplex(x):
    part = imag(x)
    return compare(part, lift(np.zeros((), part.dtype), trace=part.trace), "ne")


@implements(np.isreal)
def isreal(x):
    return emit(ops.NOT, [iscomplex(x)])


@implements(np.iscomplexobj)
def iscomplexobj(x) -> bool:
    return lift(x).dtype.kind == "c"


@implements(np.isrealobj)
def isrealobj(x) -> bool:
    return lift(x).dtype.kind != "c"


def warn_discarded_imaginary() -> None:
    """numpy's ComplexWarning for a complex to real conversion, given where the user's code
    converts (once per trace, as the conversion is traced once)."""
    loc = user_location()
    message = "Casting complex values to real discards the imaginary part"
    if loc is not None:
        warnings.warn_explicit(message, np.exceptions.ComplexWarning, loc.file, loc.line)
    else:
        warnings.warn(message, np.exceptions.ComplexWarning, stacklevel=3)


# -- ufuncs with complex loops --------------------------------------------------------------

def _isnan(x: Tracer) -> Tracer:
    re, im = parts(x)
    return emit(ops.OR, [compare(re, re, "ne"), compare(im, im, "ne")])


def _isfinite(x: Tracer) -> Tracer:
    re, im = parts(x)
    return emit(ops.AND, [emit(ops.IS_FINITE, [re]), emit(ops.IS_FINITE, [im])])


def _isinf(x: Tracer) -> Tracer:
    def inf(part: Tracer) -> Tracer:
        return emit(ops.AND, [emit(ops.NOT, [emit(ops.IS_FINITE, [part])]),
                              compare(part, part, "eq")])
    re, im = parts(x)
    return emit(ops.OR, [inf(re), inf(im)])


def _one_like(x: Tracer) -> Tracer:
    return lift(np.ones((), x.dtype), trace=x.trace)


def integer_power(x: Tracer, n: int) -> Tracer:
    """x ** n for a complex x and an integer n, |n| < 100, as numpy computes it: binary
    powering, then one complex division for a negative n."""
    if n == 0:
        return emit(ops.BROADCAST_IN_DIM, [_one_like(x)], {"dims": []}, x.aval)
    result, square, k = None, x, abs(n)
    while True:
        if k & 1:
            result = square if result is None else emit(ops.MUL, [result, square])
        k >>= 1
        if not k:
            break
        square = emit(ops.MUL, [square, square])
    assert result is not None
    return emit(ops.DIV, [_one_like(x), result]) if n < 0 else result


def power(x: Tracer, y: object) -> Tracer:
    exponent = y if not isinstance(y, Tracer) else y._known
    value = None if exponent is None else np.asarray(exponent)
    if value is not None and value.ndim == 0 and value.imag == 0 and \
            float(value.real).is_integer() and abs(float(value.real)) < 100:
        return integer_power(x, int(value.real))
    raise unsupported("numpy.power of complex values with an exponent that is not a constant "
                      "integer (|n| < 100)",
                      "Write the power as np.exp(y * np.log(x)) if that is what you need.")


COMPLEX_UFUNCS: dict[np.ufunc, Callable[..., Tracer]] = {
    np.isnan: _isnan, np.isfinite: _isfinite, np.isinf: _isinf, np.conjugate: conj,
}
# Ufuncs whose ordinary implementation is right for complex operands: ops the IR defines on
# complex values (numpy's formulas, jitc/passes/complex_split.py).
COMPLEX_AS_IS = frozenset({
    np.add, np.subtract, np.multiply, np.true_divide, np.negative, np.positive, np.square,
    np.reciprocal, np.absolute, np.exp, np.log, np.sqrt, np.sin, np.cos, np.tanh, np.equal,
    np.not_equal})


__all__ = ["COMPLEX_AS_IS", "COMPLEX_UFUNCS", "angle", "conj", "imag", "iscomplex",
           "iscomplexobj", "isreal", "isrealobj", "real"]
