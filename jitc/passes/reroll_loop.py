"""Building the `while` that replaces a run of repeated blocks (see passes/reroll.py).

The loop carries, in order: the step counter, the values one block hands to the next (with
the first block's inputs as initial values), the values read after the loop from the last
block only, buffers stacking a value of every block, then what the body only reads: the
loop-invariant values and the tables of constants that change from block to block. An integer
constant that changes by the same amount every block (a loop index, a slice start) is computed
from the counter instead of read from a table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from jitc.ir import ops
from jitc.ir.core import Builder, Function, Instruction, Literal, Value
from jitc.ir.dtypes import from_numpy
from jitc.ir.types import TensorType
from jitc.passes.rewrite import users_of

# ("intra", place, index) | ("carry", place, index) | ("outer", value) | ("lit", key)
Operand = tuple
Slot = tuple[int, int]  # (place in the block, result index)

_I64 = from_numpy(np.dtype(np.int64))


def is_value_like(inst: Instruction) -> bool:
    """Constants and iotas: values, not steps of a loop (tracing makes a constant once)."""
    return not inst.operands and inst.op is not ops.PARAMETER


@dataclass
class Pattern:
    """What every block of a run is: per instruction, its operands' kinds; the initial values
    of the carried ones; the constants and slice starts that change from block to block."""

    operands: list[list[Operand]]
    carry_init: dict[Slot, Value] = field(default_factory=dict)
    literal_values: dict[tuple[int, int], list[Instruction]] = field(default_factory=dict)
    slice_starts: dict[int, list[tuple[int, ...]]] = field(default_factory=dict)
    # Slot -> the blocks whose value of it the program reads after the run.
    escapes: dict[Slot, set[int]] = field(default_factory=dict)


def _affine(values: np.ndarray) -> tuple[int, int] | None:
    """(a, b) when the integer values are a + b*k for k = 0, 1, ..."""
    if values.ndim != 1 or values.dtype.kind not in "iu" or len(values) < 2:
        return None
    a, b = int(values[0]), int(values[1]) - int(values[0])
    expected = a + b * np.arange(len(values), dtype=np.int64)
    return (a, b) if np.array_equal(values.astype(np.int64), expected) else None


def np_stack_of(values: Sequence[Value], users: dict[int, list[Instruction]],
                returned: set[int]) -> tuple[list[Instruction], int] | None:
    """How tracing records `np.stack(values, axis=a)` (a reshape of each value inserting a unit
    axis a, read only by one concatenate of them all along a, in order) or
    `np.concatenate(values, axis=a)` of values whose axis a has size 1: when the values are
    read that way, the instructions to drop and the axis a (the stacked buffer of a loop,
    [steps, *value shape], is the result moved to axis a). Else None."""
    first, shape = values[0], values[0].type.shape
    pieces = [first] + [u.result for u in users.get(id(first), []) if u.op is ops.RESHAPE
                        and u.result.type.rank == len(shape) + 1]
    for piece in pieces:
        for concat in users.get(id(piece), []):
            if concat.op is not ops.CONCATENATE or len(concat.operands) != len(values) \
                    or not concat.result.type.is_row_major:
                continue
            axis = concat.attrs["dimension"]
            assert isinstance(axis, int)
            if piece is first:
                if [id(v) for v in concat.operands] == [id(v) for v in values] \
                        and shape[axis] == 1:
                    return [concat], axis
                continue
            expanded = [v.producer for v in concat.operands]
            if all(r.op is ops.RESHAPE and r.operands[0] is value
                   and r.result.type.shape[axis] == 1
                   and r.result.type.shape[:axis] + r.result.type.shape[axis + 1:] == shape
                   and id(r.result) not in returned and len(users[id(r.result)]) == 1
                   for r, value in zip(expanded, values)):
                return [*expanded, concat], axis
    return None


def stacked_result(emit: Builder, stacked: Value, result: TensorType, axis: int) -> Value:
    """The concatenate's result from the loop's stacked buffer [steps, *value shape]."""
    shape = stacked.type.shape
    if axis:
        perm = [*range(1, axis + 1), 0, *range(axis + 1, len(shape))]
        stacked = emit.emit(ops.TRANSPOSE, [stacked], {"permutation": perm})
    if stacked.type.shape != result.shape:
        stacked = emit.emit(ops.RESHAPE, [stacked], {}, result)
    return stacked


@dataclass
class _Varying:
    """A value that changes from block to block: from the counter, or a row of a table."""

    values: np.ndarray  # [trips, ...]
    affine: tuple[int, int] | None


class FoldedLoop:
    def __init__(self, name: str, blocks: list[list[Instruction]], pattern: Pattern,
                 literal_key: Callable[[Instruction], tuple]) -> None:
        self.name, self.blocks, self.pattern = name, blocks, pattern
        self.literal_key = literal_key
        self.template = blocks[0]
        trips = len(blocks)
        self.carries = sorted(pattern.carry_init)
        escapes = pattern.escapes
        self.lasts = sorted(s for s, ks in escapes.items()
                            if ks == {trips - 1} and s not in pattern.carry_init)
        self.stacks = sorted(s for s, ks in escapes.items() if len(ks) == trips and trips > 1)
        self.invariants: list[Value] = []
        seen: set[int] = set()
        for kinds in pattern.operands:
            for kind in kinds:
                if kind[0] == "outer" and id(kind[1]) not in seen:
                    seen.add(id(kind[1]))
                    self.invariants.append(kind[1])
        self.literal_rows = {
            slot: self._varying(np.stack([p.attrs["value"].array for p in producers]))
            for slot, producers in sorted(pattern.literal_values.items())}
        self.start_rows: dict[int, list[_Varying | int]] = {}
        for r, starts in sorted(pattern.slice_starts.items()):
            columns = np.array(starts, np.int64).T
            self.start_rows[r] = [int(c[0]) if (c == c[0]).all() else self._varying(c)
                                  for c in columns]
        self.tables = [v for v in self._all_varying() if v.affine is None]

    @staticmethod
    def _varying(values: np.ndarray) -> _Varying:
        return _Varying(values, _affine(values))

    def _all_varying(self) -> list[_Varying]:
        out = list(self.literal_rows.values())
        for columns in self.start_rows.values():
            out += [c for c in columns if isinstance(c, _Varying)]
        return out

    def slot_type(self, slot: Slot) -> TensorType:
        return self.template[slot[0]].results[slot[1]].type

    # -- the enclosing function's side --------------------------------------------------------
    def emit(self, tail: Sequence[Instruction], outputs: Sequence[Value]
             ) -> tuple[list[Instruction], dict[int, Value], set[int]]:
        """The instructions that replace the run, the values of the run read later mapped to
        their replacements, and the tail instructions that became unneeded."""
        head = Function(self.name)
        emit = Builder(head)
        emit.loc = self.template[0].loc
        trips = len(self.blocks)

        def constant(array: np.ndarray) -> Value:
            return emit.emit(ops.CONSTANT, [], {"value": Literal(array)})

        def zeros(type_: TensorType) -> Value:
            zero = constant(np.zeros((), type_.dtype.numpy))
            return emit.emit(ops.BROADCAST_IN_DIM, [zero], {"dims": []}, type_)

        init = [constant(np.array(0, np.int64))]
        init += [self.pattern.carry_init[s] for s in self.carries]
        init += [zeros(self.slot_type(s)) for s in self.lasts]
        init += [zeros(self.stacked_type(s)) for s in self.stacks]
        init += self.invariants
        init += [constant(t.values) for t in self.tables]
        types = [v.type for v in init]
        self.cond = self._condition(types, trips)
        self.body = self._body(types)
        results = emit.emit_multi(ops.WHILE, init,
                                  {"cond": self.cond.name, "body": self.body.name}, types)
        mapping: dict[int, Value] = {}
        position = 1
        for slot in self.carries + self.lasts:
            mapping[id(self.value(trips - 1, slot))] = results[position]
            position += 1
        dropped: set[int] = set()
        users = users_of(tail)
        returned = {id(v) for v in outputs}
        for slot in self.stacks:
            stacked = results[position]
            position += 1
            values = [self.value(k, slot) for k in range(trips)]
            stack_op = np_stack_of(values, users, returned)
            if stack_op is not None:
                instructions, axis = stack_op
                concat = instructions[-1]
                mapping[id(concat.result)] = stacked_result(emit, stacked, concat.result.type,
                                                            axis)
                dropped.update(id(inst) for inst in instructions)
            type_ = self.slot_type(slot)
            for k in range(trips):
                value = self.value(k, slot)
                still_read = id(value) in returned or any(
                    id(user) not in dropped for user in users.get(id(value), []))
                if id(value) in mapping or not still_read:
                    continue
                piece = emit.emit(ops.SLICE, [stacked], {
                    "start": [k] + [0] * type_.rank, "limit": [k + 1, *type_.shape],
                    "stride": []})
                mapping[id(value)] = emit.emit(ops.RESHAPE, [piece], {}, type_)
        return head.body, mapping, dropped

    def value(self, k: int, slot: Slot) -> Value:
        return self.blocks[k][slot[0]].results[slot[1]]

    def stacked_type(self, slot: Slot) -> TensorType:
        type_ = self.slot_type(slot)
        return TensorType(type_.dtype, (len(self.blocks), *type_.shape))

    # -- the loop's regions --------------------------------------------------------------------
    def _condition(self, types: Sequence[TensorType], trips: int) -> Function:
        fn = Function(f"{self.name}.cond")
        emit = Builder(fn)
        params = [emit.emit(ops.PARAMETER, [], {"index": n}, t) for n, t in enumerate(types)]
        bound = emit.emit(ops.CONSTANT, [], {"value": Literal(np.array(trips, np.int64))})
        fn.outputs = [emit.emit(ops.COMPARE, [params[0], bound], {"direction": "lt"})]
        return fn

    def _body(self, types: Sequence[TensorType]) -> Function:
        fn = Function(f"{self.name}.body")
        emit = Builder(fn)
        params = [emit.emit(ops.PARAMETER, [], {"index": n}, t) for n, t in enumerate(types)]
        step = params[0]
        emit.loc = self.template[0].loc
        carried = dict(zip(self.carries, params[1:]))
        offset = 1 + len(self.carries) + len(self.lasts) + len(self.stacks)
        invariant = {id(v): params[offset + n] for n, v in enumerate(self.invariants)}
        tables = dict(zip(map(id, self.tables), params[offset + len(self.invariants):]))
        constants: dict[tuple, Value] = {}

        def literal(producer: Instruction) -> Value:
            key = self.literal_key(producer)
            if key not in constants:
                constants[key] = emit.emit_multi(producer.op, [], producer.attrs,
                                                 [v.type for v in producer.results])[0]
            return constants[key]

        def integer(value: int, type_: TensorType) -> Value:
            return emit.emit(ops.CONSTANT, [], {"value": Literal(
                np.array(value, type_.dtype.numpy))})

        def varying(item: _Varying) -> Value:
            dtype = from_numpy(item.values.dtype)
            type_ = TensorType(dtype, item.values.shape[1:])
            if item.affine is not None:
                a, b = item.affine
                value = step
                if b != 1:
                    value = emit.emit(ops.MUL, [value, integer(b, step.type)])
                if a != 0:
                    value = emit.emit(ops.ADD, [value, integer(a, step.type)])
                if dtype is not _I64:
                    value = emit.emit(ops.CONVERT, [value], {}, type_)
                return value
            table = tables[id(item)]
            zero = integer(0, step.type)
            piece = emit.emit(ops.DYNAMIC_SLICE, [table, step] + [zero] * type_.rank,
                              {"sizes": [1, *type_.shape]})
            return emit.emit(ops.RESHAPE, [piece], {}, type_)

        values: list[tuple[Value, ...]] = []
        for r, inst in enumerate(self.template):
            emit.loc = inst.loc
            operands = []
            for m, kind in enumerate(self.pattern.operands[r]):
                if kind[0] == "intra":
                    operands.append(values[kind[1]][kind[2]])
                elif kind[0] == "carry":
                    operands.append(carried[(kind[1], kind[2])])
                elif kind[0] == "outer":
                    operands.append(invariant[id(kind[1])])
                elif (r, m) in self.literal_rows:
                    operands.append(varying(self.literal_rows[(r, m)]))
                else:
                    operands.append(literal(inst.operands[m].producer))
            result_types = [v.type for v in inst.results]
            if r in self.start_rows:
                index = TensorType(_I64, ())
                starts = [integer(c, index) if isinstance(c, int) else varying(c)
                          for c in self.start_rows[r]]
                sizes = [hi - lo for lo, hi in zip(inst.attrs["start"], inst.attrs["limit"])]
                values.append(emit.emit_multi(ops.DYNAMIC_SLICE, [operands[0], *starts],
                                              {"sizes": sizes}, result_types))
            else:
                values.append(emit.emit_multi(inst.op, operands, inst.attrs, result_types,
                                              name_hints=[v.name_hint for v in inst.results]))
        outputs = [emit.emit(ops.ADD, [step, integer(1, step.type)])]
        outputs += [values[r][i] for r, i in self.carries + self.lasts]
        buffers = params[1 + len(self.carries) + len(self.lasts):]
        for (r, i), buffer in zip(self.stacks, buffers):
            value = values[r][i]
            expanded = emit.emit(ops.RESHAPE, [value], {},
                                 TensorType(value.type.dtype, (1, *value.type.shape)))
            zero = integer(0, step.type)
            outputs.append(emit.emit(ops.DYNAMIC_UPDATE_SLICE,
                                     [buffer, expanded, step] + [zero] * value.type.rank))
        outputs += params[offset:]
        fn.outputs = outputs
        return fn
