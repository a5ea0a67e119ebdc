"""Matrices built from vectors, and the diagonal written in place: diagflat, vander,
tril_indices_from, triu_indices_from and fill_diagonal."""

from __future__ import annotations

import numpy as np

from jitc import lax
from jitc.numpy._core import check_static_int, implements, lift
from jitc.numpy.matrices import diag
from jitc.numpy.scatter import put
from jitc.numpy.shapes import concatenate, flip, reshape, stack, transpose
from jitc.tracing.errors import ShapeError, TraceError, located
from jitc.tracing.tracer import Tracer


@implements(np.diagflat)
def diagflat(v, k=0):
    return diag(reshape(lift(v), (-1,)), check_static_int(k, "numpy.diagflat's k"))


@implements(np.vander)
def vander(x, N=None, increasing=False):
    v = lift(x)
    if v.ndim != 1:
        raise ValueError(located("x must be a one-dimensional array or sequence."))
    n = v.shape[0] if N is None else check_static_int(N, "numpy.vander's N")
    if n < 0:
        raise ValueError(located(f"negative dimensions are not allowed (numpy.vander's N={n})"))
    # numpy fills an array of promote_types(x.dtype, int) and multiplies along each row.
    dtype = np.promote_types(v.dtype, np.int64)
    v = lift(v, dtype)
    ones = lift(np.ones(v.shape, dtype), trace=v.trace)
    matrix = transpose(_powers(ones, v, n))
    return matrix if increasing else flip(matrix, axis=1)


# Past this many columns the powers come from a loop rather than one multiply each.
_UNROLLED_POWERS = 32


def _powers(ones: Tracer, v: Tracer, n: int) -> Tracer:
    """Rows 1, v, v*v, (v*v)*v, ... (n of them), multiplied one after another as numpy's
    multiply.accumulate does, so that float results round as numpy's do."""
    if n == 0:
        return lift(np.ones((0, ones.shape[0]), ones.dtype), trace=ones.trace)
    if n <= _UNROLLED_POWERS:
        rows = [ones]
        for _ in range(n - 1):
            rows.append(np.multiply(rows[-1], v))
        return stack(rows)

    def step(power: Tracer, _: object) -> tuple[Tracer, Tracer]:
        following = np.multiply(power, v)
        return following, following
    _, rest = lax.scan(step, ones, length=n - 1)
    return concatenate([reshape(ones, (1, -1)), rest])


def _square_shape(arr: object, name: str) -> tuple[int, ...]:
    shape = arr.shape if isinstance(arr, Tracer) else np.shape(arr)
    if len(shape) != 2:
        raise ValueError(located(f"input array must be 2-d (numpy.{name} of an array of shape "
                                 f"{tuple(shape)})"))
    return shape


@implements(np.tril_indices_from)
def tril_indices_from(arr, k=0):
    rows, cols = _square_shape(arr, "tril_indices_from")
    return np.tril_indices(rows, check_static_int(k, "numpy.tril_indices_from's k"), cols)


@implements(np.triu_indices_from)
def triu_indices_from(arr, k=0):
    rows, cols = _square_shape(arr, "triu_indices_from")
    return np.triu_indices(rows, check_static_int(k, "numpy.triu_indices_from's k"), cols)


@implements(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False):
    if not isinstance(a, Tracer):
        raise TraceError(located(
            "numpy.fill_diagonal writes into a numpy array that is not traced; jitc can only "
            "write traced arrays in place. Pass the array as an argument of the jitted "
            "function, or copy it first (a = np.array(a) inside the function)."))
    if a.ndim < 2:
        raise ValueError(located("array must be at least 2-d"))
    if a.ndim == 2:
        # Past a tall matrix's square part the diagonal goes on only when wrap=True.
        step = a.shape[1] + 1
        end = None if wrap else a.shape[1] * a.shape[1]
    else:
        if len(set(a.shape)) != 1:
            raise ShapeError(located(f"All dimensions of input must be of equal length "
                                     f"(numpy.fill_diagonal of {a.aval.short()})"))
        step = 1 + int(np.cumprod(a.shape[:-1]).sum())
        end = None
    positions = np.arange(a.size)[:end:step]
    if positions.size:
        put(a, positions, val)


__all__ = ["diagflat", "fill_diagonal", "tril_indices_from", "triu_indices_from", "vander"]
