"""Convolutions of bytes widened to int32 become patches and one byte product (im2col).

An int8 convolution in numpy's idiom widens both operands first, as integer_dots' products
do (`conv_general_dilated(x.astype(np.int32), w.astype(np.int32), ...)`, or np.convolve of
widened arrays). A direct convolution of those int32 values multiplies one 32-bit lane at a
time; the byte product (VNNI on the CPU) multiplies 64 bytes per instruction. So this pass
rewrites

    %x = convert(%a) : s32[..]        (%a: s8 or u8, any dim_labels)
    %w = convert(%b) : s32[..]        (%b: s8 or u8)
    %c = convolution(%x, %w) ...      : s32[..]

into moves of the bytes and one `dot_general ... result=i32`:

    transpose %a to (batch, spatial..., feature); pad it with zero bytes (the convolution's
    padding, negative amounts crop, and its input dilation as interior padding); slice it once
    per kernel tap (the stride is the slice's stride, the kernel dilation its offset);
    concatenate the slices along the feature dimension: patches (batch, out spatial...,
    taps x features);
    transpose %b to (out, spatial..., in) and reshape it to (out, taps x in);
    multiply the two over taps x features, then transpose to the result's labels.

With feature groups the group leads both operands, (group, batch, spatial..., features per
group) and (group, out per group, taps x in), as the product's batch dimension.

Every term of each output is the same product of two bytes and int32 addition wraps modulo
2^32 in any order, so the result is the convolution's to the bit. A tap over padding or a hole
of the dilation reads a zero byte and adds nothing, as in the direct convolution.

Left to the generic convolution, which is also exact: symbolic or empty shapes, few output
features per group (np.convolve has one, a depthwise convolution one per group: a product
with one column wastes the byte kernel's register tile, and the direct loop is faster there),
and batch entries whose patches
alone are larger than MAX_PATCH_BYTES (a long kernel over a long signal would need length x
kernel bytes). A batch whose patches are larger is split into chunks of entries, each
patches and a product, the results concatenated.
"""

from __future__ import annotations

import math

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Instruction, Literal, Module, Value
from jitc.ir.ops.linalg import _conv_window, parse_dim_labels
from jitc.ir.symbolic import is_static
from jitc.ir.types import TensorType
from jitc.passes.integer_dots import _moved, _widening
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import rebuild_module

# Fewer output features than this stay a direct convolution: the byte product's register
# tile is 32 columns wide, and a direct loop over 1 to 7 kernels is as fast.
MIN_OUT_FEATURES = 8
# The largest patch matrix the rewrite builds (taps x the input, in bytes): larger batches
# are done in chunks; a single batch entry whose patches are larger stays a convolution.
MAX_PATCH_BYTES = 1 << 28


def _static(*types: TensorType) -> bool:
    return all(is_static(d) for t in types for d in t.shape)


def _patch_bytes(inst: Instruction) -> int:
    """The bytes of one batch entry's patches: its output positions x taps x in features."""
    dims = parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    lhs, out = inst.operands[0].type, inst.results[0].type
    rhs = inst.operands[1].type
    return math.prod(out.shape[d] for d in dims.out_spatial) * lhs.shape[dims.lhs_feature] * \
        math.prod(rhs.shape[d] for d in dims.rhs_spatial)


def _eligible(inst: Instruction) -> bool:
    if inst.op is not ops.CONVOLUTION or inst.results[0].type.dtype is not dtypes.int32:
        return False
    lhs, rhs = (v.type for v in inst.operands)
    out = inst.results[0].type
    if not _static(lhs, rhs, out) or 0 in (*lhs.shape, *rhs.shape, *out.shape):
        return False
    dims = parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    per_group = rhs.shape[dims.rhs_out] // inst.attrs["feature_group_count"]  # type: ignore
    return per_group >= MIN_OUT_FEATURES and _patch_bytes(inst) <= MAX_PATCH_BYTES


def _transpose(builder: Builder, value: Value, permutation: list[int]) -> Value:
    if permutation == list(range(len(permutation))):
        return value
    return builder.emit(ops.TRANSPOSE, [value], {"permutation": permutation})


def _patches(builder: Builder, x: Value, inst: Instruction) -> Value:
    """(leading..., out spatial..., taps x features) bytes of `x` (leading..., spatial...,
    features; the leading dimensions are the batch, or the group and the batch), taps major,
    in the kernel's row-major tap order."""
    dims = parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    spatial = len(dims.lhs_spatial)
    strides, padding, lhs_dil, rhs_dil = _conv_window(inst.attrs, spatial)
    lead = [0] * (x.type.rank - spatial - 1)
    low = [*lead, *(lo for lo, _ in padding), 0]
    high = [*lead, *(hi for _, hi in padding), 0]
    interior = [*lead, *(d - 1 for d in lhs_dil), 0]
    if any(low) or any(high) or any(interior):
        zero = builder.emit(ops.CONSTANT, [], {"value": Literal(np.zeros((), x.type.dtype.numpy))})
        x = builder.emit(ops.PAD, [x, zero], {"low": low, "high": high, "interior": interior})
    rhs, out = inst.operands[1].type, inst.results[0].type
    window = [rhs.shape[d] for d in dims.rhs_spatial]
    out_spatial = [out.shape[d] for d in dims.out_spatial]
    leading, features = list(x.type.shape[:len(lead)]), x.type.shape[-1]
    taps = []
    for offsets in np.ndindex(*window):
        corner = [k * d for k, d in zip(offsets, rhs_dil)]
        limit = [*leading, *(s + (n - 1) * step + 1 for s, n, step
                             in zip(corner, out_spatial, strides)), features]
        taps.append(builder.emit(ops.SLICE, [x], {
            "start": [*lead, *corner, 0], "limit": limit,
            "stride": [*(1 for _ in lead), *strides, 1]}))
    if len(taps) == 1:
        return taps[0]
    return builder.emit(ops.CONCATENATE, taps, {"dimension": x.type.rank - 1})


def _rewrite(builder: Builder, inst: Instruction, operands: list[Value]) -> list[Value] | None:
    if not _eligible(inst):
        return None
    found = [_widening(v) for v in operands]
    if found[0] is None or found[1] is None:
        return None
    x, w = (_moved(builder, source, moves) for source, moves in found)
    dims = parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    spatial = len(dims.lhs_spatial)
    groups: int = inst.attrs["feature_group_count"]  # type: ignore[assignment]
    x = _transpose(builder, x, [dims.lhs_batch, *dims.lhs_spatial, dims.lhs_feature])
    w = _transpose(builder, w, [dims.rhs_out, *dims.rhs_spatial, dims.rhs_in])
    out_features, depth = w.type.shape[0], math.prod(w.type.shape[1:])
    if groups == 1:
        w_shape: tuple[int, ...] = (out_features, depth)
    else:  # the group leads both operands: (group, batch, spatial..., features per group)
        *shape, features = x.type.shape
        x = builder.emit(ops.RESHAPE, [x], {}, TensorType(
            x.type.dtype, (*shape, groups, features // groups)))
        x = _transpose(builder, x, [spatial + 1, *range(spatial + 1), spatial + 2])
        w_shape = (groups, out_features // groups, depth)
    w = builder.emit(ops.RESHAPE, [w], {}, TensorType(w.type.dtype, w_shape))
    batch_axis = 0 if groups == 1 else 1
    group_dims = [] if groups == 1 else [0]
    # Batch entries in chunks whose patches fit MAX_PATCH_BYTES, each its own product: a
    # chunk's patches are dead once its product is done, so the chunks share that memory.
    batch = x.type.shape[batch_axis]
    chunk = min(batch, MAX_PATCH_BYTES // _patch_bytes(inst))
    parts = []
    for first in range(0, batch, chunk):
        part = x
        if chunk < batch:
            start, limit = [0] * x.type.rank, list(x.type.shape)
            start[batch_axis], limit[batch_axis] = first, min(first + chunk, batch)
            part = builder.emit(ops.SLICE, [x], {"start": start, "limit": limit})
        parts.append(builder.emit(ops.DOT_GENERAL, [_patches(builder, part, inst), w], {
            "lhs_batch": group_dims, "rhs_batch": group_dims,
            "lhs_contract": [part.type.rank - 1], "rhs_contract": [len(w_shape) - 1],
            "result": "i32"}))
    product = parts[0] if len(parts) == 1 else \
        builder.emit(ops.CONCATENATE, parts, {"dimension": batch_axis})
    # product is (group?, batch, spatial..., features per group); the result's dimension d
    # reads the axes where[d] of it, the group and the feature merged by a reshape.
    where = {dims.out_batch: [batch_axis],
             dims.out_feature: [*group_dims, product.type.rank - 1],
             **{d: [batch_axis + 1 + s] for s, d in enumerate(dims.out_spatial)}}
    result = _transpose(builder, product, [a for d in range(spatial + 2) for a in where[d]])
    out = inst.results[0].type
    if groups > 1:
        result = builder.emit(ops.RESHAPE, [result], {}, TensorType(dtypes.int32, out.shape))
    return [result]


@module_pass("integer_convolutions")
def integer_convolutions(module: Module) -> Module:
    return rebuild_module(module, _rewrite)


__all__ = ["integer_convolutions", "MIN_OUT_FEATURES", "MAX_PATCH_BYTES"]
