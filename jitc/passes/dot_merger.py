"""Dot merging: independent products of several row blocks by one matrix become one product.

An unrolled recurrence multiplies every step's input by the same weights, `x[t] @ w`, and none
of those products depends on another: they are one product of the stacked inputs,
`concatenate(x[0], ..., x[T-1]) @ w`, whose row blocks are sliced back out. One large product
runs at the machine's full rate where T small ones pay T times the fixed costs of a kernel
(XLA has the same rewrite, DotMerger).

A group is the dot_generals that share their rhs value and attributes, with a rank-2 lhs
contracted on its last dimension and no batch dimensions. A member joins only if its lhs does
not depend on an earlier member's result (the steps' `h @ w_h`, each needing the previous
step, stay apart). The merged product sits where the group's first member was; whatever the
other members' lhs need is computed before it, which any order respecting the data flow
allows.
"""

from __future__ import annotations

import bisect
import heapq

from jitc.ir import ops
from jitc.ir.core import Builder, Function, Instruction, Module, Value
from jitc.ir.symbolic import at_most
from jitc.ir.views import slice_view_offset
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import copy_instruction, users_of

# Merging pays for products too small to use the machine well; a large one gains nothing
# and its stacked operand would cost a copy.
MAX_MERGED_ROWS = 256


def _key(inst: Instruction) -> tuple | None:
    if inst.op is not ops.DOT_GENERAL:
        return None
    lhs, rhs = inst.operands
    attrs = inst.attrs
    if attrs["lhs_batch"] or attrs["rhs_batch"] or lhs.type.rank != 2 or rhs.type.rank != 2 or \
            list(attrs["lhs_contract"]) != [1] or lhs.type.dtype is not rhs.type.dtype or \
            not at_most(lhs.type.shape[0], MAX_MERGED_ROWS):
        return None
    return (id(rhs), tuple(attrs["rhs_contract"]), lhs.type.dtype)  # type: ignore[arg-type]


def _groups(fn: Function) -> list[list[Instruction]]:
    """Groups of two or more mergeable products, each in program order; the groups in the
    order of their first candidate."""
    candidates: dict[tuple, list[Instruction]] = {}
    for inst in fn.body:
        key = _key(inst)
        if key is not None:
            candidates.setdefault(key, []).append(inst)
    position = {id(inst): n for n, inst in enumerate(fn.body)}
    users = users_of(fn.body)
    groups = []
    for members in candidates.values():
        if len(members) > 1:
            kept = _independent(fn, members, position, users)
            if len(kept) > 1:
                groups.append(kept)
    return groups


def _independent(fn: Function, members: list[Instruction], position: dict[int, int],
                 users: dict[int, list[Instruction]]) -> list[Instruction]:
    """The members, in program order, whose lhs depends on no earlier kept member.

    Walks forward from the kept members only, in program order, and never past the last
    member: the work is the part of the kept members' forward cone that lies between the first
    and the last member, not the whole function once per group (an unrolled loop has a group
    per step)."""
    last = position[id(members[-1])]
    tainted: set[int] = set()  # positions of instructions computed from a kept member
    frontier: list[int] = []   # tainted positions whose users are not yet tainted
    kept = []

    def taint_users(inst: Instruction) -> None:
        for v in inst.results:
            for user in users.get(id(v), ()):
                at = position[id(user)]
                if at <= last and at not in tainted:
                    tainted.add(at)
                    heapq.heappush(frontier, at)

    for member in members:
        at = position[id(member)]
        while frontier and frontier[0] < at:
            taint_users(fn.body[heapq.heappop(frontier)])
        # The rhs is shared and defined before the first member: only the lhs can be tainted.
        if at not in tainted:
            kept.append(member)
            taint_users(member)
    return kept


def _tiles(lhs: list[Value]) -> Value | None:
    """The array whose consecutive contiguous blocks the lhs are, in order and covering it
    all (an unrolled loop's x[0], x[1], ...), or None."""
    whole, expected = None, 0
    for v in lhs:
        inst = v.producer
        if inst.op is ops.RESHAPE and inst.operands[0].type.is_row_major and \
                v.type.is_row_major:
            inst = inst.operands[0].producer
        offset = slice_view_offset(inst)
        if offset is None or offset != expected or \
                (whole is not None and inst.operands[0] is not whole):
            return None
        whole = inst.operands[0]
        expected += v.type.size
    return whole if whole is not None and expected == whole.type.size else None


def _reads(inst: Instruction, first: dict[int, list[Instruction]]) -> list[Value]:
    """What `inst` needs computed before it: for a group's first member, every member's lhs
    and the shared rhs."""
    group = first.get(id(inst))
    if group is None:
        return list(inst.operands)
    return [m.operands[0] for m in group] + [group[0].operands[1]]


@module_pass("dot_merger")
def dot_merger(module: Module) -> Module:
    """Merges groups in rounds, finding groups again on the merged program after each round:
    groups may depend on one another (a member of one reading a member of another), and only
    a fresh look at the merged program says which products are still independent.

    A round merges the first group and every later one whose span (first to last member) is
    disjoint from the spans taken before it. Merging a group only moves instructions inside
    its span and makes its members depend on each other's operands, so a group with a disjoint
    span keeps the same independent members: the round gives what merging them one at a time
    would, in one rebuild (an unrolled loop has one group per step, a rebuild per group was
    quadratic)."""
    while True:
        groups = _groups(module.entry)
        if not groups:
            return module
        module = _merge(module, _disjoint(module.entry, groups))


def _disjoint(fn: Function, groups: list[list[Instruction]]) -> list[list[Instruction]]:
    """The first group and each later one whose span overlaps none taken before it."""
    position = {id(inst): n for n, inst in enumerate(fn.body)}
    starts: list[int] = []  # the spans taken, sorted by start
    ends: list[int] = []
    taken = []
    for group in groups:
        start, end = position[id(group[0])], position[id(group[-1])]
        at = bisect.bisect(starts, start)
        if (at and ends[at - 1] >= start) or (at < len(starts) and starts[at] <= end):
            continue
        starts.insert(at, start)
        ends.insert(at, end)
        taken.append(group)
    return taken


def _merge(module: Module, groups: list[list[Instruction]]) -> Module:
    fn = module.entry
    first = {id(group[0]): group for group in groups}
    merged_away = {id(m) for group in groups for m in group}
    producers = {id(v): inst for inst in fn.body for v in inst.results}
    new_fn = Function(fn.name)
    builder = Builder(new_fn)
    mapping: dict[int, Value] = {}
    emitted: set[int] = set()

    def emit(target: Instruction) -> None:
        """`target` after everything it reads, which is pulled forward if need be (depth
        first, without recursion: a pulled chain can be long)."""
        stack = [target]
        while stack:
            inst = stack[-1]
            if id(inst) in emitted:
                stack.pop()
                continue
            needed = [producers[id(v)] for v in _reads(inst, first)
                      if id(v) not in mapping and id(producers[id(v)]) not in emitted]
            if needed:
                stack.extend(reversed(needed))
                continue
            stack.pop()
            emitted.add(id(inst))
            if id(inst) in first:
                merge(first[id(inst)])
            elif id(inst) not in merged_away:  # else its group's product computes it
                for old, new in zip(inst.results, copy_instruction(
                        builder, inst, [mapping[id(v)] for v in inst.operands])):
                    mapping[id(old)] = new

    def merge(group: list[Instruction]) -> None:
        rhs = group[0].operands[1]
        builder.loc = group[0].loc
        lhs = [m.operands[0] for m in group]
        rows_total = sum(v.type.shape[0] for v in lhs)
        whole = _tiles(lhs)
        if whole is not None:
            # x[0], x[1], ... stacked is x itself, as rows: no copy.
            stacked = builder.emit(ops.RESHAPE, [mapping[id(whole)]], {},
                                   whole.type.with_shape((rows_total, lhs[0].type.shape[1])))
        else:
            stacked = builder.emit(ops.CONCATENATE, [mapping[id(v)] for v in lhs],
                                   {"dimension": 0})
        product = builder.emit(ops.DOT_GENERAL, [stacked, mapping[id(rhs)]],
                               dict(group[0].attrs))
        row = 0
        for member in group:
            emitted.add(id(member))
            out = member.results[0]
            rows = member.operands[0].type.shape[0]
            builder.loc = member.loc
            mapping[id(out)] = builder.emit(
                ops.SLICE, [product], {"start": [row, 0], "limit": [row + rows,
                                                                   out.type.shape[1]]},
                name_hint=out.name_hint)
            row += rows

    for inst in fn.body:
        emit(inst)
    new_fn.outputs = [mapping[id(v)] for v in fn.outputs]
    others = [f for name, f in module.functions.items() if name != fn.name]
    return Module([new_fn, *others], module.entry_name)


__all__ = ["dot_merger"]
