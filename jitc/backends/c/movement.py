"""The C elemental rules of the data-movement ops (broadcasts, reshapes, slices, pads,
concatenates, dynamic slices, gathers): index arithmetic that maps an output element to the
operand element it reads. Registered in `elemental.RULES` when that module loads.

With a run-time extent (a symbolic module) an operand may be empty, so a rule reads an
operand of run-time extent only where an element is selected (`_read_if`), never at a
clamped index that an empty operand would put out of bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jitc.backends.reshapes import reshape_groups
from jitc.ir.core import Instruction, Value
from jitc.ir.symbolic import DimLike, is_static

from .cgen import extent, register_type
from .elemental import CEmitter, Index, _result, rule


@rule("broadcast_in_dim")
def _broadcast(e: CEmitter, inst: Instruction, index: Index) -> str:
    operand, result = inst.operands[0].type, inst.results[0].type
    mapped = ["0" if operand.shape[i] == 1 and result.shape[d] != 1 else index[d]
              for i, d in enumerate(inst.attrs["dims"])]  # type: ignore[arg-type]
    return e.operand(inst, 0, mapped)


def delinearize(e: CEmitter, linear: str, shape: Sequence[int]) -> Index:
    """Row-major multi-index of a linear position (which is in range: the outermost index
    is what remains after dividing by the inner sizes)."""
    out: Index = []
    for n, d in enumerate(reversed(shape)):
        if d == 1:
            out.append("0")
        elif n == len(shape) - 1:
            out.append(linear)
        else:
            out.append(e.let_index(f"{linear} % {extent(d)}"))
            linear = e.let_index(f"{linear} / {extent(d)}")
    return out[::-1]


def linearize(e: CEmitter, index: Index, shape: Sequence[int]) -> str:
    terms = []
    stride = 1
    for i, d in reversed(list(zip(index, shape))):
        if i != "0":
            terms.append(i if stride == 1 else f"{i} * {extent(stride)}")
        stride *= d
    return e.let_index(" + ".join(reversed(terms)) or "0")


@rule("reshape")
def _reshape(e: CEmitter, inst: Instruction, index: Index) -> str:
    operand, result = inst.operands[0].type, inst.results[0].type
    # Only inserting or removing size-1 dimensions needs no arithmetic.
    if [d for d in operand.shape if d != 1] == [d for d in result.shape if d != 1]:
        kept = iter([i for i, d in zip(index, result.shape) if d != 1])
        return e.operand(inst, 0, ["0" if d == 1 else next(kept) for d in operand.shape])
    groups = reshape_groups(operand.shape, result.shape) \
        if operand.is_static and result.is_static else None
    if groups is None:
        linear = linearize(e, index, result.shape)
        return e.operand(inst, 0, delinearize(e, linear, operand.shape))
    mapped: Index = []
    for (o0, o1), (r0, r1) in groups:
        linear = linearize(e, index[r0:r1], result.shape[r0:r1])
        mapped += delinearize(e, linear, operand.shape[o0:o1])
    return e.operand(inst, 0, mapped)


@rule("transpose")
def _transpose(e: CEmitter, inst: Instruction, index: Index) -> str:
    perm = inst.attrs["permutation"]
    mapped = ["0"] * len(perm)  # type: ignore[arg-type]
    for i, p in enumerate(perm):  # type: ignore[arg-type]
        mapped[p] = index[i]
    return e.operand(inst, 0, mapped)


@rule("slice")
def _slice(e: CEmitter, inst: Instruction, index: Index) -> str:
    stride = inst.attrs["stride"] or (1,) * len(index)  # type: ignore[operator]
    mapped = []
    for i, start, step in zip(index, inst.attrs["start"], stride):  # type: ignore[arg-type]
        term = i if step == 1 else f"{i} * {step}"
        mapped.append(e.let_index(term if start == 0 else f"{term} + {extent(start)}"))
    return e.operand(inst, 0, mapped)


@rule("reverse")
def _reverse(e: CEmitter, inst: Instruction, index: Index) -> str:
    shape = inst.results[0].type.shape
    dims = set(inst.attrs["dims"])  # type: ignore[arg-type]
    mapped = [e.let_index(f"{extent(shape[a] - 1)} - {i}") if a in dims else i
              for a, i in enumerate(index)]
    return e.operand(inst, 0, mapped)


@rule("pad")
def _pad(e: CEmitter, inst: Instruction, index: Index) -> str:
    operand = inst.operands[0].type
    fill = e.scalar(inst.operands[1])
    if operand.size == 0:
        return fill
    interior = inst.attrs["interior"] or (0,) * operand.rank  # type: ignore[operator]
    conditions, mapped = [], []
    for a, i in enumerate(index):
        low, gap, size = inst.attrs["low"][a], interior[a] + 1, operand.shape[a]  # type: ignore
        shifted = e.let_index(f"{i} - {low}" if low else i)
        position = e.let_index(f"{shifted} / {gap}") if gap > 1 else shifted
        conditions.append(f"{shifted} >= 0 && {position} < {extent(size)}")
        if gap > 1:
            conditions.append(f"{shifted} % {gap} == 0")
        mapped.append(e.clamp_index(position, 0, size - 1))
    inside = e.let_bool(" && ".join(conditions))
    if not operand.is_static:  # a run-time extent may be 0: read only what is selected
        return _read_if(e, inst, inside, lambda: e.operand(inst, 0, mapped), fill)
    # The load uses a clamped index, so it stays in bounds whether or not it is selected.
    value = e.operand(inst, 0, mapped)
    return _result(e, inst, f"{inside} ? {value} : {fill}")


def _read_if(e: CEmitter, inst: Instruction, condition: str, read: Callable[[], str],
             otherwise: str) -> str:
    """`condition ? read() : otherwise`, with read()'s loads only where `condition` holds
    (an operand of run-time extent may have no element to read, even at a clamped index)."""
    result = e.w.fresh("t")
    e.w.line(f"{register_type(inst.results[0].type.dtype)} {result};")
    with e.w.block(f"if ({condition})"):
        e.w.line(f"{result} = {read()};")
    with e.w.block("else"):
        e.w.line(f"{result} = {otherwise};")
    return result


# Up to this many operands a concatenate's element is a chain of conditional expressions over
# every operand's element; above, a switch computes only the element's own operand (as in the
# LLVM emitter: with thousands of operands, a chain is quadratic work in the kernel and in the
# C compiler).
SELECTED_PIECES = 8
SWITCH_CASES = 1 << 14


@rule("concatenate")
def _concatenate(e: CEmitter, inst: Instruction, index: Index) -> str:
    axis = inst.attrs["dimension"]
    position = index[axis]  # type: ignore[index]
    if not all(is_static(v.type.shape[axis]) for v in inst.operands):  # type: ignore[index]
        return _concatenate_run_time(e, inst, index)
    pieces, start = [], 0
    for n, v in enumerate(inst.operands):
        size = v.type.shape[axis]  # type: ignore[index]
        if size:
            pieces.append((n, start, size))
        start += size
    assert pieces, "concatenate of empty operands has no elements"
    sizes = {size for _, _, size in pieces}
    if len(pieces) > SELECTED_PIECES and (len(sizes) == 1 or start <= SWITCH_CASES):
        return _concatenate_switch(e, inst, index, pieces)
    result: str | None = None
    for n, begin, size in reversed(pieces):
        mapped = list(index)
        local = e.let_index(f"{position} - {begin}" if begin else position)
        mapped[axis] = e.clamp_index(local, 0, size - 1)  # type: ignore[index]
        value = e.operand(inst, n, mapped)
        result = value if result is None else \
            _result(e, inst, f"{position} < {begin + size} ? {value} : {result}")
    assert result is not None
    return result


def _concatenate_switch(e: CEmitter, inst: Instruction, index: Index,
                        pieces: list[tuple[int, int, int]]) -> str:
    axis = inst.attrs["dimension"]
    position = index[axis]  # type: ignore[index]
    sizes = {size for _, _, size in pieces}
    if len(sizes) == 1:  # blocks of one size: the piece is the position divided by it
        (size,) = sizes
        selector = f"{position} / {size}" if size > 1 else position
        cases = [[k] for k in range(len(pieces))]
    else:
        selector = position
        cases = [list(range(begin, begin + size)) for _, begin, size in pieces]
    result = e.w.fresh("t")
    e.w.line(f"{register_type(inst.results[0].type.dtype)} {result};")
    with e.w.block(f"switch ({selector})"):
        for k, ((n, begin, size), values) in enumerate(zip(pieces, cases)):
            # Every position falls in some piece: the last one doubles as the default.
            labels = "default:" if k == len(pieces) - 1 else \
                " ".join(f"case {v}:" for v in values)
            # A scope per case: what it computes is not visible to the others.
            with e.w.block(labels):
                mapped = list(index)
                local = e.let_index(f"{position} - {begin}" if begin else position)
                mapped[axis] = e.clamp_index(local, 0, size - 1)  # type: ignore[index]
                e.w.line(f"{result} = {e.operand(inst, n, mapped)};")
                e.w.line("break;")
    return result


def _concatenate_run_time(e: CEmitter, inst: Instruction, index: Index) -> str:
    """A concatenate along an axis of run-time extent: an if-else chain over the pieces that
    reads only the piece the position falls in (any piece may be empty at run time, so none
    is read unselected)."""
    axis = inst.attrs["dimension"]
    position = index[axis]  # type: ignore[index]
    pieces = [(n, v.type.shape[axis]) for n, v in enumerate(inst.operands)  # type: ignore
              if not is_static(v.type.shape[axis]) or v.type.shape[axis]]  # type: ignore
    result = e.w.fresh("t")
    e.w.line(f"{register_type(inst.results[0].type.dtype)} {result};")
    begin: DimLike = 0
    for k, (n, size) in enumerate(pieces):
        end = begin + size
        # The last piece takes every position left (positions are below the result's extent).
        header = "else" if k else ""
        if k < len(pieces) - 1:
            header = f"{header} if ({position} < {extent(end)})".lstrip()
        with e.w.block(header):
            mapped = list(index)
            mapped[axis] = position if is_static(begin) and begin == 0 else \
                e.let_index(f"{position} - {extent(begin)}")  # type: ignore[index]
            e.w.line(f"{result} = {e.operand(inst, n, mapped)};")
        begin = end
    return result


def clamped_starts(e: CEmitter, starts: Sequence[Value], shape: Sequence[int],
                    sizes: Sequence[int]) -> Index:
    """The start indices of a dynamic slice (or update) of `sizes`, clamped as the op clamps
    them: into [0, dim - size]."""
    return [e.clamp_index(e.to_index(e.scalar(v)), 0, dim - size)
            for v, dim, size in zip(starts, shape, sizes)]


@rule("dynamic_slice")
def _dynamic_slice(e: CEmitter, inst: Instruction, index: Index) -> str:
    operand = inst.operands[0].type
    starts = clamped_starts(e, inst.operands[1:], operand.shape,
                             inst.attrs["sizes"])  # type: ignore[arg-type]
    return e.operand(inst, 0, [e.let_index(f"{s} + {i}") for s, i in zip(starts, index)])


@rule("dynamic_update_slice")
def _dynamic_update_slice(e: CEmitter, inst: Instruction, index: Index) -> str:
    operand, update = inst.operands[0].type, inst.operands[1].type
    if update.size == 0:
        return e.operand(inst, 0, index)
    starts = clamped_starts(e, inst.operands[2:], operand.shape, update.shape)
    conditions, local = [], []
    for i, s, size in zip(index, starts, update.shape):
        delta = e.let_index(f"{i} - {s}")
        conditions.append(f"{delta} >= 0 && {delta} < {extent(size)}")
        local.append(e.clamp_index(delta, 0, size - 1))
    inside = e.let_bool(" && ".join(conditions) or "1")
    if not update.is_static:  # a run-time extent may be 0: read the update only inside it
        old = e.operand(inst, 0, index)
        return _read_if(e, inst, inside, lambda: e.operand(inst, 1, local), old)
    new, old = e.operand(inst, 1, local), e.operand(inst, 0, index)
    return _result(e, inst, f"{inside} ? {new} : {old}")


@rule("gather")
def _gather(e: CEmitter, inst: Instruction, index: Index) -> str:
    operand, indices = inst.operands[0].type, inst.operands[1].type
    axis = inst.attrs["axis"]
    k = indices.rank
    raw = e.value_at(inst.operands[1], index[axis:axis + k])  # type: ignore[misc]
    position = e.clamp_index(e.to_index(raw), 0, operand.shape[axis] - 1)  # type: ignore
    mapped = index[:axis] + [position] + index[axis + k:]  # type: ignore[operator]
    return e.operand(inst, 0, mapped)
