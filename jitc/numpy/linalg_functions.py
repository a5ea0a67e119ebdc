"""np.linalg's functions built from the factorizations: lstsq, pinv, matrix_rank, cond,
matrix_power and multi_dot, each computed the way numpy computes it (the same cutoffs, the
same order of products), so that rounding stays close to numpy's.
"""

from __future__ import annotations

import operator

import numpy as np

from jitc.numpy._core import implements, lift, unsupported
from jitc.numpy.decompositions import _svd, svdvals
from jitc.numpy.linalg import matmul
from jitc.numpy.shapes import broadcast_to, reshape
from jitc.numpy.solvers import LinAlgError, _floating, _square_matrices, inv
from jitc.tracing.errors import located
from jitc.tracing.tracer import Tracer


def _reciprocal_above(values: Tracer, cutoff: Tracer) -> Tracer:
    large = values > cutoff
    return np.where(large, 1 / np.where(large, values, 1), 0)


@implements(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """numpy's least-squares solution by the SVD (as LAPACK's gelsd): singular values at or
    below rcond * the largest count as zero. Where numpy returns no residuals because the rank
    is below n (known only from the values), the compiled function returns them as nan."""
    x, y = lift(a), lift(b)
    if x.ndim != 2 or y.ndim not in (1, 2):
        raise LinAlgError(located(f"{x.ndim if x.ndim != 2 else y.ndim}-dimensional array "
                                  "given. Array must be two-dimensional"))
    x, y = _floating(x, y), _floating(y, x)
    vector = y.ndim == 1
    if vector:
        y = reshape(y, (y.shape[0], 1))
    m, n = x.shape
    if y.shape[0] != m:
        raise LinAlgError(located(f"Incompatible dimensions: lstsq({x.aval.short()}, "
                                  f"{y.aval.short()}): b needs one row per row of a"))
    if rcond is None:
        rcond = np.finfo(x.dtype).eps * max(m, n)
    k = y.shape[1]
    if x.size == 0:
        values = lift(np.zeros((min(m, n),), x.dtype))
        solution = lift(np.zeros((n, k), x.dtype))
        rank = lift(np.zeros((), np.int32))
    else:
        u, values, vh = _svd(x, False, True)
        cutoff = np.asarray(rcond, x.dtype) * np.max(values)
        rank = np.sum(values > cutoff).astype(np.int32)
        weights = _reciprocal_above(values, cutoff)
        solution = matmul(np.swapaxes(vh, -1, -2),
                          np.expand_dims(weights, -1) * matmul(np.swapaxes(u, -1, -2), y))
    if m > n:
        residual = matmul(x, solution) - y if x.size else -y
        sums = np.sum(residual * residual, axis=0)
        residuals = np.where(rank == n, sums, np.nan)
    else:
        residuals = lift(np.zeros((0,), x.dtype))
    if vector:
        solution = reshape(solution, (n,))
    return solution, residuals, rank, values


def _pinv_cutoff(rcond, rtol, shape: tuple[int, ...], dtype: np.dtype) -> object:
    if rcond is None:
        if rtol is _NO_VALUE:
            return 1e-15
        if rtol is None:
            return max(shape[-2:]) * np.finfo(dtype).eps
        return rtol
    if rtol is not _NO_VALUE:
        raise ValueError(located("`rtol` and `rcond` can't be both set."))
    return rcond


_NO_VALUE = object()


@implements(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE):
    x = lift(a)
    if x.ndim < 2:
        raise LinAlgError(located(f"{x.ndim}-dimensional array given. Array must be at least "
                                  "two-dimensional"))
    m, n = x.shape[-2:]
    if x.size == 0:
        return lift(np.zeros(x.shape[:-2] + (n, m), x.dtype))
    x = _floating(x)
    rcond = lift(np.asarray(_pinv_cutoff(rcond, rtol, x.shape, x.dtype)))
    u, values, vh = _svd(x, False, True)
    cutoff = np.expand_dims(rcond, -1) * np.max(values, axis=-1, keepdims=True)
    weights = _reciprocal_above(values, cutoff)
    return matmul(np.swapaxes(vh, -1, -2),
                  np.expand_dims(weights, -1) * np.swapaxes(u, -1, -2))


@implements(np.linalg.matrix_rank)
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    if rtol is not None and tol is not None:
        raise ValueError(located("`tol` and `rtol` can't be both set."))
    x = lift(A)
    if x.ndim < 2:
        return np.any(x != 0).astype(np.int64)
    values = svdvals(x)
    if tol is None:
        if rtol is None:
            rtol = max(x.shape[-2:]) * np.finfo(values.dtype).eps
        else:
            rtol = np.expand_dims(lift(rtol), -1)
        largest = np.max(values, axis=-1, keepdims=True) if values.shape[-1] else \
            lift(np.zeros(values.shape[:-1] + (1,), values.dtype))
        tol = largest * rtol
    else:
        tol = np.expand_dims(lift(tol), -1)
    return np.count_nonzero(values > tol, axis=-1)


@implements(np.linalg.cond)
def cond(x, p=None):
    a = lift(x)
    if a.ndim >= 2 and a.shape[-2:] and 0 in a.shape[-2:]:
        raise LinAlgError(located("cond is not defined on empty arrays"))
    if p is None or p in (2, -2):
        values = svdvals(a)
        ratio = values[..., 0] / values[..., -1]
        return 1 / ratio if p == -2 else ratio
    from jitc.numpy.linalg import norm
    square = _floating(_square_matrices(a))
    ratio = norm(square, p, axis=(-2, -1)) * norm(inv(square), p, axis=(-2, -1))
    # numpy gives inf where inverting failed (a nan), unless the matrix held a nan itself.
    had_nan = np.any(np.isnan(square), axis=(-2, -1))
    return np.where(np.isnan(ratio) & ~had_nan, np.inf, ratio)


@implements(np.linalg.matrix_power)
def matrix_power(a, n):
    x = _square_matrices(a)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(located("exponent must be an integer")) from None
    if n == 0:
        return lift(broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape)).copy_tracer()
    if n < 0:
        x, n = inv(x), -n
    if n == 1:
        return x
    # numpy's order of products: binary powers, each new bit multiplied in from the right.
    power = result = None
    while n > 0:
        power = x if power is None else matmul(power, power)
        n, bit = divmod(n, 2)
        if bit:
            result = power if result is None else matmul(result, power)
    return result


def _chain_order(shapes: list[tuple[int, int]]) -> list[list[int]]:
    """numpy's _multi_dot_matrix_chain_order: where to split each range of the chain."""
    n = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(arrays: list[Tracer], split: list[list[int]], i: int, j: int) -> Tracer:
    if i == j:
        return arrays[i]
    k = split[i][j]
    return matmul(_chain(arrays, split, i, k), _chain(arrays, split, k + 1, j))


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    if out is not None:
        raise unsupported("numpy.linalg.multi_dot(..., out=...)")
    xs = [lift(x) for x in arrays]
    if len(xs) < 2:
        raise ValueError(located("Expecting at least two arrays."))
    if len(xs) == 2:
        from jitc.numpy.linalg import dot
        return dot(xs[0], xs[1])
    first, last = xs[0].ndim, xs[-1].ndim
    if first == 1:
        xs[0] = reshape(xs[0], (1, xs[0].shape[0]))
    if last == 1:
        xs[-1] = reshape(xs[-1], (xs[-1].shape[0], 1))
    for x in xs:
        if x.ndim != 2:
            raise LinAlgError(located(f"{x.ndim}-dimensional array given. Array must be "
                                      "two-dimensional"))
    if len(xs) == 3:  # numpy's _multi_dot_three: compare the two orders' costs directly
        (a0, a1), (b1, c1) = xs[0].shape, xs[2].shape
        cost_ab_c = a0 * a1 * b1 + a0 * b1 * c1
        cost_a_bc = a1 * b1 * c1 + a0 * a1 * c1
        result = (matmul(matmul(xs[0], xs[1]), xs[2]) if cost_ab_c < cost_a_bc
                  else matmul(xs[0], matmul(xs[1], xs[2])))
    else:
        result = _chain(xs, _chain_order([x.shape for x in xs]), 0, len(xs) - 1)
    if first == 1 and last == 1:
        return result[0, 0]
    if first == 1 or last == 1:
        return reshape(result, (-1,))
    return result


# -- numpy.linalg's array-API spellings of functions numpy also has ------------------------------

def _linalg_alias(name: str):
    """Register for np.linalg.<name> where this numpy has it (numpy 2 added them)."""
    numpy_function = getattr(np.linalg, name, None)
    return implements(numpy_function) if numpy_function is not None else (lambda f: f)


@_linalg_alias("diagonal")
def linalg_diagonal(x, /, *, offset=0):
    return np.diagonal(lift(x), offset, axis1=-2, axis2=-1)


@_linalg_alias("trace")
def linalg_trace(x, /, *, offset=0, dtype=None):
    return np.trace(lift(x), offset, axis1=-2, axis2=-1, dtype=dtype)


@_linalg_alias("matmul")
def linalg_matmul(x1, x2, /):
    return matmul(x1, x2)


@_linalg_alias("tensordot")
def linalg_tensordot(x1, x2, /, *, axes=2):
    return np.tensordot(lift(x1), lift(x2), axes=axes)


@_linalg_alias("outer")
def linalg_outer(x1, x2, /):
    a, b = lift(x1), lift(x2)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(located(f"Input arrays must be one-dimensional, but they are "
                                 f"a.ndim={a.ndim} and b.ndim={b.ndim}."))
    return np.outer(a, b)


@_linalg_alias("vecdot")
def linalg_vecdot(x1, x2, /, *, axis=-1):
    a, b = lift(x1), lift(x2)
    return np.sum(np.conj(a) * b, axis=axis)  # numpy conjugates the first (complex values)


@_linalg_alias("matrix_norm")
def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    from jitc.numpy.linalg import norm
    return norm(lift(x), ord=ord, axis=(-2, -1), keepdims=keepdims)


@_linalg_alias("vector_norm")
def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """numpy's: the axes named (all of them for None) become one, then a vector norm."""
    from jitc.numpy.linalg import norm
    a = lift(x)
    shape = list(a.shape)
    if axis is None:
        axes = tuple(range(a.ndim))
    elif isinstance(axis, tuple):
        axes = tuple(ax % a.ndim for ax in axis)
    else:
        axes = None
    if axes is None:
        result = norm(a, ord=ord, axis=axis)
    else:
        rest = tuple(i for i in range(a.ndim) if i not in axes)
        merged = reshape(np.transpose(a, axes + rest),
                         (int(np.prod([shape[i] for i in axes], dtype=int)),
                          *[shape[i] for i in rest]))
        result = norm(merged, ord=ord, axis=0)
    if keepdims:
        for i in ((axis % a.ndim,) if axes is None else axes):
            shape[i] = 1
        result = reshape(result, tuple(shape))
    return result
