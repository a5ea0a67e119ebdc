"""Fusion: group instructions into kernels that make one pass over memory.

Working from the last instruction back, each unfused instruction seeds a group and pulls in
the producers of its members while the group stays computable by one kernel template:

- loop: elementwise and data-movement ops of one shape, computed element by element;
- row: reductions over the trailing dimensions of one row-major shape S, with elementwise ops
  on S and on the reduced shape, computed one row at a time (softmax and layernorm become one
  kernel each);
- reduce: one reduction over any dimensions with its elementwise producers (input fusion);
- dot: a dot_general or convolution with an elementwise epilogue on its result (output
  fusion: bias, activation).

A producer moves into a group when all its users are in the group. A cheap producer (pure data
movement, conversions, constants) is duplicated into every group that wants it. Anything else
with users outside the group, expensive producers above all (dot, reductions, transcendental
chains), stays materialised: nothing expensive is ever computed twice.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from jitc.ir import ops
from jitc.ir.core import Builder, Function, Instruction, Module, Value
from jitc.ir.opdef import OpDef, Trait
from jitc.ir.views import slice_view_offset
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import copy_instruction, users_of

# Ops a backend can compute element by element (the elemental emitter has a rule for each).
# real, imag and complex never reach a backend (jitc/passes/complex_split.py).
ELEMENTAL: frozenset[OpDef] = frozenset(
    op for op in ops.OPS.values() if op.has(Trait.ELEMENTWISE)) - frozenset({
        ops.REAL, ops.IMAG, ops.COMPLEX}) | frozenset({
        ops.BROADCAST_IN_DIM, ops.RESHAPE, ops.TRANSPOSE, ops.SLICE, ops.PAD,
        ops.CONCATENATE, ops.REVERSE, ops.IOTA, ops.DYNAMIC_SLICE, ops.DYNAMIC_UPDATE_SLICE,
        ops.GATHER})
# Producers cheap enough to recompute in every kernel that reads them.
CHEAP: frozenset[OpDef] = frozenset({
    ops.BROADCAST_IN_DIM, ops.RESHAPE, ops.TRANSPOSE, ops.SLICE, ops.REVERSE, ops.CONVERT,
    ops.BITCAST_CONVERT, ops.IOTA, ops.CONSTANT})
CONTRACTIONS: frozenset[OpDef] = frozenset({ops.DOT_GENERAL, ops.CONVOLUTION})


def is_scalar_constant(value: Value) -> bool:
    return value.producer.op is ops.CONSTANT and value.type.size == 1


def trailing_reduce_outer(inst: Instruction) -> tuple[int, ...] | None:
    """For a reduce over the trailing dimensions of a row-major operand, the kept (outer)
    shape; None for any other instruction."""
    if inst.op is not ops.REDUCE:
        return None
    operand = inst.operands[0].type
    dims = sorted(inst.attrs["dims"])  # type: ignore[arg-type]
    k = operand.rank - len(dims)
    if not dims or dims != list(range(k, operand.rank)) or not operand.is_row_major:
        return None
    return operand.shape[:k]


@dataclass
class Group:
    root: Instruction
    kind: str
    members: dict[int, Instruction] = field(default_factory=dict)
    # Members only this group computes (moved in); the rest are cheap copies whose original
    # stays in the program for other users.
    owned: set[int] = field(default_factory=set)
    shape: tuple[int, ...] = ()        # loop/dot: the root shape; row: the full row shape S
    outer: tuple[int, ...] = ()        # row: the reduced (outer) shape O
    core: Instruction | None = None    # dot: the contraction
    siblings: list[Instruction] = field(default_factory=list)  # more roots (multi-output)

    def has(self, inst: Instruction) -> bool:
        return id(inst) in self.members


class _Fuser:
    def __init__(self, fn: Function, views: bool = False, byte_epilogues: bool = False
                 ) -> None:
        self.fn = fn
        # The backend finishes a byte product's int32 sums in registers, so its epilogue may
        # change the dtype (requantization: scale, round, clip, convert to int8).
        self.byte_epilogues = byte_epilogues
        # The backend reads a slice that is a contiguous block of its operand in place (a
        # view): such a slice stays an instruction of its own instead of joining a kernel, so
        # kernels that differ only in which block they read stay one shared body.
        self.views = views
        self.users = users_of(fn.body)
        self.returned = {id(v) for v in fn.outputs}
        self.group_of: dict[int, Group] = {}
        # Values finished groups read from outside: they must stay materialised, even when
        # their only original user is later moved into another group (the readers may be
        # copies of a cheap producer).
        self.read_by_groups: set[int] = set()

    # -- which groups may take which producers -------------------------------------------
    def _row_shapes(self, full: tuple[int, ...], outer: tuple[int, ...]) -> set[tuple]:
        """Shapes a row kernel computes per row: the row, the reduced value, with kept dims."""
        return {full, outer, outer + (1,) * (len(full) - len(outer))}

    def _elemental_fits(self, group: Group, producer: Instruction) -> bool:
        """Elemental producers of any shape are computed through index mapping; an expensive
        one must not be recomputed for many output elements (a broadcast of its result)."""
        if producer.op in CHEAP:
            return True
        result = producer.results[0].type
        if group.kind == "row":
            return result.shape in self._row_shapes(group.shape, group.outer) or \
                result.size == _size(group.shape)
        if group.kind == "reduce":
            return result.size == group.root.operands[0].type.size
        # A value indexed by the outer loops only (one per row, say) is computed once per
        # iteration of those loops: LLVM hoists it out of the inner ones.
        return result.size == _size(group.shape) or _is_prefix_shape(result.shape, group.shape)

    def _reduce_consumers_fit(self, group: Group, reduce: Instruction,
                              full: tuple[int, ...], outer: tuple[int, ...]) -> bool:
        """Everything in the group computed from the reduced value is per row."""
        allowed = self._row_shapes(full, outer)
        pending = [reduce]
        seen: set[int] = set()
        while pending:
            inst = pending.pop()
            for v in inst.results:
                for user in self.users.get(id(v), []):
                    if not group.has(user) or id(user) in seen:
                        continue
                    seen.add(id(user))
                    if any(r.type.shape not in allowed for r in user.results) or \
                            not _keeps_rows(user):
                        return False
                    pending.append(user)
        return True

    def _reads_pointwise(self, group: Group, core: Instruction) -> bool:
        """Whether the group reads the contraction's result only at the element it writes:
        an epilogue rewrites each finished element in place, so no member may move data
        (transpose, reverse, slice...) between the contraction and the root."""
        shape = core.results[0].type.shape
        pending, seen = [core], set()
        while pending:
            inst = pending.pop()
            for user in self.users.get(id(inst.results[0]), []):
                if not group.has(user) or id(user) in seen:
                    continue
                seen.add(id(user))
                if not user.op.has(Trait.ELEMENTWISE) or user.results[0].type.shape != shape:
                    return False
                pending.append(user)
        return True

    def _accepts(self, group: Group, producer: Instruction) -> str | None:
        """The group's kind after taking `producer`, or None when it cannot."""
        if len(producer.results) != 1:
            return None
        result = producer.results[0].type
        if producer.op in ELEMENTAL or producer.op is ops.CONSTANT:
            return group.kind if self._elemental_fits(group, producer) else None
        outer = trailing_reduce_outer(producer)
        if outer is not None and group.kind in ("loop", "row"):
            full = producer.operands[0].type.shape
            if group.kind == "row" and (full, outer) != (group.shape, group.outer):
                return None
            if group.kind == "loop" and group.shape not in self._row_shapes(full, outer):
                return None
            return "row" if self._reduce_consumers_fit(group, producer, full, outer) else None
        if producer.op in CONTRACTIONS and group.kind == "loop" and group.core is None:
            # The epilogue rewrites the contraction's buffer in place: same dtype and layout
            # (any dtype for a byte product's, see byte_epilogues).
            any_dtype = self.byte_epilogues and bool(producer.attrs.get("result"))
            epilogue_ok = result.shape == group.shape and all(
                m.op in ELEMENTAL and all((any_dtype or v.type.dtype is result.dtype) and
                                          v.type.layout == result.layout for v in m.results)
                for m in group.members.values() if m.results[0].type.shape == group.shape)
            same_dtype = any_dtype or group.root.results[0].type.dtype is result.dtype
            return "dot" if epilogue_ok and same_dtype \
                and self._reads_pointwise(group, producer) else None
        return None

    def _is_view(self, inst: Instruction) -> bool:
        return self.views and slice_view_offset(inst) is not None

    def _pull(self, group: Group, producer: Instruction) -> bool:
        if producer.op is ops.PARAMETER or id(producer) in self.group_of \
                or group.has(producer) or self._is_view(producer):
            return False
        if producer.op is ops.CONSTANT and not is_scalar_constant(producer.results[0]):
            return False  # array constants stay kernel inputs, passed by pointer
        users = [u for v in producer.results for u in self.users.get(id(v), [])]
        all_inside = all(id(u) in group.owned for u in users) and not any(
            id(v) in self.returned or id(v) in self.read_by_groups for v in producer.results)
        if not all_inside and producer.op not in CHEAP:
            return False
        kind = self._accepts(group, producer)
        if kind is None:
            return False
        if kind == "row" and group.kind == "loop" and producer.op is ops.REDUCE:
            group.outer = trailing_reduce_outer(producer) or ()
            group.shape = producer.operands[0].type.shape
        if kind == "dot" and group.core is None and producer.op in CONTRACTIONS:
            group.core = producer
        group.kind = kind
        group.members[id(producer)] = producer
        if all_inside:
            group.owned.add(id(producer))
            self.group_of[id(producer)] = group
        return True

    def _grow(self, group: Group) -> None:
        """Pull producers into `group` until none more can join.

        A worklist, not rounds over all members: a chain of n ops joins in O(n) steps. A
        producer turned down is tried again when a user of it joins (then perhaps all its
        users are inside), and every member is tried again when the group's kind changes."""
        pending = deque(group.members.values())
        while pending:
            member = pending.popleft()
            if member is group.core:
                continue  # a contraction reads its operands from memory
            for operand in member.operands:
                before = (group.kind, group.shape, group.outer, group.core)
                if self._pull(group, operand.producer):
                    if (group.kind, group.shape, group.outer, group.core) != before:
                        pending.extend(group.members.values())
                    else:
                        pending.append(operand.producer)

    def _seed(self, inst: Instruction) -> Group | None:
        if len(inst.results) != 1 or self._is_view(inst):
            return None
        result = inst.results[0].type
        if inst.op in CONTRACTIONS:
            return None  # a contraction joins its consumer's group, or stays alone
        if inst.op is ops.REDUCE:
            outer = trailing_reduce_outer(inst)
            if outer is not None:
                return Group(inst, "row", {id(inst): inst}, {id(inst)},
                             inst.operands[0].type.shape, outer)
            return Group(inst, "reduce", {id(inst): inst}, {id(inst)}, result.shape)
        if inst.op in ELEMENTAL:
            return Group(inst, "loop", {id(inst): inst}, {id(inst)}, result.shape)
        return None

    def groups(self) -> list[Group]:
        found = []
        for inst in reversed(self.fn.body):
            if id(inst) in self.group_of or inst.op in (ops.PARAMETER, ops.CONSTANT):
                continue
            users = [u for v in inst.results for u in self.users.get(id(v), [])]
            if users and not any(id(v) in self.returned for v in inst.results) and all(
                    id(u) in self.group_of and self.group_of[id(u)].has(inst) for u in users):
                continue  # every user reads its own copy: dead once the kernels are built
            group = self._seed(inst)
            if group is None:
                continue
            self.group_of[id(inst)] = group
            self._grow(group)
            found.append(group)
            if _worth_a_kernel(group):
                self.read_by_groups.update(
                    id(v) for m in group.members.values() for v in m.operands
                    if not group.has(v.producer))
        return found


def _keeps_rows(inst: Instruction) -> bool:
    """Whether `inst` reads each operand at the same row it writes: the row kernel keeps one
    reduced value per row in a register, so nothing may move data between rows."""
    if inst.op.has(Trait.ELEMENTWISE) or inst.op is ops.REDUCE:
        return True
    operand, result = inst.operands[0].type, inst.results[0].type
    if inst.op is ops.BROADCAST_IN_DIM:
        return list(inst.attrs["dims"]) == list(range(operand.rank))  # type: ignore[arg-type]
    if inst.op is ops.RESHAPE:
        return _strip_ones(operand.shape) == _strip_ones(result.shape)
    return False


def _strip_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    end = len(shape)
    while end and shape[end - 1] == 1:
        end -= 1
    return shape[:end]


def _is_prefix_shape(shape: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """`full[:k]`, possibly padded with 1s to full's rank: a value that varies only along the
    leading k dimensions."""
    return any(shape in (full[:k], full[:k] + (1,) * (len(full) - k))
               for k in range(len(full) + 1))


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _worth_a_kernel(group: Group) -> bool:
    """A group of one instruction (plus duplicated cheap producers it does not need) stays a
    plain instruction."""
    real = [m for m in group.members.values() if not is_scalar_constant(m.results[0])]
    return len(real) > 1


def _updates_a_parameter(fn: Function, group: Group) -> bool:
    """Whether `group` is a block update of a parameter that the function returns (a written
    argument's new value, `cache[pos] = k`): it stays a kernel of its own, which backends
    store in the argument's buffer in place (only the block), rather than a second output of
    a kernel that writes every element."""
    root = group.root
    return (root.op is ops.DYNAMIC_UPDATE_SLICE and root.operands[0].producer.op is
            ops.PARAMETER and any(v is root.results[0] for v in fn.outputs))


def _merge_siblings(fn: Function, groups: list[Group]) -> list[Group]:
    """Join kernels of one kind and shape that read a common input into one multi-output
    kernel, so the input is read once (a sum and a sum of squares of the same rows).

    Each group joins the earliest kernel (by root) that shares an input with it and runs after
    all its inputs exist. Kernels are indexed by (kind, shapes, input), each list sorted by root
    position, so a group looks at one candidate per input instead of every earlier kernel (an
    array constant read by every row of an unrolled fill made that quadratic)."""
    position = {id(inst): n for n, inst in enumerate(fn.body)}
    defined_at = {id(v): position[id(inst)] for inst in fn.body for v in inst.results}
    merged: list[Group] = []
    inputs: dict[int, dict[int, Value]] = {}  # id(kernel) -> its inputs
    # (kind, shapes, input) -> root positions of the kernels reading it, sorted; and the
    # kernel at each root position.
    readers: dict[tuple, list[int]] = {}
    kernel_at: dict[int, Group] = {}
    for group in sorted(groups, key=lambda g: position[id(g.root)]):
        mine = _input_values(group)
        if group.kind not in ("loop", "row") or _updates_a_parameter(fn, group):
            merged.append(group)
            continue
        signature = (group.kind, group.shape, group.outer, group.root.results[0].type.shape)
        # The joint kernel runs where the earlier root was: everything it reads must exist by
        # then (so neither kernel may read the other's result).
        ready = max((defined_at[v] for v in mine), default=-1)
        target = None
        for v in mine:
            roots = readers.get((signature, v), [])
            at = bisect.bisect_right(roots, ready)
            if at < len(roots) and (target is None or roots[at] < position[id(target.root)]):
                target = kernel_at[roots[at]]
        if target is None:
            merged.append(group)
            inputs[id(group)] = mine
            kernel_at[position[id(group.root)]] = group
            for v in mine:
                readers.setdefault((signature, v), []).append(position[id(group.root)])
            continue
        target.members.update(group.members)
        target.owned |= group.owned
        target.siblings += [group.root, *group.siblings]
        _update_inputs(target, inputs[id(target)], group, mine, readers, signature,
                       position[id(target.root)])
    return merged


def _input_values(group: Group) -> dict[int, Value]:
    return {id(v): v for m in group.members.values() for v in m.operands
            if not group.has(v.producer)}


def _update_inputs(target: Group, inputs: dict[int, Value], joined: Group,
                   joined_inputs: dict[int, Value], readers: dict[tuple, list[int]],
                   signature: tuple, root: int) -> None:
    """`target`'s inputs after `joined` joined it (its members already added): values one
    computes for the other are inputs no more. Work in the size of `joined` alone."""
    for member in joined.members.values():
        for v in member.results:
            if inputs.pop(id(v), None) is not None:
                readers[(signature, id(v))].remove(root)
    for key, v in joined_inputs.items():
        if key not in inputs and not target.has(v.producer):
            inputs[key] = v
            bisect.insort(readers.setdefault((signature, key), []), root)


def _merge_producers(fn: Function, groups: list[Group]) -> list[Group]:
    """Join a loop kernel into the loop kernel of the same shape that reads its result, as a
    second output (an LSTM step's cell state and the hidden state computed from it: one pass
    instead of two). The joint kernel runs where the reader's root is, so every other reader
    of the joined result must come after that (or be an output of the function); a cheap
    copy of a reader in the kernel leaves the original reader in place, which counts too."""
    position = {id(inst): n for n, inst in enumerate(fn.body)}
    users = users_of(fn.body)
    by_root = {id(g.root): g for g in groups}
    gone: set[int] = set()
    for consumer in sorted(groups, key=lambda g: -position[id(g.root)]):
        if id(consumer) in gone or consumer.kind != "loop":
            continue
        at = position[id(consumer.root)]
        changed = True
        while changed:
            changed = False
            for v in _input_values(consumer).values():
                producer = by_root.get(id(v.producer))
                if (producer is None or producer is consumer or id(producer) in gone
                        or producer.kind != "loop" or producer.siblings
                        or _updates_a_parameter(fn, producer)
                        or producer.shape != consumer.shape
                        or producer.root.results[0].type.shape != consumer.shape
                        or not all(id(u) in consumer.owned or position[id(u)] > at
                                   for u in users.get(id(v), []))):
                    continue
                consumer.members.update(producer.members)
                consumer.owned |= producer.owned
                consumer.siblings.append(producer.root)
                gone.add(id(producer))
                changed = True
                break
    return [g for g in groups if id(g) not in gone]


def _build(module: Module, fn: Function, groups: list[Group]) -> Module:
    groups = _merge_producers(fn, groups)
    fused = [g for g in _merge_siblings(fn, groups) if _worth_a_kernel(g) or g.siblings]
    if not fused:
        return module
    root_group = {id(g.root): g for g in fused}
    moved = set().union(*(g.owned for g in fused))
    position = {id(inst): n for n, inst in enumerate(fn.body)}
    new_fn = Function(fn.name)
    builder = Builder(new_fn)
    mapping: dict[int, Value] = {}
    bodies: list[Function] = []
    names = _FreshNames(module.functions)
    for inst in fn.body:
        group = root_group.get(id(inst))
        if group is not None:
            name = names.fresh(f"fused_{group.kind}")
            body, inputs = _body(group, name, position)
            bodies.append(body)
            builder.loc = inst.loc
            roots = [group.root, *group.siblings]
            results = builder.emit_multi(
                ops.FUSION, [mapping[id(v)] for v in inputs],
                {"kind": group.kind, "calls": name}, [r.results[0].type for r in roots],
                name_hints=[r.results[0].name_hint for r in roots])
            for root, result in zip(roots, results):
                mapping[id(root.results[0])] = result
            continue
        if id(inst) in moved:
            continue
        for old, new in zip(inst.results, copy_instruction(
                builder, inst, [mapping[id(v)] for v in inst.operands])):
            mapping[id(old)] = new
    new_fn.outputs = [mapping[id(v)] for v in fn.outputs]
    others = [f for n, f in module.functions.items() if n != fn.name]
    return Module([new_fn, *others, *bodies], module.entry_name)


class _FreshNames:
    """`base_0`, `base_1`, ...: the first of them not taken yet. Remembers where each base's
    search stopped, so naming n kernels is not a quadratic search."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)
        self.next: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        n = self.next.get(base, 0)
        while f"{base}_{n}" in self.taken:
            n += 1
        self.next[base] = n + 1
        name = f"{base}_{n}"
        self.taken.add(name)
        return name


def _body(group: Group, name: str, position: dict[int, int]) -> tuple[Function, list[Value]]:
    """The group as a function of its inputs (values produced outside it)."""
    body = Function(name)
    builder = Builder(body)
    inputs: list[Value] = []
    mapping: dict[int, Value] = {}
    members = sorted(group.members.values(), key=lambda inst: position[id(inst)])
    for member in members:
        for v in member.operands:
            if id(v) in mapping or group.has(v.producer):
                continue
            if is_scalar_constant(v):
                (copy,) = copy_instruction(builder, v.producer, [])
                mapping[id(v)] = copy
                continue
            mapping[id(v)] = builder.emit(ops.PARAMETER, [], {"index": len(inputs)}, v.type,
                                          name_hint=v.name_hint)
            inputs.append(v)
    for member in members:
        builder.loc = member.loc
        results = copy_instruction(builder, member, [mapping[id(v)] for v in member.operands])
        for old, new in zip(member.results, results):
            mapping[id(old)] = new
    body.outputs = [mapping[id(r.results[0])] for r in (group.root, *group.siblings)]
    return body, inputs


@module_pass("fusion")
def fusion(module: Module) -> Module:
    fn = module.entry
    return _build(module, fn, _Fuser(fn).groups())


@module_pass("fusion")
def fusion_keeping_views(module: Module) -> Module:
    """fusion for the cpu backend: it reads contiguous slices in place (jitc.ir.views) and
    finishes byte products through epilogues of any dtype."""
    fn = module.entry
    return _build(module, fn, _Fuser(fn, views=True, byte_epilogues=True).groups())


__all__ = ["fusion", "fusion_keeping_views", "ELEMENTAL", "CHEAP"]
