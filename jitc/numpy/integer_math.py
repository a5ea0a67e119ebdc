"""gcd and lcm: numpy's integer loops, on the magnitudes taken in the unsigned type of the
same width (so that the most negative value has one) and the result's bits read back in the
argument's type: Euclid's algorithm for gcd, run for all elements at once in a while loop that
ends when every element has finished, and |a| / gcd * |b| (wrapping) for lcm."""

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


def _unsigned_magnitude(x: Tracer) -> Tracer:
    if x.dtype.kind == "u":
        return x
    wrapped = convert(x, np.dtype(f"u{x.dtype.itemsize}"))
    negated = emit(ops.SUB, [_zero(wrapped), wrapped])
    return select(compare(x, _zero(x), "lt"), negated, wrapped)


def _euclid(a: Tracer, b: Tracer) -> Tracer:
    """The gcd of unsigned a and b, of their broadcast shape."""
    a, b = broadcast_arrays(a, b)

    def running(state: tuple[Tracer, Tracer]) -> Tracer:
        return any_(compare(state[0], _zero(state[0]), "ne"))

    def euclid_step(state: tuple[Tracer, Tracer]) -> tuple[Tracer, Tracer]:
        a, b = state
        busy = compare(a, _zero(a), "ne")
        divisor = select(busy, a, _zero(a, 1))
        return select(busy, emit(ops.REM, [b, divisor]), a), select(busy, a, b)

    return lax.while_loop(running, euclid_step, (a, b))[1]


def _gcd(a: Tracer, b: Tracer) -> Tracer:
    return convert(_euclid(_unsigned_magnitude(a), _unsigned_magnitude(b)), a.dtype)


def _lcm(a: Tracer, b: Tracer) -> Tracer:
    ua, ub = _unsigned_magnitude(a), _unsigned_magnitude(b)
    divisor = _euclid(ua, ub)
    found = compare(divisor, _zero(divisor), "ne")
    safe = select(found, divisor, _zero(divisor, 1))
    product = emit(ops.MUL, [emit(ops.DIV, [ua, safe]), ub])
    return convert(select(found, product, _zero(divisor)), a.dtype)


UFUNCS[np.gcd] = _gcd
UFUNCS[np.lcm] = _lcm
