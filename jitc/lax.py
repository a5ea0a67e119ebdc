"""jitc.lax: direct access to IR ops that numpy has no spelling for (as in jax.lax).

Each function emits one op of the table; arguments are traced arrays (or values that become
constants). Outside a trace they evaluate with the reference semantics, so they can be tried
eagerly on numpy arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.opdef import OpDef
from jitc.ir.types import TensorType
from jitc.numpy._core import lift, lift_all, tracers_in
from jitc.tracing.state import emit, emit_multi
from jitc.tracing.tracer import Tracer


def _eager(op: OpDef, operands: Sequence[Any], attrs: dict[str, Any],
           result_types: Sequence[TensorType] | None = None) -> list[np.ndarray]:
    """Evaluate one op on concrete arrays with its reference semantics."""
    arrays = [np.asarray(a) for a in operands]
    types = [TensorType(dtypes.from_numpy(a.dtype), a.shape) for a in arrays]
    attrs = op.normalize_attrs(attrs)
    results = op.result_types(types, attrs, result_types)
    with np.errstate(all="ignore"):
        return [np.asarray(r) for r in op.reference(arrays, attrs, results)]


def _apply(op: OpDef, operands: Sequence[Any], attrs: dict[str, Any] | None = None,
           result_type: TensorType | None = None, same_dtype: bool = True) -> Any:
    attrs = attrs or {}
    declared = None if result_type is None else (result_type,)
    if not tracers_in(operands):
        arrays = [np.asarray(a) for a in operands]
        if same_dtype and arrays:
            common = np.result_type(*operands)
            arrays = [a.astype(common) for a in arrays]
        return _eager(op, arrays, attrs, declared)[0]
    xs = lift_all(list(operands)) if same_dtype else [lift(x) for x in operands]
    return emit(op, xs, attrs, result_type)


def logistic(x: Any) -> Any:
    return _apply(ops.LOGISTIC, [x])


def rsqrt(x: Any) -> Any:
    return _apply(ops.RSQRT, [x])


def clamp(lo: Any, x: Any, hi: Any) -> Any:
    return _apply(ops.CLAMP, [lo, x, hi])


def rem(x: Any, y: Any) -> Any:
    return _apply(ops.REM, [x, y])


def div(x: Any, y: Any) -> Any:
    """Division with the IR's semantics (integers truncate toward zero)."""
    return _apply(ops.DIV, [x, y])


def shift_left(x: Any, y: Any) -> Any:
    return _apply(ops.SHIFT_LEFT, [x, y])


def shift_right_arithmetic(x: Any, y: Any) -> Any:
    return _apply(ops.SHIFT_RIGHT_ARITHMETIC, [x, y])


def shift_right_logical(x: Any, y: Any) -> Any:
    return _apply(ops.SHIFT_RIGHT_LOGICAL, [x, y])


def convert_element_type(x: Any, dtype: Any) -> Any:
    """Conversion with defined results everywhere (saturating float to int, nan to 0)."""
    target = dtypes.from_numpy(dtype)
    shape = np.shape(x) if not isinstance(x, Tracer) else x.shape
    return _apply(ops.CONVERT, [x], {}, TensorType(target, shape))


def bitcast_convert_type(x: Any, dtype: Any) -> Any:
    target = dtypes.from_numpy(dtype)
    shape = np.shape(x) if not isinstance(x, Tracer) else x.shape
    return _apply(ops.BITCAST_CONVERT, [x], {}, TensorType(target, shape))


def iota(dtype: Any, shape: Sequence[int], dimension: int = 0) -> Any:
    result = TensorType(dtypes.from_numpy(dtype), tuple(shape))
    from jitc.tracing.state import current_trace
    if current_trace() is None:
        return _eager(ops.IOTA, [], {"dimension": dimension}, (result,))[0]
    return emit(ops.IOTA, [], {"dimension": dimension}, result)


def broadcast_in_dim(x: Any, shape: Sequence[int], dims: Sequence[int]) -> Any:
    dtype = dtypes.from_numpy(x.dtype if isinstance(x, Tracer) else np.asarray(x).dtype)
    return _apply(ops.BROADCAST_IN_DIM, [x], {"dims": list(dims)},
                  TensorType(dtype, tuple(shape)))


def slice(x: Any, start: Sequence[int], limit: Sequence[int],
          stride: Sequence[int] | None = None) -> Any:
    return _apply(ops.SLICE, [x], {"start": start, "limit": limit, "stride": stride or ()})


def pad(x: Any, value: Any, low: Sequence[int], high: Sequence[int],
        interior: Sequence[int] | None = None) -> Any:
    return _apply(ops.PAD, [x, value], {"low": low, "high": high, "interior": interior or ()})


def dynamic_slice(x: Any, starts: Sequence[Any], sizes: Sequence[int]) -> Any:
    """A `sizes` block at run-time start indices (clamped so the block fits)."""
    return _apply(ops.DYNAMIC_SLICE, [x, *starts], {"sizes": sizes}, same_dtype=False)


def dynamic_update_slice(x: Any, update: Any, starts: Sequence[Any]) -> Any:
    if not tracers_in([x, update, *starts]):
        return _eager(ops.DYNAMIC_UPDATE_SLICE, [x, update, *starts], {})[0]
    base, upd = lift_all([x, update])
    return emit(ops.DYNAMIC_UPDATE_SLICE, [base, upd, *[lift(s) for s in starts]])


def gather(x: Any, indices: Any, axis: int = 0) -> Any:
    """np.take with indices clamped into range."""
    return _apply(ops.GATHER, [x, indices], {"axis": axis}, same_dtype=False)


def reduce(operands: Sequence[Any], dims: Sequence[int], kind: str) -> tuple[Any, ...]:
    """One multi-operand reduce: every operand reduced over `dims`, one result each."""
    attrs = {"dims": list(dims), "kind": kind}
    if not tracers_in(list(operands)):
        return tuple(_eager(ops.REDUCE, operands, attrs))
    return emit_multi(ops.REDUCE, [lift(x) for x in operands], attrs)


def dot_general(lhs: Any, rhs: Any, contract: tuple[Sequence[int], Sequence[int]],
                batch: tuple[Sequence[int], Sequence[int]] = ((), ())) -> Any:
    attrs = {"lhs_contract": list(contract[0]), "rhs_contract": list(contract[1]),
             "lhs_batch": list(batch[0]), "rhs_batch": list(batch[1])}
    return _apply(ops.DOT_GENERAL, [lhs, rhs], attrs)


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int] = (),
                         padding: Sequence[tuple[int, int]] = (),
                         lhs_dilation: Sequence[int] = (), rhs_dilation: Sequence[int] = (),
                         dimension_numbers: str = "bf01_oi01->bf01",
                         feature_group_count: int = 1) -> Any:
    """N-d convolution (cross-correlation). `dimension_numbers` uses the IR's dim_labels:
    `bf01_oi01->bf01` is NCHW/OIHW, `b01f_01io->b01f` is NHWC/HWIO."""
    attrs = {"dim_labels": dimension_numbers, "strides": list(window_strides),
             "padding": [tuple(p) for p in padding], "lhs_dilation": list(lhs_dilation),
             "rhs_dilation": list(rhs_dilation), "feature_group_count": feature_group_count}
    return _apply(ops.CONVOLUTION, [lhs, rhs], attrs)


def argmax(x: Any, axis: int, index_dtype: Any = np.int64) -> Any:
    return _apply(ops.ARGMAX, [x], {"axis": axis,
                                    "index_dtype": dtypes.from_numpy(index_dtype).name})


def argmin(x: Any, axis: int, index_dtype: Any = np.int64) -> Any:
    return _apply(ops.ARGMIN, [x], {"axis": axis,
                                    "index_dtype": dtypes.from_numpy(index_dtype).name})


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    if not tracers_in([pred, on_true, on_false]):
        return np.where(pred, on_true, on_false)
    a, b = lift_all([on_true, on_false])
    return emit(ops.SELECT, [lift(pred), a, b])
