"""Products of traced arrays besides dot and einsum: kron, cross, and the 1-d correlate and
convolve, the last two as one `convolution` op, each following numpy's own definition."""

from __future__ import annotations

import numpy as np

from jitc.ir import ops
from jitc.ir.types import TensorType
from jitc.numpy._core import convert, implements, lift, lift_all, normalize_axis, unsupported
from jitc.numpy.shapes import expand_dims, moveaxis, reshape, slice_axis, squeeze, stack
from jitc.tracing.errors import ShapeError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


@implements(np.kron)
def kron(a, b):
    """numpy's recipe: both arrays to one rank, interleaved new axes, a product, a reshape.
    numpy makes arrays of Python scalars first: they promote as int64 or float64."""
    a, b = (x if isinstance(x, Tracer) else lift(np.asarray(x)) for x in (a, b))
    nda, ndb = a.ndim, b.ndim
    if nda == 0 or ndb == 0:
        return np.multiply(a, b)
    nd = max(nda, ndb)
    a_shape = (1,) * max(0, ndb - nda) + a.shape
    b_shape = (1,) * max(0, nda - ndb) + b.shape
    a_arr = reshape(a, a_shape)
    b_arr = reshape(b, b_shape)
    a_arr = expand_dims(a_arr, tuple(range(1, nd * 2, 2)))
    b_arr = expand_dims(b_arr, tuple(range(0, nd * 2, 2)))
    return reshape(np.multiply(a_arr, b_arr), tuple(x * y for x, y in zip(a_shape, b_shape)))


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = lift(a), lift(b)
    a = moveaxis(a, normalize_axis(axisa, a.ndim, "axisa"), -1)
    b = moveaxis(b, normalize_axis(axisb, b.ndim, "axisb"), -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(located("incompatible dimensions for cross product\n(dimension "
                                 "must be 2 or 3)"))
    if a.shape[-1] != b.shape[-1]:
        raise unsupported("numpy.cross of a 2-vector with a 3-vector",
                          "Pad the 2-vectors with a zero third component first.")
    a, b = lift_all([a, b])

    def part(x: Tracer, i: int) -> Tracer:
        return squeeze(slice_axis(x, x.ndim - 1, i, i + 1), -1)
    a0, a1, b0, b1 = part(a, 0), part(a, 1), part(b, 0), part(b, 1)
    z = np.subtract(np.multiply(a0, b1), np.multiply(a1, b0))
    if a.shape[-1] == 2:
        return z  # numpy 2 deprecates 2-vectors and gives the z component alone
    a2, b2 = part(a, 2), part(b, 2)
    x = np.subtract(np.multiply(a1, b2), np.multiply(a2, b1))
    y = np.subtract(np.multiply(a2, b0), np.multiply(a0, b2))
    result = stack(np.broadcast_arrays(x, y, z), axis=-1)
    return moveaxis(result, -1, normalize_axis(axisc, result.ndim, "axisc"))


def _correlate_full(a: Tracer, v: Tracer) -> Tracer:
    """Every overlap of v slid along a (len(a) >= len(v)): numpy's mode 'full'. Complex
    values are correlated part by part (the convolution op takes real values)."""
    if a.dtype.kind == "c":
        from jitc.numpy.complexes import make, parts
        (ar, ai), (vr, vi) = parts(a), parts(v)
        return make(np.subtract(_correlate_full(ar, vr), _correlate_full(ai, vi)),
                    np.add(_correlate_full(ar, vi), _correlate_full(ai, vr)))
    n, m = a.shape[0], v.shape[0]
    lhs = reshape(a, (1, 1, n))
    rhs = reshape(v, (1, 1, m))
    out = emit(ops.CONVOLUTION, [lhs, rhs], {"dim_labels": "bf0_oi0->bf0",
                                             "padding": ((m - 1, m - 1),)},
               TensorType(lhs.aval.dtype, (1, 1, n + m - 1)))
    return reshape(out, (n + m - 1,))


def _correlate(a, v, mode: str, name: str, conjugate: bool = False) -> Tracer:
    """numpy's correlation of 1-d a and v; `conjugate` (numpy.correlate) takes v's complex
    conjugate first, as numpy does before it orders the operands."""
    a, v = lift(a), lift(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(located(f"numpy.{name}: object too deep for desired array (both "
                                 "arguments must be 1-d)"))
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError(located(f"numpy.{name}: {'a' if a.shape[0] == 0 else 'v'} cannot "
                                 "be empty"))
    if mode not in ("full", "same", "valid"):
        raise ValueError(located(f"numpy.{name}: mode must be one of 'valid', 'same', or "
                                 f"'full' (got {mode!r})"))
    a, v = lift_all([a, v])
    if conjugate:
        v = np.conj(v)
    boolean = a.dtype == np.bool_
    if boolean:  # numpy's bool correlation is an or of ands: a sum that is not zero
        a, v = convert(a, np.int64), convert(v, np.int64)
    swapped = v.shape[0] > a.shape[0]
    if swapped:
        a, v = v, a
    n, m = a.shape[0], v.shape[0]
    full = _correlate_full(a, v)
    if mode == "same":
        start = (m - 1) - m // 2
        full = slice_axis(full, 0, start, start + n)
    elif mode == "valid":
        full = slice_axis(full, 0, m - 1, n)
    if swapped:
        full = np.flip(full)
    return np.not_equal(full, 0) if boolean else full


@implements(np.correlate)
def correlate(a, v, mode="valid"):
    return _correlate(a, v, mode, "correlate", conjugate=True)


@implements(np.convolve)
def convolve(a, v, mode="full"):
    a, v = lift(a), lift(v)
    if v.ndim == 1 and a.ndim == 1 and v.shape[0] > a.shape[0]:
        a, v = v, a
    if v.ndim != 1:
        raise ShapeError(located("numpy.convolve: object too deep for desired array"))
    return _correlate(a, np.flip(v), mode, "convolve")
