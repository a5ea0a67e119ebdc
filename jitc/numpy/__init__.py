"""jitc.numpy: numpy's API for traced code.

Every name here behaves like numpy's. Ufuncs (`jnp.tanh`, `jnp.add`, ...) *are* numpy's
ufuncs: they reach jitc through `Tracer.__array_ufunc__`. Other functions are jitc
implementations that fall back to numpy when no traced value is involved, so the same code runs
eagerly too. Plain numpy code (`np.sum(x)` on a tracer) goes through the same implementations
via `__array_function__`.
"""

import numpy as _np

# Imported for their registrations in the ufunc table.
from jitc.numpy import fft
from jitc.numpy import float_bits as _float_bits
from jitc.numpy import integer_math as _integer_math
from jitc.numpy._core import HANDLED
from jitc.numpy.complexes import (
    angle,
    conj,
    imag,
    iscomplex,
    iscomplexobj,
    isreal,
    isrealobj,
    real,
)
from jitc.numpy.creation import (
    arange,
    array,
    asarray,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    identity,
    ones,
    ones_like,
    tri,
    zeros,
    zeros_like,
)
from jitc.numpy.decompositions import eigh, eigvalsh, qr, svd
from jitc.numpy.dispatch import (
    apply_function,
    nonzero,
    round,
)
from jitc.numpy.einsum import einsum
from jitc.numpy.histograms import bincount, digitize, histogram, searchsorted
from jitc.numpy.indexing import getitem, take, take_along_axis
from jitc.numpy.linalg import dot, inner, matmul, outer, tensordot, vdot
from jitc.numpy.linalg_functions import (
    cond,
    lstsq,
    matrix_power,
    matrix_rank,
    multi_dot,
    pinv,
)
from jitc.numpy.logic import allclose, array_equal, array_equiv, isclose
from jitc.numpy.matrices import diag, diagonal, rot90, trace
from jitc.numpy.matrix_builders import (
    diagflat,
    fill_diagonal,
    tril_indices_from,
    triu_indices_from,
    vander,
)
from jitc.numpy.nanfunctions import (
    nanargmax,
    nanargmin,
    nancumprod,
    nancumsum,
    nanmax,
    nanmean,
    nanmedian,
    nanmin,
    nanpercentile,
    nanprod,
    nanquantile,
    nanstd,
    nansum,
    nanvar,
)
from jitc.numpy.piecewise import select, sinc
from jitc.numpy.predicates import isneginf, isposinf
from jitc.numpy.products import convolve, correlate, cross, kron
from jitc.numpy.ranges import geomspace, linspace, logspace, meshgrid
from jitc.numpy.reductions import (
    all,
    any,
    argmax,
    argmin,
    count_nonzero,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from jitc.numpy.scatter import place, put, putmask, setitem
from jitc.numpy.shapes import (
    append,
    array_split,
    astype,
    atleast_1d,
    atleast_2d,
    broadcast_arrays,
    clip,
    column_stack,
    concatenate,
    copy,
    diff,
    expand_dims,
    flatten,
    flip,
    fliplr,
    flipud,
    hsplit,
    hstack,
    matrix_transpose,
    moveaxis,
    ndim,
    pad,
    ravel,
    repeat,
    reshape,
    roll,
    shape,
    size,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
    tril,
    triu,
    vsplit,
    vstack,
    where,
)
from jitc.numpy.shapes import broadcast_view as broadcast_to
from jitc.numpy.solvers import cholesky, det, inv, slogdet, solve
from jitc.numpy.sorting import (
    argpartition,
    argsort,
    median,
    partition,
    percentile,
    quantile,
    sort,
)
from jitc.numpy.stacking import atleast_3d, delete, dstack, ediff1d, resize
from jitc.numpy.statistics import average, corrcoef, cov, interp, ptp
from jitc.numpy.ufunc_methods import cumprod, cumsum
from jitc.numpy.ufuncs import UFUNCS, apply_operator, apply_ufunc, nan_to_num
from jitc.numpy.windows import sliding_window_view

# The ufuncs jitc traces, under numpy's names (they are numpy's own objects).
for _ufunc in UFUNCS:
    globals()[_ufunc.__name__] = _ufunc
abs = _np.absolute
conjugate = conj
divide = _np.true_divide
pow = _np.power
amax, amin = max, min
concat = concatenate
permute_dims = transpose

# dtypes and constants, so `jnp.float32` and `jnp.pi` read like numpy.
bool_ = _np.bool_
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
complex64, complex128 = _np.complex64, _np.complex128
pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, None
ndarray = _np.ndarray


def logistic(x):
    """1 / (1 + exp(-x)), evaluated stably (jitc's `logistic` op when traced)."""
    from jitc.ir import ops
    from jitc.numpy._core import lift, tracers_in
    from jitc.tracing.state import emit
    if not tracers_in([x]):
        return _np.where(_np.asarray(x) >= 0, 1 / (1 + _np.exp(-_np.abs(x))),
                         _np.exp(-_np.abs(x)) / (1 + _np.exp(-_np.abs(x))))
    t = lift(x)
    if t.dtype.kind != "f":
        t = lift(t, _np.float64)
    return emit(ops.LOGISTIC, [t])


__all__ = [name for name in dir() if not name.startswith("_")]
del _ufunc
