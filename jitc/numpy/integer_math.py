"""gcd and lcm: numpy's integer loops (Euclid's algorithm on the magnitudes, taken in the
unsigned type of the same width so that the most negative value has one; lcm as |a / gcd * b|
with wrapping), run for all elements at once in a while loop that ends when every element has
finished."""

from __future__ import annotations

import numpy as np

from jitc import lax
from jitc.ir import ops
from jitc.numpy._core import convert, lift
from jitc.numpy.comparisons import compare
from jitc.numpy.reductions import any as any_
from jitc.numpy.shapes import broadcast_arrays
from jitc.numpy.ufuncs import UFUNCS, select
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def _zero(x: Tracer, value: int = 0) -> Tracer:
    return lift(np.asarray(value, dtype=x.dtype), trace=x.trace)


def _magnitude(x: Tracer) -> Tracer:
    # numpy's npy_abs: the most negative value stays itself, as in C.
    return x if x.dtype.kind == "u" else emit(ops.ABS, [x])


def _unsigned_magnitude(x: Tracer) -> Tracer:
    if x.dtype.kind == "u":
        return x
    wrapped = convert(x, np.dtype(f"u{x.dtype.itemsize}"))
    negated = emit(ops.SUB, [_zero(wrapped), wrapped])
    return select(compare(x, _zero(x), "lt"), negated, wrapped)


def _gcd(a: Tracer, b: Tracer) -> Tracer:
    dtype = a.dtype
    a, b = broadcast_arrays(_unsigned_magnitude(a), _unsigned_magnitude(b))

    def running(state: tuple[Tracer, Tracer]) -> Tracer:
        return any_(compare(state[0], _zero(state[0]), "ne"))

    def euclid_step(state: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        a, b = state
        busy = compare(a, _zero(a), "ne")
        divisor = select(busy, a, _zero(a, 1))
        return select(busy, emit(ops.REM, [b, divisor]), a), select(busy, a, b)

    return convert(lax.while_loop(running, euclid_step, (a, b))[1], dtype)


def _lcm(a: Tracer, b: Tracer) -> Tracer:
    divisor = _gcd(a, b)
    dtype = divisor.dtype
    if dtype.kind == "i" and dtype.itemsize < 4:
        # C computes int8 and int16 in int: |a / gcd * b| is taken before it wraps.
        a, b, divisor = (convert(v, np.int32) for v in (a, b, divisor))
    found = compare(divisor, _zero(divisor), "ne")
    safe = select(found, divisor, _zero(divisor, 1))
    product = emit(ops.MUL, [emit(ops.DIV, [a, safe]), b])
    return convert(select(found, _magnitude(product), _zero(divisor)), dtype)


UFUNCS[np.gcd] = _gcd
UFUNCS[np.lcm] = _lcm
