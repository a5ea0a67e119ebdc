"""Where every IR value lives while a compiled function runs.

Slots of the frame a compiled entry function works on, in order: the caller's arguments, the
caller's result buffers, array constants (passed by pointer, never baked into code), and
temporaries carved out of one workspace arena whose size is known at compile time.

A function with symbolic dimensions (docs/dynamic-shapes.md) has one more slot, `dims_slot`,
holding the pointer to the call's symbol values; the sizes and offsets of its temporaries
whose shapes have symbols are `Dim` expressions, laid out after the static ones, and the
workspace size is an expression the caller evaluates per call.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from jitc.ir import ops
from jitc.ir.core import Function, Instruction, Module, Value
from jitc.ir.opdef import Trait
from jitc.ir.symbolic import Constraint, Dim, DimLike, is_static
from jitc.ir.views import slice_view_offset

if TYPE_CHECKING:
    from jitc.backends.cpu.gemm_bytes import PackedRhs

ALIGNMENT = 64


def _aligned(n: DimLike) -> DimLike:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def aligned_zeros(size: int) -> np.ndarray:
    """`size` zero bytes whose data starts at a multiple of ALIGNMENT, like the workspace's
    buffers and baked constants."""
    raw = np.zeros(size + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + size]


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `array` whose data starts at a multiple of ALIGNMENT."""
    copy = aligned_zeros(array.nbytes).view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def _at_least_one(n: DimLike) -> DimLike:
    """A buffer size of at least one byte; a symbolic size may be 0, so it gets one more."""
    return n + 1 if isinstance(n, Dim) else max(n, 1)


@dataclass
class BufferPlan:
    num_args: int
    num_outputs: int
    constants: list[np.ndarray] = field(default_factory=list)
    slots: dict[int, int] = field(default_factory=dict)          # id(Value) -> frame slot
    temp_offsets: dict[int, DimLike] = field(default_factory=dict)  # frame slot -> offset
    workspace_bytes: DimLike = 0
    copies: list[tuple[Value, int]] = field(default_factory=list)  # (source, output slot)
    aliases: dict[int, Value] = field(default_factory=dict)  # id(bitcast value) -> its operand
    donations: dict[int, int] = field(default_factory=dict)  # result index -> argument index
    # dynamic_update_slices (alone or at a loop fusion's root) computed in their operand's
    # buffer, a written argument's own: only the block is written (`_updated_in_place`).
    in_place: set[int] = field(default_factory=set)  # id(instruction)
    # Views: frame slot -> (slot of the buffer it lies in, byte offset); see plan_buffers.
    views: dict[int, tuple[int, DimLike]] = field(default_factory=dict)
    # The symbols of a symbolic function, in the order of the call's values, and the frame
    # slot holding the pointer to those values (None for a static function).
    symbols: tuple[str, ...] = ()
    dims_slot: int | None = None
    # What the program's constraints say about the symbols' values (a kernel need not emit
    # code for sizes they rule out).
    constraints: tuple[Constraint, ...] = ()
    # Constants passed packed for the byte products that read them (packed_weights.py):
    # id(constant value) -> its layout; `constants` holds the packed bytes.
    packed: dict[int, PackedRhs] = field(default_factory=dict)

    @property
    def num_slots(self) -> int:
        return (self.num_args + self.num_outputs + len(self.constants) + len(self.temp_offsets)
                + len(self.views) + (self.dims_slot is not None))

    def slot(self, value: Value) -> int | None:
        return self.slots.get(id(value))

    def add_scratch(self, size: DimLike) -> int:
        """A new frame slot pointing at `size` fresh bytes at the end of the workspace (which
        the runtime keeps between calls, so its pages are touched once)."""
        slot = self.num_slots
        offset = _aligned(self.workspace_bytes)
        self.temp_offsets[slot] = offset
        self.workspace_bytes = offset + _aligned(_at_least_one(size))
        return slot


def is_inline_constant(value: Value) -> bool:
    return value.producer.op.name == "constant" and value.type.size == 1


def is_bitcast(inst: Instruction) -> bool:
    """A reshape or transpose whose result has the same bytes in the same order as its operand:
    the value can share its operand's buffer."""
    if inst.op.name not in ("reshape", "transpose") or len(inst.operands) != 1:
        return False
    operand, result = inst.operands[0].type, inst.results[0].type
    if inst.op.name == "reshape":
        return operand.is_row_major and result.is_row_major
    perm = inst.attrs["permutation"]
    return [perm[d] for d in result.layout] == list(operand.layout)  # type: ignore[index]


def _is_alias(inst: Instruction, views: bool) -> bool:
    """Whether `inst` only names (part of) its operand's buffer: a bitcast, or a view."""
    return is_bitcast(inst) or (views and slice_view_offset(inst) is not None)


def _read_last_by(fn: Function, p: Value, producer: Instruction, views: bool) -> bool:
    """Whether `producer` is the last instruction to read argument `p` (reads through a
    bitcast or a view of it count as reads of it, where their kernel runs) and reads it only
    directly, with no alias of `p` returned: then `producer` may write into `p`'s buffer."""
    names = {id(p)}  # p and every alias of (part of) its buffer
    for inst in fn.body:
        if _is_alias(inst, views) and id(inst.operands[0]) in names:
            names.add(id(inst.results[0]))
    if any(id(v) in names and v is not p for v in [*fn.outputs, *producer.operands]):
        return False
    position = {id(inst): n for n, inst in enumerate(fn.body)}
    users = [inst for inst in fn.body if not _is_alias(inst, views) and
             any(id(v) in names for v in inst.operands)]
    return bool(users) and max(position[id(u)] for u in users) == position[id(producer)]


def _donation(fn: Function, value: Value, donated: frozenset[int] | set[int],
              program: Module | None, views: bool) -> int | None:
    """A donated argument whose buffer can hold `value`: same type, row-major, read for the
    last time by the kernel that computes `value`, and read by it only at the element it
    writes (so writing element i never clobbers an element still to be read). Reads through
    a bitcast or a view of the argument count as reads of it, where their kernel runs; the
    producer may read the argument only directly."""
    producer = value.producer
    params = fn.parameters
    for index in sorted(donated):
        if index >= len(params):
            continue
        p = params[index]
        if p.type != value.type or not p.type.is_row_major or any(v is p for v in fn.outputs):
            continue
        if not _read_last_by(fn, p, producer, views):
            continue
        if _reads_in_step(producer, [n for n, v in enumerate(producer.operands) if v is p],
                          program):
            return index
    return None


def _updated_in_place(fn: Function, value: Value, index: int, program: Module | None,
                      views: bool) -> bool:
    """Whether result `value`, written back into argument `index` after the call, can be
    computed in that argument's buffer by writing only a block: its producer is a
    dynamic_update_slice of that argument (`x[i] = row`, `cache[pos] = k`), alone or at the root
    of a loop fusion, which nothing reads after it and whose block reads the argument nowhere
    (computing the block never sees an element the write changed)."""
    producer, p = value.producer, fn.parameters[index]
    if p.type != value.type or any(v is p for v in fn.outputs) or \
            sum(v is p for v in producer.operands) != 1:
        return False
    if producer.op is ops.DYNAMIC_UPDATE_SLICE:
        if producer.operands[0] is not p:
            return False
    elif producer.op is ops.FUSION and program is not None and producer.attrs["kind"] == "loop":
        body = program.functions[producer.attrs["calls"]]  # type: ignore[index]
        root = body.outputs[0].producer if len(body.outputs) == 1 else None
        if root is None or root.op is not ops.DYNAMIC_UPDATE_SLICE:
            return False
        base = root.operands[0]
        if base.producer.op is not ops.PARAMETER or \
                producer.operands[base.producer.attrs["index"]] is not p or \
                sum(v is base for inst in body.body for v in inst.operands) != 1:
            return False
    else:
        return False
    return _read_last_by(fn, p, producer, views)


def _reads_in_step(inst: Instruction, operand_indices: list[int],
                   program: Module | None) -> bool:
    """Whether `inst` reads those operands only at the index of the element it writes."""
    shape = inst.results[0].type.shape
    if inst.op.has(Trait.ELEMENTWISE):
        return all(inst.operands[i].type.shape == shape for i in operand_indices)
    if inst.op.name != "fusion" or program is None or inst.attrs["kind"] != "loop":
        return False
    body = program.functions[inst.attrs["calls"]]  # type: ignore[index]
    pending = [body.parameters[i] for i in operand_indices]
    while pending:
        v = pending.pop()
        for user in body.body:
            if any(o is v for o in user.operands):
                if not user.op.has(Trait.ELEMENTWISE) or user.results[0].type.shape != shape:
                    return False
                pending.append(user.results[0])
    return True


def _interval_overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def plan_buffers(fn: Function, donated: frozenset[int] = frozenset(),
                 program: Module | None = None, views: bool = False,
                 symbols: tuple[str, ...] = (), writebacks: tuple[int, ...] = ()
                 ) -> BufferPlan:
    """Where every value lives: caller buffers for arguments and results, pointers for array
    constants, and offsets into one workspace for the rest.

    Scalar constants are computed inline. Bitcasts (layout-preserving reshapes and transposes
    that only change the layout) share their operand's buffer. Temporaries whose lifetimes do
    not overlap share workspace bytes, and an elementwise op may write over an operand of the
    same type that dies there (in-place update). A result may be computed in place in a
    donated argument's buffer when that is safe (see `_donation`). With `views`, a slice that
    is a contiguous block of its operand (jitc.ir.views) is a pointer into the operand's buffer:
    a frame slot of its own, set by the entry function to the operand's address plus an offset.
    `symbols`: the symbol values the function takes, when it is a region of a program with
    those symbols (its own parameters need not have them all); else those of its parameters.
    `writebacks`: the arguments the last len(writebacks) results are copied back into; such a
    result that updates a block of its argument is computed in the argument's buffer.
    """
    params = fn.parameters
    plan = BufferPlan(len(params), len(fn.outputs))
    for i, p in enumerate(params):
        plan.slots[id(p)] = i
    output_base = plan.num_args
    taken: set[int] = set()
    for n, value in enumerate(fn.outputs):
        slot = output_base + n
        producer = value.producer.op.name
        if id(value) in plan.slots or producer in ("parameter", "constant"):
            plan.copies.append((value, slot))
            continue
        back = n - (len(fn.outputs) - len(writebacks))
        donor = None
        if back >= 0 and writebacks[back] not in taken and \
                _updated_in_place(fn, value, writebacks[back], program, views):
            donor = writebacks[back]
            plan.in_place.add(id(value.producer))
        else:
            donor = _donation(fn, value, donated - taken, program, views)
        if donor is not None:
            taken.add(donor)
            plan.donations[n] = donor
            plan.slots[id(value)] = donor
        else:
            plan.slots[id(value)] = slot
    next_slot = plan.num_args + plan.num_outputs
    for inst in fn.body:
        if inst.op.name == "constant" and not is_inline_constant(inst.result):
            plan.constants.append(inst.attrs["value"].array)  # type: ignore[attr-defined]
            plan.slots[id(inst.result)] = next_slot
            next_slot += 1
    # A bitcast aliases its operand's buffer (unless it is a result: results are fresh arrays).
    offsets: dict[int, DimLike] = {}  # id(view) -> byte offset into its operand
    for inst in fn.body:
        if id(inst.results[0]) in plan.slots:
            continue
        view = slice_view_offset(inst) if views else None
        if is_bitcast(inst) or view is not None:
            plan.aliases[id(inst.result)] = inst.operands[0]
            if view is not None and (not is_static(view) or view):
                offsets[id(inst.result)] = view * inst.result.type.dtype.itemsize
    def owner(v: Value) -> Value:
        while id(v) in plan.aliases:
            v = plan.aliases[id(v)]
        return v
    position = {id(inst): n for n, inst in enumerate(fn.body)}
    last_use: dict[int, int] = {}
    for n, inst in enumerate(fn.body):
        for v in inst.operands:
            last_use[id(owner(v))] = n
    for v in fn.outputs:
        last_use[id(owner(v))] = len(fn.body)
    temps: list[tuple[Value, tuple[int, int]]] = []
    for inst in fn.body:
        if inst.op.name in ("parameter", "constant"):
            continue
        for value in inst.results:
            if id(value) in plan.slots or id(value) in plan.aliases:
                continue
            start = position[id(inst)]
            temps.append((value, (start, last_use.get(id(value), start))))
    static_temps = [(v, span) for v, span in temps if v.type.is_static]
    placed = _assign_offsets(fn, static_temps, plan, owner)
    if len(static_temps) < len(temps):
        placed.update(_assign_symbolic_offsets(fn, temps, plan, owner))
    for value, _ in temps:
        plan.slots[id(value)] = next_slot
        plan.temp_offsets[next_slot] = placed[id(value)]
        next_slot += 1
    plan = _resolve_aliases(plan, owner, fn, offsets, next_slot)
    if not symbols:
        symbols = tuple(sorted(set().union(*(t.symbols for t in fn.parameter_types))))
    if symbols:
        plan.symbols = symbols
        plan.dims_slot = plan.num_slots
        plan.constraints = program.constraints if program is not None else ()
    return plan


def _assign_offsets(fn: Function, temps: list[tuple[Value, tuple[int, int]]],
                    plan: BufferPlan, owner: Callable[[Value], Value]) -> dict[int, int]:
    """Greedy placement, largest first: each storage block takes the lowest aligned offset
    that no block alive at the same time occupies. A result computed in place shares one block
    with the operand it overwrites."""
    intervals = {id(v): span for v, span in temps}
    sizes = {id(v): _aligned(max(v.type.nbytes, 1)) for v, _ in temps}
    block_of = {id(v): id(v) for v, _ in temps}
    for result, operand in _in_place_pairs(fn, intervals, owner).items():
        block_of[result] = block_of[operand]
    blocks: dict[int, list[int]] = {}
    for key, block in block_of.items():
        blocks.setdefault(block, []).append(key)
    placed: list[tuple[int, int, tuple[int, int]]] = []  # (offset, size, interval)
    alive = _Lifetimes()
    offsets: dict[int, int] = {}
    for members in sorted(blocks.values(), key=lambda ms: -max(sizes[m] for m in ms)):
        span = (min(intervals[m][0] for m in members), max(intervals[m][1] for m in members))
        size = max(sizes[m] for m in members)
        # The lowest aligned offset clear of every block alive at the same time: a sweep over
        # those blocks by offset (only those: a scan of every block placed, again after each
        # move, was quadratic in the temporaries of an unrolled loop).
        offset = 0
        for other_offset, other_size in alive.overlapping(span):
            if other_offset >= offset + size:
                break
            if other_offset + other_size > offset:
                offset = _aligned(other_offset + other_size)
        placed.append((offset, size, span))
        alive.add(span, (offset, size))
        for m in members:
            offsets[m] = offset
    plan.workspace_bytes = max((o + s for o, s, _ in placed), default=0)
    return offsets


def _assign_symbolic_offsets(fn: Function, temps: list[tuple[Value, tuple[int, int]]],
                             plan: BufferPlan, owner: Callable[[Value], Value]
                             ) -> dict[int, DimLike]:
    """Offsets (expressions) for the temporaries whose sizes have symbols, after the static
    ones. Blocks of the same size expression whose lifetimes do not overlap share bytes (the
    layers of an MLP); sizes are never compared otherwise, since their order is only known
    at the call. A result computed in place shares its operand's block."""
    intervals = {id(v): span for v, span in temps}
    symbolic = [(v, span) for v, span in temps if not v.type.is_static]
    block_of = {id(v): id(v) for v, _ in symbolic}
    for result, operand in _in_place_pairs(fn, intervals, owner).items():
        if result in block_of and operand in block_of:
            block_of[result] = block_of[operand]
    members: dict[int, list[Value]] = {}
    for v, _ in symbolic:
        members.setdefault(block_of[id(v)], []).append(v)
    bins: list[tuple[DimLike, list[tuple[int, int]]]] = []  # (size, spans living there)
    offsets: dict[int, DimLike] = {}
    for values in members.values():
        span = (min(intervals[id(v)][0] for v in values),
                max(intervals[id(v)][1] for v in values))
        size = _aligned(_at_least_one(values[0].type.nbytes))
        shared = next((n for n, (bin_size, spans) in enumerate(bins) if bin_size == size
                       and not any(_interval_overlaps(span, s) for s in spans)), None)
        if shared is None:
            shared = len(bins)
            bins.append((size, []))
        bins[shared][1].append(span)
        for v in values:
            offsets[id(v)] = shared
    starts: list[DimLike] = []
    end: DimLike = _aligned(plan.workspace_bytes)
    for size, _ in bins:
        starts.append(end)
        end = end + size
    plan.workspace_bytes = end
    return {key: starts[n] for key, n in offsets.items()}  # type: ignore[index]


class _Lifetimes:
    """Placed blocks by the program positions they are alive at, so that finding the blocks
    alive during a span does not look at every block. A short-lived block goes into the
    buckets of BUCKET positions its life covers; a long-lived one (an unrolled loop's results
    kept to the end) into one list sorted by offset, scanned whole."""

    BUCKET = 64
    LONG = 4 * BUCKET

    def __init__(self) -> None:
        self.buckets: dict[int, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
        self.long: list[tuple[tuple[int, int], tuple[int, int]]] = []  # sorted by offset

    def add(self, span: tuple[int, int], block: tuple[int, int]) -> None:
        if span[1] - span[0] > self.LONG:
            at = bisect.bisect(self.long, block, key=lambda entry: entry[1])
            self.long.insert(at, (span, block))
            return
        for bucket in range(span[0] // self.BUCKET, span[1] // self.BUCKET + 1):
            self.buckets.setdefault(bucket, []).append((span, block))

    def overlapping(self, span: tuple[int, int]) -> Iterator[tuple[int, int]]:
        """(offset, size) of the blocks alive at some position of `span`, by offset."""
        short = set()
        for bucket in range(span[0] // self.BUCKET, span[1] // self.BUCKET + 1):
            for other, block in self.buckets.get(bucket, ()):
                if _interval_overlaps(span, other):
                    short.add(block)
        long = (block for other, block in self.long if _interval_overlaps(span, other))
        return heapq.merge(sorted(short), long)


def _in_place_pairs(fn: Function, intervals: dict[int, tuple[int, int]],
                    owner: Callable[[Value], Value]) -> dict[int, int]:
    """result -> operand pairs where an elementwise op may overwrite a dying operand."""
    pairs: dict[int, int] = {}
    for n, inst in enumerate(fn.body):
        if not inst.op.has(Trait.ELEMENTWISE) or len(inst.results) != 1:
            continue
        result = inst.results[0]
        if id(result) not in intervals:
            continue
        for v in inst.operands:
            v = owner(v)
            span = intervals.get(id(v))
            if span is not None and span[1] == n and v.type.layout == result.type.layout \
                    and v.type.shape == result.type.shape and \
                    v.type.dtype.itemsize == result.type.dtype.itemsize and \
                    id(v) not in pairs.values():
                pairs[id(result)] = id(v)
                break
    return pairs


def _resolve_aliases(plan: BufferPlan, owner: Callable[[Value], Value], fn: Function,
                     offsets: dict[int, int], next_slot: int) -> BufferPlan:
    """Aliases take their owner's slot; one at an offset (a view, or a bitcast of one) gets a
    slot of its own pointing into the owner's buffer (shared by every alias at that offset)."""
    at_offset: dict[tuple[int, int], int] = {}
    for inst in fn.body:
        for value in inst.results:
            if id(value) not in plan.aliases:
                continue
            offset, v = 0, value
            while id(v) in plan.aliases:
                offset += offsets.get(id(v), 0)
                v = plan.aliases[id(v)]
            if offset == 0:
                plan.slots[id(value)] = plan.slots[id(v)]
            else:
                place = (plan.slots[id(v)], offset)
                if place not in at_offset:
                    at_offset[place] = next_slot
                    plan.views[next_slot] = place
                    next_slot += 1
                plan.slots[id(value)] = at_offset[place]
    return plan


def contiguous_argument(array: object, dtype: np.dtype, donated: bool) -> np.ndarray:
    """An argument as compiled code reads it: a C-contiguous, aligned ndarray of `dtype`. A
    donated one is always a copy (it was read-only or shared memory with another argument),
    so the caller's array is never written through a conversion."""
    converted = np.array(array, dtype=dtype, order="C", copy=donated or None)
    if not converted.flags.aligned:  # a view at an odd byte offset: the code assumes alignment
        converted = converted.copy()
    return converted
