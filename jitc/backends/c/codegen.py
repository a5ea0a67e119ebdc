"""Lowering an optimized IR module to one C translation unit.

The unit defines `void jitc_entry(void **buffers)`, the same ABI as the CPU backend's entry:
`buffers` holds the argument pointers, the result pointers, the array-constant pointers and
the workspace pointer, in that order (buffer assignment decides which temporaries share
workspace bytes). The entry names each buffer after its IR value and calls the kernels in
program order; every kernel is a `static` function of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from jitc.backends.cpu.plan import ALIGNMENT, BufferPlan, is_inline_constant, plan_buffers
from jitc.ir import ops
from jitc.ir.core import Function, Instruction, Module, Value
from jitc.ir.opdef import Trait
from jitc.ir.printer import print_module, value_names
from jitc.ir.symbolic import DimLike
from jitc.ir.types import TensorType

from .cgen import c_identifier, symbol_variable
from .elemental import RULES
from .extents import WorkspaceLayout, module_symbols, plan_symbolic, refuse_unsupported
from .fusions import emit_fusion, update_in_place
from .helpers import HELPERS, preamble
from .kernels import Kernel, emit_arg, emit_convolution, emit_copy, emit_dot, emit_elemental
from .kernels import emit_reduce as _emit_reduce
from .sort_kernel import emit_sort

ENTRY = "jitc_entry"
# A symbolic module's library also exports `int64_t WORKSPACE_BYTES(const int64_t *dims)`.
WORKSPACE_BYTES = "jitc_workspace_bytes"
_LAYOUT = "jitc_workspace_layout"
INCLUDES = ("math.h", "stdbool.h", "stdint.h", "string.h")
_SPECIAL = {ops.REDUCE: _emit_reduce, ops.ARGMAX: emit_arg, ops.ARGMIN: emit_arg,
            ops.DOT_GENERAL: emit_dot, ops.CONVOLUTION: emit_convolution, ops.SORT: emit_sort}
_HELPER_CALL = re.compile(r"\bjitc_\w+")


def instruction_texts(module: Module) -> dict[int, str]:
    """Each instruction's line of IR text (large constants elided), for comments."""
    texts: dict[int, str] = {}
    for fn in module.functions.values():
        lines = print_module(Module([fn], fn.name), elide_constants=True).splitlines()
        body = lines[lines.index(f"func @{fn.name} {{") + 1:]
        for inst, line in zip(fn.body, body):
            texts[id(inst)] = line.strip()
    return texts


class Program:
    """What the kernels of one compiled function share: the buffer plan, the C names of the
    entry function's values and buffers, and the IR text of every instruction. A symbolic
    module's (`symbols`, in the order of the entry's `dims`) also has the `layout` of its
    workspace, whose offsets the code computes at each call. A region of a symbolic module
    takes the symbols of the whole module (`symbols`), in its order."""

    def __init__(self, module: Module, donated: frozenset[int] = frozenset(),
                 symbols: list[str] | None = None, prefix: str = "", threads: int = 1,
                 writebacks: tuple[int, ...] = ()) -> None:
        self.module = module
        self.threads = threads  # the most a kernel may run on (parallel.py)
        fn = module.entry
        self.symbols = module_symbols(module) if symbols is None else symbols
        self.layout: WorkspaceLayout | None = None
        # The names of the functions that compute the workspace layout and size.
        self.layout_function = f"{prefix}{_LAYOUT}"
        self.bytes_function = f"{prefix}{WORKSPACE_BYTES}"
        if self.symbols:
            refuse_unsupported(module)
            self.plan, self.layout = plan_symbolic(fn, module, self.symbols)
        else:
            self.plan = plan_buffers(fn, donated, module, writebacks=writebacks)
        self.symbol_variables = [symbol_variable(s) for s in self.symbols]
        self.texts = instruction_texts(module)
        self.names: dict[int, str] = {}
        # The entry of a symbolic module also declares `dims` and `offsets` itself.
        taken = {*self.symbol_variables, "dims", "offsets"} if self.symbols else set()
        for key, name in value_names(fn).items():
            self.names[key] = _unique(c_identifier(name), taken)
        self.slot_names = self._slot_names(fn, taken)
        self.scratch_offsets: list[tuple[int, int]] = []  # (offset, bytes) after the arena

    def _slot_names(self, fn: Function, taken: set[str]) -> list[str]:
        names: list[str | None] = [None] * self.plan.num_slots
        values = [v for inst in fn.body for v in inst.results]
        for v in values:
            slot = self.plan.slot(v)
            if slot is not None and id(v) not in self.plan.aliases and names[slot] is None:
                names[slot] = self.names[id(v)]
        for n in range(self.plan.num_outputs):
            slot = self.plan.num_args + n
            if names[slot] is None:  # a copied result: no value of its own lives there
                names[slot] = _unique(f"result{n}", taken)
        return [name or f"slot{n}" for n, name in enumerate(names)]

    def slot_pointer(self, value: Value) -> str:
        return self.slot_names[self.plan.slot(value)]  # type: ignore[index]

    def storage_key(self, value: Value) -> object:
        slot = self.plan.slot(value)
        offset = self.plan.temp_offsets.get(slot)  # type: ignore[arg-type]
        return ("workspace", offset) if offset is not None else ("slot", slot)

    def is_inline(self, value: Value) -> bool:
        return is_inline_constant(value)

    def scratch(self, t: TensorType) -> tuple[str, object]:
        """Workspace bytes past the arena for a kernel's private use: (the entry's argument
        expression, a storage key)."""
        return self.scratch_bytes(t.nbytes)

    def scratch_bytes(self, nbytes: DimLike,
                      largest_of: tuple[str, ...] = ()) -> tuple[str, object]:
        """Like `scratch`; in a symbolic module followed by room for the largest size the
        functions `largest_of` (regions' workspace sizes) give for `dims`."""
        if self.layout is not None:
            index = self.layout.add_scratch(nbytes, ALIGNMENT, largest_of)
            return f"(void *)(workspace + offsets[{index}])", ("scratch", index)
        end = self.workspace_bytes
        self.scratch_offsets.append((end, max(nbytes, 1)))
        return f"(void *)(workspace + {end})", ("scratch", end)

    @property
    def workspace_bytes(self) -> int | None:
        """The workspace's size; None for a symbolic module, whose size the binding decides
        (WORKSPACE_BYTES in its library)."""
        if self.layout is not None:
            return None
        if not self.scratch_offsets:
            return self.plan.workspace_bytes
        offset, size = self.scratch_offsets[-1]
        return (offset + size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _unique(name: str, taken: set[str]) -> str:
    chosen, n = name, 2
    while chosen in taken:
        chosen, n = f"{name}_{n}", n + 1
    taken.add(chosen)
    return chosen


def emit_kernel(program: Program, name: str, inst: Instruction) -> Kernel:
    if id(inst) in program.plan.in_place:  # a dynamic_update_slice in its operand's buffer
        return update_in_place(program, name, inst)
    if inst.op is ops.FUSION:
        return emit_fusion(program, name, inst)
    special = _SPECIAL.get(inst.op)
    if special is not None:
        return special(program, name, inst)
    if inst.op.name not in RULES:
        raise NotImplementedError(f"the C backend cannot lower {inst.op.name}")
    return emit_elemental(program, name, inst)


@dataclass
class Translation:
    source: str
    plan: BufferPlan
    kernel_count: int
    workspace_bytes: int | None  # None: computed per call (WORKSPACE_BYTES)
    symbols: list[str]


@dataclass
class Unit:
    """One lowered function of the translation unit: its `static` C functions in definition
    order (region code, kernels, then its entry), the helpers they call and its entry."""

    functions: list[str]
    helpers: set[str]
    entry: str
    workspace_bytes: int | None  # None: the program's `bytes_function` computes it
    kernel_count: int
    program: Program


def lower_module(module: Module, donated: frozenset[int] = frozenset(),
                 threads: int = 1, writebacks: tuple[int, ...] = ()) -> Translation:
    """The C source of an optimized module; `donated` names arguments whose buffers results
    may be computed in (buffer assignment decides where that is safe); large kernels run on
    up to `threads` threads of the pool (parallel.py); `writebacks`: the arguments the last
    results are copied back into (a block update of one is stored in its buffer in place)."""
    unit = lower_unit(module, donated, threads=threads, writebacks=writebacks)
    parts = [_header(module.entry, unit.program),
             "\n".join(f"#include <{h}>" for h in INCLUDES)]
    if unit.helpers:
        parts.append(preamble(unit.helpers))
    parts += unit.functions
    return Translation("\n\n".join(parts) + "\n", unit.program.plan, unit.kernel_count,
                       unit.workspace_bytes, unit.program.symbols)


def lower_unit(module: Module, donated: frozenset[int] = frozenset(), prefix: str = "",
               region: bool = False, symbols: list[str] | None = None,
               threads: int = 1, writebacks: tuple[int, ...] = ()) -> Unit:
    """The C functions of `module`. The entry of a `region` is `static void
    {prefix}entry(void **buffers)` taking `[arguments..., results..., workspace]` (with
    `dims` before the workspace when `symbols`, those of the whole module, are given), with
    its array constants baked into the unit; kernel names start with `prefix`."""
    from .control import emit_control
    fn = module.entry
    program = Program(module, donated, symbols, prefix, threads, writebacks)
    kernels: list[Kernel] = []
    region_code: list[str] = []
    helpers: set[str] = set()

    def lower_region(region_module: Module, region_prefix: str) -> Unit:
        unit = lower_unit(region_module, prefix=region_prefix, region=True,  # has `prefix`
                          symbols=program.symbols or None, threads=threads)
        region_code.extend(unit.functions)
        helpers.update(unit.helpers)
        return unit

    for n, inst in enumerate(fn.body):
        if inst.op in (ops.PARAMETER, ops.CONSTANT) or id(inst.results[0]) in \
                program.plan.aliases:
            continue
        label = inst.attrs["kind"] if inst.op is ops.FUSION else inst.op.name
        name = f"{prefix}k{n}_{label}"
        if inst.op.has(Trait.REGIONS):
            kernels.append(emit_control(program, name, inst, lower_region))
        else:
            kernels.append(emit_kernel(program, name, inst))
    for n, (source, slot) in enumerate(program.plan.copies):
        kernels.append(emit_copy(program, f"{prefix}copy{n}", source, slot,
                                 program.slot_names[slot]))
    kernels = _shared(kernels)
    # The helpers the final code calls (dead code removal may have dropped some calls).
    helpers |= {name for k in kernels for name in _HELPER_CALL.findall(k.source)} & \
        set(HELPERS)
    functions = region_code + [k.source for k in kernels if k.source]
    if program.layout is not None:
        functions.append(program.layout.function(program.symbols, program.layout_function))
        functions.append("\n".join([
            f"{'static ' if region else ''}int64_t {program.bytes_function}"
            "(const int64_t *dims) {",
            f"    int64_t offsets[{max(program.layout.count, 1)}];",
            f"    return {program.layout_function}(dims, offsets);", "}"]))
    if region:
        functions += [baked_array(f"{prefix}const{n}", array)
                      for n, array in enumerate(program.plan.constants)]
        entry = f"{prefix}entry"
        functions.append(_entry(fn, program, kernels, entry, prefix if region else None))
    else:
        entry = ENTRY
        functions.append(_entry(fn, program, kernels, entry, None))
    return Unit(functions, helpers, entry, program.workspace_bytes, len(kernels), program)


def _shared(kernels: list[Kernel]) -> list[Kernel]:
    """Kernels whose code differs only in parameter names (a model's layers, each on its own
    weights) call the first of them: the C compiler compiles each distinct kernel once."""
    first: dict[str, Kernel] = {}
    result = []
    for kernel in kernels:
        same = first.setdefault(kernel.shape, kernel) if kernel.shape is not None else kernel
        result.append(kernel if same is kernel else Kernel(same.name, kernel.arguments, ""))
    return result


def baked_array(name: str, array: np.ndarray) -> str:
    """`array`'s bytes as a static array of 64-bit words (aligned for every element type),
    in the host's byte order: the unit is compiled for the host."""
    data = np.ascontiguousarray(array).tobytes()
    data += bytes(-len(data) % 8 if data else 8)  # C has no arrays of zero elements
    words = np.frombuffer(data, np.uint64)
    rows = [", ".join(f"{int(w):#x}u" for w in words[i:i + 6]) for i in range(0, len(words), 6)]
    body = ",\n    ".join(rows)
    return f"static const uint64_t {name}[{len(words)}] = {{\n    {body}}};"


def _header(fn: Function, program: Program) -> str:
    plan = program.plan
    params = ", ".join(f"{program.names[id(p)]}: {p.type}" for p in fn.parameters)
    results = ", ".join(str(v.type) for v in fn.outputs)
    constants = sorted((plan.slot(i.result), i.result) for i in fn.body
                       if i.op is ops.CONSTANT and plan.slot(i.result) is not None)
    rows = [f"argument {program.names[id(p)]}: {p.type}" for p in fn.parameters]
    rows += [f"result {n}: {v.type}" for n, v in enumerate(fn.outputs)]
    rows += [f"constant {program.slot_names[s]}: {v.type}" for s, v in constants]  # type: ignore
    if program.layout is None:
        rows.append(f"workspace: {program.workspace_bytes} bytes, aligned to {ALIGNMENT}")
    else:
        rows.append(f"dims: int64_t[{len(program.symbols)}], the values of "
                    f"{', '.join(program.symbols)}")
        rows.append(f"workspace: {WORKSPACE_BYTES}(dims) bytes, aligned to {ALIGNMENT}")
    return "\n".join([
        f"/* @{fn.name}({params}) -> ({results})",
        " *",
        " * Generated by jitc's C backend from the optimized IR: one function per kernel, each",
        " * IR instruction as the comment above the code that computes it. It needs a C99",
        " * compiler and libm:",
        " *     cc -std=c99 -O3 -march=native -ffp-contract=off -shared -fPIC -o lib.so this.c -lm",
        f" * {ENTRY}(buffers) runs it; buffers holds pointers to dense arrays in the layouts",
        " * shown (array constants are passed in, not written here):",
        *(f" *   buffers[{n}]  {row}" for n, row in enumerate(rows)),
        " */"])


def _entry(fn: Function, program: Program, kernels: list[Kernel], entry: str,
           baked: str | None) -> str:
    """The entry function; `baked` is the prefix of the array constants baked into the unit
    (a region's entry), or None when they are passed in `buffers`."""
    plan = program.plan
    used = {arg for k in kernels for arg in k.arguments}
    passed = plan.num_args + plan.num_outputs
    direct = passed + len(plan.constants)
    workspace_index = passed if baked is not None else direct
    roles = ["argument"] * plan.num_args + ["result"] * plan.num_outputs + \
        ["constant"] * len(plan.constants)
    linkage = "static " if baked is not None else ""
    lines = [f"{linkage}void {entry}(void **buffers) {{"]
    if program.symbols:  # the symbol values come in the frame slot before the workspace
        lines.append(f"    const int64_t *dims = buffers[{workspace_index}]; /* "
                     f"{', '.join(program.symbols)} */")
        lines.append("    (void)dims;")
        lines += [f"    const int64_t {name} = dims[{n}];"
                  for n, name in enumerate(program.symbol_variables) if name in used]
        workspace_index += 1
    for slot in range(direct):
        name = program.slot_names[slot]
        if name not in used:
            continue
        if slot >= passed and baked is not None:
            lines.append(f"    void *{name} = (void *){baked}const{slot - passed};")
        else:
            lines.append(f"    void *{name} = buffers[{slot}]; /* {roles[slot]} */")
    layout = program.layout
    if any("workspace" in arg for arg in used) or \
            any(program.slot_names[s] in used for s in plan.temp_offsets):
        size = program.workspace_bytes if layout is None else f"{program.bytes_function}(dims)"
        lines.append(f"    char *workspace = buffers[{workspace_index}]; /* {size} bytes */")
        if layout is not None:
            lines.append(f"    int64_t offsets[{max(layout.count, 1)}];")
            lines.append(f"    {program.layout_function}(dims, offsets);")
    for slot, offset in sorted(plan.temp_offsets.items(), key=lambda item: item[1]):
        name = program.slot_names[slot]
        if name in used:
            where = offset if layout is None else f"offsets[{layout.level_of[slot]}]"
            lines.append(f"    void *{name} = workspace + {where};")
    if len(lines) == 1:
        lines.append("    (void)buffers;")
    for kernel in kernels:
        lines.append(f"    {kernel.name}({', '.join(kernel.arguments)});")
    lines.append("}")
    return "\n".join(lines)


__all__ = ["ENTRY", "WORKSPACE_BYTES", "Program", "Translation", "Unit", "lower_module",
           "lower_unit"]
