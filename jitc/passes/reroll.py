"""Loop re-rolling: a Python loop that tracing unrolled becomes one `while` op again.

Tracing runs a Python `for` loop's body once per iteration, so a 1000-step RNN is 1000 copies
of the step in the IR, and every later pass and LLVM see all of them. This pass finds runs of
consecutive copies and folds them into a `while` whose body is one copy, so what follows the
trace works on a program whose size does not grow with the trip count (the idea of LLVM's
LoopReroll, on our IR, where SSA and the absence of side effects make it exact).

A run of `trips` blocks of `period` instructions folds when the blocks are the same program:
- instruction r of every block has the same op, attributes and result types; a `slice` may
  start at a different place in each block with the same sizes (it becomes a `dynamic_slice`);
- each operand is, in every block, the same kind of value: a result of an earlier instruction
  of the same block (at the same place), a result of the block before (a loop-carried value;
  the first block reads its initial value from before the run), one value from before the run
  (loop-invariant), or a constant. A constant that differs between blocks (the Python loop
  index, `x[t]`'s start) is read from a table of its values indexed by the iteration;
- what the rest of the program reads of the run is the last block's results, or one result of
  every block (as `np.stack` of per-step outputs), which the loop writes into a stacked buffer.

Constants and iotas are values here, not instructions of a block: tracing makes a constant once
and reuses it, so they do not repeat with the loop. Anything else that differs (another op, an
operand from two blocks back, a value of an earlier block read after the loop) ends the run
there: the blocks before it fold, the rest stays as traced. What is folded computes exactly
what the unrolled program computes, op for op. Region functions compare by structure, so loops
nested in loops fold from the inside out and then as a whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jitc.ir import ops
from jitc.ir.core import (
    Function,
    Instruction,
    Module,
    Value,
    function_structure,
    reachable_functions,
)
from jitc.ir.opdef import AttrKind
from jitc.passes.reroll_loop import (
    FoldedLoop,
    Operand,
    Pattern,
    is_value_like,
    np_stack_of,
)
from jitc.passes.rewrite import remapped, users_of

# Fewer iterations than this stay unrolled: a short loop runs faster unrolled (fusion across
# steps, no loop overhead) and costs little to compile.
MIN_TRIPS = 8
_CANDIDATE_PERIODS = 8


def reroll(module: Module, min_trips: int = MIN_TRIPS) -> Module:
    """The module with every foldable run of repeated blocks in every function folded into a
    `while` (the same module when there is none)."""
    rewriter = _Rewriter(module, min_trips)
    for name in list(module.functions):
        rewriter.function(name)
    if not rewriter.changed:
        return module
    reachable = reachable_functions(rewriter.functions, module.entry_name)
    return Module([f for n, f in rewriter.functions.items() if n in reachable],
                  module.entry_name)


def _varying_attrs(inst: Instruction) -> frozenset[str]:
    return frozenset({"start", "limit"}) if inst.op is ops.SLICE else frozenset()


@dataclass
class _Run:
    """Blocks `first`.. of `period` instructions (positions in the non-constant sequence)."""

    first: int
    period: int
    trips: int


class _Rewriter:
    def __init__(self, module: Module, min_trips: int) -> None:
        self.functions: dict[str, Function] = dict(module.functions)
        self.min_trips = max(2, min_trips)
        self.changed = False
        self.region_ids: dict[str, int] = {}
        self.structures: dict[tuple, int] = {}
        self.folds = 0
        # Instructions this pass made after a loop (steps of a stacked result): never folded,
        # or the slices of one fold would fold into the next loop.
        self.generated: set[int] = set()
        self.signatures: dict[int, tuple[Instruction, tuple]] = {}
        self.literal_keys: dict[int, tuple[Instruction, tuple]] = {}

    # -- structural identity of region functions ---------------------------------------------
    def region_id(self, name: str) -> int:
        if name not in self.region_ids:
            key = function_structure(self.functions[name],
                                     lambda inst: self.attr_key(inst, frozenset()))
            self.region_ids[name] = self.structures.setdefault(key, len(self.structures))
        return self.region_ids[name]

    def attr_key(self, inst: Instruction, skip: frozenset[str]) -> tuple:
        kinds = {a.name: a.kind for a in inst.op.attrs}
        items = []
        for name, value in sorted(inst.attrs.items()):
            if name in skip:
                continue
            if kinds.get(name) is AttrKind.FUNCTION:
                value = ("region", self.region_id(value))  # type: ignore[arg-type]
            elif kinds.get(name) is AttrKind.FUNCTIONS:
                value = ("regions", tuple(self.region_id(v) for v in value))  # type: ignore
            items.append((name, value))
        return tuple(items)

    @staticmethod
    def _cached(cache: dict[int, tuple[Instruction, tuple]], inst: Instruction,
                compute: Callable[[Instruction], tuple]) -> tuple:
        known = cache.get(id(inst))
        if known is not None and known[0] is inst:
            return known[1]
        value = compute(inst)
        cache[id(inst)] = (inst, value)  # the instruction pins its id
        return value

    def signature(self, inst: Instruction) -> tuple:
        return self._cached(self.signatures, inst, self._signature)

    def _signature(self, inst: Instruction) -> tuple:
        if id(inst) in self.generated:
            return ("generated", id(inst))
        attrs = self.attr_key(inst, _varying_attrs(inst)) if inst.op.control or \
            inst.op is ops.SLICE else inst.attr_key()
        return (inst.op.name, attrs, tuple(v.type for v in inst.results), len(inst.operands))

    def literal_key(self, inst: Instruction) -> tuple:
        return self._cached(self.literal_keys, inst, lambda i: (
            i.op.name, i.attr_key(), tuple(v.type for v in i.results)))

    # -- driver --------------------------------------------------------------------------------
    def function(self, name: str) -> None:
        """Fold runs in `name` until none is left, then in the loop bodies made on the way."""
        while True:
            fn = self.functions[name]
            folded = self.fold_one(fn)
            if folded is None:
                return
            self.functions[name], bodies = folded
            self.region_ids.pop(name, None)
            self.changed = True
            for body in bodies:
                self.function(body)

    def fold_one(self, fn: Function) -> tuple[Function, list[str]] | None:
        sequence = [inst for inst in fn.body if not is_value_like(inst)
                    and inst.op is not ops.PARAMETER]
        if len(sequence) < 2 * self.min_trips:
            return None
        signatures = [self.signature(inst) for inst in sequence]
        for run in self.candidates(signatures):
            checked = self.check(fn, sequence, run)
            if checked is not None:
                return self.build(fn, sequence, *checked)
        return None

    def candidates(self, signatures: Sequence[tuple]) -> list[_Run]:
        """Runs where the sequence repeats itself with some period, longest first. Periods are
        the distances between consecutive occurrences of one signature that occur most."""
        ids: dict[tuple, int] = {}
        codes = [ids.setdefault(s, len(ids)) for s in signatures]
        last: dict[int, int] = {}
        distances: Counter[int] = Counter()
        for n, code in enumerate(codes):
            if code in last:
                distances[n - last[code]] += 1
            last[code] = n
        runs = []
        for period, count in distances.most_common(_CANDIDATE_PERIODS):
            if count < self.min_trips - 1:
                continue
            n, size = 0, len(codes)
            while n + period < size:
                if codes[n] != codes[n + period]:
                    n += 1
                    continue
                start = n
                while n + period < size and codes[n] == codes[n + period]:
                    n += 1
                trips = (n - start) // period + 1
                if trips >= self.min_trips:
                    runs.append(_Run(start, period, trips))
        runs.sort(key=lambda r: -r.trips * r.period)
        return runs

    # -- checking a run ------------------------------------------------------------------------
    def check(self, fn: Function, sequence: list[Instruction], run: _Run
              ) -> tuple[_Run, Pattern] | None:
        """The longest prefix of `run` (dropping a first block that differs) that folds, with
        its pattern; None when fewer than min_trips blocks do."""
        for _ in range(2):
            if run.trips < self.min_trips:
                return None
            checked = self.check_blocks(fn, sequence, run)
            if checked is None:
                run = _Run(run.first + run.period, run.period, run.trips - 1)
                continue
            trips, pattern = checked
            if trips >= self.min_trips:
                return _Run(run.first, run.period, trips), pattern
            return None
        return None

    def check_blocks(self, fn: Function, sequence: list[Instruction], run: _Run
                     ) -> tuple[int, Pattern] | None:
        period = run.period
        where: dict[int, tuple[int, int]] = {}
        for k in range(run.trips):
            for r in range(period):
                where[id(sequence[run.first + k * period + r])] = (k, r)

        def block(k: int) -> list[Instruction]:
            start = run.first + k * period
            return sequence[start:start + period]

        def classify(value: Value, k: int) -> Operand | None:
            producer = value.producer
            if is_value_like(producer):
                return ("lit", self.literal_key(producer))
            place = where.get(id(producer))
            if place is None:
                return ("outer", value)
            kd, rd = place
            if kd == k:
                return ("intra", rd, value.index)
            if kd == k - 1:
                return ("carry", rd, value.index)
            return None

        template = block(1)
        pattern = Pattern([[] for _ in range(period)])
        for r, inst in enumerate(template):
            for value in inst.operands:
                kind = classify(value, 1)
                if kind is None:
                    return None
                pattern.operands[r].append(kind)
        # Block 0 reads the carried values' initial values from before the run.
        first = block(0)
        for r, inst in enumerate(first):
            if not self.same_attrs(inst, template[r]):
                return None
            for m, value in enumerate(inst.operands):
                want, got = pattern.operands[r][m], classify(value, 0)
                if want[0] == "carry":
                    if got is None or got[0] in ("intra", "carry"):
                        return None
                    slot = (want[1], want[2])
                    if pattern.carry_init.setdefault(slot, value) is not value:
                        return None
                elif not self.same_kind(want, got):
                    return None
        trips = run.trips
        for k in range(2, run.trips):
            if not all(self.same_attrs(inst, template[r]) and all(
                    self.same_kind(pattern.operands[r][m], classify(v, k))
                    for m, v in enumerate(inst.operands))
                    for r, inst in enumerate(block(k))):
                trips = k
                break
        # What is read after the run: the last block's values, or one value of every block.
        # A value of every block folds only when np.stack reads them (as lax.scan's ys);
        # other reads of earlier blocks would need one instruction per step after the loop.
        users, returned = users_of(fn.body), {id(v) for v in fn.outputs}
        while trips >= self.min_trips:
            escapes = self.escapes(fn, sequence, run, trips, where)
            early = []
            for (r, i), ks in escapes.items():
                values = [block(k)[r].results[i] for k in range(trips)]
                if len(ks) == trips and np_stack_of(values, users, returned):
                    continue
                early += [k for k in ks if k != trips - 1]
            if not early:
                pattern.escapes = escapes
                break
            trips = min(early) + 1
        if trips < self.min_trips:
            return trips, pattern
        for r, inst in enumerate(template):
            if inst.op is ops.SLICE:
                starts = [tuple(block(k)[r].attrs["start"]) for k in range(trips)]
                if len(set(starts)) > 1:
                    pattern.slice_starts[r] = starts
            for m, kind in enumerate(pattern.operands[r]):
                if kind[0] == "lit":
                    producers = [block(k)[r].operands[m].producer for k in range(trips)]
                    if len({self.literal_key(p) for p in producers}) > 1:
                        if any(p.op is not ops.CONSTANT for p in producers) or len(
                                {p.results[0].type for p in producers}) > 1:
                            return 0, pattern
                        pattern.literal_values[(r, m)] = producers
        return trips, pattern

    def same_attrs(self, inst: Instruction, template: Instruction) -> bool:
        if inst.op is not template.op:
            return False
        if inst.op is ops.SLICE:
            a, b = inst.attrs, template.attrs
            sizes_a = [hi - lo for lo, hi in zip(a["start"], a["limit"])]
            sizes_b = [hi - lo for lo, hi in zip(b["start"], b["limit"])]
            if sizes_a != sizes_b:
                return False
            if a["start"] != b["start"] and any(s != 1 for s in (a["stride"] or ())):
                return False
        return self.signature(inst) == self.signature(template)

    @staticmethod
    def same_kind(want: Operand, got: Operand | None) -> bool:
        if got is None or got[0] != want[0]:
            return False
        if want[0] == "outer":
            return got[1] is want[1]
        return want[0] == "lit" or got == want

    def escapes(self, fn: Function, sequence: list[Instruction], run: _Run, trips: int,
                where: dict[int, tuple[int, int]]) -> dict[tuple[int, int], set[int]]:
        """(place, result index) -> the blocks whose value of it is read after the run."""
        last = sequence[run.first + trips * run.period - 1]
        inside = {id(sequence[run.first + n]) for n in range(trips * run.period)}
        out: dict[tuple[int, int], set[int]] = {}

        def note(value: Value) -> None:
            if id(value.producer) in inside:
                k, r = where[id(value.producer)]
                out.setdefault((r, value.index), set()).add(k)
        after = False
        for inst in fn.body:
            if after:
                for value in inst.operands:
                    note(value)
            elif inst is last:
                after = True
        for value in fn.outputs:
            note(value)
        return out

    # -- building the loop ---------------------------------------------------------------------
    def build(self, fn: Function, sequence: list[Instruction], run: _Run, pattern: Pattern
              ) -> tuple[Function, list[str]]:
        period, trips = run.period, run.trips
        blocks = [sequence[run.first + k * period:run.first + (k + 1) * period]
                  for k in range(trips)]
        name = f"{fn.name}.loop{self.folds}"
        while name + ".body" in self.functions:
            self.folds += 1
            name = f"{fn.name}.loop{self.folds}"
        self.folds += 1
        first_index = fn.body.index(blocks[0][0])
        last_index = fn.body.index(blocks[-1][-1])
        loop = FoldedLoop(name, blocks, pattern, self.literal_key)
        head, mapping, dropped = loop.emit(fn.body[last_index + 1:], fn.outputs)
        self.generated.update(id(inst) for inst in head)
        self.functions[loop.cond.name] = loop.cond
        self.functions[loop.body.name] = loop.body
        used = {id(v) for inst in head + fn.body[last_index + 1:] for v in inst.operands}
        used.update(id(v) for v in fn.outputs)
        kept = [inst for inst in fn.body[first_index:last_index + 1]
                if is_value_like(inst) and any(id(v) in used for v in inst.results)]
        tail = remapped([i for i in fn.body[last_index + 1:] if id(i) not in dropped], mapping)
        new = Function(fn.name, fn.body[:first_index] + kept + head + tail,
                       [mapping.get(id(v), v) for v in fn.outputs])
        return new, [loop.body.name]
