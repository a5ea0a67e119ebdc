"""Products: matmul, dot, einsum, tensordot, inner, outer, all lowered to dot_general."""

from __future__ import annotations

import string

import numpy as np

from jitc.ir import ops
from jitc.numpy._core import convert, implements, lift, lift_all, normalize_axis, unsupported
from jitc.numpy.reductions import reduce
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
    if a.shape[-1] != b.shape[-2]:
        raise _matmul_shapes_error(a, b)
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ShapeError(located(f"matmul: {a.aval.short()} @ {b.aval.short()}: the batch "
                                 f"dimensions {a.shape[:-2]} and {b.shape[:-2]} do not "
                                 "broadcast")) from None
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
    if x.shape[-1] != y.shape[-2]:
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
        if x.shape[i] != y.shape[j]:
            raise ShapeError(located(f"tensordot: axis {i} of {x.aval.short()} does not match "
                                     f"axis {j} of {y.aval.short()}"))
    result = dot_general(x, y, (xa, ya))
    result._array = True  # numpy's tensordot reshapes its product: a 0-d one is an array
    return result


# -- norms -------------------------------------------------------------------------------------

@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims=False):
    """Vector norms of any order and the matrix norms that need no decomposition."""
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
    if ord not in (1, -1, np.inf, -np.inf):
        raise unsupported(f"numpy.linalg.norm with ord={ord!r} for matrices",
                          "The 2-norm and the nuclear norm need singular values.")
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


# -- einsum ------------------------------------------------------------------------------------

def _parse_einsum(spec: str, operands: list[Tracer]) -> tuple[list[str], str]:
    spec = spec.replace(" ", "")
    if "->" in spec:
        inputs_text, output = spec.split("->")
    else:
        inputs_text, output = spec, None
    inputs = inputs_text.split(",")
    if len(inputs) != len(operands):
        raise ShapeError(located(f"einsum: {spec!r} names {len(inputs)} operands, "
                                 f"{len(operands)} were given"))
    used = set(spec) - set(",->.")
    spare = iter(c for c in string.ascii_letters if c not in used)
    ellipsis_letters = ""
    expanded = []
    for term, x in zip(inputs, operands):
        if "..." in term:
            n = x.ndim - (len(term) - 3)
            while len(ellipsis_letters) < n:
                ellipsis_letters = next(spare) + ellipsis_letters
            term = term.replace("...", ellipsis_letters[len(ellipsis_letters) - n:])
        if len(term) != x.ndim:
            raise ShapeError(located(f"einsum: {term!r} has {len(term)} letters for an operand "
                                     f"of shape {x.aval.short()}"))
        if len(set(term)) != len(term):
            raise unsupported("einsum with a repeated index in one operand (a diagonal)")
        expanded.append(term)
    if output is None:
        counts = {c: "".join(expanded).count(c) for c in set("".join(expanded))}
        output = ellipsis_letters + "".join(sorted(c for c, n in counts.items()
                                                   if n == 1 and c not in ellipsis_letters))
    else:
        output = output.replace("...", ellipsis_letters)
    return expanded, output


def _einsum_pair(x: Tracer, xs: str, y: Tracer, ys: str, keep: set[str]) -> tuple[Tracer, str]:
    batch = [c for c in xs if c in ys and c in keep]
    contract = [c for c in xs if c in ys and c not in keep]
    for c in batch + contract:
        if x.shape[xs.index(c)] != y.shape[ys.index(c)]:
            raise ShapeError(located(f"einsum: index {c!r} has size {x.shape[xs.index(c)]} in "
                                     f"one operand and {y.shape[ys.index(c)]} in another"))
    result = dot_general(x, y, ([xs.index(c) for c in contract], [ys.index(c) for c in contract]),
                         ([xs.index(c) for c in batch], [ys.index(c) for c in batch]))
    free_x = [c for c in xs if c not in batch and c not in contract]
    free_y = [c for c in ys if c not in batch and c not in contract]
    return result, "".join(batch + free_x + free_y)


def _sum_unused(x: Tracer, term: str, needed: set[str]) -> tuple[Tracer, str]:
    axes = tuple(i for i, c in enumerate(term) if c not in needed)
    if not axes:
        return x, term
    return reduce(x, axes, "sum"), "".join(c for c in term if c in needed)


@implements(np.einsum)
def einsum(subscripts, *operands, out=None, dtype=None, order="K", casting="safe",
           optimize=False):
    if not isinstance(subscripts, str):
        raise unsupported("einsum with the interleaved (operand, sublist) form")
    if out is not None:
        raise unsupported("numpy.einsum(..., out=...)")
    xs = lift_all(list(operands), dtype)
    terms, output = _parse_einsum(subscripts, xs)
    # Contract left to right, summing an index out as soon as nothing later needs it.
    current, term = xs[0], terms[0]
    for i in range(1, len(xs) + 1):
        later = set(output).union(*terms[i:]) if i < len(xs) else set(output)
        current, term = _sum_unused(current, term, later)
        if i == len(xs):
            break
        nxt, nterm = _sum_unused(xs[i], terms[i], set(output).union(term, *terms[i + 1:]))
        keep = set(output).union(*terms[i + 1:])
        current, term = _einsum_pair(current, term, nxt, nterm, keep)
    if sorted(term) != sorted(output):
        missing = set(output) - set(term)
        raise ShapeError(located(f"einsum: output index {''.join(missing)!r} is in no input"))
    if term != output:
        current = transpose(current, [term.index(c) for c in output])
    return current
