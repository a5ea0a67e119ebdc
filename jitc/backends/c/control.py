"""Control flow in C: a `while` or `conditional` is one step function of the unit that calls
the entry functions of its regions.

The design is the CPU backend's (jitc/backends/cpu/control.py, docs/porting.md): each region
is optimized as a module of its own and lowered like a whole program into `static` functions
of the same translation unit (codegen.lower_unit), whose entry takes `[arguments...,
results..., workspace]`. A `while` keeps its carry in two sets of buffers, its own results (A)
and scratch bytes of the caller's workspace (B): each iteration runs the condition on A, the
body from A into B, and swaps them. A carry the body returns unchanged stays in A, and a scan
output the body writes one block of is written in place.

In a symbolic module every region takes the module's `dims` (before its workspace), sizes
and offsets are C expressions over the symbol values, and a region's workspace size is its
`jitc_workspace_bytes` function's answer for them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from jitc.backends.cpu.control import carry_layout, region_module
from jitc.ir.core import Instruction, Module, Value
from jitc.ir.ops import CONDITIONAL, WHILE
from jitc.ir.symbolic import DimLike

from .cgen import Writer, extent, memory_type
from .kernels import Kernel

if TYPE_CHECKING:
    from .codegen import Program, Unit

# (region module, name prefix) -> its lowered code, added to the unit by the caller.
LowerRegion = Callable[[Module, str], "Unit"]


def _optimized(module: Module, program: Module) -> Module:
    """A region of `program` optimized as a module of its own, under `program`'s
    constraints (passes may need them for its symbolic types)."""
    from jitc.passes.pipeline import Pipeline

    from .backend import C_PASSES
    module = Module(module.functions.values(), module.entry_name, program.constraints)
    return Pipeline("region", C_PASSES, verify=False).run(module)


class _Step:
    """The parameters, arguments and lines of one step function."""

    def __init__(self, program: Program, name: str, inst: Instruction) -> None:
        self.program = program
        self.name = name
        self.inst = inst
        self.params: list[str] = []
        self.arguments: list[str] = []
        self.w = Writer()
        self.constants: list[str] = []

    def pointer(self, value: Value, written: bool = False) -> str:
        """A C expression of the address of `value` inside the step: a parameter for a
        buffer, a static array for an inline scalar constant."""
        from .codegen import baked_array
        if self.program.plan.slot(value) is None:
            name = f"c{len(self.constants)}"
            array = value.producer.attrs["value"].array  # type: ignore[union-attr]
            self.constants.append(baked_array(name, np.asarray(array, value.type.dtype.numpy)))
            return f"(void *){name}"
        name = f"p{len(self.params)}"
        const = "" if written else "const "
        self.params.append(f"{const}void *{name}")
        self.arguments.append(self.program.slot_pointer(value))
        return f"(void *){name}" if not written else name

    def scratch(self, nbytes: DimLike, regions: Sequence[Unit] = ()) -> str:
        """Scratch bytes of the caller's workspace: `nbytes`, then room for the largest
        workspace of `regions`."""
        if self.program.layout is None:
            nbytes += max((unit.workspace_bytes for unit in regions), default=0)  # type: ignore
            argument, _ = self.program.scratch_bytes(nbytes)
        else:
            argument, _ = self.program.scratch_bytes(
                nbytes, tuple(unit.program.bytes_function for unit in regions))
        self.params.append("char *scratch")
        self.arguments.append(f"(char *){argument}")
        return "scratch"

    @property
    def dims(self) -> list[str]:
        """The entries of a region's buffers that pass the symbol values on: none in a
        static module."""
        return ["(void *)dims"] if self.program.symbols else []

    def kernel(self) -> Kernel:
        header = f"// {self.program.texts[id(self.inst)]}"
        params = list(self.params)
        values = []
        if self.program.symbols:
            params.append("const int64_t *dims")
            self.arguments.append("dims")
            words = set(re.findall(r"\w+", "\n".join(self.w.lines)))
            values = [f"    const int64_t {v} = dims[{n}];"
                      for n, v in enumerate(self.program.symbol_variables) if v in words]
        signature = f"static void {self.name}({', '.join(params)}) {{"
        if len(signature) > 100:
            signature = f"static void {self.name}(\n    " + ",\n    ".join(params) + ") {"
        body = ["    " + line for c in self.constants for line in c.splitlines()]
        lines = [header, signature, *values, *body, *self.w.lines, "}"]
        return Kernel(self.name, self.arguments, "\n".join(lines))


def emit_control(program: Program, name: str, inst: Instruction,
                 lower_region: LowerRegion) -> Kernel:
    emit = CONTROL.get(inst.op)
    if emit is None:
        raise NotImplementedError(f"the C backend cannot lower {inst.op.name}")
    return emit(program, name, inst, lower_region)


def _call(w: Writer, entry: str, array: str, pointers: Sequence[str]) -> None:
    for n, pointer in enumerate(pointers):
        w.line(f"{array}[{n}] = {pointer};")
    w.line(f"{entry}({array});")


def _emit_while(program: Program, name: str, inst: Instruction,
                lower_region: LowerRegion) -> Kernel:
    module = program.module
    body_fn = module.functions[inst.attrs["body"]]  # type: ignore[index]
    # As on the CPU; in a symbolic module the offsets are expressions.
    layout = carry_layout(inst, body_fn)
    writes, moving = layout.writes, layout.moving
    offsets, block_offsets = layout.offsets, layout.block_offsets
    region_workspace = layout.carry_bytes
    cond = lower_region(_optimized(region_module(module, inst.attrs["cond"]),  # type: ignore
                                   module), f"{name}_cond_")
    body = lower_region(_optimized(region_module(module, body_fn.name,
                                                 layout.body_outputs(body_fn)), module),
                        f"{name}_body_")

    step = _Step(program, name, inst)
    w = step.w
    operands = [step.pointer(v) for v in inst.operands]
    results = [step.pointer(v, written=True) for v in inst.results]  # type: ignore[arg-type]
    scratch = step.scratch(region_workspace, [cond, body])
    count = len(results)
    w.line(f"void *current[{count}] = {{{', '.join(results)}}};  /* where each carry is (A) */")
    spare = ", ".join(f"{scratch} + {extent(offsets[i])}" if i in offsets else "0"
                      for i in range(count))
    w.line(f"void *spare[{count}] = {{{spare}}};  /* where the body writes it (B) */")
    blocks = [f"{scratch} + {extent(offset)}" for offset in block_offsets]
    workspace = f"{scratch} + {extent(region_workspace)}"
    dims = step.dims
    w.line("uint8_t go;")
    w.line(f"void *cond_buffers[{count + 2 + len(dims)}];")
    w.line(f"void *body_buffers[{count + len(moving) + len(blocks) + 1 + len(dims)}];")
    for result, operand, v in zip(results, operands, inst.operands):
        w.line(f"if ({result} != {operand}) memcpy({result}, {operand}, "
               f"{extent(v.type.nbytes)});")
    current = [f"current[{i}]" for i in range(count)]
    with w.block("for (;;)"):
        _call(w, cond.entry, "cond_buffers", [*current, "&go", *dims, workspace])
        w.line("if (!go) break;")
        _call(w, body.entry, "body_buffers",
              [*current, *(f"spare[{i}]" for i in moving), *blocks, *dims, workspace])
        position = 0
        for j, write in writes.items():
            count_starts = len(write.operands) - 2
            _write_block(w, f"current[{j}]", write, blocks[position],
                         blocks[position + 1:position + 1 + count_starts], f"s{j}_")
            position += 1 + count_starts
        for i in moving:
            w.line(f"{{ void *swap = current[{i}]; current[{i}] = spare[{i}]; "
                   f"spare[{i}] = swap; }}")
    for i in moving:
        w.line(f"if (current[{i}] != {results[i]}) "
               f"memcpy({results[i]}, current[{i}], {extent(inst.results[i].type.nbytes)});")
    return step.kernel()


def _write_block(w: Writer, target: str, write: Instruction, block: str,
                 starts: Sequence[str], prefix: str) -> None:
    """dynamic_update_slice in place: the block at the clamped starts of `target`."""
    operand, update = write.operands[0].type, write.operands[1].type
    terms = []
    for d, (pointer, start_value) in enumerate(zip(starts, write.operands[2:])):
        ctype = memory_type(start_value.type.dtype)
        limit = extent(operand.shape[d] - update.shape[d])
        start = f"{prefix}{d}"
        w.line(f"int64_t {start} = (int64_t)*(const {ctype} *)({pointer});")
        w.line(f"{start} = {start} < 0 ? 0 : {start} > {limit} ? {limit} : {start};")
        terms.append(f"{start} * {extent(operand.strides[d] * operand.dtype.itemsize)}")
    offset = " + ".join(terms) or "0"
    w.line(f"memcpy((char *){target} + ({offset}), {block}, {extent(update.nbytes)});")


def _emit_conditional(program: Program, name: str, inst: Instruction,
                      lower_region: LowerRegion) -> Kernel:
    branches = inst.attrs["branches"]
    codes = [lower_region(_optimized(region_module(program.module, branch), program.module),
                          f"{name}_branch{k}_")
             for k, branch in enumerate(branches)]  # type: ignore[union-attr]
    step = _Step(program, name, inst)
    w = step.w
    index = step.pointer(inst.operands[0])
    operands = [step.pointer(v) for v in inst.operands[1:]]
    results = [step.pointer(v, written=True) for v in inst.results]
    workspace = step.scratch(0, codes)
    dims = step.dims
    w.line(f"void *buffers[{len(operands) + len(results) + 1 + len(dims)}];")
    # Out-of-range indices run the last branch (jitc.ir.ops.control.branch_index).
    w.line(f"switch (*(const int32_t *){index}) {{")
    for k, code in enumerate(codes):
        w.line("default:" if k == len(codes) - 1 else f"case {k}:")
        w.depth += 1
        _call(w, code.entry, "buffers", [*operands, *results, *dims, workspace])
        w.line("break;")
        w.depth -= 1
    w.line("}")
    return step.kernel()


CONTROL = {WHILE: _emit_while, CONDITIONAL: _emit_conditional}
