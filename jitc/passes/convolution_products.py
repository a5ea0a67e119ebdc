"""Convolutions whose product a GEMM runs become patches and one dot_general (im2col).

A direct convolution computes one output element at a time; the GEMMs (the blocked float one
and the byte one, VNNI on the CPU) multiply register tiles of them. So this pass rewrites a
convolution of

  - bytes widened to int32 (numpy's idiom for an int8 convolution: `conv_general_dilated(
    x.astype(np.int32), w.astype(np.int32), ...)`, or np.convolve of widened arrays), into a
    product of the bytes, `dot_general ... result=i32`;
  - float32 or float64 values, into a float dot_general, when the patches hold input values
    only (no kernel tap lies over padding or a hole of the input dilation; cropping is fine)
    or the kernel is a constant with no inf or nan: a tap over padding contributes nothing to
    a convolution (as numpy's correlate skips what lies outside its input), where the
    patches' zero times an infinite tap would be nan. float16 has no GEMM and stays. The
    C backend runs `byte_convolution_products`, which leaves floats alone.

The rewrite, for any dim_labels:

    transpose the input to (batch, spatial..., feature); pad it with zeros (the convolution's
    padding, negative amounts crop, and its input dilation as interior padding); slice it once
    per kernel tap (the stride is the slice's stride, the kernel dilation its offset);
    concatenate the slices along the feature dimension: patches (batch, out spatial...,
    taps x features);
    transpose the kernel to (out, spatial..., in) and reshape it to (out, taps x in);
    multiply the two over taps x features, then transpose to the result's labels.

With feature groups the group leads both operands, (group, batch, spatial..., features per
group) and (group, out per group, taps x in), as the product's batch dimension.

Bytes: every term of each output is the same product of two bytes and int32 addition wraps
modulo 2^32 in any order, so the result is the convolution's to the bit. Floats: the same
terms, summed in the GEMM's order instead of the direct loop's, so the result rounds
differently (docs/operation_semantics.md: contractions agree to a tolerance).

Left to the generic convolution: symbolic or empty shapes, few output features per group
(np.convolve has one, a depthwise convolution one per group: a product with one column wastes
the GEMM's register tile, and the direct loop is faster there), and batch entries whose
patches alone are larger than MAX_PATCH_BYTES (a long kernel over a long signal would need
length x kernel elements). A batch whose patches are larger is split into chunks of entries,
each patches and a product, the results concatenated.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Instruction, Literal, Module, Value
from jitc.ir.ops.linalg import _conv_window, parse_dim_labels
from jitc.ir.symbolic import is_static
from jitc.ir.types import TensorType
from jitc.passes.integer_dots import _moved, _widening
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import rebuild_module

# Fewer output features than this stay a direct convolution: the GEMMs' register tiles are 16
# to 32 columns wide, and a direct loop over 1 to 7 kernels is as fast (float32, 32x64x34x34
# by 3x3: 1 feature 12 ms direct, 38 ms as a product; 4 features 45 ms either way).
MIN_OUT_FEATURES = 8
# On the cpu backend a float convolution takes the product only from more features: its
# direct loop vectorizes along an output row, and the patches cost a pass over 9x the input
# (float32 32x64x34x34 by 3x3, direct against product, one process: output features
# innermost (NHWC) 16 features 19.7 against 27.0 ms, 32: 60.6 against 32.5; features outside
# the rows (NCHW) 32: 19.6 against 33.1, 48: 35.5 against 39.2, 64: 45.0 against 41.1).
CPU_FLOAT_FEATURES_INNERMOST = 32
CPU_FLOAT_FEATURES = 64
# The largest patch matrix the rewrite builds (taps x the input, in bytes): larger batches
# are done in chunks; a single batch entry whose patches are larger stays a convolution.
MAX_PATCH_BYTES = 1 << 28
# The results whose convolutions become products: int32 (of widened bytes: the byte GEMM) and
# the floats the blocked GEMM multiplies (float16 has no GEMM and stays a convolution).
PRODUCT_DTYPES = (dtypes.int32, dtypes.float32, dtypes.float64)


def _static(*types: TensorType) -> bool:
    return all(is_static(d) for t in types for d in t.shape)


def _patch_bytes(inst: Instruction) -> int:
    """The bytes of one batch entry's patches: its output positions x taps x in features, of
    bytes (under an int32 convolution) or of the float input."""
    dims = parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    lhs, out = inst.operands[0].type, inst.results[0].type
    rhs = inst.operands[1].type
    itemsize = 1 if out.dtype is dtypes.int32 else lhs.dtype.itemsize
    return math.prod(out.shape[d] for d in dims.out_spatial) * lhs.shape[dims.lhs_feature] * \
        math.prod(rhs.shape[d] for d in dims.rhs_spatial) * itemsize


def _eligible(inst: Instruction, cpu: bool) -> bool:
    """Whether the convolution has the static shapes and the output features per group a
    product pays for (`cpu`: the cpu backend's thresholds for floats)."""
    if inst.op is not ops.CONVOLUTION or inst.results[0].type.dtype not in PRODUCT_DTYPES:
        return False
    lhs, rhs = (v.type for v in inst.operands)
    out = inst.results[0].type
    if not _static(lhs, rhs, out) or 0 in (*lhs.shape, *rhs.shape, *out.shape):
        return False
    dims = parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    per_group = rhs.shape[dims.rhs_out] // inst.attrs["feature_group_count"]  # type: ignore
    fewest = MIN_OUT_FEATURES
    if cpu and out.dtype is not dtypes.int32:
        innermost = dims.out_feature == out.rank - 1
        fewest = CPU_FLOAT_FEATURES_INNERMOST if innermost else CPU_FLOAT_FEATURES
    return per_group >= fewest and _patch_bytes(inst) <= MAX_PATCH_BYTES


def _reads_only_input(inst: Instruction) -> bool:
    """Whether no kernel tap ever lies over padding or a hole of the input dilation (cropping
    is fine): then the patches hold input values only."""
    spatial = len(parse_dim_labels(inst.attrs["dim_labels"]).lhs_spatial)  # type: ignore
    _, padding, lhs_dil, _ = _conv_window(inst.attrs, spatial)
    return all(lo <= 0 and hi <= 0 for lo, hi in padding) and all(d == 1 for d in lhs_dil)


def _finite_constant(value: Value) -> bool:
    inst = value.producer
    return inst.op is ops.CONSTANT and bool(
        np.isfinite(inst.attrs["value"].array).all())  # type: ignore[union-attr]


def _sources(inst: Instruction, operands: Sequence[Value], floats: bool
             ) -> tuple[tuple[Value | np.ndarray, list[Instruction]], ...] | None:
    """The values the patches and the kernel are made of, each with the moves to replay on
    it: the bytes under an int32 convolution's widenings; a float convolution's own operands,
    when the patches' zeros are exact (see the module docstring)."""
    if inst.results[0].type.dtype is dtypes.int32:
        found = [_widening(v) for v in operands]
        if found[0] is None or found[1] is None:
            return None
        return found[0], found[1]
    if not floats or not (_reads_only_input(inst) or _finite_constant(inst.operands[1])):
        return None
    return (operands[0], []), (operands[1], [])


def _transpose(builder: Builder, value: Value, permutation: list[int]) -> Value:
    if permutation == list(range(len(permutation))):
        return value
    return builder.emit(ops.TRANSPOSE, [value], {"permutation": permutation})


def _patches(builder: Builder, x: Value, inst: Instruction) -> Value:
    """(leading..., out spatial..., taps x features) elements of `x` (leading..., spatial...,
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


def _rewrite(builder: Builder, inst: Instruction, operands: Sequence[Value],
             floats: bool = True, cpu: bool = False) -> list[Value] | None:
    if not _eligible(inst, cpu):
        return None
    found = _sources(inst, operands, floats)
    if found is None:
        return None
    x, w = (_moved(builder, source, moves) for source, moves in found)
    out = inst.results[0].type
    # A byte product names its int32 result; a float product's result is its operands' dtype.
    result_attr = {"result": "i32"} if out.dtype is dtypes.int32 else {}
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
            **result_attr}))
    product = parts[0] if len(parts) == 1 else \
        builder.emit(ops.CONCATENATE, parts, {"dimension": batch_axis})
    # product is (group?, batch, spatial..., features per group); the result's dimension d
    # reads the axes where[d] of it, the group and the feature merged by a reshape.
    where = {dims.out_batch: [batch_axis],
             dims.out_feature: [*group_dims, product.type.rank - 1],
             **{d: [batch_axis + 1 + s] for s, d in enumerate(dims.out_spatial)}}
    result = _transpose(builder, product, [a for d in range(spatial + 2) for a in where[d]])
    if groups > 1:
        result = builder.emit(ops.RESHAPE, [result], {}, TensorType(out.dtype, out.shape))
    return [result]


@module_pass("convolution_products")
def convolution_products(module: Module) -> Module:
    return rebuild_module(module, _rewrite)


# The cpu backend's variant, under the same name (disabling it by name disables either).
@module_pass("convolution_products")
def cpu_convolution_products(module: Module) -> Module:
    return rebuild_module(module, functools.partial(_rewrite, cpu=True))


# The C backend's variant, under the same name (disabling it by name disables either): its
# bytes pay, its floats hardly (its direct loop against patches and its tiled product, float32
# 32x64x34x34 by 3x3, one process: 16 features 24.5 against 58.9 ms, 64: 99.6 against 82.7).
@module_pass("convolution_products")
def byte_convolution_products(module: Module) -> Module:
    return rebuild_module(module, functools.partial(_rewrite, floats=False))


__all__ = ["convolution_products", "byte_convolution_products", "cpu_convolution_products",
           "MIN_OUT_FEATURES", "CPU_FLOAT_FEATURES", "CPU_FLOAT_FEATURES_INNERMOST",
           "MAX_PATCH_BYTES"]
