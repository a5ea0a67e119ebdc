"""Elemental rules for data movement: broadcasts, reshapes, transposes, slices, padding,
concatenation, reversal, dynamic slices and gathers. Each computes which operand element an
output element comes from; importing this module registers them in elemental.RULES."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from jitc.backends.llvm import extents
from jitc.backends.llvm.elemental import ElementalEmitter, Index, rule
from jitc.backends.llvm.types import I1, I64
from jitc.backends.reshapes import reshape_groups
from jitc.ir.core import Instruction, Value
from jitc.ir.symbolic import DimLike, is_static

# -- data movement ---------------------------------------------------------------------------

@rule("broadcast_in_dim")
def _broadcast(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    operand, result = inst.operands[0].type, inst.results[0].type
    zero = e.index_const(0)
    mapped = [zero if operand.shape[i] == 1 and result.shape[d] != 1 else index[d]
              for i, d in enumerate(inst.attrs["dims"])]  # type: ignore[arg-type]
    return e.operand(inst, 0, mapped)


def delinearize(b: ir.IRBuilder, linear: ir.Value, shape: Sequence[int]) -> Index:
    """Row-major multi-index of a linear position (which is in range: the outermost index
    is what remains after dividing by the inner sizes)."""
    out: Index = []
    for n, d in enumerate(reversed(shape)):
        if d == 1:
            out.append(ir.Constant(I64, 0))
        elif n == len(shape) - 1:
            out.append(linear)
        else:
            size = extents.value(b, d)
            out.append(b.urem(linear, size))
            linear = b.udiv(linear, size)
    return out[::-1]


def linearize(b: ir.IRBuilder, index: Index, shape: Sequence[int]) -> ir.Value:
    linear: ir.Value = ir.Constant(I64, 0)
    for i, d in zip(index, shape):
        linear = b.add(b.mul(linear, extents.value(b, d)), i)
    return linear


@rule("reshape")
def _reshape(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    operand, result = inst.operands[0].type, inst.results[0].type
    # Only inserting or removing size-1 dimensions needs no arithmetic.
    if [d for d in operand.shape if d != 1] == [d for d in result.shape if d != 1]:
        kept = [i for i, d in zip(index, result.shape) if d != 1]
        it = iter(kept)
        mapped = [e.index_const(0) if d == 1 else next(it) for d in operand.shape]
        return e.operand(inst, 0, mapped)
    groups = reshape_groups(operand.shape, result.shape) \
        if operand.is_static and result.is_static else None
    if groups is None:
        linear = linearize(e.builder, index, result.shape)
        return e.operand(inst, 0, delinearize(e.builder, linear, operand.shape))
    mapped: Index = []
    for (o0, o1), (r0, r1) in groups:
        linear = linearize(e.builder, index[r0:r1], result.shape[r0:r1])
        mapped += delinearize(e.builder, linear, operand.shape[o0:o1])
    return e.operand(inst, 0, mapped)


@rule("transpose")
def _transpose(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    perm = inst.attrs["permutation"]
    mapped: Index = [e.index_const(0)] * len(perm)  # type: ignore[arg-type]
    for i, p in enumerate(perm):  # type: ignore[arg-type]
        mapped[p] = index[i]
    return e.operand(inst, 0, mapped)


@rule("slice")
def _slice(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    b = e.builder
    stride = inst.attrs["stride"] or (1,) * len(index)  # type: ignore[operator]
    mapped = []
    for i, start, step in zip(index, inst.attrs["start"], stride):  # type: ignore[arg-type]
        v = i if step == 1 else b.mul(i, e.index_const(step))
        mapped.append(v if start == 0 else b.add(v, e.index_const(start)))
    return e.operand(inst, 0, mapped)


@rule("reverse")
def _reverse(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    shape = inst.results[0].type.shape
    dims = set(inst.attrs["dims"])  # type: ignore[arg-type]
    b = e.builder
    mapped = [b.sub(e.index_const(shape[a] - 1), i) if a in dims else i
              for a, i in enumerate(index)]
    return e.operand(inst, 0, mapped)


@rule("pad")
def _pad(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    b = e.builder
    operand = inst.operands[0].type
    fill = e.scalar(inst.operands[1])
    if is_static(operand.size) and operand.size == 0:
        return fill
    interior = inst.attrs["interior"] or (0,) * operand.rank  # type: ignore[operator]
    inside: ir.Value = ir.Constant(I1, 1)
    mapped = []
    for a, i in enumerate(index):
        low, gap, size = inst.attrs["low"][a], interior[a] + 1, operand.shape[a]  # type: ignore
        shifted = b.sub(i, e.index_const(low))
        position = b.sdiv(shifted, e.index_const(gap)) if gap > 1 else shifted
        ok = b.and_(b.icmp_signed(">=", shifted, e.index_const(0)),
                    b.icmp_signed("<", position, e.index_const(size)))
        if gap > 1:
            ok = b.and_(ok, b.icmp_signed("==", b.srem(shifted, e.index_const(gap)),
                                          e.index_const(0)))
        inside = b.and_(inside, ok)
        mapped.append(e.clamp_index(position, 0, size - 1))
    if is_static(operand.size):
        # The load uses a clamped index, so it stays in bounds whether or not it is selected.
        return b.select(inside, e.operand(inst, 0, mapped), fill)
    # An operand of symbolic size may be empty at the call: read it only inside.
    return _read_inside(e, inside, lambda: e.operand_in_branch(inst, 0, mapped), fill)


# Up to this many operands, a concatenate's element is a chain of selects over every operand's
# element at that index (straight-line code LLVM vectorizes); above, a switch runs only the
# operand the element comes from: with thousands of operands (the rows of an unrolled fill) a
# select chain does work quadratic in them, in the kernel and in LLVM compiling it.
SELECTED_PIECES = 8
# A switch on the position itself has a case per position: at most this many.
SWITCH_CASES = 1 << 14


def _concatenate_branched(e: ElementalEmitter, inst: Instruction, index: Index,
                          pieces: list[tuple[int, int, int]]) -> ir.Value:
    b = e.builder
    axis = inst.attrs["dimension"]
    position = index[axis]  # type: ignore[index]
    sizes = {size for _, _, size in pieces}
    total = pieces[-1][1] + pieces[-1][2]
    if len(sizes) == 1:  # blocks of one size: the piece is the position divided by it
        (size,) = sizes
        selector = b.udiv(position, e.index_const(size)) if size > 1 else position
        cases = [[k] for k in range(len(pieces))]
    elif total <= SWITCH_CASES:
        selector = position
        cases = [list(range(begin, begin + size)) for _, begin, size in pieces]
    else:
        return _concatenate_selected(e, inst, index, pieces)
    function = b.function
    merge = function.append_basic_block("concat.merge")
    blocks = [function.append_basic_block(f"concat.{n}") for n, _, _ in pieces]
    # Every position falls in some piece: the last one's block doubles as the default.
    switch = b.switch(selector, blocks[-1])
    incoming = []
    for (n, begin, size), block, values in zip(pieces, blocks, cases):
        for v in values:
            switch.add_case(e.index_const(v), block)
        b.position_at_end(block)
        local = e.clamp_index(b.sub(position, e.index_const(begin)), 0, size - 1)
        incoming.append((_piece(e, inst, n, index, local), b.block))
        b.branch(merge)
    b.position_at_end(merge)
    return _merged(b, incoming)


def _piece(e: ElementalEmitter, inst: Instruction, n: int, index: Index,
           local: ir.Value) -> ir.Value:
    """Operand `n` of a concatenate at `index` with `local` on the joined axis, read in the
    branch that only runs for its elements."""
    mapped = list(index)
    mapped[inst.attrs["dimension"]] = local  # type: ignore[index]
    return e.operand_in_branch(inst, n, mapped)


def _merged(b: ir.IRBuilder, incoming: list[tuple[ir.Value, ir.Block]]) -> ir.Value:
    """The value of whichever branch ran, at the block they all branch to."""
    result = b.phi(incoming[0][0].type)
    for value, block in incoming:
        result.add_incoming(value, block)
    return result


@rule("concatenate")
def _concatenate(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    axis = inst.attrs["dimension"]
    start = 0
    pieces = []  # (operand, first position, size) of each operand with elements
    for n, v in enumerate(inst.operands):
        size = v.type.shape[axis]  # type: ignore[index]
        if not is_static(size) or size:
            pieces.append((n, start, size))
        start += size
    assert pieces, "concatenate of empty operands has no elements"
    if not all(is_static(size) for _, _, size in pieces):
        return _concatenate_symbolic(e, inst, index, pieces)
    if len(pieces) > SELECTED_PIECES:
        return _concatenate_branched(e, inst, index, pieces)
    return _concatenate_selected(e, inst, index, pieces)


def _concatenate_symbolic(e: ElementalEmitter, inst: Instruction, index: Index,
                          pieces: list[tuple[int, DimLike, DimLike]]) -> ir.Value:
    """A concatenate whose pieces have symbolic extents (any may be empty at the call): a
    chain of tests on the position, each branch reading only the piece the element lies in
    (a select chain would load from every piece, out of an empty one)."""
    b = e.builder
    axis = inst.attrs["dimension"]
    position = index[axis]  # type: ignore[index]
    merge = b.function.append_basic_block("concat.merge")
    incoming = []
    for k, (n, begin, size) in enumerate(pieces):
        last = k == len(pieces) - 1
        here = b.function.append_basic_block(f"concat.{n}")
        if last:
            b.branch(here)
        else:
            following = b.function.append_basic_block(f"concat.after{n}")
            inside = b.icmp_signed("<", position, e.index_const(begin + size))
            b.cbranch(inside, here, following)
        b.position_at_end(here)
        local = b.sub(position, e.index_const(begin))
        incoming.append((_piece(e, inst, n, index, local), b.block))
        b.branch(merge)
        if not last:
            b.position_at_end(following)
    b.position_at_end(merge)
    return _merged(b, incoming)


def _concatenate_selected(e: ElementalEmitter, inst: Instruction, index: Index,
                          pieces: list[tuple[int, int, int]]) -> ir.Value:
    b = e.builder
    axis = inst.attrs["dimension"]
    position = index[axis]  # type: ignore[index]
    result: ir.Value | None = None
    for n, begin, size in reversed(pieces):
        local = e.clamp_index(b.sub(position, e.index_const(begin)), 0, size - 1)
        mapped = list(index)
        mapped[axis] = local  # type: ignore[index]
        value = e.operand(inst, n, mapped)
        if result is None:
            result = value
        else:
            result = b.select(b.icmp_signed("<", position, e.index_const(begin + size)),
                              value, result)
    assert result is not None
    return result


def clamped_starts(e: ElementalEmitter, starts: Sequence[Value], shape: Sequence[int],
                    sizes: Sequence[int]) -> Index:
    """The start indices of a dynamic slice (or update) of `sizes`, clamped as the op clamps
    them: into [0, dim - size]."""
    out = []
    for v, dim, size in zip(starts, shape, sizes):
        raw = e.to_index(e.scalar(v), v.type.dtype)
        out.append(e.clamp_index(raw, 0, dim - size))
    return out


@rule("dynamic_slice")
def _dynamic_slice(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    operand = inst.operands[0].type
    starts = clamped_starts(e, inst.operands[1:], operand.shape,
                             inst.attrs["sizes"])  # type: ignore[arg-type]
    b = e.builder
    return e.operand(inst, 0, [b.add(s, i) for s, i in zip(starts, index)])


@rule("dynamic_update_slice")
def _dynamic_update_slice(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    operand, update = inst.operands[0].type, inst.operands[1].type
    if is_static(update.size) and update.size == 0:
        return e.operand(inst, 0, index)
    starts = clamped_starts(e, inst.operands[2:], operand.shape, update.shape)
    b = e.builder
    inside: ir.Value = ir.Constant(I1, 1)
    local = []
    for i, s, size in zip(index, starts, update.shape):
        offset = b.sub(i, s)
        inside = b.and_(inside, b.icmp_unsigned("<", offset, e.index_const(size)))
        local.append(e.clamp_index(offset, 0, size - 1))
    if is_static(update.size):
        return b.select(inside, e.operand(inst, 1, local), e.operand(inst, 0, index))
    # An update of symbolic size may be empty at the call: read it only inside.
    return _read_inside(e, inside, lambda: e.operand_in_branch(inst, 1, local),
                        e.operand(inst, 0, index))


def _read_inside(e: ElementalEmitter, inside: ir.Value, read: Callable[[], ir.Value],
                 otherwise: ir.Value) -> ir.Value:
    """`read()` where `inside` holds, else `otherwise`, the read in a block of its own: no
    load runs outside the operand (which may be empty at the call)."""
    b = e.builder
    before = b.block
    with b.if_then(inside):
        value = read()
        reading = b.block
    return _merged(b, [(value, reading), (otherwise, before)])


@rule("gather")
def _gather(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    operand, indices = inst.operands[0].type, inst.operands[1].type
    axis = inst.attrs["axis"]
    k = indices.rank
    raw = e.value_at(inst.operands[1], index[axis:axis + k])  # type: ignore[misc]
    position = e.clamp_index(e.to_index(raw, indices.dtype), 0,
                             operand.shape[axis] - 1)  # type: ignore[index]
    mapped = index[:axis] + [position] + index[axis + k:]  # type: ignore[operator]
    return e.operand(inst, 0, mapped)
