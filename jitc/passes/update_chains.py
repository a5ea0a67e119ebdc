"""Chains of dynamic_update_slice at constant starts, joined in time linear in their length.

A Python loop that fills an array row by row (`y[i] = ...`) traces as one update per row. Each
writes its block at constant starts; two writes of adjacent blocks along one axis are one write
of their concatenation, and a write that covers the whole array is that concatenation itself.
So a whole fill becomes a single concatenate.

Built update by update, the k-th update would make a concatenate of k pieces: quadratic in the
rows. Instead, an update whose result only feeds the next update of its chain stays a pending
`_Block` (the pieces so far, in a deque that the next update extends in place); what the chain
computes is built once, at its last update (or wherever a pending block cannot be extended).
The IR that comes out is what joining update by update gives; each update of the chain is also
copied as it is, so the function stays valid in between, and dce removes those copies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from jitc.ir import ops
from jitc.ir.core import Builder, Function, Instruction, Value
from jitc.passes.fold import constant_array
from jitc.passes.rewrite import copy_instruction


@dataclass
class _Block:
    """dynamic_update_slice(base, block, *starts), where block is `pieces[0]` when `axis` is
    None, else concatenate(pieces) along `axis`."""

    base: Value
    pieces: deque[Value]
    axis: int | None
    starts: Sequence[Value]
    at: list[int]             # the constant starts
    shape: tuple[int, ...]    # the block's shape


def constant_starts(starts: Sequence[Value]) -> list[int] | None:
    values = []
    for start in starts:
        array = constant_array(start)
        if array is None:
            return None
        values.append(int(array))
    return values


def _links(fn: Function) -> dict[int, Instruction]:
    """The updates whose result is read once, as the operand written into by another update,
    and is not returned (the inner links of chains), each with that next update."""
    readers: dict[int, list[tuple[int, Instruction]]] = {}
    for inst in fn.body:
        for n, v in enumerate(inst.operands):
            readers.setdefault(id(v), []).append((n, inst))
    returned = {id(v) for v in fn.outputs}
    links = {}
    for inst in fn.body:
        if inst.op is ops.DYNAMIC_UPDATE_SLICE and id(inst.results[0]) not in returned:
            users = readers.get(id(inst.results[0]), [])
            if len(users) == 1 and users[0][0] == 0 and \
                    users[0][1].op is ops.DYNAMIC_UPDATE_SLICE:
                links[id(inst)] = users[0][1]
    return links


def _placement(inner_at: list[int], inner_shape: tuple[int, ...], outer_at: list[int],
               outer_shape: tuple[int, ...]) -> tuple[int, bool] | None:
    """How a block written at `outer_at` joins one written at `inner_at`: (-1, True) when it
    writes over it exactly, (axis, True) when it follows it along axis, (axis, False) when it
    precedes it; None when the two are not one block."""
    if inner_at == outer_at and inner_shape == outer_shape:
        return -1, True
    differ = [d for d in range(len(outer_at))
              if (inner_at[d], inner_shape[d]) != (outer_at[d], outer_shape[d])]
    if len(differ) != 1:
        return None
    axis = differ[0]
    if inner_at[axis] + inner_shape[axis] == outer_at[axis]:
        return axis, True
    if outer_at[axis] + outer_shape[axis] == inner_at[axis]:
        return axis, False
    return None


class UpdateChains:
    """The dynamic_update_slice rule of one function's rebuild (see the module docstring)."""

    def __init__(self, fn: Function) -> None:
        self.links = _links(fn)  # id(an inner link) -> the update after it
        self.pending: dict[int, _Block] = {}  # id(the copy standing for a block) -> the block

    def rewrite(self, b: Builder, inst: Instruction,
                operands: Sequence[Value]) -> Sequence[Value] | None:
        """The values replacing update `inst`, or None to copy it unchanged."""
        operands = list(operands)
        inner = self.pending.pop(id(operands[0]), None)
        joined = self._join(b, inst, operands, inner)
        if isinstance(joined, _Block):
            if self._continues(inst, joined):
                (copy,) = copy_instruction(b, inst, operands)
                self.pending[id(copy)] = joined
                return (copy,)
            return (self._build(b, joined, inst.results[0]),)
        if joined is not None and joined.type == inst.results[0].type:
            return (joined,)
        if inner is None:
            return None
        operands[0] = self._build(b, inner, operands[0])
        return copy_instruction(b, inst, operands)

    def _continues(self, inst: Instruction, block: _Block) -> bool:
        """Whether the next update of the chain (if any) will join `block`, judged from its
        original operands. A block it does not join is built here, where joining update by
        update builds it; a wrong guess only moves where it is built."""
        after = self.links.get(id(inst))
        if after is None:
            return False
        at = constant_starts(after.operands[2:])
        return at is not None and _placement(block.at, block.shape, at,
                                             after.operands[1].type.shape) is not None

    def _build(self, b: Builder, block: _Block, like: Value) -> Value:
        if block.axis is None:
            update = block.pieces[0]
        else:
            update = b.emit(ops.CONCATENATE, list(block.pieces), {"dimension": block.axis})
        return b.emit(ops.DYNAMIC_UPDATE_SLICE, [block.base, update, *block.starts], {},
                      like.type)

    def _join(self, b: Builder, inst: Instruction, operands: list[Value],
              inner: _Block | None) -> _Block | Value | None:
        """The block written by `inst` joined with the one written into (`inner`, else the
        update that produced operands[0]): a block, a whole concatenate, or None."""
        outer_at = constant_starts(operands[2:])
        if outer_at is None:
            return None
        if inner is None:
            producer = operands[0].producer
            if producer.op is not ops.DYNAMIC_UPDATE_SLICE:
                return None
            inner_at = constant_starts(producer.operands[2:])
            if inner_at is None:
                return None
            first = producer.operands[1]
            inner = _Block(producer.operands[0], deque([first]), None, producer.operands[2:],
                           inner_at, first.type.shape)
        second = operands[1]
        placement = _placement(inner.at, inner.shape, outer_at, second.type.shape)
        if placement is None:
            return None
        axis, appended = placement
        if axis < 0:
            return _Block(inner.base, deque([second]), None, operands[2:], outer_at,
                          second.type.shape)
        starts, at = (inner.starts, inner.at) if appended else (operands[2:], outer_at)
        shape = list(inner.shape)
        shape[axis] += second.type.shape[axis]
        pieces = self._pieces(b, inner, axis)
        more = _flat(second, axis)
        if tuple(shape) == inner.base.type.shape:  # all of it: the starts are zeros
            # `pieces` is left as it is: the caller may yet need `inner` built.
            whole = [*pieces, *more] if appended else [*more, *pieces]
            return b.emit(ops.CONCATENATE, whole, {"dimension": axis})
        if appended:
            pieces.extend(more)
        else:
            pieces.extendleft(reversed(more))
        return _Block(inner.base, pieces, axis, starts, at, tuple(shape))

    def _pieces(self, b: Builder, block: _Block, axis: int) -> deque[Value]:
        """The pieces of `block` as operands of a concatenate along `axis`. A pending block is
        read by this update alone: its deque is taken over, not copied."""
        if block.axis == axis:
            return block.pieces
        if block.axis is None:
            return deque(_flat(block.pieces[0], axis))
        return deque([b.emit(ops.CONCATENATE, list(block.pieces), {"dimension": block.axis})])


def _flat(piece: Value, axis: int) -> list[Value]:
    """A concatenate along `axis` as its operands, to keep one flat concatenate."""
    producer = piece.producer
    if producer.op is ops.CONCATENATE and producer.attrs["dimension"] == axis:
        return list(producer.operands)
    return [piece]


__all__ = ["UpdateChains", "constant_starts"]
