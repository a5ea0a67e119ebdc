"""The CPU's direct convolution, a row of outputs at a time so that LLVM vectorizes it.

A row is the output's innermost (most minor) dimension with every other index fixed; it is
computed in tiles of up to TILE elements held in an accumulator array. The loops over input
features and kernel taps stay outside the loop over the tile, in the order one element sums
them (input feature, then the taps in row-major order), so each element adds the same terms in
the same order as one element at a time would: the results are bit for bit the same.

- A spatial row (NCHW's W): per tap, the output positions whose input position lies in the
  input are one range, computed once per tap; the inner loop runs over that range only, so a
  tap over padding is skipped, not multiplied (an infinite kernel value adds no nan there).
  Input dilation in the row's dimension leaves holes inside the range, masked per element.
  The rows of a block of output features are computed together (the feature loop inside the
  tap loops), so an input row is read from memory once for all of them; the range's last,
  partial vector runs under a lane mask (tail folding) rather than in a scalar loop.
- A feature row (NHWC's f): a tap's input position is the same for the whole row, so its
  bounds check is one branch per tap; the inner loop runs over the output features of one
  group, each with its own kernel value, all multiplying one input element.

A row over the batch dimension keeps the element-at-a-time loop (convolution.py).

Skipping a term is the same as adding a masked zero: the accumulator starts at +0.0 and a sum
that starts at +0.0 never becomes -0.0, so adding +0.0 never changes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from jitc.backends.llvm import indexing
from jitc.backends.llvm.elemental import convert_value
from jitc.backends.llvm.loops import for_range, loop_nest
from jitc.backends.llvm.reductions import accumulator_dtype
from jitc.backends.llvm.types import I1, I64, constant, value_type
from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value
from jitc.ir.ops import linalg as linalg_ops
from jitc.ir.symbolic import is_static

if TYPE_CHECKING:
    from jitc.backends.cpu.kernels import KernelContext

# Output elements one accumulator array holds: enough for long vector loops, small enough to
# stay in the L1 cache beside the input row.
TILE = 256
# Accumulators of one block of spatial rows (several output features): 16 KiB of float32.
BLOCK = 4096
# Output features that share one load of an input vector in a spatial row's inner loop.
# 8 measured best on the 8x32x18x18 by 32x32x3x3 layer (3.8 ms one thread; 4: 6.5, 16: 7.7).
UNROLL = 8


def _i64(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


def _floor_div(b: ir.IRBuilder, a: ir.Value, divisor: int) -> ir.Value:
    """floor(a / divisor) for divisor > 0 (sdiv truncates towards zero)."""
    if divisor == 1:
        return a
    negative = b.icmp_signed("<", a, _i64(0))
    adjusted = b.select(negative, b.sub(a, _i64(divisor - 1)), a)
    return b.sdiv(adjusted, _i64(divisor))


def _ceil_div(b: ir.IRBuilder, a: ir.Value, divisor: int) -> ir.Value:
    return b.neg(_floor_div(b, b.neg(a), divisor))


def _max(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)




def _multiply_add(b: ir.IRBuilder, current: ir.Value, x: ir.Value, w: ir.Value,
                  acc: dtypes.DType) -> ir.Value:
    """current + x * w, the product and the sum each rounded (as the element loop does)."""
    if acc.is_float:
        return b.fadd(current, b.fmul(x, w))
    return b.add(current, b.mul(x, w))


class _Conv:
    """The facts about one convolution that its row loops need."""

    def __init__(self, inst: Instruction) -> None:
        attrs = inst.attrs
        self.lhs, self.rhs = inst.operands
        self.out = inst.results[0]
        self.dims = linalg_ops.parse_dim_labels(attrs["dim_labels"])  # type: ignore[arg-type]
        self.spatial = len(self.dims.lhs_spatial)
        self.strides, self.padding, self.lhs_dil, self.rhs_dil = linalg_ops._conv_window(
            attrs, self.spatial)
        self.groups: int = attrs["feature_group_count"]  # type: ignore[assignment]
        self.in_per_group = self.rhs.type.shape[self.dims.rhs_in]
        self.out_per_group = self.rhs.type.shape[self.dims.rhs_out] // self.groups
        self.window = [self.rhs.type.shape[d] for d in self.dims.rhs_spatial]
        self.dtype = self.out.type.dtype
        self.acc = accumulator_dtype(self.dtype)

    def in_size(self, s: int) -> int:
        return self.lhs.type.shape[self.dims.lhs_spatial[s]]

    def position(self, b: ir.IRBuilder, s: int, out_position: ir.Value,
                 tap: ir.Value) -> ir.Value:
        """Where output position and tap meet in the dilated, padded input of dimension s."""
        at = b.add(b.mul(out_position, _i64(self.strides[s])), b.mul(tap, _i64(self.rhs_dil[s])))
        return b.sub(at, _i64(self.padding[s][0]))

    def source(self, b: ir.IRBuilder, s: int, position: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The input index a dilated position reads, and whether it is an input element."""
        size = self.in_size(s)
        dilation = self.lhs_dil[s]
        source = b.sdiv(position, _i64(dilation)) if dilation > 1 else position
        ok = b.and_(b.icmp_signed(">=", position, _i64(0)),
                    b.icmp_signed("<", source, _i64(size)))
        if dilation > 1:
            ok = b.and_(ok, b.icmp_signed("==", b.srem(position, _i64(dilation)), _i64(0)))
        return source, ok


def convolution_rows(ctx: KernelContext, inst: Instruction, epilogue: Value | None) -> bool:
    """Emit `inst`'s kernel body a row at a time; False (nothing emitted) where the output's
    innermost dimension is its batch or is not static."""
    conv = _Conv(inst)
    out_type = conv.out.type
    order = list(reversed(out_type.layout))
    row_dim, feature = order[-1], conv.dims.out_feature
    row_length = out_type.shape[row_dim]
    if row_dim == conv.dims.out_batch or not is_static(row_length):
        return False
    b = ctx.builder
    tile = max(1, min(TILE, row_length))
    # Spatial rows of several output features at once read each input row once for all of
    # them (unless the features are the dimension split across threads).
    features = out_type.shape[feature]
    blocked = row_dim != feature and order[0] != feature
    block = max(1, min(features, BLOCK // tile)) if blocked else 1
    # Features a tap's inner loop updates together; a block and a group hold whole units.
    unroll = UNROLL if blocked else 1
    while conv.out_per_group % unroll:
        unroll //= 2
    block = max(unroll, block - block % unroll)
    with b.goto_entry_block():
        sums = b.alloca(ir.ArrayType(ir.ArrayType(value_type(conv.acc), tile), block),
                        name="sums")
        sums.align = 64
    out_ptr = ctx.pointer(conv.out)
    outer = [d for d in order[:-1] if not (blocked and d == feature)]
    bounds: list[tuple[ir.Value | int, ir.Value | int]] = [(0, out_type.shape[d])
                                                           for d in outer]
    bounds[0] = (ctx.begin, ctx.end)
    computes = bool(conv.lhs.type.size and conv.in_per_group)

    def row(counters: list[ir.Value]) -> None:
        out_index: list[ir.Value] = [_i64(0)] * out_type.rank
        for d, counter in zip(outer, counters):
            out_index[d] = counter
        if blocked:
            with for_range(b, 0, features, step=block, name="block") as first:
                last = _min(b, b.add(first, _i64(block)), _i64(features))
                tiles(out_index, first, last)
        else:
            tiles(out_index, out_index[feature], b.add(out_index[feature], _i64(1)))

    def tiles(out_index: list[ir.Value], first: ir.Value, last: ir.Value) -> None:
        """Output features [first, last) of spatial rows; a feature row passes [0, 1)."""
        with for_range(b, 0, row_length, step=tile, name="tile") as start:
            stop = _min(b, b.add(start, _i64(tile)), _i64(row_length))

            def slot(o: ir.Value, j: ir.Value) -> ir.Value:
                return b.gep(sums, [_i64(0), b.sub(o, first), b.sub(j, start)], inbounds=True)

            def each(body: Callable[[ir.Value, ir.Value], None]) -> None:
                with for_range(b, first, last, name="f") as o, \
                        for_range(b, start, stop, name="j") as j:
                    body(o, j)
            each(lambda o, j: b.store(constant(conv.acc, 0), slot(o, j)))
            if computes and row_dim == feature:
                _feature_taps(ctx, conv, out_index, start, stop, lambda j: slot(first, j))
            elif computes:
                _spatial_taps(ctx, conv, out_index, row_dim, (first, last), unroll, start,
                              stop, slot)

            def store(o: ir.Value, j: ir.Value) -> None:
                index = list(out_index)
                index[row_dim] = j
                if row_dim != feature:
                    index[feature] = o
                value = convert_value(b, b.load(slot(o, j), typ=value_type(conv.acc)), conv.acc,
                                      conv.dtype)
                indexing.store(b, value, out_ptr, out_type, index)
                if epilogue is not None:
                    indexing.store(b, ctx.emitter.value_at(epilogue, index), out_ptr, out_type,
                                   index)
            each(store)

    loop_nest(b, bounds, row, name="row")
    return True


def _spatial_taps(ctx: KernelContext, conv: _Conv, out_index: list[ir.Value], row_dim: int,
                  features: tuple[ir.Value, ir.Value], unroll: int, start: ir.Value,
                  stop: ir.Value, slot) -> None:
    """Every tap's terms for output positions [start, stop) of spatial row `row_dim`, for
    output features [first, last), whose count is a multiple of `unroll`."""
    b, e, dims = ctx.builder, ctx.emitter, conv.dims
    row_s = dims.out_spatial.index(row_dim)
    # Input positions the row's dimension can read: the dilated input, [0, last].
    last = (conv.in_size(row_s) - 1) * conv.lhs_dil[row_s]
    stride = conv.strides[row_s]

    def tap(counters: list[ir.Value]) -> None:
        c, taps = counters[0], counters[1:]
        lhs_index: list[ir.Value] = [_i64(0)] * conv.lhs.type.rank
        rhs_index: list[ir.Value] = [_i64(0)] * conv.rhs.type.rank
        lhs_index[dims.lhs_batch] = out_index[dims.out_batch]
        rhs_index[dims.rhs_in] = c
        valid: ir.Value = ir.Constant(I1, 1)
        for s in range(conv.spatial):
            rhs_index[dims.rhs_spatial[s]] = taps[s]
            if s == row_s:
                continue
            position = conv.position(b, s, out_index[dims.out_spatial[s]], taps[s])
            lhs_index[dims.lhs_spatial[s]], ok = conv.source(b, s, position)
            valid = b.and_(valid, ok)
        with b.if_then(valid):
            # position(j) = j * stride + offset lies in [0, last] for j in [low, high).
            offset = conv.position(b, row_s, _i64(0), taps[row_s])
            low = _max(b, start, _ceil_div(b, b.neg(offset), stride))
            high = _min(b, stop, b.add(_floor_div(b, b.sub(_i64(last), offset), stride),
                                       _i64(1)))
            with for_range(b, *features, step=unroll, name="o") as o:
                group = b.udiv(o, _i64(conv.out_per_group))
                lhs_index[dims.lhs_feature] = b.add(b.mul(group, _i64(conv.in_per_group)), c)
                # `unroll` features of one group: one input load feeds them all.
                weights = []
                for q in range(unroll):
                    rhs_index[dims.rhs_out] = b.add(o, _i64(q))
                    weights.append(convert_value(b, e.value_at(conv.rhs, rhs_index), conv.dtype,
                                                 conv.acc))
                with for_range(b, low, high, name="j", masked_tail=True) as j:
                    position = b.add(b.mul(j, _i64(stride)), offset)
                    index = list(lhs_index)
                    index[dims.lhs_spatial[row_s]], ok = conv.source(b, row_s, position)
                    x = convert_value(b, e.value_at(conv.lhs, index), conv.dtype, conv.acc)
                    for q, w in enumerate(weights):
                        pointer = slot(b.add(o, _i64(q)), j)
                        current = b.load(pointer, typ=value_type(conv.acc))
                        updated = _multiply_add(b, current, x, w, conv.acc)
                        if conv.lhs_dil[row_s] > 1:  # a hole between dilated inputs adds 0
                            updated = b.select(ok, updated, current)
                        b.store(updated, pointer)

    loop_nest(b, [(0, conv.in_per_group)] + [(0, k) for k in conv.window], tap, name="t")


def _feature_taps(ctx: KernelContext, conv: _Conv, out_index: list[ir.Value],
                  start: ir.Value, stop: ir.Value, slot) -> None:
    """Every tap's terms for output features [start, stop), one group after another."""
    b, e, dims = ctx.builder, ctx.emitter, conv.dims

    def tap(counters: list[ir.Value]) -> None:
        c, taps = counters[0], counters[1:]
        lhs_index: list[ir.Value] = [_i64(0)] * conv.lhs.type.rank
        lhs_index[dims.lhs_batch] = out_index[dims.out_batch]
        valid: ir.Value = ir.Constant(I1, 1)
        for s in range(conv.spatial):
            position = conv.position(b, s, out_index[dims.out_spatial[s]], taps[s])
            lhs_index[dims.lhs_spatial[s]], ok = conv.source(b, s, position)
            valid = b.and_(valid, ok)
        with b.if_then(valid):
            for g in range(conv.groups):
                first = g * conv.out_per_group
                low = _max(b, start, _i64(first))
                high = _min(b, stop, _i64(first + conv.out_per_group))
                index = list(lhs_index)
                index[dims.lhs_feature] = b.add(_i64(g * conv.in_per_group), c)
                with b.if_then(b.icmp_signed("<", low, high)):
                    x = convert_value(b, e.value_at(conv.lhs, index), conv.dtype, conv.acc)
                    with for_range(b, low, high, name="o", masked_tail=True) as o:
                        rhs_index: list[ir.Value] = [_i64(0)] * conv.rhs.type.rank
                        rhs_index[dims.rhs_out] = o
                        rhs_index[dims.rhs_in] = c
                        for s in range(conv.spatial):
                            rhs_index[dims.rhs_spatial[s]] = taps[s]
                        w = convert_value(b, e.value_at(conv.rhs, rhs_index), conv.dtype,
                                          conv.acc)
                        pointer = slot(o)
                        current = b.load(pointer, typ=value_type(conv.acc))
                        b.store(_multiply_add(b, current, x, w, conv.acc), pointer)

    loop_nest(b, [(0, conv.in_per_group)] + [(0, k) for k in conv.window], tap, name="t")


__all__ = ["TILE", "convolution_rows"]
