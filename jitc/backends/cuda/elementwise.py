"""Kernels that compute each output element independently: elementwise ops and loop fusions,
data movement (gather, dynamic slices, pads, copies) and direct convolution.

Threads walk the output in its physical order with a grid-stride loop: consecutive threads
write consecutive addresses, so stores (and the loads of operands laid out like the output)
coalesce.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.cuda import launch as launches
from jitc.backends.cuda.kernel import KernelBuilder, KernelSpec, PhaseContext
from jitc.backends.llvm import indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import for_range, loop_nest
from jitc.backends.llvm.reductions import accumulator_dtype
from jitc.backends.llvm.types import I1, I32, I64, constant, value_type
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value
from jitc.ir.ops import linalg as linalg_ops
from jitc.ir.types import TensorType

_FLOAT_NAMES = {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}
Generate = Callable[[PhaseContext, list[ir.Value]], list[ir.Value]]


def physical_order(t: TensorType) -> list[int]:
    """Dimensions from the most major to the most minor."""
    return list(reversed(t.layout))


def delinearize(b: ir.IRBuilder, linear: ir.Value, shape: Sequence[int],
                order: Sequence[int]) -> list[ir.Value]:
    """The multi-index (i64, by logical dimension) of position `linear` when `shape` is walked
    in `order` (major to minor). Division by constants is cheaper in 32 bits, which suffices
    whenever the whole shape does."""
    total = 1
    for d in shape:
        total *= d
    narrow = total < 2**31
    t = I32 if narrow else I64
    rest = b.trunc(linear, I32) if narrow and linear.type == I64 else linear
    index: list[ir.Value] = [ir.Constant(I64, 0)] * len(shape)
    for k, d in enumerate(reversed(order)):
        size = shape[d]
        if size == 1:
            continue
        is_last = all(shape[e] == 1 for e in list(reversed(order))[k + 1:])
        digit = rest if is_last else b.urem(rest, ir.Constant(t, size))
        index[d] = b.zext(digit, I64) if narrow else digit
        if not is_last:
            rest = b.udiv(rest, ir.Constant(t, size))
    return index


def grid_stride(ctx: PhaseContext, n: int, body: Callable[[ir.Value], None]) -> None:
    """`body(i)` for i = this thread's global index, then every launch.threads-th after it,
    while i < n."""
    b = ctx.builder
    with for_range(b, ctx.global_thread(), n, step=ctx.launch.threads, name="i") as i:
        body(i)


def elementwise_kernel(module: ir.Module, plan: BufferPlan, name: str, values: Sequence[Value],
                       out: TensorType, generate: Generate, *, targets: Sequence[Value] = (),
                       copy_slot: int | None = None,
                       aliases: dict[int, Value] | None = None) -> KernelSpec | None:
    """A kernel storing `generate(ctx, index)` (one value per target) at every index of the
    shape `out`, into the buffers of `targets` (siblings of one shape, each in its own
    layout; threads walk the first one's), or into frame slot `copy_slot` (a result that
    copies another value). None when `out` has no elements."""
    if out.size == 0:
        return None
    config = launches.elementwise(out.size)
    extra = [(copy_slot, out)] if copy_slot is not None else []
    kb = KernelBuilder(module, plan, name, values, targets, config, extra)
    kb.aliases.update(aliases or {})
    with kb.phase() as ctx:
        if copy_slot is not None:
            destinations = [(kb.extra_buffer(ctx, 0), out)]
        else:
            destinations = [(ctx.pointer(t), t.type) for t in targets]
        walk = destinations[0][1]

        def body(i: ir.Value) -> None:
            index = delinearize(ctx.builder, i, walk.shape, physical_order(walk))
            for value, (pointer, t) in zip(generate(ctx, index), destinations, strict=True):
                indexing.store(ctx.builder, value, pointer, t, index)
        grid_stride(ctx, out.size, body)
    return kb.finish()


# -- convolution --------------------------------------------------------------------------------

def convolution_element(ctx: PhaseContext, inst: Instruction,
                        out_index: list[ir.Value]) -> ir.Value:
    """One output element of a direct convolution: the sum over its group's input features and
    the kernel window. Taps in the padding or between dilated inputs contribute nothing; their
    loads use clamped indices and are masked out."""
    attrs = inst.attrs
    lhs, rhs = inst.operands
    out = inst.results[0]
    dims = linalg_ops.parse_dim_labels(attrs["dim_labels"])  # type: ignore[arg-type]
    spatial = len(dims.lhs_spatial)
    strides, padding, lhs_dil, rhs_dil = linalg_ops._conv_window(attrs, spatial)
    groups: int = attrs["feature_group_count"]  # type: ignore[assignment]
    in_per_group = rhs.type.shape[dims.rhs_in]
    out_per_group = rhs.type.shape[dims.rhs_out] // groups
    b, e = ctx.builder, ctx.emitter
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
        current = b.load(slot)
        updated = multiply_add(b, x, w, current, acc)
        b.store(b.select(valid, updated, current), slot)

    if lhs.type.size and in_per_group:
        loop_nest(b, [(0, in_per_group)] + [(0, k) for k in window], tap, name="t")
    return convert_value(b, b.load(slot), acc, dtype)


def multiply_add(b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value,
                 dtype: dtypes.DType) -> ir.Value:
    """acc + x * y; one rounding (fma) for floats, on the GPU and in the simulator alike."""
    if dtype.is_float:
        name = f"llvm.fma.{_FLOAT_NAMES[type(x.type)]}"
        # Declared by hand: llvmlite's declare_intrinsic gets fma's parameter count wrong.
        fma = b.module.globals.get(name) or ir.Function(
            b.module, ir.FunctionType(x.type, [x.type] * 3), name)
        return b.call(fma, [x, y, acc])
    return b.add(acc, b.mul(x, y))
