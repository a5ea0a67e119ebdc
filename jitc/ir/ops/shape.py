"""Ops that move elements without computing on them: broadcast, reshape, transpose, slicing,
padding, concatenation, reversal, dynamic slices and gather."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jitc.ir import symbolic
from jitc.ir.opdef import VARIADIC, Attr, AttrKind, IRTypeError, OpDef, Trait, register
from jitc.ir.ops.rules import (
    check_axes,
    check_scalar_index,
    declared_one,
    is_symbolic,
    require_at_least,
    require_equal,
    same_dtype,
    tensor,
)
from jitc.ir.types import TensorType

Attrs = Mapping[str, object]
Declared = Sequence[TensorType] | None
Arrays = Sequence[np.ndarray]
Results = Sequence[TensorType]


def _broadcast_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    (operand,) = types
    result = declared_one("broadcast_in_dim", declared)
    dims = attrs["dims"]
    if len(dims) != operand.rank:
        raise IRTypeError(f"broadcast_in_dim: dims={list(dims)} must name one result dimension "
                          f"per operand dimension of {operand.short()}")
    check_axes("broadcast_in_dim", dims, result.rank)
    if list(dims) != sorted(dims):
        raise IRTypeError(f"broadcast_in_dim: dims={list(dims)} must be increasing "
                          "(use transpose to reorder)")
    for axis, dim in enumerate(dims):
        size, target = operand.shape[axis], result.shape[dim]
        if is_symbolic(size, target) and size != 1:
            require_equal(size, target, f"broadcast_in_dim of {operand.short()} to "
                          f"{result.short()}")
        elif operand.shape[axis] not in (1, result.shape[dim]):
            raise IRTypeError(f"broadcast_in_dim: operand dimension {axis} of "
                              f"{operand.short()} cannot become {result.shape[dim]}")
    if result.dtype is not operand.dtype:
        raise IRTypeError("broadcast_in_dim keeps the dtype")
    return [tensor(result.dtype, result.shape)]


def _broadcast_reference(args: Arrays, attrs: Attrs, results: Results):
    (x,), result = args, results[0]
    view = [1] * result.rank
    for axis, dim in enumerate(attrs["dims"]):
        view[dim] = x.shape[axis]
    return [np.broadcast_to(x.reshape(view), result.shape)]


def _reshape_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    (operand,) = types
    result = declared_one("reshape", declared)
    symbolic_size = is_symbolic(result.size, operand.size)
    if (not symbolic_size and result.size != operand.size) or result.dtype is not operand.dtype:
        raise IRTypeError(f"reshape cannot turn {operand.short()} into {result.short()}")
    if symbolic_size:
        _require_same_size(operand, result)
    return [tensor(result.dtype, result.shape)]


def _require_same_size(operand: TensorType, result: TensorType) -> None:
    """Symbolic sizes of a reshape must be equal; pieces `e//k` of the result need `e % k == 0`
    (which is what a user means by reshaping `n` into `[n//8, 8]`)."""
    why = f"reshape of {operand.short()} into {result.short()}"
    needed = symbolic.divisibility_needed(operand.size, result.size,
                                          symbolic.known_constraints())
    for constraint in needed:
        try:
            symbolic.require(constraint, why)
        except symbolic.ConstraintError as exc:
            raise IRTypeError(str(exc)) from None
    if not needed:
        require_equal(operand.size, result.size, why)


def _reshape_reference(args: Arrays, attrs: Attrs, results: Results):
    return [np.reshape(args[0], results[0].shape)]


def _transpose_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    (operand,) = types
    perm = attrs["permutation"]
    if sorted(perm) != list(range(operand.rank)):
        raise IRTypeError(f"transpose: permutation={list(perm)} is not a permutation of the "
                          f"dimensions of {operand.short()}")
    return [tensor(operand.dtype, [operand.shape[p] for p in perm])]


def _transpose_reference(args: Arrays, attrs: Attrs, results: Results):
    return [np.transpose(args[0], attrs["permutation"])]


def _slice_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    (operand,) = types
    start, limit, stride = attrs["start"], attrs["limit"], attrs["stride"] or \
        (1,) * operand.rank
    if not len(start) == len(limit) == len(stride) == operand.rank:
        raise IRTypeError(f"slice: start, limit and stride need {operand.rank} entries each")
    shape = []
    for axis, (lo, hi, step) in enumerate(zip(start, limit, stride)):
        if is_symbolic(lo, hi, operand.shape[axis]) and step >= 1:
            why = f"slice [{lo}:{hi}:{step}] of dimension {axis} of {operand.short()}"
            require_at_least(lo, 0, why)
            require_at_least(hi, lo, why)
            require_at_least(operand.shape[axis], hi, why)
            shape.append(symbolic.ceil_divide(hi - lo, step))
            continue
        if not 0 <= lo <= hi <= operand.shape[axis] or step < 1:
            raise IRTypeError(f"slice: [{lo}:{hi}:{step}] is not a valid slice of dimension "
                              f"{axis} of {operand.short()}")
        shape.append(-(-(hi - lo) // step))
    return [tensor(operand.dtype, shape)]


def _slice_reference(args: Arrays, attrs: Attrs, results: Results):
    stride = attrs["stride"] or (1,) * args[0].ndim
    index = tuple(slice(lo, hi, s) for lo, hi, s in zip(attrs["start"], attrs["limit"], stride))
    return [args[0][index]]


def _pad_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    operand, value = types
    same_dtype("pad", types)
    if value.rank != 0:
        raise IRTypeError(f"pad: the padding value must be a scalar, got {value.short()}")
    low, high = attrs["low"], attrs["high"]
    interior = attrs["interior"] or (0,) * operand.rank
    if not len(low) == len(high) == len(interior) == operand.rank:
        raise IRTypeError(f"pad: low, high and interior need {operand.rank} entries each")
    shape = []
    for axis, size in enumerate(operand.shape):
        if interior[axis] < 0:
            raise IRTypeError(f"pad: interior padding {interior[axis]} is negative")
        if is_symbolic(size):
            why = f"pad of dimension {axis} of {operand.short()}"
            if interior[axis]:
                # Interior padding goes between elements: (size - 1) gaps need size >= 1.
                require_at_least(size, 1, why)
            out = low[axis] + high[axis] + size + (size - 1) * interior[axis]
            require_at_least(out, 0, why)
            shape.append(out)
            continue
        out = low[axis] + high[axis] + size + max(size - 1, 0) * interior[axis]
        if out < 0:
            raise IRTypeError(f"pad: dimension {axis} of {operand.short()} would have size {out}")
        shape.append(out)
    return [tensor(operand.dtype, shape)]


def _pad_reference(args: Arrays, attrs: Attrs, results: Results):
    x, value = args
    interior = attrs["interior"] or (0,) * x.ndim
    # Place the (interior-spread) operand in a buffer padded by max(low, 0) and max(high, 0),
    # then crop the negative edges.
    spread = [s + max(s - 1, 0) * i for s, i in zip(x.shape, interior)]
    lows = [max(lo, 0) for lo in attrs["low"]]
    highs = [max(hi, 0) for hi in attrs["high"]]
    full = np.full([lo + s + hi for lo, s, hi in zip(lows, spread, highs)], value, x.dtype)
    full[tuple(slice(lo, lo + s, i + 1) for lo, s, i in zip(lows, spread, interior))] = x
    crop = tuple(slice(-min(lo, 0), full.shape[a] + min(hi, 0))
                 for a, (lo, hi) in enumerate(zip(attrs["low"], attrs["high"])))
    return [full[crop]]


def _concatenate_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    dtype = same_dtype("concatenate", types)
    first, axis = types[0], attrs["dimension"]
    check_axes("concatenate", [axis], first.rank)
    listed = ", ".join(t.short() for t in types)
    for t in types[1:]:
        if t.rank != first.rank or any(a != b and not is_symbolic(a, b) for d, (a, b) in
                                       enumerate(zip(t.shape, first.shape)) if d != axis):
            raise IRTypeError(f"concatenate along {axis}: shapes differ elsewhere ({listed})")
        for d, (a, b) in enumerate(zip(t.shape, first.shape)):
            if d != axis and a != b:
                require_equal(a, b, f"concatenate along {axis} of {listed}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return [tensor(dtype, shape)]


def _concatenate_reference(args: Arrays, attrs: Attrs, results: Results):
    return [np.concatenate(args, axis=attrs["dimension"])]


def _reverse_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    (operand,) = types
    check_axes("reverse", attrs["dims"], operand.rank)
    return [tensor(operand.dtype, operand.shape)]


def _reverse_reference(args: Arrays, attrs: Attrs, results: Results):
    return [np.flip(args[0], axis=attrs["dims"]) if attrs["dims"] else args[0]]


def _clamped_starts(starts: Arrays, shape: Sequence[int], sizes: Sequence[int]) -> list[int]:
    return [int(np.clip(int(s), 0, dim - size)) for s, dim, size in zip(starts, shape, sizes)]


def _dynamic_slice_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    operand, starts = types[0], types[1:]
    sizes = attrs["sizes"]
    if len(starts) != operand.rank or len(sizes) != operand.rank:
        raise IRTypeError(f"dynamic_slice of {operand.short()} needs {operand.rank} start "
                          "indices and sizes")
    for t in starts:
        check_scalar_index("dynamic_slice", t)
    for axis, (size, dim) in enumerate(zip(sizes, operand.shape)):
        if is_symbolic(size, dim):
            why = f"dynamic_slice of size {size} from dimension {axis} of {operand.short()}"
            require_at_least(size, 0, why)
            require_at_least(dim, size, why)
        elif not 0 <= size <= dim:
            raise IRTypeError(f"dynamic_slice: size {size} does not fit dimension {axis} "
                              f"of {operand.short()}")
    return [tensor(operand.dtype, sizes)]


def _dynamic_slice_reference(args: Arrays, attrs: Attrs, results: Results):
    x, sizes = args[0], attrs["sizes"]
    starts = _clamped_starts(args[1:], x.shape, sizes)
    return [x[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]]


def _dynamic_update_slice_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    operand, update, starts = types[0], types[1], types[2:]
    same_dtype("dynamic_update_slice", [operand, update])
    if len(starts) != operand.rank or update.rank != operand.rank:
        raise IRTypeError(f"dynamic_update_slice of {operand.short()} needs an update of the "
                          f"same rank and {operand.rank} start indices")
    for t in starts:
        check_scalar_index("dynamic_update_slice", t)
    if any(u > d for u, d in zip(update.shape, operand.shape) if not is_symbolic(u, d)):
        raise IRTypeError(f"dynamic_update_slice: update {update.short()} is larger than "
                          f"{operand.short()}")
    for u, d in zip(update.shape, operand.shape):
        if is_symbolic(u, d):
            require_at_least(d, u, f"dynamic_update_slice of {update.short()} into "
                             f"{operand.short()}")
    return [tensor(operand.dtype, operand.shape)]


def _dynamic_update_slice_reference(args: Arrays, attrs: Attrs, results: Results):
    x, update = args[0], args[1]
    starts = _clamped_starts(args[2:], x.shape, update.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return [out]


def _gather_rule(types: Sequence[TensorType], attrs: Attrs, declared: Declared):
    operand, indices = types
    axis = attrs["axis"]
    check_axes("gather", [axis], operand.rank, "axis")
    if not indices.dtype.is_int:
        raise IRTypeError(f"gather: indices must be integers, got {indices.short()}")
    if is_symbolic(operand.shape[axis], indices.size):
        if indices.size != 0:
            require_at_least(operand.shape[axis], 1, f"gather from axis {axis} of "
                             f"{operand.short()} with indices {indices.short()}")
    elif operand.shape[axis] == 0 and indices.size > 0:
        raise IRTypeError(f"gather: cannot take elements from empty axis {axis} of "
                          f"{operand.short()}")
    shape = operand.shape[:axis] + indices.shape + operand.shape[axis + 1:]
    return [tensor(operand.dtype, shape)]


def _gather_reference(args: Arrays, attrs: Attrs, results: Results):
    x, indices = args
    axis = attrs["axis"]
    if x.shape[axis] == 0:
        return [np.zeros(results[0].shape, x.dtype)]
    return [np.take(x, np.clip(indices, 0, x.shape[axis] - 1), axis=axis)]


def _op(name: str, arity: int, rule, reference, summary: str, attrs: tuple[Attr, ...],
        typed: bool = False) -> OpDef:
    traits = frozenset({Trait.TYPED_RESULT}) if typed else frozenset()
    return register(OpDef(name, arity, rule, reference, summary, attrs, traits))


INTS = AttrKind.INTS
DIMS = AttrKind.DIMS
BROADCAST_IN_DIM = _op(
    "broadcast_in_dim", 1, _broadcast_rule, _broadcast_reference,
    "operand dimension i becomes result dimension dims[i] (size 1 expands); other result "
    "dimensions repeat the operand", (Attr("dims", INTS),), typed=True)
RESHAPE = _op("reshape", 1, _reshape_rule, _reshape_reference,
              "the same elements in row-major order with a new shape", (), typed=True)
TRANSPOSE = _op("transpose", 1, _transpose_rule, _transpose_reference,
                "result dimension i is operand dimension permutation[i]",
                (Attr("permutation", INTS),))
SLICE = _op("slice", 1, _slice_rule, _slice_reference,
            "operand[start:limit:stride] per dimension",
            (Attr("start", DIMS), Attr("limit", DIMS), Attr("stride", INTS, ())))
PAD = _op("pad", 2, _pad_rule, _pad_reference,
          "surround (negative: crop) each dimension with low/high copies of the scalar value and "
          "put interior copies between elements",
          (Attr("low", INTS), Attr("high", INTS), Attr("interior", INTS, ())))
CONCATENATE = _op("concatenate", VARIADIC, _concatenate_rule, _concatenate_reference,
                  "operands joined along `dimension`", (Attr("dimension", AttrKind.INT),))
REVERSE = _op("reverse", 1, _reverse_rule, _reverse_reference,
              "the order of elements along each of `dims` is reversed", (Attr("dims", INTS),))
DYNAMIC_SLICE = _op(
    "dynamic_slice", VARIADIC, _dynamic_slice_rule, _dynamic_slice_reference,
    "a `sizes` block starting at run-time scalar indices, clamped so the block fits",
    (Attr("sizes", DIMS),))
DYNAMIC_UPDATE_SLICE = _op(
    "dynamic_update_slice", VARIADIC, _dynamic_update_slice_rule,
    _dynamic_update_slice_reference,
    "operand with the update written at run-time scalar indices, clamped so the update fits",
    ())
GATHER = _op("gather", 2, _gather_rule, _gather_reference,
             "np.take(operand, indices, axis) with indices clamped into range",
             (Attr("axis", AttrKind.INT),))
