"""Products: matmul, dot, tensordot, inner, outer (all lowered to dot_general) and norms."""

from __future__ import annotations

import numpy as np

from jitc.ir import ops
from jitc.ir.opdef import IRTypeError
from jitc.ir.ops.rules import broadcast_shapes as broadcast_extents
from jitc.ir.symbolic import DimLike, is_static
from jitc.numpy._core import convert, implements, lift, lift_all, normalize_axis, unsupported
from jitc.numpy.shapes import broadcast_to, reshape, transpose
from jitc.tracing.errors import ShapeError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def dot_general(lhs: Tracer, rhs: Tracer, contract: tuple[list[int], list[int]],
                batch: tuple[list[int], list[int]] = ([], [])) -> Tracer:
    if lhs.dtype == np.bool_:
        raise unsupported("products of bool arrays", "Convert them with .astype(int) first.")
    return emit(ops.DOT_GENERAL, [lhs, rhs], {
        "lhs_batch": batch[0], "rhs_batch": batch[1],
        "lhs_contract": contract[0], "rhs_contract": contract[1]})


def _differ(a: DimLike, b: DimLike) -> bool:
    """Extents that differ for every size. Symbolic ones that may differ are not decided here:
    dot_general's rule records their equality as a constraint of the call (`k == m`)."""
    return is_static(a) and is_static(b) and a != b


def _batch_shape(a: Tracer, b: Tracer) -> tuple[DimLike, ...]:
    """The broadcast batch dimensions of a matmul."""
    try:
        if all(is_static(d) for d in (*a.shape[:-2], *b.shape[:-2])):
            return np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        return broadcast_extents([a.shape[:-2], b.shape[:-2]])
    except (ValueError, IRTypeError):
        raise ShapeError(located(f"matmul: {a.aval.short()} @ {b.aval.short()}: the batch "
                                 f"dimensions {a.shape[:-2]} and {b.shape[:-2]} do not "
                                 "broadcast")) from None


def _matmul_shapes_error(a: Tracer, b: Tracer) -> ShapeError:
    return ShapeError(located(f"matmul: {a.aval.short()} @ {b.aval.short()}: the last "
                              "dimension of the left operand must equal the "
                              f"{'only' if b.ndim == 1 else 'second-to-last'} dimension of the "
                              "right operand; transpose an operand (.T, .swapaxes(-1, -2)) or "
                              "fix its shape"))


@implements()
def matmul(x1, x2, /, out=None, **kwargs):
    if out is not None:
        raise unsupported("numpy.matmul(..., out=...)")
    a, b = lift_all([x1, x2])
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(located("matmul: operands must not be scalars (use * instead)"))
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = reshape(b, (b.shape[0], 1))
    if _differ(a.shape[-1], b.shape[-2]):
        raise _matmul_shapes_error(a, b)
    batch = _batch_shape(a, b)
    if batch:
        a = broadcast_to(a, batch + a.shape[-2:])
        b = broadcast_to(b, batch + b.shape[-2:])
    nb = len(batch)
    result = dot_general(a, b, ([nb + 1], [nb]), (list(range(nb)), list(range(nb))))
    if squeeze_a or squeeze_b:
        shape = result.shape[:nb] + (() if squeeze_a else (result.shape[nb],)) + \
            (() if squeeze_b else (result.shape[-1],))
        result = reshape(result, shape)
    return result


@implements(np.dot)
def dot(a, b, out=None):
    if out is not None:
        raise unsupported("numpy.dot(..., out=...)")
    x, y = lift_all([a, b])
    if x.ndim == 0 or y.ndim == 0:
        return np.multiply(x, y)
    if y.ndim <= 2:
        return matmul(x, y)
    # dot contracts the last axis of a with the second-to-last of b, batching nothing.
    if _differ(x.shape[-1], y.shape[-2]):
        raise _matmul_shapes_error(x, y)
    return dot_general(x, y, ([x.ndim - 1], [y.ndim - 2]))


@implements(np.vdot)
def vdot(a, b):
    x, y = lift_all([a, b])
    return dot(reshape(np.conj(x), (-1,)), reshape(y, (-1,)))  # conjugates its first argument


@implements(np.inner)
def inner(a, b):
    x, y = lift_all([a, b])
    if x.ndim == 0 or y.ndim == 0:
        return np.multiply(x, y)
    return dot_general(x, y, ([x.ndim - 1], [y.ndim - 1]))


@implements(np.outer)
def outer(a, b, out=None):
    x, y = lift_all([a, b])
    return np.multiply(reshape(x, (-1, 1)), reshape(y, (1, -1)))


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    x, y = lift_all([a, b])
    if isinstance(axes, int):
        xa, ya = list(range(x.ndim - axes, x.ndim)), list(range(axes))
    else:
        xa, ya = axes
        xa = [xa] if isinstance(xa, int) else list(xa)
        ya = [ya] if isinstance(ya, int) else list(ya)
    xa = [normalize_axis(i, x.ndim) for i in xa]
    ya = [normalize_axis(i, y.ndim) for i in ya]
    for i, j in zip(xa, ya):
        if _differ(x.shape[i], y.shape[j]):
            raise ShapeError(located(f"tensordot: axis {i} of {x.aval.short()} does not match "
                                     f"axis {j} of {y.aval.short()}"))
    result = dot_general(x, y, (xa, ya))
    result._array = True  # numpy's tensordot reshapes its product: a 0-d one is an array
    return result


# -- norms -------------------------------------------------------------------------------------

@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms of any order and every matrix norm (2, -2 and 'nuc' by the SVD)."""
    a = lift(x)
    if a.dtype.kind != "f":
        a = convert(a, np.float64)
    if axis is None:
        if ord is None:
            return _sum_of_squares_root(a, tuple(range(a.ndim)), keepdims)
        if a.ndim not in (1, 2):
            raise ShapeError(located(f"numpy.linalg.norm with ord={ord!r} needs a 1-d or 2-d "
                                     f"array or an axis, got {a.aval.short()}"))
        axis = tuple(range(a.ndim))
    axes = (normalize_axis(axis, a.ndim),) if isinstance(axis, (int, np.integer)) else \
        tuple(normalize_axis(ax, a.ndim) for ax in axis)
    if len(axes) == 1:
        return _vector_norm(a, axes[0], ord, keepdims)
    if len(axes) == 2 and axes[0] != axes[1]:
        return _matrix_norm(a, axes, ord, keepdims)
    raise ShapeError(located(f"numpy.linalg.norm: improper axis {axis!r} for "
                             f"{a.aval.short()}"))


def _sum_of_squares_root(a: Tracer, axes: tuple[int, ...], keepdims: bool) -> Tracer:
    return np.sqrt(np.sum(np.multiply(a, a), axis=axes, keepdims=keepdims))


def _vector_norm(a: Tracer, axis: int, ord, keepdims: bool) -> Tracer:
    if ord is None or ord == 2:
        return _sum_of_squares_root(a, (axis,), keepdims)
    magnitude = np.abs(a)
    if ord == np.inf:
        return np.max(magnitude, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return np.min(magnitude, axis=axis, keepdims=keepdims)
    if ord == 0:
        return np.sum(np.not_equal(a, 0).astype(a.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return np.sum(magnitude, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise unsupported(f"numpy.linalg.norm with ord={ord!r} for vectors")
    p = np.asarray(ord, dtype=a.dtype)
    return np.power(np.sum(np.power(magnitude, p), axis=axis, keepdims=keepdims), 1 / p)


def _matrix_norm(a: Tracer, axes: tuple[int, ...], ord, keepdims: bool) -> Tracer:
    rows, cols = axes
    if ord is None or ord == "fro":
        return _sum_of_squares_root(a, axes, keepdims)
    if ord in (2, -2, "nuc"):
        from jitc.numpy.decompositions import svdvals  # it needs this module's products
        values = svdvals(np.moveaxis(a, axes, (-2, -1)))
        pick = np.sum if ord == "nuc" else np.max if ord == 2 else np.min
        result = pick(values, axis=-1)
        if keepdims:
            for axis in sorted(axes):
                result = np.expand_dims(result, axis)
        return result
    if ord not in (1, -1, np.inf, -np.inf):
        raise ValueError(located(f"Invalid norm order {ord!r} for matrices"))
    summed, over = (rows, cols) if ord in (1, -1) else (cols, rows)
    pick = np.max if ord in (1, np.inf) else np.min
    result = pick(np.sum(np.abs(a), axis=summed, keepdims=True), axis=over, keepdims=True)
    if keepdims:
        return result
    return reshape(result, tuple(d for i, d in enumerate(result.shape) if i not in axes))


@implements(np.linalg.matrix_transpose if hasattr(np.linalg, "matrix_transpose") else np.swapaxes)
def matrix_transpose(x):
    t = lift_all([x])[0]
    axes = list(range(t.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return transpose(t, axes)
