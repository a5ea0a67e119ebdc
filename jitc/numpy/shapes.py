"""Shape manipulation with numpy's signatures, lowered to reshape, transpose, broadcast,
slice, concatenate, reverse and pad."""

from __future__ import annotations

import builtins
import itertools
import math
from collections.abc import Sequence

import numpy as np

from jitc.ir import ops, symbolic
from jitc.ir.symbolic import Dim, DimLike, exact_quotient, is_static
from jitc.ir.types import TensorType
from jitc.numpy._core import (
    check_static_int,
    convert,
    implements,
    is_python_scalar,
    lift,
    lift_all,
    normalize_axes,
    normalize_axis,
    result_type,
    unsupported,
)
from jitc.tracing import effects
from jitc.tracing.errors import ShapeError, located
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer


def _typed(x: Tracer, shape: Sequence[int]) -> TensorType:
    return TensorType(x.aval.dtype, tuple(shape))


def _new_dimension(d: object) -> DimLike:
    return d if isinstance(d, Dim) else check_static_int(d, "a dimension of the new shape")


def _resolve_shape(size: DimLike, shape: Sequence[object], what: str) -> tuple[DimLike, ...]:
    dims = [_new_dimension(d) for d in shape]
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1 or any(is_static(d) and d < -1 for d in dims):
        raise ShapeError(located(f"cannot reshape {what} into shape {tuple(map(str, dims))}"))
    known = math.prod(d for d in dims if d != -1)
    if unknown:
        if not is_static(known):
            quotient = exact_quotient(size, known)
            if quotient is None:
                raise unsupported(
                    f"reshape of {what} with -1 beside the symbolic extent {known}, which "
                    "does not divide its size for every value",
                    "Write every dimension of the new shape (x.shape[0] for a symbolic one).")
            # numpy cannot infer -1 beside an extent 0: such a call must not get a result.
            symbolic.require(symbolic.at_least(known, 1), f"reshape of {what} with -1")
            dims[unknown[0]] = quotient
            return tuple(dims)
        # A symbolic size splits into pieces of `known` where the call's divisibility holds
        # (the reshape rule records `n % k == 0`).
        if known == 0 or (is_static(size) and size % known):
            raise ShapeError(located(f"cannot reshape {what} into shape {tuple(dims)}"))
        dims[unknown[0]] = size // known
    # Products that differ only for some sizes are the reshape rule's constraint of the call.
    total = math.prod(dims)
    if is_static(total) and is_static(size) and total != size:
        raise ShapeError(located(f"cannot reshape {what} (size {size}) into shape "
                                 f"{tuple(dims)}"))
    return tuple(dims)


@implements(np.reshape)
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        raise unsupported(f"reshape with order={order!r}", "Only C order is traced.")
    shape = newshape if shape is None else shape
    x = lift(a)
    if isinstance(shape, (int, np.integer, Tracer)):
        shape = (shape,)
    new = _resolve_shape(x.size, shape, x.aval.short())
    result = x if new == x.shape else emit(ops.RESHAPE, [x], {}, _typed(x, new))
    return effects.derive(x, result, effects.Reshape(new))


@implements(np.transpose)
def transpose(a, axes=None):
    x = lift(a)
    if axes is None:
        perm = list(range(x.ndim))[::-1]
    else:
        perm = [normalize_axis(p, x.ndim) for p in axes]
        if sorted(perm) != list(range(x.ndim)):
            raise ShapeError(located(f"transpose: axes {tuple(axes)} don't match an array of "
                                     f"dimension {x.ndim}"))
    result = x if perm == list(range(x.ndim)) else emit(ops.TRANSPOSE, [x],
                                                        {"permutation": perm})
    return effects.derive(x, result, effects.Transpose(perm))


@implements(np.matrix_transpose)
def matrix_transpose(x):
    t = lift(x)
    if t.ndim < 2:
        raise ShapeError(located(f"matrix_transpose needs at least 2 dimensions, got "
                                 f"{t.aval.short()}"))
    axes = list(range(t.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return transpose(t, axes)


@implements(np.swapaxes)
def swapaxes(a, axis1, axis2):
    x = lift(a)
    perm = list(range(x.ndim))
    i, j = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    x = lift(a)
    src = normalize_axes_list(source, x.ndim)
    dst = normalize_axes_list(destination, x.ndim)
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def normalize_axes_list(axis, ndim: int) -> list[int]:
    axes = axis if isinstance(axis, (tuple, list)) else [axis]
    return [normalize_axis(a, ndim) for a in axes]


@implements(np.expand_dims)
def expand_dims(a, axis):
    x = lift(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    rank = x.ndim + len(axes)
    positions = sorted(normalize_axis(ax, rank) for ax in axes)
    shape = list(x.shape)
    for p in positions:
        shape.insert(p, 1)
    return reshape(x, shape)


@implements(np.squeeze)
def squeeze(a, axis=None):
    x = lift(a)
    if axis is None:
        axes = [i for i, d in enumerate(x.shape) if d == 1]
    else:
        axes = list(normalize_axes(axis, x.ndim))
        for ax in axes:
            if x.shape[ax] != 1:
                raise ShapeError(located(f"cannot squeeze axis {ax} of {x.aval.short()}: its "
                                         "size is not 1"))
    return reshape(x, [d for i, d in enumerate(x.shape) if i not in axes])


@implements(np.ravel)
def ravel(a, order="C"):
    return reshape(a, (-1,), order=order)


def flatten(a, order="C"):
    return ravel(a, order).copy_tracer()  # always a copy in numpy, never a view


@implements(np.copy)
def copy(a, order="K", subok=False):
    return lift(a).copy_tracer()


def astype(a, dtype, order="K", casting="unsafe", subok=True, copy=True):
    x = lift(a)
    if x.dtype.kind == "c" and np.dtype(dtype).kind not in "cb":
        from jitc.numpy.complexes import warn_discarded_imaginary
        warn_discarded_imaginary()
    result = convert(x, dtype, discard_imaginary=True)
    return result.copy_tracer() if result is x and copy else result


@implements(np.copyto)
def copyto(dst, src, casting="same_kind", where=True):
    if not isinstance(dst, Tracer):
        raise unsupported("numpy.copyto into an array that is not traced",
                          "Pass the destination as an argument of the jitted function.")
    if where is not True:
        src = globals()["where"](where, src, dst)
    effects.write_result(dst, src, "numpy.copyto", "assignment destination is read-only")


@implements(np.atleast_1d)
def atleast_1d(*arys):
    out = [reshape(x, (1,)) if lift(x).ndim == 0 else lift(x) for x in arys]
    return out[0] if len(out) == 1 else out


@implements(np.atleast_2d)
def atleast_2d(*arys):
    out = []
    for a in arys:
        x = lift(a)
        out.append(reshape(x, (1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x)
    return out[0] if len(out) == 1 else out


@implements(eager=np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    """`array` stretched to `shape`, a value of its own: how jitc itself broadcasts. numpy's
    np.broadcast_to, a read-only view, is `broadcast_view`."""
    x = lift(array)
    shape = _shape_tuple(shape)
    if not all(is_static(d) for d in (*x.shape, *shape)):
        return _broadcast_symbolic(x, shape)
    try:
        target = np.broadcast_shapes(x.shape, shape)
    except ValueError:
        target = None
    if target != tuple(shape):
        raise ShapeError(located(f"cannot broadcast {x.aval.short()} to shape {tuple(shape)}"))
    if x.shape == tuple(shape):
        return x
    offset = len(shape) - x.ndim
    return emit(ops.BROADCAST_IN_DIM, [x], {"dims": list(range(offset, len(shape)))},
                _typed(x, shape))


@implements(np.broadcast_to)
def broadcast_view(array, shape, subok=False):
    """numpy's np.broadcast_to: a read-only view of `array`, which sees later writes into it
    (jitc.tracing.effects.Broadcast)."""
    x = lift(array)
    result = effects.derive(x, broadcast_to(x, shape), effects.Broadcast(_shape_tuple(shape)))
    if result._view is None:  # of a scalar (numpy's view of a temporary), or of a copy
        result._readonly = effects.Broadcast.readonly
    return result


def _shape_tuple(shape) -> tuple[DimLike, ...]:
    return (shape,) if isinstance(shape, (int, Dim)) else tuple(shape)


def _broadcast_symbolic(x: Tracer, shape: tuple[DimLike, ...]) -> Tracer:
    """broadcast_to with symbolic extents: a static 1 stretches; two extents that may differ
    are the broadcast_in_dim rule's `a == b` constraint of the call."""
    offset = len(shape) - x.ndim
    if offset < 0 or any(is_static(a) and is_static(b) and a not in (1, b)
                         for a, b in zip(x.shape, shape[offset:])):
        raise ShapeError(located(f"cannot broadcast {x.aval.short()} to shape "
                                 f"({', '.join(map(str, shape))})"))
    if x.shape == shape:
        return x
    return emit(ops.BROADCAST_IN_DIM, [x], {"dims": list(range(offset, len(shape)))},
                _typed(x, shape))


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    xs = [lift(a) for a in args]
    try:
        shape = np.broadcast_shapes(*(x.shape for x in xs))
    except ValueError:
        shapes = " with ".join(x.aval.short() for x in xs)
        raise ShapeError(located(f"cannot broadcast {shapes}")) from None
    return tuple(broadcast_to(x, shape) for x in xs)


# -- joining and splitting -----------------------------------------------------------------------

@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    if out is not None:
        raise unsupported("numpy.concatenate(..., out=...)")
    xs = lift_all(list(arrays), dtype)
    if axis is None:
        xs = [ravel(x) for x in xs]
        axis = 0
    if not xs:
        raise ShapeError(located("need at least one array to concatenate"))
    if xs[0].ndim == 0:
        raise ShapeError(located("zero-dimensional arrays cannot be concatenated"))
    ax = normalize_axis(axis, xs[0].ndim)
    if len(xs) == 1:
        return xs[0]
    return emit(ops.CONCATENATE, xs, {"dimension": ax})


@implements(np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    xs = lift_all(list(arrays), dtype)
    if not xs:
        raise ShapeError(located("need at least one array to stack"))
    shapes = {x.shape for x in xs}
    if len(shapes) != 1:
        raise ShapeError(located("all input arrays must have the same shape to stack, got "
                                 + ", ".join(x.aval.short() for x in xs)))
    ax = normalize_axis(axis, xs[0].ndim + 1)
    return concatenate([expand_dims(x, ax) for x in xs], axis=ax)


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    xs = [lift(x) for x in tup]
    return concatenate(xs, axis=0 if xs and xs[0].ndim == 1 else 1, dtype=dtype)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    return concatenate(atleast_2d_list(tup), axis=0, dtype=dtype)


def atleast_2d_list(tup) -> list[Tracer]:
    out = atleast_2d(*tup)
    return [out] if isinstance(out, Tracer) else list(out)


@implements(np.column_stack)
def column_stack(tup):
    xs = [lift(x) for x in tup]
    return concatenate([reshape(x, (-1, 1)) if x.ndim < 2 else x for x in xs], axis=1)


def _split_points(n: int, sections, strict: bool, what: str) -> list[int]:
    if isinstance(sections, (int, np.integer)):
        count = int(sections)
        if count <= 0:
            raise ShapeError(located("number of sections must be larger than 0"))
        if strict and n % count:
            raise ShapeError(located(
                f"numpy.split: {what} (size {n}) does not divide into {count} equal sections; "
                "use np.array_split for sections of unequal size, or pass the split indices"))
        size, extra = divmod(n, count)
        points, at = [], 0
        for i in range(count - 1):
            at += size + (1 if i < extra else 0)
            points.append(at)
        return points
    return [check_static_int(p, "a split index") for p in sections]


def _split(a, sections, axis, strict: bool) -> list[Tracer]:
    x = lift(a)
    ax = normalize_axis(axis, x.ndim)
    n = x.shape[ax]
    points = _split_points(n, sections, strict, f"axis {ax} of {x.aval.short()}")
    bounds = [0] + [min(max(p if p >= 0 else p + n, 0), n) for p in points] + [n]
    pieces = []
    for lo, hi in itertools.pairwise(bounds):
        hi = max(lo, hi)
        pieces.append(slice_axis(x, ax, lo, hi))
    return pieces


def slice_axis(x: Tracer, axis: int, lo: int, hi: int, step: int = 1) -> Tracer:
    if (lo, hi, step) == (0, x.shape[axis], 1):
        return x
    start = [0] * x.ndim
    limit = list(x.shape)
    stride = [1] * x.ndim
    start[axis], limit[axis], stride[axis] = lo, hi, step
    return emit(ops.SLICE, [x], {"start": start, "limit": limit,
                                 "stride": stride if step != 1 else ()})


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, strict=True)


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, strict=False)


@implements(np.hsplit)
def hsplit(ary, indices_or_sections):
    return _split(ary, indices_or_sections, 1 if lift(ary).ndim > 1 else 0, strict=True)


@implements(np.vsplit)
def vsplit(ary, indices_or_sections):
    return _split(ary, indices_or_sections, 0, strict=True)


# -- selection and rearrangement -----------------------------------------------------------------

@implements(np.where)
def where(condition, x=None, y=None):
    if x is None or y is None:
        raise unsupported("numpy.where with one argument (its result shape depends on the "
                          "data)", "Use the three-argument form np.where(cond, x, y).")
    cond = lift(condition)
    if cond.dtype != np.bool_:
        cond = np.not_equal(cond, 0)
    a, b = lift_all([x, y])
    return emit(ops.SELECT, [cond, a, b])  # an array, like numpy's, even for scalar x and y


@implements(np.clip)
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kwargs):
    if out is not None:
        raise unsupported("numpy.clip(..., out=...)")
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    x = lift(a)
    if lo is not None:
        x = np.maximum(x, _clip_bound(x, lo))
    if hi is not None:
        x = np.minimum(x, _clip_bound(x, hi))
    return x


def _clip_bound(x: Tracer, bound: object) -> object:
    """numpy clips a Python int bound outside an integer array's range to that range."""
    if x.dtype.kind in "iu" and is_python_scalar(bound) and isinstance(bound, int):
        info = np.iinfo(x.dtype)
        return builtins.min(builtins.max(bound, int(info.min)), int(info.max))
    return bound


@implements(np.flip)
def flip(m, axis=None):
    x = lift(m)
    axes = normalize_axes(axis, x.ndim)
    return emit(ops.REVERSE, [x], {"dims": axes}) if axes else x


@implements(np.fliplr)
def fliplr(m):
    return flip(m, 1)


@implements(np.flipud)
def flipud(m):
    return flip(m, 0)


@implements(np.append)
def append(arr, values, axis=None):
    if axis is None:
        return concatenate([ravel(arr), ravel(values)])
    return concatenate([arr, values], axis=axis)


@implements(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    x = lift(a)
    ax = normalize_axis(axis, x.ndim)
    edge = x.shape[:ax] + (1,) + x.shape[ax + 1:]
    parts = [x]
    if prepend is not np._NoValue:
        parts.insert(0, _diff_edge(prepend, edge))
    if append is not np._NoValue:
        parts.append(_diff_edge(append, edge))
    if len(parts) > 1:
        x = concatenate(parts, axis=ax)
    for _ in range(check_static_int(n, "the diff order n")):
        length = x.shape[ax]
        step = min(1, length) if is_static(length) else 1  # an empty axis stays empty
        later, earlier = slice_axis(x, ax, step, length), slice_axis(x, ax, 0, length - step)
        x = np.not_equal(later, earlier) if x.dtype == np.bool_ else np.subtract(later, earlier)
    return x


def _diff_edge(value, edge_shape: tuple[int, ...]) -> Tracer:
    """numpy.diff's prepend/append: a scalar fills one slice along the axis."""
    v = lift(value)
    return broadcast_to(v, edge_shape) if v.ndim == 0 else v


@implements(np.roll)
def roll(a, shift, axis=None):
    x = lift(a)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), x.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else [shift]
    axes = axis if isinstance(axis, (tuple, list)) else [axis]
    for s, ax in np.broadcast(shifts, axes):
        ax = normalize_axis(ax, x.ndim)
        n = x.shape[ax]
        if not is_static(n):
            x = _roll_symbolic(x, check_static_int(s, "the roll shift"), ax)
            continue
        if n == 0:
            continue
        k = check_static_int(s, "the roll shift") % n
        if k:
            x = concatenate([slice_axis(x, ax, n - k, n), slice_axis(x, ax, 0, n - k)], axis=ax)
    return x


def _roll_symbolic(x: Tracer, shift: int, axis: int) -> Tracer:
    """np.roll along a symbolic axis: the window of length n of the axis written twice that
    starts at n - shift % n (the call's values; an empty axis stays empty)."""
    n = lift(x.shape[axis], np.int64)
    start = np.subtract(n, np.remainder(lift(np.int64(shift)), n))
    starts = [lift(np.int64(0))] * x.ndim
    starts[axis] = start
    doubled = concatenate([x, x], axis=axis)
    return emit(ops.DYNAMIC_SLICE, [doubled, *starts], {"sizes": list(x.shape)})


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    x = lift(a)
    if axis is None:
        x, axis = ravel(x), 0
    ax = normalize_axis(axis, x.ndim)
    if isinstance(repeats, Tracer) and repeats._known is not None:
        repeats = repeats._known  # np.array([...]) written in the traced function
    if isinstance(repeats, Tracer):
        repeats.int_argument_needed()  # a count from int arguments: compiled per value
        raise unsupported("numpy.repeat with traced repeat counts",
                          "The result's length would depend on the data: pass the counts as "
                          "a constant or a static argument.")
    counts = np.asarray(repeats)
    if counts.ndim and counts.size != 1:
        if counts.shape != (x.shape[ax],):
            raise ShapeError(located(f"numpy.repeat: {counts.size} repeat counts for axis "
                                     f"{ax} of {x.aval.short()}"))
        if counts.dtype.kind not in "iu" or (counts < 0).any():
            raise ShapeError(located("numpy.repeat: counts must be non-negative integers"))
        from jitc.numpy.indexing import take
        return take(x, np.repeat(np.arange(x.shape[ax]), counts), axis=ax)
    r = int(counts.reshape(()))
    if r < 0:
        raise ShapeError(located("negative dimensions are not allowed"))
    expanded = broadcast_to(expand_dims(x, ax + 1),
                            x.shape[:ax + 1] + (r,) + x.shape[ax + 1:])
    return reshape(expanded, x.shape[:ax] + (x.shape[ax] * r,) + x.shape[ax + 1:])


@implements(np.tile)
def tile(A, reps):
    x = lift(A)
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    rank = max(x.ndim, len(reps))
    reps = (1,) * (rank - len(reps)) + tuple(int(r) for r in reps)
    x = reshape(x, (1,) * (rank - x.ndim) + x.shape)
    interleaved = []
    for r, d in zip(reps, x.shape):
        interleaved += [r, d]
    spread = reshape(x, [v for d in x.shape for v in (1, d)])
    return reshape(broadcast_to(spread, interleaved),
                   [r * d for r, d in zip(reps, x.shape)])


@implements(np.pad)
def pad(array, pad_width, mode="constant", **kwargs):
    if mode != "constant":
        raise unsupported(f"numpy.pad with mode={mode!r}", "Only mode='constant' is traced.")
    x = lift(array)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    if (widths < 0).any():  # numpy's check (the pad op would crop instead)
        raise ValueError(located("index can't contain negative values"))
    value = kwargs.get("constant_values", 0)
    if np.ndim(value) != 0:
        raise unsupported("numpy.pad with per-axis constant_values")
    fill = lift(value, x.dtype)
    return emit(ops.PAD, [x, fill], {"low": [int(w) for w in widths[:, 0]],
                                     "high": [int(w) for w in widths[:, 1]]})


def _triangle_mask(x: Tracer, k: int, lower: bool) -> Tracer:
    rows, cols = x.shape[-2], x.shape[-1]
    # jitc.numpy.creation imports this module: its tri (symbolic sizes too) is found late.
    from jitc.numpy.creation import tri
    mask = tri(rows, cols, k, dtype=bool) if lower else \
        np.logical_not(tri(rows, cols, k - 1, dtype=bool))
    return lift(mask)


@implements(np.tril)
def tril(m, k=0):
    x = lift(m)
    return where(_triangle_mask(x, check_static_int(k, "k"), True), x, np.zeros((), x.dtype))


@implements(np.triu)
def triu(m, k=0):
    x = lift(m)
    return where(_triangle_mask(x, check_static_int(k, "k"), False), x, np.zeros((), x.dtype))


# -- shape queries -------------------------------------------------------------------------------

@implements(np.shape)
def shape(a):
    return lift(a).shape


@implements(np.ndim)
def ndim(a):
    return lift(a).ndim


@implements(np.size)
def size(a, axis=None):
    x = lift(a)
    return x.size if axis is None else x.shape[normalize_axis(axis, x.ndim)]


@implements(np.result_type)
def _result_type(*arrays_and_dtypes):
    return result_type(*arrays_and_dtypes)
