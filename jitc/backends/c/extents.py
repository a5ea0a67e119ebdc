"""Run-time extents in the C backend (docs/dynamic-shapes.md, "Backends"): which instructions
its kernels compile with symbolic dimensions, and where temporaries live when their sizes are
expressions.

A symbolic module compiles once. Its entry takes the symbol values as `const int64_t *dims`
(in `sorted(symbols)` order); the code reads them into `int64_t d_<symbol>` variables and
prints every extent as a C expression over them (`cgen.extent`). Buffer assignment is the CPU
planner's (jitc/backends/cpu/plan.py) run on a stand-in of the function whose symbols have
large representative values; the offsets it picks become expressions (`WorkspaceLayout`)
that hold for every binding, computed by the generated code at each call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jitc.backends.cpu.plan import ALIGNMENT, BufferPlan, plan_buffers
from jitc.ir import ops, symbolic
from jitc.ir.core import Function, Instruction, Module, Value
from jitc.ir.opdef import AttrKind, Trait
from jitc.ir.symbolic import DimLike
from jitc.ir.types import TensorType
from jitc.tracing.errors import TraceError, located

from .cgen import extent, symbol_variable
from .elemental import RULES

# Ops whose C kernels take run-time extents. Each was checked for what a symbolic extent
# changes: bounds and strides printed through `cgen.extent`, no decision on a size in Python,
# and no element read that an extent of 0 would put out of bounds. Any other op with a
# symbolic type is refused at compile time (`refuse_unsupported`).
SYMBOLIC_OPS = frozenset({
    "parameter", "constant", "extent", "iota", "broadcast_in_dim", "reshape", "transpose", "slice",
    "reverse", "concatenate", "pad", "gather", "dynamic_slice", "dynamic_update_slice",
    "reduce", "argmax", "argmin", "dot_general", "convolution", "sort", "fusion", "while",
    "conditional"})
FUSION_KINDS = frozenset({"loop", "reduce", "dot", "row"})
# The stand-in values of the symbols while planning buffers: large, so that the planner
# treats a symbolic temporary as large, and odd and unlike any static extent, so that no
# shape equality holds at them that does not hold symbolically.
REPRESENTATIVE = 1_000_003


def module_symbols(module: Module) -> list[str]:
    """The symbols of a module in the order of the entry's `dims` vector."""
    return sorted(set().union(*(t.symbols for t in module.entry.parameter_types)))


def _is_symbolic(inst: Instruction) -> bool:
    if not all(v.type.is_static for v in (*inst.operands, *inst.results)):
        return True
    return any(symbolic.symbols_of(inst.attrs.get(spec.name)) for spec in inst.op.attrs
               if spec.kind is AttrKind.DIMS)


def _supported(inst: Instruction, module: Module) -> str | None:
    """None when the C kernels compile `inst` with its symbolic extents, else what is not."""
    op = inst.op
    if not _is_symbolic(inst):
        return None
    if op.has(Trait.ELEMENTWISE) and op.name in RULES:
        return None
    if op.name not in SYMBOLIC_OPS:
        return f"`{op.name}`"
    if op is ops.FUSION:
        kind = inst.attrs["kind"]
        if kind not in FUSION_KINDS:
            return f"a `{kind}` fusion"
        body = module.functions[inst.attrs["calls"]]  # type: ignore[index]
        for inner in body.body:
            problem = _supported(inner, module)
            if problem is not None:
                return f"{problem} (in a `{kind}` fusion)"
    return None


def refuse_unsupported(module: Module) -> None:
    """Raise TraceError naming the first instruction whose kernel the C backend cannot yet
    compile with run-time extents (and where the user's code made it)."""
    for inst in module.entry.body:
        problem = _supported(inst, module)
        if problem is not None:
            raise TraceError(located(
                f"the c backend cannot compile {problem} with symbolic dimensions yet "
                f"({', '.join(str(v.type) for v in inst.results)}); compile for concrete "
                "shapes (jit(..., dynamic=False), or the automatic policy, which then "
                "compiles each shape exactly) or use backend='interpreter'", inst.loc))


# -- buffers ---------------------------------------------------------------------------------

def _aligned(nbytes: DimLike, alignment: int) -> DimLike:
    return symbolic.floor_divide(nbytes + (alignment - 1), alignment) * alignment


@dataclass
class WorkspaceLayout:
    """Offsets of the workspace's blocks as expressions of the symbols.

    `levels` are the distinct offsets the planner chose at the representative sizes, lowest
    first; each level's run-time offset is the largest end (offset + aligned size) of the
    temporaries that lie wholly below it at those sizes. Two temporaries alive at the same
    time are disjoint there, so one lies wholly below the other, and the run-time offsets keep
    them apart for every binding. Scratch blocks follow the arena, one after the other."""

    levels: list[int]
    level_of: dict[int, int]                      # frame slot -> its level
    below: list[list[tuple[int, DimLike]]]        # per level: (level, size) ends to clear
    ends: list[tuple[int, DimLike]]               # (level, size) of every temporary
    # Per scratch block: its aligned bytes, and workspace-size functions of regions (called
    # with `dims`) of which it holds the largest answer after them.
    scratch: list[tuple[DimLike, tuple[str, ...]]] = field(default_factory=list)

    @property
    def count(self) -> int:
        """Entries of the `offsets` array: the levels, then the scratch blocks."""
        return len(self.levels) + len(self.scratch)

    def add_scratch(self, nbytes: DimLike, alignment: int, largest_of: tuple[str, ...] = ()
                    ) -> int:
        """A new scratch block past the arena of `nbytes` and then the largest size the
        functions `largest_of` give (regions' workspaces); its index in `offsets`."""
        nbytes = _aligned(nbytes if not symbolic.is_static(nbytes) else max(nbytes, 1),
                          alignment)  # type: ignore[call-overload]
        self.scratch.append((nbytes, largest_of))
        return self.count - 1

    def function(self, symbols: list[str], name: str) -> str:
        """`static int64_t name(const int64_t *dims, int64_t *offsets)`: fills `offsets`
        and returns the workspace bytes the binding needs."""
        lines = []
        for level, ends in enumerate(self.below):
            lines.append(f"    offsets[{level}] = 0;")
            lines += _raise_to(f"offsets[{level}]", ends)
        lines.append("    int64_t end = 0;")
        lines += _raise_to("end", self.ends)
        for n, (size, largest_of) in enumerate(self.scratch):
            lines.append(f"    offsets[{len(self.levels) + n}] = end;")
            lines.append(f"    end += {extent(size)};")
            if largest_of:
                lines.append("    {")
                lines.append("        int64_t most = 0, size;")
                for function in largest_of:
                    lines.append(f"        size = {function}(dims);")
                    lines.append("        if (size > most) most = size;")
                lines += ["        end += most;", "    }"]
        words = set(re.findall(r"\w+", "\n".join(lines)))
        head = [f"static int64_t {name}(const int64_t *dims, int64_t *offsets) {{",
                "    (void)dims;", "    (void)offsets;"]
        head += [f"    const int64_t {symbol_variable(s)} = dims[{n}];"
                 for n, s in enumerate(symbols) if symbol_variable(s) in words]
        return "\n".join([*head, *lines, "    return end;", "}"])


def _raise_to(target: str, ends: list[tuple[int, DimLike]]) -> list[str]:
    lines = []
    for level, size in ends:
        end = f"offsets[{level}] + {extent(size)}"
        lines.append(f"    if ({end} > {target}) {target} = {end};")
    return lines


def plan_symbolic(fn: Function, program: Module,
                  symbols: list[str]) -> tuple[BufferPlan, WorkspaceLayout]:
    """Buffer assignment for a function with symbolic types (no donation: whether a result
    fits an argument's buffer would depend on the binding)."""
    stand_in, originals = _stand_in(fn, symbols)
    plan = plan_buffers(stand_in, frozenset(), program)
    plan.slots = {id(originals[key]): slot for key, slot in plan.slots.items()}
    plan.aliases = {id(originals[key]): originals[id(v)] for key, v in plan.aliases.items()}
    plan.copies = [(originals[id(v)], slot) for v, slot in plan.copies]
    sizes: dict[int, DimLike] = {}    # slot -> aligned bytes, symbolic
    concrete: dict[int, int] = {}     # slot -> aligned bytes at the representative sizes
    for stand in _values(stand_in):
        value = originals[id(stand)]
        slot = plan.slots.get(id(value))
        if slot in plan.temp_offsets and slot not in sizes:
            sizes[slot] = _aligned(value.type.nbytes, ALIGNMENT)  # type: ignore[index]
            concrete[slot] = _aligned(max(stand.type.nbytes, 1), ALIGNMENT)  # type: ignore
    levels = sorted(set(plan.temp_offsets.values()))
    level_of = {slot: levels.index(offset) for slot, offset in plan.temp_offsets.items()}
    below = []
    for start in levels:
        under = [s for s, o in plan.temp_offsets.items() if o + concrete[s] <= start]
        # Only the highest of a chain matters: a block wholly below another ends before it.
        top = [s for s in under if not any(plan.temp_offsets[t] >= plan.temp_offsets[s] +
                                           concrete[s] for t in under)]
        below.append(_distinct([(level_of[s], sizes[s]) for s in top]))
    ends = _distinct([(level_of[s], sizes[s]) for s in plan.temp_offsets])
    return plan, WorkspaceLayout(levels, level_of, below, ends)


def _distinct(ends: list[tuple[int, DimLike]]) -> list[tuple[int, DimLike]]:
    return sorted(set(ends), key=lambda item: (item[0], str(item[1])))


def _values(fn: Function) -> list[Value]:
    return [v for inst in fn.body for v in inst.results]


def _stand_in(fn: Function, symbols: list[str]) -> tuple[Function, dict[int, Value]]:
    """A copy of `fn` whose types have the representative sizes, and the original of each of
    its values (by id)."""
    env = {s: REPRESENTATIVE + 2 * n for n, s in enumerate(symbols)}
    copies: dict[int, Value] = {}
    originals: dict[int, Value] = {}
    body = []
    for inst in fn.body:
        types: list[TensorType] = [v.type.concrete(env) for v in inst.results]
        copy = Instruction(inst.op, [copies[id(v)] for v in inst.operands], inst.attrs, types,
                           inst.loc, [v.name_hint for v in inst.results])
        for old, new in zip(inst.results, copy.results):
            copies[id(old)] = new
            originals[id(new)] = old
        body.append(copy)
    return Function(fn.name, body, [copies[id(v)] for v in fn.outputs]), originals
