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
from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.convolution import convolution_element as shared_convolution_element
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.types import I32, I64, declare
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

_FLOAT_NAMES = {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}
Generate = Callable[[PhaseContext, list[ir.Value]], list[ir.Value]]


def physical_order(t: TensorType) -> list[int]:
    """Dimensions from the most major to the most minor."""
    return list(reversed(t.layout))


def delinearize(b: ir.IRBuilder, linear: ir.Value, shape: Sequence[DimLike],
                order: Sequence[int]) -> list[ir.Value]:
    """The multi-index (i64, by logical dimension) of position `linear` when `shape` is walked
    in `order` (major to minor). Division by constants is cheaper in 32 bits, which suffices
    whenever the whole shape does."""
    if not all(is_static(d) for d in shape):
        return _delinearize_symbolic(b, linear, shape, order)
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


def _delinearize_symbolic(b: ir.IRBuilder, linear: ir.Value, shape: Sequence[DimLike],
                          order: Sequence[int]) -> list[ir.Value]:
    """`delinearize` in 64 bits by extents computed from the call's symbol values. An
    extent that is 0 at the call divides as 1: a kernel may compute the index of a position
    it then does not touch (row 0 of no rows), and a division by zero would trap."""
    index: list[ir.Value] = [ir.Constant(I64, 0)] * len(shape)
    minor_to_major = list(reversed(order))
    rest = linear
    for k, d in enumerate(minor_to_major):
        if is_static(shape[d]) and shape[d] == 1:
            continue
        if all(is_static(shape[e]) and shape[e] == 1 for e in minor_to_major[k + 1:]):
            index[d] = rest
            break
        size = extents.value(b, shape[d]) if not is_static(shape[d]) else \
            ir.Constant(I64, max(shape[d], 1))  # type: ignore[call-overload]
        if not is_static(shape[d]):
            size = b.select(b.icmp_unsigned("==", size, ir.Constant(I64, 0)),
                            ir.Constant(I64, 1), size)
        index[d] = b.urem(rest, size)
        rest = b.udiv(rest, size)
    return index


def grid_stride(ctx: PhaseContext, n: DimLike, body: Callable[[ir.Value], None]) -> None:
    """`body(i)` for i = this thread's global index, then every launch.threads-th after it,
    while i < n."""
    b = ctx.builder
    with for_range(b, ctx.global_thread(), n, step=ctx.threads(), name="i") as i:
        body(i)


def elementwise_kernel(module: ir.Module, plan: BufferPlan, name: str, values: Sequence[Value],
                       out: TensorType, generate: Generate, *, targets: Sequence[Value] = (),
                       copy_slot: int | None = None,
                       aliases: dict[int, Value] | None = None) -> KernelSpec | None:
    """A kernel storing `generate(ctx, index)` (one value per target) at every index of the
    shape `out`, into the buffers of `targets` (siblings of one shape, each in its own
    layout; threads walk the first one's), or into frame slot `copy_slot` (a result that
    copies another value). None when `out` has no elements."""
    if is_static(out.size):
        if out.size == 0:
            return None
        config = launches.elementwise(out.size)
    else:
        config = launches.symbolic_elementwise(out.size)  # type: ignore[arg-type]
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
    """One output element of a direct convolution (backends/llvm/convolution.py), each
    product added with one rounding (fma), on the GPU and in the simulator alike."""
    return shared_convolution_element(ctx.emitter, inst, out_index, _fused_step)


def _fused_step(b: ir.IRBuilder, current: ir.Value, x: ir.Value, w: ir.Value,
                valid: ir.Value, acc: dtypes.DType) -> ir.Value:
    return b.select(valid, multiply_add(b, x, w, current, acc), current)


def multiply_add(b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value,
                 dtype: dtypes.DType) -> ir.Value:
    """acc + x * y; one rounding (fma) for floats, on the GPU and in the simulator alike."""
    if dtype.is_float:
        name = f"llvm.fma.{_FLOAT_NAMES[type(x.type)]}"
        # Declared by hand: llvmlite's declare_intrinsic gets fma's parameter count wrong.
        fma = declare(b.module, name, ir.FunctionType(x.type, [x.type] * 3))
        return b.call(fma, [x, y, acc])
    return b.add(acc, b.mul(x, y))
