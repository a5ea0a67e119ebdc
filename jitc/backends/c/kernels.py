"""C kernels for single instructions: elementwise loops, copies, reductions, argmax/argmin,
dot_general and convolution. Fusions reuse these templates (fusions.py).

A kernel is one `static void` C function whose parameters are the buffers it reads and
writes, typed (`const float *x`), `restrict` unless two of them share storage. It loops over
its output in physical order (the innermost loop runs along the minor dimension) and writes
each element once, except where a contraction accumulates into its output.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jitc.ir import dtypes
from jitc.ir.core import Instruction, Value
from jitc.ir.dtypes import DType
from jitc.ir.ops import linalg as linalg_ops
from jitc.ir.ops.reduce import reduce_identity
from jitc.ir.symbolic import DimLike, at_most, is_static
from jitc.ir.types import TensorType

from .cgen import (
    Writer,
    float_suffix,
    literal,
    loop_nest,
    memory_type,
    physical_order,
    register_type,
)
from .elemental import CEmitter, accumulator_dtype, combine, convert_value
from .parallel import split_outer_loop, thread_count
from .tiled_dot import dot_per_element, tiled_dot

if TYPE_CHECKING:
    from .codegen import Program


@dataclass
class Kernel:
    name: str
    arguments: list[str]    # what the entry function passes: buffer pointers, in order
    source: str
    # The code up to the names of its parameters (None: never shared): kernels with equal
    # shapes compute the same thing on their own buffers, so one function serves them all.
    shape: str | None = None


class KernelContext:
    """Builds one kernel function: its parameters, its writer and its elemental emitter."""

    def __init__(self, program: Program, name: str, inst: Instruction | None,
                 values: Sequence[Value]) -> None:
        self.program = program
        self.name = name
        self.inst = inst
        self.w = Writer()
        self.params: list[tuple[str, str, str]] = []   # (C type, name, argument)
        self.storage: list[object] = []                 # where each parameter points
        buffers: dict[int, str] = {}
        written = {id(v) for v in inst.results} if inst is not None else set()
        for v in values:
            name_ = program.names[id(v)]
            buffers[id(v)] = name_
            const = "" if id(v) in written else "const "
            self.params.append((f"{const}{memory_type(v.type.dtype)} *", name_,
                                program.slot_pointer(v)))
            self.storage.append(program.storage_key(v))
        self.e = CEmitter(self.w, buffers, program.texts)
        # The kernel's work (about one unit per element touched or multiply-add), which
        # decides how many threads it is worth (codegen.PARALLEL_GRAIN per thread).
        self.cost: DimLike = sum((v.type.size for v in values), 0)
        # Whether the iterations of the kernel's outer loop write disjoint outputs (its
        # emitter says so), which lets threads share them out (parallel.py).
        self.parallel = False

    def pointer(self, value: Value) -> str:
        return self.e.buffers[id(value)]

    def extra(self, dtype: DType, name: str, argument: str, storage: object) -> str:
        """A written buffer that is no IR value of this kernel (a copy's target, scratch)."""
        self.params.append((f"{memory_type(dtype)} *", name, argument))
        self.storage.append(storage)
        return name

    def finish(self) -> Kernel:
        # restrict promises the compiler that no two pointers reach the same bytes: true
        # unless buffer assignment put two of this kernel's values in one place (an in-place
        # update or a bitcast of an operand).
        distinct = len(set(self.storage)) == len(self.storage)
        qualifier = "restrict " if distinct else ""
        body = remove_unused(self.w.lines)
        text = "\n".join(line for line in body if not line.lstrip().startswith("//"))
        # A buffer the code never reads (the operand of a pad with no elements) stays a
        # parameter, so every kernel of an instruction takes the same arguments.
        # One scan for all of them: a search per parameter was quadratic in a kernel with
        # thousands of operands (a concatenate of every row of an unrolled fill).
        words = set(_WORD.findall(text))
        body = [f"    (void){name};" for _, name, _ in self.params if name not in words] + body
        # The values of the symbols the code reads (a symbolic module's extents), by value.
        extents = [v for v in self.program.symbol_variables if v in words]
        params = [f"{ctype}{qualifier}{name}" for ctype, name, _ in self.params] + \
            [f"int64_t {v}" for v in extents]
        signature = f"static void {self.name}({', '.join(params) or 'void'}) {{"
        if len(signature) > 100:
            signature = f"static void {self.name}(\n    " + ",\n    ".join(params) + ") {"
        header = [f"// {self.program.texts[id(self.inst)]}"] if self.inst is not None else []
        lines = header + [signature, *(body or ["    // no elements"]), "}"]
        threads = thread_count(self.cost, self.program.threads) if self.parallel and \
            distinct else None
        symbols = set(_WORD.findall(threads or "")) & set(self.program.symbol_variables)
        if not symbols <= set(extents):
            threads = None  # a run-time cost over symbols the kernel does not take
        split = threads and split_outer_loop(
            self.name, [(f"{ctype}{qualifier}", name) for ctype, name, _ in self.params] +
            [("int64_t", v) for v in extents], body, threads)
        if split:
            lines = header + [signature if line == "@SIGNATURE" else line for line in split]
            body = [*body, threads]
        names = [name for _, name, _ in self.params] + extents
        positions = {name: f"@{n}" for n, name in enumerate(names)}
        shape = _WORD.sub(lambda m: positions.get(m.group(), m.group()),
                          "\n".join([", ".join(params), *body]))
        arguments = [arg for _, _, arg in self.params] + extents
        return Kernel(self.name, arguments, "\n".join(lines), shape)


_WORD = re.compile(r"\w+")
_DECLARATION = re.compile(r"^\s*const [\w ]+ (t\d+) = ")
_TEMP = re.compile(r"\bt\d+\b")


def remove_unused(lines: list[str]) -> list[str]:
    """The lines without the declarations of temporaries nothing reads (and the comments
    above them): the emitter computes indices an operand may then ignore (a broadcast does
    not read the index of an expanded dimension). Every temporary is a `const` of a pure
    expression, so dropping an unread one changes nothing."""
    lines = list(lines)
    while True:
        uses: dict[str, int] = {}
        for line in lines:
            if not line.lstrip().startswith("//"):
                for name in _TEMP.findall(line):
                    uses[name] = uses.get(name, 0) + 1
        dead = set()
        for n, line in enumerate(lines):
            match = _DECLARATION.match(line)
            if match and uses.get(match.group(1)) == 1:
                dead.add(n)
                k = n - 1
                while k >= 0 and lines[k].lstrip().startswith("//"):
                    dead.add(k)
                    k -= 1
        if not dead:
            return lines
        lines = [line for n, line in enumerate(lines) if n not in dead]


def buffers_used(inst: Instruction, program: Program) -> list[Value]:
    """The materialised values a kernel for `inst` reads or writes (results first)."""
    seen: dict[int, Value] = {id(v): v for v in inst.results}

    def visit(v: Value) -> None:
        if id(v) in seen:
            return
        if program.plan.slot(v) is not None:
            seen[id(v)] = v
        elif not program.is_inline(v):
            for operand in v.producer.operands:
                visit(operand)
    for operand in inst.operands:
        visit(operand)
    return list(seen.values())


def logical(order: list[int], counters: list[str]) -> list[str]:
    index = ["0"] * len(order)
    for d, c in zip(order, counters):
        index[d] = c
    return index


def bounds(t: TensorType) -> list[tuple[str | int, str | int]]:
    return [(0, t.shape[d]) for d in physical_order(t)]


def loop_over(ctx: KernelContext, t: TensorType, body: Callable[[list[str]], None]) -> None:
    """Loops over every element of `t` in physical order; body gets the logical index."""
    loop_nest(ctx.w, bounds(t), lambda counters: body(logical(physical_order(t), counters)))


def elementwise_loop(ctx: KernelContext, t: TensorType, target: str,
                     generate: Callable[[list[str]], str]) -> None:
    loop_over(ctx, t, lambda index: ctx.e.store(generate(index), target, t, index))


# -- elementwise -----------------------------------------------------------------------------

def emit_elemental(program: Program, name: str, inst: Instruction) -> Kernel:
    """A loop over the output computing each element with the elemental emitter."""
    out = inst.results[0]
    ctx = KernelContext(program, name, inst, buffers_used(inst, program))
    ctx.parallel = True
    elementwise_loop(ctx, out.type, ctx.pointer(out),
                     lambda index: ctx.e.compute(inst, index))
    return ctx.finish()


def emit_copy(program: Program, name: str, source: Value, slot: int, target: str) -> Kernel:
    """Copy `source` into result slot `slot` (a result that is a parameter, a constant or a
    value already returned in another position)."""
    inputs = [source] if program.plan.slot(source) is not None else []
    ctx = KernelContext(program, name, None, inputs)
    ctx.w.comment(f"result {target} is a copy of {program.names.get(id(source), 'a constant')}")
    pointer = ctx.extra(source.type.dtype, target, program.slot_names[slot], ("slot", slot))
    elementwise_loop(ctx, source.type, pointer, lambda index: ctx.e.value_at(source, index))
    return ctx.finish()


# -- reductions ------------------------------------------------------------------------------

def emit_reduce(program: Program, name: str, inst: Instruction) -> Kernel:
    ctx = KernelContext(program, name, inst, buffers_used(inst, program))
    ctx.parallel = True
    reduce_into(ctx, inst)
    return ctx.finish()


def declare_accumulator(ctx: KernelContext, kind: str, dtype: DType) -> str:
    name = ctx.w.fresh("a")
    identity = literal(dtype, reduce_identity(kind, dtype.numpy))
    ctx.w.line(f"{register_type(dtype)} {name} = {identity};")
    return name


# Elements a float64 sum adds in sequence before the block joins the pairwise cascade.
SUM_BLOCK = 64


class PairwiseSums:
    """Pairwise summation for the float64 sums among `names` (accumulators of `operands`):
    every SUM_BLOCK elements the accumulator joins a cascade of partial sums
    (jitc_cascade_push), so the error grows with log2(n), as numpy's, not with n. float32 and
    float16 need none: they accumulate in double, which is exact enough for any length."""

    def __init__(self, ctx: KernelContext, kind: str, operands: Sequence[Value],
                 names: list[str], count: DimLike) -> None:
        self.w = ctx.w
        # A run-time count may be large: the cascade, which gives the plain sum up to
        # SUM_BLOCK elements.
        long = not at_most(count, SUM_BLOCK)
        self.names = [a for a, v in zip(names, operands)
                      if kind == "sum" and v.type.dtype is dtypes.float64 and long]
        self.counter = self.w.fresh("n") if self.names else ""
        if self.names:
            self.w.line(f"int {self.counter} = 0;")
        for a in self.names:
            self.w.line(f"double {a}_levels[64];")
            self.w.line(f"uint64_t {a}_pushed = 0;")

    def step(self) -> None:
        """After each element: push the blocks that are full."""
        if not self.names:
            return
        with self.w.block(f"if (++{self.counter} == {SUM_BLOCK})"):
            for a in self.names:
                self.w.line(f"jitc_cascade_push({a}_levels, &{a}_pushed, {a});")
                self.w.line(f"{a} = 0.0;")
            self.w.line(f"{self.counter} = 0;")

    def finish(self) -> None:
        for a in self.names:
            self.w.line(f"{a} = jitc_cascade_total({a}_levels, {a}_pushed, {a});")


def reduce_into(ctx: KernelContext, inst: Instruction) -> None:
    """Each output element accumulates its reduced elements, one operand per accumulator."""
    kind = inst.attrs["kind"]
    dims = list(inst.attrs["dims"])  # type: ignore[arg-type]
    in_type = inst.operands[0].type
    out_type = inst.results[0].type
    kept = [d for d in range(in_type.rank) if d not in dims]
    reduced_order = [d for d in physical_order(in_type) if d in dims]
    accs = [accumulator_dtype(kind, v.type.dtype) for v in inst.operands]  # type: ignore
    if in_type.is_static and out_type.is_static:
        reduced_count: DimLike = in_type.size // max(out_type.size, 1)  # type: ignore
    else:
        reduced_count = math.prod(in_type.shape[d] for d in dims)  # type: ignore[misc]

    def element(counters: list[str]) -> None:
        out_index = logical(physical_order(out_type), counters)
        names = [declare_accumulator(ctx, kind, dt) for dt in accs]  # type: ignore[arg-type]
        pairwise = PairwiseSums(ctx, kind, inst.operands, names,  # type: ignore[arg-type]
                                reduced_count)

        def accumulate(reduced: list[str]) -> None:
            at = dict(zip(reduced_order, reduced))
            index = [at[d] if d in at else out_index[kept.index(d)]
                     for d in range(in_type.rank)]
            for operand, acc, dt in zip(inst.operands, names, accs):
                x = convert_value(ctx.e, ctx.e.value_at(operand, index), operand.type.dtype, dt)
                ctx.w.line(f"{acc} = {combine(ctx.e, kind, dt, acc, x)};")  # type: ignore
            pairwise.step()
        loop_nest(ctx.w, [(0, in_type.shape[d]) for d in reduced_order], accumulate)
        pairwise.finish()
        for result, acc, dt in zip(inst.results, names, accs):
            value = convert_value(ctx.e, acc, dt, result.type.dtype)
            ctx.e.store(value, ctx.pointer(result), result.type, out_index)

    loop_nest(ctx.w, bounds(out_type), element)


# -- argmax / argmin -------------------------------------------------------------------------

def emit_arg(program: Program, name: str, inst: Instruction) -> Kernel:
    """The first index of the extreme value along `axis`; the first nan wins."""
    ctx = KernelContext(program, name, inst, buffers_used(inst, program))
    ctx.parallel = True
    axis = inst.attrs["axis"]
    operand, out = inst.operands[0], inst.results[0]
    dtype = operand.type.dtype
    sign = ">" if inst.op.name == "argmax" else "<"

    def element(counters: list[str]) -> None:
        out_index = logical(physical_order(out.type), counters)

        def at(i: str) -> str:
            return ctx.e.value_at(operand, out_index[:axis] + [i] + out_index[axis:])  # type: ignore
        best, where = ctx.w.fresh("a"), ctx.w.fresh("a")
        ctx.w.line(f"{register_type(dtype)} {best} = {at('0')};")
        ctx.w.line(f"int64_t {where} = 0;")
        with ctx.w.loop(1, operand.type.shape[axis]) as i:  # type: ignore[index]
            x = at(i)
            better = f"{x} {sign} {best}"
            if dtype.is_float:
                better += f" || (isnan({x}) && !isnan({best}))"
            with ctx.w.block(f"if ({better})"):
                ctx.w.line(f"{best} = {x};")
                ctx.w.line(f"{where} = {i};")
        value = convert_value(ctx.e, where, dtypes.int64, out.type.dtype)
        ctx.e.store(value, ctx.pointer(out), out.type, out_index)

    loop_nest(ctx.w, bounds(out.type), element)
    return ctx.finish()


# -- dot_general -----------------------------------------------------------------------------

# Output rows a product computes together: each rhs row loaded is used this many times (the
# rows' partial sums, 4 x 3 KB for a 768-wide product, stay in L1).
DOT_ROW_BLOCK = 4
# Multiply-adds from which a product is tiled (tiled_dot.py): a smaller one keeps the
# plainer code, whose speed is the same there.
TILED_DOT_COST = 1 << 15


def emit_dot(program: Program, name: str, inst: Instruction) -> Kernel:
    ctx = KernelContext(program, name, inst, buffers_used(inst, program))
    ctx.parallel = True
    dot_into(ctx, inst, ctx.pointer(inst.results[0]))
    return ctx.finish()


def dot_into(ctx: KernelContext, inst: Instruction, target: str,
             epilogue: Callable[[list[str]], None] | None = None) -> None:
    """target[batch, lhs free, rhs free] = sum over the contracting dimensions.

    For each output row (batch and lhs-free indices) the kernel zeroes the row, then for each
    contracting index adds lhs * rhs-row into it, so the innermost loop runs along the
    contiguous rhs free dimensions; `epilogue(index)` then finishes each element of the row.
    float16 sums each element in a float accumulator instead.
    """
    attrs = inst.attrs
    lhs, rhs = inst.operands
    out = inst.results[0]
    lb, rb, lc, rc, lf, rf = linalg_ops.dot_axes(lhs.type.rank, rhs.type.rank, attrs)
    nb, nlf = len(lb), len(lf)
    dtype = out.type.dtype
    rows = [(0, out.type.shape[d]) for d in range(nb + nlf)]
    cols = [(0, out.type.shape[d]) for d in range(nb + nlf, out.type.rank)]
    contract = [(0, lhs.type.shape[d]) for d in lc]

    def operand_index(rank: int, batch: list[int], contracting: list[int], free: list[int],
                      out_index: list[str], k: list[str], free_offset: int) -> list[str]:
        return linalg_ops.dot_operand_index("0", rank, batch, contracting, free, out_index, k,
                                            free_offset)

    def rhs_at(out_index: list[str], k: list[str]) -> str:
        return ctx.e.value_at(rhs, operand_index(rhs.type.rank, rb, rc, rf, out_index, k,
                                                 nb + nlf))

    def factors(out_index: list[str], k: list[str], acc: DType,
                y: str | None = None) -> tuple[str, str]:
        x = ctx.e.value_at(lhs, operand_index(lhs.type.rank, lb, lc, lf, out_index, k, nb))
        y = rhs_at(out_index, k) if y is None else y
        return (convert_value(ctx.e, x, lhs.type.dtype, acc),
                convert_value(ctx.e, y, rhs.type.dtype, acc))

    def product(out_index: list[str], k: list[str], acc: DType, y: str | None = None) -> str:
        return ctx.e.let(acc, combine(ctx.e, "prod", acc, *factors(out_index, k, acc, y)))

    def finish(index: list[str]) -> None:
        if epilogue is not None:
            epilogue(index)

    if dtype.is_float and dtype.bits == 16:
        def element(counters: list[str]) -> None:
            acc = declare_accumulator(ctx, "sum", dtypes.float32)

            def step(k: list[str]) -> None:
                term = product(counters, k, dtypes.float32)
                ctx.w.line(f"{acc} += {term};")
            loop_nest(ctx.w, contract, step)
            ctx.e.store(convert_value(ctx.e, acc, dtypes.float32, dtype), target, out.type,
                        counters)
            finish(counters)
        loop_nest(ctx.w, rows + cols, element)
        return

    def row_block(block: list[list[str]]) -> None:
        # Each rhs row is read once for all the rows of the block; every element still sums
        # its terms one at a time in contracting order, as with one row.
        zero = literal(dtype, 0)

        def clear(c: list[str]) -> None:
            for row_counters in block:
                ctx.e.store(zero, target, out.type, row_counters + c)
        loop_nest(ctx.w, cols, clear)

        def step(k: list[str]) -> None:
            def accumulate(c: list[str]) -> None:
                # The block's rows differ only in an lhs free index: one rhs element for all.
                shared = rhs_at(block[0] + c, k) if len(block) > 1 else None
                for row_counters in block:
                    index = row_counters + c
                    current = ctx.e.load(target, out.type, index)
                    if fused:
                        x, y = factors(index, k, dtype, shared)
                        total = f"{fused}({x}, {y}, {current})"
                    else:
                        total = combine(ctx.e, "sum", dtype, current, product(index, k, dtype,
                                                                              shared))
                    ctx.e.store(total, target, out.type, index)
            loop_nest(ctx.w, cols, accumulate)
        loop_nest(ctx.w, contract, step)
        if epilogue is not None:
            for row_counters in block:
                loop_nest(ctx.w, cols, lambda c, rc=row_counters: finish(rc + c))

    ctx.cost = out.type.size * math.prod(k for _, k in contract)  # type: ignore[misc]
    # float32 and float64 accumulate with fused multiply-adds, in contracting order.
    fused = f"fma{float_suffix(dtype)}" if dtype.is_float else ""
    if fused and len(contract) == 1 and all(stop == 1 for _, stop in cols):
        dot_per_element(ctx, rows, len(cols), contract[0][1], factors, fused, dtype,
                         lambda index, value: (ctx.e.store(value, target, out.type, index),
                                               finish(index)))
        return
    if fused and not at_most(ctx.cost, TILED_DOT_COST) and len(lc) == 1 and len(rf) == 1 \
            and nlf and lhs.type.dtype is dtype and rhs.type.dtype is dtype:
        def lhs_at(out_index: list[str], k: str) -> str:
            return ctx.e.value_at(lhs, operand_index(lhs.type.rank, lb, lc, lf, out_index,
                                                     [k], nb))
        tiled_dot(ctx, target, out.type, rows, cols[0][1], contract[0][1], lhs_at,
                  lambda out_index, k: rhs_at(out_index, [k]), fused, epilogue,
                  pack=physical_order(rhs.type)[-1] != rf[0])
        return

    height = rows[-1][1] if rows else 1
    # Blocks along the last lhs free dimension (with none, rows differ in the rhs they read).
    # A run-time extent is blocked with a remainder loop for its last extent % 4 rows.
    if not cols or not nlf or at_most(height, DOT_ROW_BLOCK - 1):
        loop_nest(ctx.w, rows, lambda row_counters: row_block([row_counters]))
        return
    blocks = height // DOT_ROW_BLOCK

    def outer(counters: list[str]) -> None:
        with ctx.w.loop(0, blocks) as b:
            first = ctx.e.let_index(f"{b} * {DOT_ROW_BLOCK}")
            row_block([counters + [first if r == 0 else ctx.e.let_index(f"{first} + {r}")]
                       for r in range(DOT_ROW_BLOCK)])
        if not is_static(height) or height % DOT_ROW_BLOCK:
            with ctx.w.loop(blocks * DOT_ROW_BLOCK, height) as i:
                row_block([counters + [i]])
    loop_nest(ctx.w, rows[:-1], outer)


# -- convolution -----------------------------------------------------------------------------

def emit_convolution(program: Program, name: str, inst: Instruction) -> Kernel:
    ctx = KernelContext(program, name, inst, buffers_used(inst, program))
    convolution_into(ctx, inst, ctx.pointer(inst.results[0]))
    return ctx.finish()


def convolution_into(ctx: KernelContext, inst: Instruction, target: str,
                     epilogue: Callable[[list[str]], None] | None = None) -> None:
    """Direct convolution: each output element sums over its group's input features and the
    kernel window; taps that fall into padding or between dilated inputs are skipped."""
    attrs = inst.attrs
    lhs, rhs = inst.operands
    out = inst.results[0]
    dims = linalg_ops.parse_dim_labels(attrs["dim_labels"])  # type: ignore[arg-type]
    spatial = len(dims.lhs_spatial)
    strides, padding, lhs_dil, rhs_dil = linalg_ops._conv_window(attrs, spatial)
    groups = attrs["feature_group_count"]
    in_per_group = rhs.type.shape[dims.rhs_in]
    out_per_group = rhs.type.shape[dims.rhs_out] // groups  # type: ignore[operator]
    dtype = out.type.dtype
    acc_type = dtypes.float32 if dtype.is_float and dtype.bits == 16 else dtype
    window = [rhs.type.shape[d] for d in dims.rhs_spatial]
    e = ctx.e

    def element(counters: list[str]) -> None:
        out_index = logical(physical_order(out.type), counters)
        o = out_index[dims.out_feature]
        group = e.let_index(f"{o} / {out_per_group}")
        acc = declare_accumulator(ctx, "sum", acc_type)

        def tap(taps: list[str]) -> None:
            c, offsets = taps[0], taps[1:]
            lhs_index, rhs_index = ["0"] * lhs.type.rank, ["0"] * rhs.type.rank
            lhs_index[dims.lhs_batch] = out_index[dims.out_batch]
            lhs_index[dims.lhs_feature] = e.let_index(f"{group} * {in_per_group} + {c}")
            rhs_index[dims.rhs_out], rhs_index[dims.rhs_in] = o, c
            conditions = []
            for s in range(spatial):
                rhs_index[dims.rhs_spatial[s]] = offsets[s]
                # Position in the dilated, padded input.
                position = e.let_index(f"{out_index[dims.out_spatial[s]]} * {strides[s]} + "
                                       f"{offsets[s]} * {rhs_dil[s]} - {padding[s][0]}")
                size = lhs.type.shape[dims.lhs_spatial[s]]
                source = e.let_index(f"{position} / {lhs_dil[s]}") if lhs_dil[s] > 1 \
                    else position
                conditions.append(f"{position} >= 0 && {source} < {size}")
                if lhs_dil[s] > 1:
                    conditions.append(f"{position} % {lhs_dil[s]} == 0")
                lhs_index[dims.lhs_spatial[s]] = source
            with ctx.w.block(f"if ({' && '.join(conditions) or '1'})"):
                x = convert_value(e, e.value_at(lhs, lhs_index), dtype, acc_type)
                y = convert_value(e, e.value_at(rhs, rhs_index), dtype, acc_type)
                term = e.let(acc_type, combine(e, "prod", acc_type, x, y))
                ctx.w.line(f"{acc} = {combine(e, 'sum', acc_type, acc, term)};")

        # A run-time batch may be 0, but then no output element runs this.
        if (not lhs.type.is_static or lhs.type.size) and in_per_group:
            loop_nest(ctx.w, [(0, in_per_group)] + [(0, k) for k in window], tap)
        e.store(convert_value(e, acc, acc_type, dtype), target, out.type, out_index)
        if epilogue is not None:
            epilogue(out_index)

    loop_nest(ctx.w, bounds(out.type), element)
