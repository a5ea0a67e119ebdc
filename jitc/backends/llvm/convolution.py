"""One output element of a direct convolution, shared by the LLVM code generators (the CPU
uses it only where the output's innermost dimension is its batch: cpu/convolution_rows.py).

The element sums, over its group's input features and the kernel window, the products of input
and kernel elements. A tap that falls into the padding or between dilated inputs contributes
nothing: its load uses a clamped (in-bounds) index and the backend's `step` masks it out.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from jitc.backends.llvm.elemental import ElementalEmitter, convert_value
from jitc.backends.llvm.loops import loop_nest
from jitc.backends.llvm.reductions import accumulator_dtype
from jitc.backends.llvm.types import I1, I64, constant, value_type
from jitc.ir import dtypes
from jitc.ir.core import Instruction
from jitc.ir.ops import linalg as linalg_ops
from jitc.ir.symbolic import is_static

# step(builder, accumulated, x, w, valid, accumulator dtype) -> the new accumulated value:
# how a backend adds x * w (one rounding or two) when `valid`.
Step = Callable[[ir.IRBuilder, ir.Value, ir.Value, ir.Value, ir.Value, dtypes.DType], ir.Value]


def convolution_element(e: ElementalEmitter, inst: Instruction, out_index: list[ir.Value],
                        step: Step) -> ir.Value:
    """The value of convolution `inst` at `out_index`, in the result's dtype."""
    attrs = inst.attrs
    lhs, rhs = inst.operands
    out = inst.results[0]
    dims = linalg_ops.parse_dim_labels(attrs["dim_labels"])  # type: ignore[arg-type]
    spatial = len(dims.lhs_spatial)
    strides, padding, lhs_dil, rhs_dil = linalg_ops._conv_window(attrs, spatial)
    groups: int = attrs["feature_group_count"]  # type: ignore[assignment]
    in_per_group = rhs.type.shape[dims.rhs_in]
    out_per_group = rhs.type.shape[dims.rhs_out] // groups
    b = e.builder
    dtype = out.type.dtype
    acc = accumulator_dtype(dtype)
    window = [rhs.type.shape[d] for d in dims.rhs_spatial]
    o = out_index[dims.out_feature]
    group = b.udiv(o, ir.Constant(I64, out_per_group))
    with b.goto_entry_block():
        slot = b.alloca(value_type(acc))
    b.store(constant(acc, 0), slot)

    def tap(counters: list[ir.Value]) -> None:
        c, taps = counters[0], counters[1:]
        lhs_index: list[ir.Value] = [ir.Constant(I64, 0)] * lhs.type.rank
        rhs_index: list[ir.Value] = [ir.Constant(I64, 0)] * rhs.type.rank
        lhs_index[dims.lhs_batch] = out_index[dims.out_batch]
        lhs_index[dims.lhs_feature] = b.add(b.mul(group, ir.Constant(I64, in_per_group)), c)
        rhs_index[dims.rhs_out] = o
        rhs_index[dims.rhs_in] = c
        valid: ir.Value = ir.Constant(I1, 1)
        for s in range(spatial):
            rhs_index[dims.rhs_spatial[s]] = taps[s]
            # Position in the dilated, padded input.
            position = b.add(b.mul(out_index[dims.out_spatial[s]], ir.Constant(I64, strides[s])),
                             b.mul(taps[s], ir.Constant(I64, rhs_dil[s])))
            position = b.sub(position, ir.Constant(I64, padding[s][0]))
            size = lhs.type.shape[dims.lhs_spatial[s]]
            source = b.sdiv(position, ir.Constant(I64, lhs_dil[s])) if lhs_dil[s] > 1 \
                else position
            ok = b.and_(b.icmp_signed(">=", position, ir.Constant(I64, 0)),
                        b.icmp_signed("<", source, ir.Constant(I64, size)))
            if lhs_dil[s] > 1:
                ok = b.and_(ok, b.icmp_signed("==", b.srem(position, ir.Constant(
                    I64, lhs_dil[s])), ir.Constant(I64, 0)))
            valid = b.and_(valid, ok)
            lhs_index[dims.lhs_spatial[s]] = e.clamp_index(source, 0, max(size - 1, 0))
        x = convert_value(b, e.value_at(lhs, lhs_index), dtype, acc)
        w = convert_value(b, e.value_at(rhs, rhs_index), dtype, acc)
        b.store(step(b, b.load(slot), x, w, valid, acc), slot)

    # Only the batch may be symbolic (the op's shape rule), and it is the output's too: when
    # it is 0 at a call no element is computed, so a static empty extent is all to test.
    empty_input = any(is_static(d) and d == 0 for d in lhs.type.shape)
    if not empty_input and in_per_group:
        loop_nest(b, [(0, in_per_group)] + [(0, k) for k in window], tap, name="t")
    return convert_value(b, b.load(slot), acc, dtype)


def window_size(inst: Instruction) -> int:
    """Taps per output element: input features per group times the kernel window."""
    dims = linalg_ops.parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    rhs = inst.operands[1].type
    taps = rhs.shape[dims.rhs_in]
    for d in dims.rhs_spatial:
        taps *= rhs.shape[d]
    return taps


__all__ = ["Step", "convolution_element", "window_size"]
