"""Reductions: reduce (several operands at once, one result each) and argmax/argmin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jitc.ir import dtypes
from jitc.ir.dtypes import Kind
from jitc.ir.opdef import VARIADIC, Attr, AttrKind, IRTypeError, OpDef, register
from jitc.ir.ops.rules import (
    ARITHMETIC,
    NUMERIC,
    check_axes,
    check_kind,
    is_symbolic,
    require_at_least,
    require_same_shape,
    tensor,
)
from jitc.ir.types import TensorType

Attrs = Mapping[str, object]

REDUCE_KINDS = {
    "sum": ARITHMETIC, "prod": ARITHMETIC,
    "max": NUMERIC | {Kind.BOOL}, "min": NUMERIC | {Kind.BOOL},
    "and": frozenset({Kind.BOOL}), "or": frozenset({Kind.BOOL}),
}


def reduce_identity(kind: str, dtype: np.dtype) -> object:
    """The value a reduction of no elements gives (and what accumulators start from)."""
    if kind in ("sum", "or"):
        return dtype.type(0)
    if kind in ("prod", "and"):
        return dtype.type(1)
    if dtype.kind == "f":
        return dtype.type(-np.inf if kind == "max" else np.inf)
    if dtype.kind == "b":
        return np.bool_(kind == "min")
    info = np.iinfo(dtype)
    return dtype.type(info.min if kind == "max" else info.max)


_NUMPY_REDUCERS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
                   "and": np.all, "or": np.any}


def _reduce_rule(types: Sequence[TensorType], attrs: Attrs, declared):
    dims, kind = attrs["dims"], attrs["kind"]
    first = types[0]
    check_axes("reduce", dims, first.rank)
    results = []
    for t in types:
        if t.shape != first.shape and not require_same_shape("reduce", [first, t]):
            listed = ", ".join(t.short() for t in types)
            raise IRTypeError(f"reduce: operands must have one shape ({listed})")
        check_kind(f"reduce kind={kind}", t.dtype, REDUCE_KINDS[kind])
        results.append(tensor(t.dtype, [d for a, d in enumerate(t.shape) if a not in dims]))
    return results


def _reduce_reference(args: Sequence[np.ndarray], attrs: Attrs, results):
    dims, kind = tuple(attrs["dims"]), attrs["kind"]
    outs = []
    for x, result in zip(args, results):
        dtype = x.dtype
        if kind in ("max", "min"):
            out = _NUMPY_REDUCERS[kind](x, axis=dims, initial=reduce_identity(kind, dtype))
        elif kind in ("sum", "prod") and dtype.kind in "fc":
            # Accumulate in float64 so the oracle is at least as accurate as any backend.
            wide = np.complex128 if dtype.kind == "c" else np.float64
            out = _NUMPY_REDUCERS[kind](x.astype(wide), axis=dims)
        else:
            out = _NUMPY_REDUCERS[kind](x, axis=dims)
        outs.append(np.asarray(out).astype(result.dtype.numpy))
    return outs


def _arg_rule(name: str):
    def rule(types: Sequence[TensorType], attrs: Attrs, declared):
        (operand,) = types
        axis = attrs["axis"]
        check_axes(name, [axis], operand.rank, "axis")
        check_kind(name, operand.dtype, NUMERIC | {Kind.BOOL})
        if is_symbolic(operand.shape[axis]):
            require_at_least(operand.shape[axis], 1, f"{name} along axis {axis} of "
                             f"{operand.short()}")
        elif operand.shape[axis] == 0:
            raise IRTypeError(f"{name} of an empty axis {axis} of {operand.short()}")
        index_dtype = dtypes.by_name(attrs["index_dtype"])
        return [tensor(index_dtype, operand.shape[:axis] + operand.shape[axis + 1:])]
    return rule


def _arg_reference(fn):
    def reference(args: Sequence[np.ndarray], attrs: Attrs, results):
        return [fn(args[0], axis=attrs["axis"]).astype(results[0].dtype.numpy)]
    return reference


REDUCE = register(OpDef(
    "reduce", VARIADIC, _reduce_rule, _reduce_reference,
    "each operand reduced over `dims` with `kind`; one result per operand",
    (Attr("dims", AttrKind.INTS), Attr("kind", AttrKind.ENUM, choices=tuple(REDUCE_KINDS)))))

_ARG_ATTRS = (Attr("axis", AttrKind.INT),
              Attr("index_dtype", AttrKind.ENUM, "i64", choices=("i32", "i64")))
ARGMAX = register(OpDef("argmax", 1, _arg_rule("argmax"), _arg_reference(np.argmax),
                        "index of the first maximum along `axis` (a nan counts as maximum)",
                        _ARG_ATTRS))
ARGMIN = register(OpDef("argmin", 1, _arg_rule("argmin"), _arg_reference(np.argmin),
                        "index of the first minimum along `axis` (a nan counts as minimum)",
                        _ARG_ATTRS))
