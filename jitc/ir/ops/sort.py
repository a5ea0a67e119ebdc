"""sort: one operand ordered along one axis, giving the ordered values or the permutation.

The order is numpy's: ascending, nan after every number, and stable (equal elements keep
their order, -0.0 and 0.0 counting as equal), which is numpy's `kind="stable"` and a valid
answer for every other `kind` numpy accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jitc.ir import dtypes
from jitc.ir.dtypes import Kind
from jitc.ir.opdef import Attr, AttrKind, OpDef, register
from jitc.ir.ops.rules import NUMERIC, check_axes, check_kind, tensor
from jitc.ir.types import TensorType

Attrs = Mapping[str, object]


def _sort_rule(types: Sequence[TensorType], attrs: Attrs, declared):
    (operand,) = types
    check_axes("sort", [attrs["axis"]], operand.rank, "axis")
    check_kind("sort", operand.dtype, NUMERIC | {Kind.BOOL})
    dtype = dtypes.int64 if attrs["output"] == "indices" else operand.dtype
    return [tensor(dtype, operand.shape)]


def _sort_reference(args: Sequence[np.ndarray], attrs: Attrs, results):
    (x,) = args
    order = np.argsort(x, axis=attrs["axis"], kind="stable")
    if attrs["output"] == "indices":
        return [order.astype(np.int64)]
    return [np.take_along_axis(x, order, axis=attrs["axis"])]


SORT = register(OpDef(
    "sort", 1, _sort_rule, _sort_reference,
    "the operand stably sorted along `axis`, nan last: the values, or (output=indices) the "
    "int64 positions along `axis` they come from",
    (Attr("axis", AttrKind.INT),
     Attr("output", AttrKind.ENUM, "values", choices=("values", "indices")))))
