"""The `sort` op on one row, as LLVM IR: a least-significant-digit radix sort.

Each element becomes an unsigned key whose integer order is numpy's order (floats: the sign
flips the other bits, -0.0 counts as 0.0, every nan becomes the largest key), paired with its
position. Radix passes are stable, so equal keys keep their positions' order: the result is
numpy's `kind="stable"`. One read of the row counts the digits of every pass; a pass whose
digit is the same for all elements (small integers in a wide type) is skipped. The values
come out by position from the input row, so -0.0 and nan payloads survive.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from jitc.backends.llvm import extents
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.types import I32, I64
from jitc.ir.dtypes import DType, Kind
from jitc.ir.symbolic import DimLike, is_static


@dataclass(frozen=True)
class RadixPlan:
    """The shape of one row's sort: key width, digit width, scratch layout. The row length
    `n` may be symbolic: its rows are taken as long ones (11-bit digits, 64-bit positions)."""

    n: DimLike
    key_bits: int
    digit_bits: int

    @property
    def passes(self) -> int:
        return -(-self.key_bits // self.digit_bits)

    @property
    def buckets(self) -> int:
        return 1 << self.digit_bits

    @property
    def position_type(self) -> ir.IntType:
        return I32 if is_static(self.n) and self.n < 2**31 else I64

    @property
    def key_type(self) -> ir.IntType:
        return ir.IntType(self.key_bits)

    def scratch_bytes(self) -> DimLike:
        """Two key arrays and two position arrays; the digit counts live on the stack."""
        return 2 * self.n * (self.key_bits // 8 + self.position_type.width // 8)


def radix_plan(n: DimLike, dtype: DType) -> RadixPlan:
    bits = max(8, dtype.numpy.itemsize * 8)
    # 11-bit digits take 3 passes for 32-bit keys and 6 for 64-bit ones, and their counts
    # still fit in the L1 cache; short rows keep 8-bit digits, cheaper to clear.
    digit = 11 if bits >= 32 and (not is_static(n) or n >= 1 << 14) else 8
    return RadixPlan(n, bits, digit)


def sort_key(b: ir.IRBuilder, x: ir.Value, dtype: DType) -> ir.Value:
    """The unsigned key of element x: comparing keys as unsigned integers is numpy's order."""
    bits = max(8, dtype.numpy.itemsize * 8)
    key_type = ir.IntType(bits)
    sign = ir.Constant(key_type, 1 << (bits - 1))
    if dtype.kind is Kind.FLOAT:
        zero = ir.Constant(x.type, 0.0)
        canonical = b.select(b.fcmp_ordered("==", x, zero), zero, x)  # -0.0 sorts as 0.0
        raw = b.bitcast(canonical, key_type)
        negative = b.icmp_signed("<", raw, ir.Constant(key_type, 0))
        flip = b.select(negative, ir.Constant(key_type, -1), sign)
        key = b.xor(raw, flip)
        return b.select(b.fcmp_unordered("uno", x, x), ir.Constant(key_type, -1), key)
    if x.type.width < bits:  # bool as i1
        x = b.zext(x, key_type)
    if dtype.kind is Kind.SIGNED:
        return b.xor(x, sign)
    return x


def _needs_positions(b: ir.IRBuilder, x: ir.Value, dtype: DType) -> ir.Value:
    """Whether element x cannot be rebuilt from its key: a -0.0 (its key is 0.0's) or a nan
    other than the canonical one (every nan has the same key)."""
    bits = dtype.numpy.itemsize * 8
    raw = b.bitcast(x, ir.IntType(bits))
    negative_zero = b.icmp_unsigned("==", raw, ir.Constant(raw.type, 1 << (bits - 1)))
    nan = b.fcmp_unordered("uno", x, x)
    canonical = b.bitcast(ir.Constant(x.type, float("nan")), raw.type)
    odd_nan = b.and_(nan, b.icmp_unsigned("!=", raw, canonical))
    return b.or_(negative_zero, odd_nan)


def value_of_key(b: ir.IRBuilder, key: ir.Value, dtype: DType, value_t: ir.Type) -> ir.Value:
    """The element whose key is `key` (the inverse of sort_key where it is one-to-one)."""
    key_t = key.type
    sign = ir.Constant(key_t, 1 << (key_t.width - 1))
    if dtype.kind is Kind.FLOAT:
        top = b.icmp_signed("<", key, ir.Constant(key_t, 0))
        raw = b.select(top, b.xor(key, sign), b.not_(key))
        value = b.bitcast(raw, value_t)
        nan = b.icmp_unsigned("==", key, ir.Constant(key_t, -1))
        return b.select(nan, ir.Constant(value_t, float("nan")), value)
    if dtype.kind is Kind.SIGNED:
        key = b.xor(key, sign)
    return b.trunc(key, value_t) if value_t.width < key_t.width else key


def emit_sort_row(b: ir.IRBuilder, plan: RadixPlan, dtype: DType, scratch: ir.Value,
                  load: Callable[[ir.Value], ir.Value],
                  emit_position: Callable[[ir.Value, ir.Value], None],
                  emit_value: Callable[[ir.Value, ir.Value], None] | None = None) -> None:
    """Sort one row: `load(i)` gives element i (i64); `emit_position(i, position)` receives
    the position (i64) of the i-th element in sorted order. With `emit_value` (the values are
    wanted, not the positions) the sort moves keys alone and `emit_value(i, value)` receives
    the values rebuilt from them, unless the row holds an element its key cannot rebuild (a
    -0.0, a nan with a payload or sign): then positions come along and `emit_position` runs.
    `scratch` holds `plan.scratch_bytes()` bytes."""
    n, key_t, pos_t = plan.n, plan.key_type, plan.position_type
    i64 = lambda v: ir.Constant(I64, v)  # noqa: E731
    size = lambda v: extents.value(b, v)  # noqa: E731  (a byte count: static or the call's)
    keys = [scratch, b.gep(scratch, [size(n * (plan.key_bits // 8))],
                           source_etype=ir.IntType(8))]
    pos_base = b.gep(scratch, [size(2 * n * (plan.key_bits // 8))], source_etype=ir.IntType(8))
    positions = [pos_base, b.gep(pos_base, [size(n * (pos_t.width // 8))],
                                 source_etype=ir.IntType(8))]
    count_t = pos_t
    with b.goto_entry_block():
        counts = b.alloca(count_t, size=i64(plan.passes * plan.buckets), name="counts")
        current = b.alloca(I64, name="current")  # which buffer holds the order: 0 or 1
        sum_slot = b.alloca(count_t, name="sum")
        carry_slot = b.alloca(ir.IntType(1), name="carry")

    def counts_at(p: int, d: ir.Value) -> ir.Value:
        return b.gep(counts, [b.add(i64(p * plan.buckets), d)], source_etype=count_t,
                     inbounds=True)
    mask = ir.Constant(key_t, plan.buckets - 1)

    def digit(key: ir.Value, p: int) -> ir.Value:
        shifted = b.lshr(key, ir.Constant(key_t, p * plan.digit_bits)) if p else key
        d = b.and_(shifted, mask)
        return b.zext(d, I64) if key_t.width < 64 else d

    # Positions are needed for indices, and for floats whose row turns out to hold a -0.0 or
    # an unusual nan; integer keys always give their values back.
    maybe_positions = emit_value is None or dtype.kind is Kind.FLOAT
    b.store(ir.Constant(ir.IntType(1), emit_value is None), carry_slot)
    with for_range(b, 0, plan.passes * plan.buckets, name="clear") as c:
        b.store(ir.Constant(count_t, 0), b.gep(counts, [c], source_etype=count_t))
    with for_range(b, 0, n, name="fill") as i:
        x = load(i)
        key = sort_key(b, x, dtype)
        b.store(key, b.gep(keys[0], [i], source_etype=key_t))
        if maybe_positions:
            b.store(b.trunc(i, pos_t) if pos_t != I64 else i,
                    b.gep(positions[0], [i], source_etype=pos_t))
        if emit_value is not None and dtype.kind is Kind.FLOAT:
            carry = b.load(carry_slot, typ=ir.IntType(1))
            b.store(b.or_(carry, _needs_positions(b, x, dtype)), carry_slot)
        for p in range(plan.passes):
            slot = counts_at(p, digit(key, p))
            b.store(b.add(b.load(slot, typ=count_t), ir.Constant(count_t, 1)), slot)

    def scatter(p: int, source: list[ir.Value], target: list[ir.Value],
                with_positions: bool) -> None:
        """Pass p: each key (and position) to its digit's next slot, in order."""
        with for_range(b, 0, n, name="scatter") as i:
            key = b.load(b.gep(source[0], [i], source_etype=key_t), typ=key_t)
            slot = counts_at(p, digit(key, p))
            to = b.load(slot, typ=count_t)
            b.store(b.add(to, ir.Constant(count_t, 1)), slot)
            to64 = b.zext(to, I64) if count_t != I64 else to
            b.store(key, b.gep(target[0], [to64], source_etype=key_t))
            if with_positions:
                position = b.load(b.gep(source[1], [i], source_etype=pos_t), typ=pos_t)
                b.store(position, b.gep(target[1], [to64], source_etype=pos_t))

    b.store(i64(0), current)
    for p in range(plan.passes):
        # Every element has the digit of some element (buffer 0 always holds a permutation
        # of the keys): then the pass would move nothing.
        some_key = b.load(keys[0], typ=key_t)
        length = size(n) if count_t == I64 else b.trunc(size(n), count_t)
        uniform = b.icmp_unsigned("==", b.load(counts_at(p, digit(some_key, p)), typ=count_t),
                                  length)
        with b.if_then(b.not_(uniform)):
            b.store(ir.Constant(count_t, 0), sum_slot)
            with for_range(b, 0, plan.buckets, name="scan") as d:
                slot = counts_at(p, d)
                here = b.load(slot, typ=count_t)
                before = b.load(sum_slot, typ=count_t)
                b.store(before, slot)
                b.store(b.add(before, here), sum_slot)
            which = b.load(current, typ=I64)
            from_odd = b.icmp_unsigned("!=", which, i64(0))
            source = [b.select(from_odd, keys[1], keys[0]),
                      b.select(from_odd, positions[1], positions[0])]
            target = [b.select(from_odd, keys[0], keys[1]),
                      b.select(from_odd, positions[0], positions[1])]

            if emit_value is None:
                scatter(p, source, target, True)
            elif not maybe_positions:
                scatter(p, source, target, False)
            else:
                with b.if_else(b.load(carry_slot, typ=ir.IntType(1))) as (carried, alone):
                    with carried:
                        scatter(p, source, target, True)
                    with alone:
                        scatter(p, source, target, False)
            b.store(b.xor(which, i64(1)), current)
    odd = b.icmp_unsigned("!=", b.load(current, typ=I64), i64(0))
    final_positions = b.select(odd, positions[1], positions[0])
    final_keys = b.select(odd, keys[1], keys[0])

    def by_position() -> None:
        with for_range(b, 0, n, name="out") as i:
            position = b.load(b.gep(final_positions, [i], source_etype=pos_t), typ=pos_t)
            emit_position(i, b.zext(position, I64) if pos_t != I64 else position)

    def by_key(value_t: ir.Type) -> None:
        with for_range(b, 0, n, name="out") as i:
            key = b.load(b.gep(final_keys, [i], source_etype=key_t), typ=key_t)
            emit_value(i, value_of_key(b, key, dtype, value_t))  # type: ignore[misc]

    if emit_value is None:
        by_position()
        return
    value_t = load(i64(0)).type
    if not maybe_positions:
        by_key(value_t)
        return
    with b.if_else(b.load(carry_slot, typ=ir.IntType(1))) as (carried, alone):
        with carried:
            by_position()
        with alone:
            by_key(value_t)
