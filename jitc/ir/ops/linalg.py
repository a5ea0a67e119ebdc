"""Contractions: dot_general and convolution."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from jitc.ir import dtypes
from jitc.ir.dtypes import DType
from jitc.ir.opdef import Attr, AttrKind, IRTypeError, OpDef, Trait, register
from jitc.ir.ops.rules import (
    ARITHMETIC,
    NUMERIC,
    check_axes,
    check_kind,
    is_symbolic,
    require_equal,
    same_dtype,
    tensor,
)
from jitc.ir.types import TensorType

Attrs = Mapping[str, object]


T = TypeVar("T")


def _wide(dtype: np.dtype) -> np.dtype:
    """Accumulation type of the reference: exact for integers (then wrapped), float64 else."""
    wide = {"f": np.float64, "c": np.complex128}.get(dtype.kind, np.int64)
    return np.dtype(wide)


# --- dot_general ------------------------------------------------------------------------------

# Byte operands whose products a dot_general may sum into a wider result (`result=i32`):
# what the numpy idiom `a.astype(np.int32) @ b.astype(np.int32)` on int8/uint8 arrays means.
NARROW_INTEGERS = (dtypes.int8, dtypes.uint8)


def _dot_dtype(types: Sequence[TensorType], attrs: Attrs) -> DType:
    result = attrs.get("result", "")
    if not result:
        dtype = same_dtype("dot_general", types)
        check_kind("dot_general", dtype, ARITHMETIC)
        return dtype
    for t in types:
        if t.dtype not in NARROW_INTEGERS:
            raise IRTypeError(f"dot_general result={result}: operands must be int8 or uint8, "
                              f"got {t.short()}")
    return dtypes.by_name(str(result))


def dot_axes(lhs_rank: int, rhs_rank: int, attrs: Attrs
             ) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    """dot_general's axes, as the kernels walk them: the lhs and rhs batch axes, contracting
    axes and free axes (the rest, in order); the result is batch, lhs free, rhs free."""
    lb, rb = list(attrs["lhs_batch"]), list(attrs["rhs_batch"])  # type: ignore[call-overload]
    lc, rc = list(attrs["lhs_contract"]), list(attrs["rhs_contract"])  # type: ignore
    lf = [d for d in range(lhs_rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs_rank) if d not in rb and d not in rc]
    return lb, rb, lc, rc, lf, rf


def dot_operand_index(zero: T, rank: int, batch: Sequence[int], contract: Sequence[int],
                      free: Sequence[int], out_index: Sequence[T], k: Sequence[T],
                      free_offset: int) -> list[T]:
    """The index of one operand's element for an output index and a contracting index, in
    whatever form a backend writes indices (`zero` for the axes none of them covers)."""
    index = [zero] * rank
    for j, d in enumerate(batch):
        index[d] = out_index[j]
    for j, d in enumerate(contract):
        index[d] = k[j]
    for j, d in enumerate(free):
        index[d] = out_index[free_offset + j]
    return index


def _dot_rule(types: Sequence[TensorType], attrs: Attrs, declared):
    lhs, rhs = types
    dtype = _dot_dtype(types, attrs)
    lb, rb = attrs["lhs_batch"], attrs["rhs_batch"]
    lc, rc = attrs["lhs_contract"], attrs["rhs_contract"]
    check_axes("dot_general lhs", list(lb) + list(lc), lhs.rank)
    check_axes("dot_general rhs", list(rb) + list(rc), rhs.rank)
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise IRTypeError("dot_general: lhs and rhs need as many batch and contracting "
                          "dimensions as each other")
    for kind, ls, rs in (("batch", lb, rb), ("contracting", lc, rc)):
        for a, b in zip(ls, rs):
            if is_symbolic(lhs.shape[a], rhs.shape[b]):
                require_equal(lhs.shape[a], rhs.shape[b], f"dot_general {kind} dimension {a} "
                              f"of {lhs.short()} and dimension {b} of {rhs.short()}")
            elif lhs.shape[a] != rhs.shape[b]:
                raise IRTypeError(f"dot_general: {kind} dimension {a} of {lhs.short()} does not "
                                  f"match dimension {b} of {rhs.short()}")
    lhs_free = [d for a, d in enumerate(lhs.shape) if a not in lb and a not in lc]
    rhs_free = [d for a, d in enumerate(rhs.shape) if a not in rb and a not in rc]
    return [tensor(dtype, [lhs.shape[a] for a in lb] + lhs_free + rhs_free)]


def _dot_reference(args: Sequence[np.ndarray], attrs: Attrs, results):
    lhs, rhs = args
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lhs_sub = [next(letters) for _ in range(lhs.ndim)]
    rhs_sub = [next(letters) for _ in range(rhs.ndim)]
    for a, b in itertools.chain(zip(attrs["lhs_batch"], attrs["rhs_batch"]),
                                zip(attrs["lhs_contract"], attrs["rhs_contract"])):
        rhs_sub[b] = lhs_sub[a]
    batch = [lhs_sub[a] for a in attrs["lhs_batch"]]
    contract = {lhs_sub[a] for a in attrs["lhs_contract"]}
    lhs_free = [s for s in lhs_sub if s not in batch and s not in contract]
    rhs_free = [s for s in rhs_sub if s not in batch and s not in contract]
    spec = f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{''.join(batch + lhs_free + rhs_free)}"
    if results[0].dtype == dtypes.float16:
        contracted = [lhs_sub[a] for a in attrs["lhs_contract"]]
        lhs = np.einsum(f"{''.join(lhs_sub)}->{''.join(batch + lhs_free + contracted)}", lhs)
        rhs = np.einsum(f"{''.join(rhs_sub)}->{''.join(batch + contracted + rhs_free)}", rhs)
        return [_float16_products(lhs, rhs, len(batch), len(lhs_free), len(rhs_free))]
    wide = _wide(results[0].dtype.numpy)
    out = np.einsum(spec, lhs.astype(wide), rhs.astype(wide))
    return [out.astype(results[0].dtype.numpy)]


def _float16_products(lhs: np.ndarray, rhs: np.ndarray, batch: int, lhs_free: int,
                      rhs_free: int) -> np.ndarray:
    """numpy's float16 matmul: each product (exact in float32) added to a float32 sum in
    order of the contracted index, rounded to float16 once. lhs is (batch, free, contracted)
    and rhs (batch, contracted, free), each group of axes in order."""
    batch_shape, m_shape = lhs.shape[:batch], lhs.shape[batch:batch + lhs_free]
    n_shape = rhs.shape[rhs.ndim - rhs_free:]
    k_shape = lhs.shape[batch + lhs_free:]
    b, m, n, k = (int(np.prod(s, dtype=np.int64))
                  for s in (batch_shape, m_shape, n_shape, k_shape))
    # Sizes written out: -1 cannot be inferred beside a 0 (an empty batch or free axis).
    left = lhs.reshape(b, m, k).astype(np.float32)
    right = rhs.reshape(b, k, n).astype(np.float32)
    total = np.zeros((b, m, n), np.float32)
    for k in range(left.shape[2]):
        total += left[:, :, k, None] * right[:, None, k, :]
    return total.astype(np.float16).reshape(batch_shape + m_shape + n_shape)


DOT_GENERAL = register(OpDef(
    "dot_general", 2, _dot_rule, _dot_reference,
    "sum of products over the contracting dimensions; result is batch, lhs free, rhs free",
    (Attr("lhs_batch", AttrKind.INTS, ()), Attr("rhs_batch", AttrKind.INTS, ()),
     Attr("lhs_contract", AttrKind.INTS), Attr("rhs_contract", AttrKind.INTS),
     Attr("result", AttrKind.ENUM, "", ("", "i32"))),
    frozenset({Trait.TRANSCENDENTAL})))


# --- convolution ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConvDims:
    """Which dimension of each operand plays which role, parsed from `dim_labels`.

    The labels read like XLA's: `bf01_oi01->bf01` is NCHW input, OIHW kernel, NCHW output;
    `b01f_01io->b01f` is NHWC / HWIO / NHWC. Digits name the spatial dimensions in order.
    """

    lhs_batch: int
    lhs_feature: int
    lhs_spatial: tuple[int, ...]
    rhs_out: int
    rhs_in: int
    rhs_spatial: tuple[int, ...]
    out_batch: int
    out_feature: int
    out_spatial: tuple[int, ...]


_LABELS = re.compile(r"^([bf0-9]+)_([oi0-9]+)->([bf0-9]+)$")


def parse_dim_labels(labels: str) -> ConvDims:
    match = _LABELS.match(labels)
    if not match:
        raise IRTypeError(f"convolution: dim_labels {labels!r} is not like 'bf01_oi01->bf01'")
    lhs, rhs, out = match.groups()
    spatial = len(lhs) - 2

    def roles(text: str, a: str, b: str) -> tuple[int, int, tuple[int, ...]]:
        digits = "".join(str(i) for i in range(spatial))
        if len(text) != spatial + 2 or sorted(text) != sorted(a + b + digits):
            raise IRTypeError(f"convolution: dim_labels {labels!r}: {text!r} must hold "
                              f"{a}, {b} and the digits 0..{spatial - 1} once each")
        return text.index(a), text.index(b), tuple(text.index(str(i)) for i in range(spatial))

    return ConvDims(*roles(lhs, "b", "f"), *roles(rhs, "o", "i"), *roles(out, "b", "f"))


def _conv_window(attrs: Attrs, spatial: int) -> tuple[tuple, tuple, tuple, tuple]:
    def ints(name: str, default: int) -> tuple[int, ...]:
        value = attrs[name] or (default,) * spatial
        if len(value) != spatial:
            raise IRTypeError(f"convolution: {name} needs {spatial} entries, got {list(value)}")
        return value
    padding = attrs["padding"] or ((0, 0),) * spatial
    if len(padding) != spatial:
        raise IRTypeError(f"convolution: padding needs {spatial} (low, high) pairs")
    strides, lhs_dil, rhs_dil = ints("strides", 1), ints("lhs_dilation", 1), ints(
        "rhs_dilation", 1)
    if min(strides + lhs_dil + rhs_dil, default=1) < 1:
        raise IRTypeError("convolution: strides and dilations must be at least 1")
    return strides, padding, lhs_dil, rhs_dil


def _conv_rule(types: Sequence[TensorType], attrs: Attrs, declared):
    lhs, rhs = types
    dtype = same_dtype("convolution", types)
    check_kind("convolution", dtype, NUMERIC)
    dims = parse_dim_labels(attrs["dim_labels"])
    spatial = len(dims.lhs_spatial)
    if lhs.rank != spatial + 2 or rhs.rank != spatial + 2:
        raise IRTypeError(f"convolution: dim_labels {attrs['dim_labels']!r} needs rank "
                          f"{spatial + 2} operands, got {lhs.short()} and {rhs.short()}")
    if is_symbolic(*rhs.shape, *(d for a, d in enumerate(lhs.shape) if a != dims.lhs_batch)):
        raise IRTypeError(f"convolution of {lhs.short()} with {rhs.short()}: only the batch "
                          "dimension may be symbolic")
    strides, padding, lhs_dil, rhs_dil = _conv_window(attrs, spatial)
    groups = attrs["feature_group_count"]
    in_features, out_features = lhs.shape[dims.lhs_feature], rhs.shape[dims.rhs_out]
    if groups < 1 or in_features % groups or out_features % groups \
            or rhs.shape[dims.rhs_in] * groups != in_features:
        raise IRTypeError(f"convolution: {in_features} input features in {groups} group(s) "
                          f"do not fit kernel {rhs.short()} ({dims.rhs_in} is its input "
                          "feature dimension)")
    out = [0] * (spatial + 2)
    out[dims.out_batch] = lhs.shape[dims.lhs_batch]
    out[dims.out_feature] = out_features
    for s in range(spatial):
        size = lhs.shape[dims.lhs_spatial[s]]
        dilated = (size - 1) * lhs_dil[s] + 1 if size else 0
        padded = dilated + padding[s][0] + padding[s][1]
        window = (rhs.shape[dims.rhs_spatial[s]] - 1) * rhs_dil[s] + 1
        out[dims.out_spatial[s]] = max(0, (padded - window) // strides[s] + 1) \
            if padded >= window else 0
    return [tensor(dtype, out)]


def _conv_reference(args: Sequence[np.ndarray], attrs: Attrs, results):
    lhs, rhs = args
    dims = parse_dim_labels(attrs["dim_labels"])
    spatial = len(dims.lhs_spatial)
    strides, padding, lhs_dil, rhs_dil = _conv_window(attrs, spatial)
    groups = attrs["feature_group_count"]
    wide = _wide(lhs.dtype)
    # Canonical layouts: x is (N, C, spatial...), w is (O, I, spatial...).
    x = np.transpose(lhs, (dims.lhs_batch, dims.lhs_feature) + dims.lhs_spatial).astype(wide)
    w = np.transpose(rhs, (dims.rhs_out, dims.rhs_in) + dims.rhs_spatial).astype(wide)
    n, c = x.shape[:2]
    dilated = np.zeros((n, c) + tuple((s - 1) * d + 1 if s else 0
                                      for s, d in zip(x.shape[2:], lhs_dil)), wide)
    spread = (slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dil)
    dilated[spread] = x
    padded = _pad_edges(dilated, padding)
    # Where the input is: a hole or padding contributes nothing, not 0 * kernel (nan for an
    # infinite tap), as numpy's correlate skips what lies outside its input.
    present = np.zeros(dilated.shape, bool)
    present[spread] = True
    present = _pad_edges(present, padding)
    out_type = results[0]
    out_spatial = tuple(out_type.shape[d] for d in dims.out_spatial)
    o = w.shape[0]
    acc = np.zeros((n, groups, o // groups) + out_spatial, wide)
    xg = padded.reshape((n, groups, c // groups) + padded.shape[2:])
    present_g = present.reshape(xg.shape)
    wg = w.reshape((groups, o // groups) + w.shape[1:])
    spatial_axes = (np.newaxis,) * spatial
    for offsets in itertools.product(*(range(k) for k in w.shape[2:])):
        window = tuple(slice(k * d, k * d + (size - 1) * s + 1, s) if size else slice(0, 0)
                       for k, d, s, size in zip(offsets, rhs_dil, strides, out_spatial))
        every = (slice(None), slice(None), slice(None))
        patch, inside = xg[every + window], present_g[every + window]
        taps = wg[every + offsets][(np.newaxis, Ellipsis) + spatial_axes]
        # (n, g, 1, c, spatial...) * (1, g, o, c, 1...), summed over c
        products = patch[:, :, np.newaxis] * taps
        acc += np.where(inside[:, :, np.newaxis], products, 0).sum(axis=3)
    canonical = acc.reshape((n, o) + out_spatial)
    order = [0] * (spatial + 2)
    for canonical_axis, out_axis in enumerate((dims.out_batch, dims.out_feature)
                                              + dims.out_spatial):
        order[out_axis] = canonical_axis
    return [np.transpose(canonical, order).astype(out_type.dtype.numpy)]


def _pad_edges(x: np.ndarray, padding: Sequence[tuple[int, int]]) -> np.ndarray:
    """Zero padding of the spatial dimensions; negative amounts crop."""
    grow = [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    x = np.pad(x, grow)
    crop = (slice(None), slice(None)) + tuple(
        slice(-min(lo, 0), x.shape[2 + i] + min(hi, 0)) for i, (lo, hi) in enumerate(padding))
    return x[crop]


CONVOLUTION = register(OpDef(
    "convolution", 2, _conv_rule, _conv_reference,
    "grouped, strided, padded and dilated N-d convolution (cross-correlation, as in deep "
    "learning) with dimension roles given by `dim_labels`",
    (Attr("dim_labels", AttrKind.STRING), Attr("strides", AttrKind.INTS, ()),
     Attr("padding", AttrKind.INT_PAIRS, ()), Attr("lhs_dilation", AttrKind.INTS, ()),
     Attr("rhs_dilation", AttrKind.INTS, ()),
     Attr("feature_group_count", AttrKind.INT, 1)),
    frozenset({Trait.TRANSCENDENTAL})))
