"""Lowering an optimized IR module to one LLVM module for the host CPU.

The module exports `jitc_entry(ptr buffers)`: `buffers` holds the argument pointers, the
result pointers, the array-constant pointers and the workspace pointer, in that order; a
function with symbolic dimensions takes one more, the pointer to its symbol values
(`int64_t dims[]` in `sorted(symbols)` order, docs/dynamic-shapes.md), kept in frame slot
`plan.dims_slot` for the kernels. The
entry function lays out the frame (one pointer per materialised value) and runs the kernels
in program order, splitting large ones across threads through `jitc_parallel_for` when the
function was compiled for more than one thread.

`Linkage` changes how the symbols are named and seen, for `jitc aot`: several functions share
one object file there, so names get a prefix, kernels and the entry become internal, and array
constants are baked into the module as read-only globals (then `buffers` has no constant
pointers). Under `jitc aot` the large ones are only declared (`ExternalConstants`): their bytes
go into the object file without passing through LLVM. The regions of control flow are modules
of their own (`Lowering.parts`); under internal linkage their entries are hidden, not internal,
so that the parts link together.

For the in-process JIT the kernels may be spread over several LLVM modules (`partitions`), so
that they compile on several threads; the entry lives in the first and declares the kernels of
the others, and the GEMM routines are declarations the backend links (gemm_routines.py).

`timing` (a number jitc/profiling.py hands out) makes the timed variant of the entry that a
profile calls: it reads the clock around each kernel and each chunk a pool thread runs and
records both (runtime/jitc_profile.c). The kernels are the same; without `timing` the entry
has no such call.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace

import numpy as np
from llvmlite import ir

from jitc.backends.cpu import dots, gemm_bytes, gemm_routines, kernels
from jitc.backends.cpu.control import RegionCode, emit_control
from jitc.backends.cpu.fusions import emit_fusion, fusion_buffers
from jitc.backends.cpu.packed_weights import pack_constants
from jitc.backends.cpu.plan import ALIGNMENT, BufferPlan, plan_buffers
from jitc.backends.cpu.sort_kernel import emit_sort
from jitc.backends.llvm import extents
from jitc.backends.llvm.elemental import RULES
from jitc.backends.llvm.types import I8, I64, PTR, VOID
from jitc.backends.llvm.vmath_base import scale_with_ldexp
from jitc.ir.core import Instruction, Module
from jitc.ir.opdef import Trait
from jitc.ir.ops import FUSION
from jitc.ir.structural import function_key

ENTRY = "jitc_entry"
PARALLEL_FOR = "jitc_parallel_for"
PROFILE_NOW = "jitc_profile_now"
PROFILE_RECORD = "jitc_profile_record"
# A kernel is split across threads only when it has at least this many element operations
# per thread: below that, waking the pool costs more than it saves.
PARALLEL_GRAIN = 1 << 15
# Kernels go to the first module until it holds this many LLVM instructions (a few ms of
# compile time), then to whichever module holds the fewest.
SPLIT_INSTRUCTIONS = 150

_SPECIAL = {"reduce": kernels.emit_reduce, "argmax": kernels.emit_arg,
            "argmin": kernels.emit_arg, "dot_general": dots.emit_dot,
            "convolution": kernels.emit_convolution, "sort": emit_sort}


@dataclass(eq=False)
class ExternalConstants:
    """Baked constants of at least `min_bytes` that the modules declare (hidden, 64-byte
    aligned) but do not define; `arrays` collects each one's symbol and value. Their bytes then
    go from the arrays straight into the object file: as IR initializers they would be printed
    as text four times their size, parsed, and copied again by LLVM's code emission. Smaller
    ones stay initializers, where LLVM can fold loads from them."""

    min_bytes: int
    arrays: list[tuple[str, np.ndarray]] = field(default_factory=list)


@dataclass(frozen=True)
class Linkage:
    """Symbol naming and visibility; the defaults are what the in-process JIT needs."""

    prefix: str = ""                  # prepended to the entry's and every kernel's name
    internal: bool = False            # kernels and entry invisible outside the module
    bake_constants: bool = False      # array constants as globals, not `buffers` entries
    parallel_for: str = PARALLEL_FOR  # the thread pool function threaded code calls
    external_constants: ExternalConstants | None = None  # where large baked constants go


@dataclass
class Lowering:
    llvm_ir: ir.Module          # the module with the entry function (parts[0])
    plan: BufferPlan
    kernels: list[kernels.Kernel]
    entry: str
    parts: list[ir.Module]      # every module with code; the kernels of each are disjoint
    # Per kernel, the index in the entry function's body of the instruction it computes
    # (None for the copies into donated results), for the profile's kernel names.
    positions: list[int | None] = field(default_factory=list)


def _instructions(module: ir.Module, first: int) -> int:
    """The instructions of the functions of `module` from its `first`-th global on: what
    emitting a kernel added, a stand-in for what it costs LLVM to compile."""
    count = 0
    for value in list(module.globals.values())[first:]:
        if isinstance(value, ir.Function):
            count += sum(len(block.instructions) for block in value.blocks)
    return count


def emit_kernel(module: ir.Module, plan: BufferPlan, name: str, inst: Instruction,
                program: Module) -> kernels.Kernel:
    if inst.op is FUSION:
        return emit_fusion(module, plan, name, inst, program)
    if id(inst) in plan.in_place:  # a dynamic_update_slice in its operand's buffer
        ctx = kernels.KernelContext(module, plan, name, kernels.buffers_used(inst, plan))
        return kernels.update_in_place(ctx, inst, ctx.pointer(inst.results[0]))
    special = _SPECIAL.get(inst.op.name)
    if special is not None:
        return special(module, plan, name, inst)
    if inst.op.name not in RULES:
        raise NotImplementedError(f"the CPU backend cannot lower {inst.op.name}")
    return kernels.emit_elemental(module, plan, name, inst)


def kernel_key(inst: Instruction, values: list, program: Module,
               packed: Collection[int] = ()) -> str:
    """What a kernel computes, independent of which buffers it works on: two instructions with
    the same key can share one compiled body. `packed`: the ids of the constants passed packed
    (a body reads them differently)."""
    position = {id(v): i for i, v in enumerate(values)}
    parts = [inst.op.name, "|".join(str(v.type) for v in inst.results),
             "|".join((f"b{position[id(v)]}:{v.type}" + (":packed" if id(v) in packed else ""))
                      if id(v) in position else f"c:{v.type}:{_literal_text(v)}"
                      for v in inst.operands)]
    if inst.op is FUSION:
        body = program.functions[inst.attrs["calls"]]  # type: ignore[index]
        parts.append(inst.attrs["kind"])  # type: ignore[arg-type]
        # By structure, not text: the layers of a model trace to equal bodies whose values
        # are named after each layer's weights.
        parts.append(function_key(body, program))
    else:
        parts.append(repr(sorted((k, str(v)) for k, v in inst.attrs.items())))
    return "\n".join(parts)


def _literal_text(value) -> str:
    literal = value.producer.attrs.get("value")
    return repr(literal.array.tolist()) if literal is not None else value.producer.op.name


def lower_module(module: Module, num_threads: int = 1, name: str = "jitc",
                 linkage: Linkage = Linkage(), donated: frozenset[int] = frozenset(),
                 partitions: int = 1, external_routines: bool = False,
                 native_ldexp: bool = False, native_vnni: bool = False,
                 timing: int | None = None, symbols: tuple[str, ...] = (),
                 writebacks: tuple[int, ...] = ()) -> Lowering:
    """The LLVM IR of `module`: its kernels spread over up to `partitions` modules (the first
    until it holds SPLIT_INSTRUCTIONS instructions, then whichever holds the least code), the
    GEMM routines declared rather than defined when `external_routines`, the vector math
    scaling with llvm.ldexp when `native_ldexp`, byte products with VNNI when `native_vnni`,
    the entry timing its kernels for profile number `timing` when given (regions run untimed
    inside the kernel that steps them). A region of a symbolic program takes the program's
    `symbols` (its entry gets their values after the workspace, like the program's).
    `writebacks`: the arguments the last results are copied back into (plan_buffers)."""
    assert partitions == 1 or not linkage.internal, "internal kernels must share one module"
    fn = module.entry
    plan = plan_buffers(fn, donated, module, views=True, symbols=symbols,
                        writebacks=writebacks)
    pack_constants(fn, module, plan)
    parts = [ir.Module(name=name if p == 0 else f"{name}.{p}") for p in range(partitions)]
    if native_ldexp:  # the target scales vectors by powers of two in one instruction
        for part in parts:
            scale_with_ldexp(part)
    if native_vnni:  # byte products may use AVX512-VNNI (gemm_bytes.py)
        for part in parts:
            gemm_bytes.use_vnni(part)
    if external_routines:
        for part in parts:
            gemm_routines.declare_externally(part)
    load = [0] * partitions
    home: dict[str, int] = {}  # the part of each kernel and shared body
    emitted: list[kernels.Kernel] = []
    positions: list[int | None] = []
    prefix = linkage.prefix
    bodies: dict[str, tuple[ir.Function, kernels.Kernel, bool]] = {}

    def emit_into(kernel_name: str, emit: Callable[[ir.Module], kernels.Kernel]
                  ) -> kernels.Kernel:
        # A small function stays in one module: another costs a thread handoff and LLVM's
        # fixed costs again, more than the parallelism saves.
        part = 0 if load[0] < SPLIT_INSTRUCTIONS else min(range(partitions),
                                                           key=load.__getitem__)
        before = len(parts[part].globals)
        kernel = emit(parts[part])
        load[part] += _instructions(parts[part], before)
        home[kernel_name] = part
        return kernel

    def lower_region(region: Module, region_prefix: str) -> RegionCode:
        # Regions are optimized and lowered as programs of their own; their modules join
        # the parts that are compiled and linked together. (`region_prefix` starts with the
        # step's name, which has `prefix`.)
        from jitc.backends.cpu.backend import CPU_PASSES
        from jitc.passes.pipeline import Pipeline
        optimized = Pipeline("region", CPU_PASSES, verify=False).run(region)
        lowered = lower_module(optimized, num_threads, name=f"{name}.{region_prefix}",
                               linkage=replace(linkage, prefix=region_prefix,
                                               bake_constants=True),
                               partitions=1, external_routines=external_routines,
                               native_ldexp=native_ldexp, symbols=plan.symbols)
        if linkage.internal:
            # The step calls the region's entry from another module: the entry is linked
            # across modules, yet never exported from the library.
            # llvmlite prints no visibility for a function but prints its linkage verbatim
            # before the return type, where `hidden` reads as default linkage, hidden
            # visibility.
            lowered.llvm_ir.get_global(lowered.entry).linkage = "hidden"
        region_parts.extend(lowered.parts)
        return RegionCode(lowered.entry, lowered.plan.workspace_bytes)

    region_parts: list[ir.Module] = []
    for n, inst in enumerate(fn.body):
        if inst.op.name in ("parameter", "constant") or id(inst.results[0]) in plan.aliases:
            continue
        if inst.op.has(Trait.REGIONS):
            # The step function is internal: it stays with the entry that calls it.
            step = f"{prefix}k{n}.{inst.op.name}"
            emitted.append(emit_control(parts[0], plan, step, inst, module, lower_region))
            positions.append(n)
            home[step] = 0
            continue
        label = inst.attrs["kind"] if inst.op is FUSION else inst.op.name
        name = f"{prefix}k{n}.{label}"
        values = fusion_buffers(inst, plan) if inst.op is FUSION else \
            kernels.buffers_used(inst, plan)
        key = kernel_key(inst, values, module, plan.packed)
        if id(inst) in plan.in_place:  # stores only the block: not the same computation
            key += "\nin place"
        # A body that takes slots of its own (a sort's scratch) after the buffers is not
        # shared: the wrapper passes only the buffers' slots.
        if key in bodies and len(bodies[key][0].args) == len(values) + 2:
            # The same computation on other buffers (an unrolled loop's steps): one body.
            body, first, shared = bodies[key]
            if not shared:
                kernels.share_body(body)
                bodies[key] = (body, first, True)
            slots = [plan.slot(v) for v in values]
            if plan.dims_slot is not None:
                slots.append(plan.dims_slot)
            # The wrapper goes where the (internal) body is.
            home[name] = home[first.name]
            kernels.emit_wrapper(parts[home[name]], name, body, slots)  # type: ignore[arg-type]
            emitted.append(kernels.Kernel(name, first.outer, first.cost))
            positions.append(n)
            continue
        kernel = emit_into(name, lambda part, name=name, inst=inst:
                           emit_kernel(part, plan, name, inst, module))
        bodies[key] = (parts[home[name]].get_global(f"{name}.body"), kernel, False)
        emitted.append(kernel)
        positions.append(n)
    for n, (source, slot) in enumerate(plan.copies):
        copy = f"{prefix}copy{n}"
        emitted.append(emit_into(copy, lambda part, copy=copy, source=source, slot=slot:
                                 kernels.emit_copy(part, plan, copy, source, slot)))
        positions.append(None)
    llvm_module = parts[0]
    for kernel in emitted:
        if home[kernel.name] != 0:
            ir.Function(llvm_module, ir.FunctionType(VOID, [PTR, I64, I64]), kernel.name)
        else:
            # Only the entry refers to a kernel of its own module. Were the kernel external,
            # LLVM would inline it into the entry (one call, constant bounds) and still compile
            # the external copy nobody calls: twice the work for a small function.
            llvm_module.get_global(kernel.name).linkage = "internal"
    entry = _emit_entry(llvm_module, plan, emitted, num_threads, linkage, timing)
    used = [part for p, part in enumerate(parts) if p == 0 or load[p] > 0]
    return Lowering(llvm_module, plan, emitted, entry.name, used + region_parts, positions)


def _baked_constants(module: ir.Module, plan: BufferPlan, linkage: Linkage
                     ) -> list[ir.GlobalValue]:
    """Each array constant as a read-only global, aligned like a workspace buffer."""
    baked = []
    external = linkage.external_constants
    for n, array in enumerate(plan.constants):
        array_type = ir.ArrayType(I8, array.nbytes)
        value = ir.GlobalVariable(module, array_type, f"{linkage.prefix}const{n}")
        value.global_constant = True
        value.align = ALIGNMENT
        if external is not None and array.nbytes >= external.min_bytes:
            value.linkage = "external"
            # llvmlite prints the storage class verbatim after the linkage, where LLVM reads
            # the visibility: the symbol is defined in the same object, never exported.
            value.storage_class = "hidden"
            external.arrays.append((value.name, array))
        else:
            value.linkage = "internal"
            value.unnamed_addr = True
            data = np.ascontiguousarray(array).tobytes()
            value.initializer = ir.Constant(array_type, bytearray(data))
        baked.append(value)
    return baked


def _emit_entry(module: ir.Module, plan: BufferPlan, emitted: list[kernels.Kernel],
                num_threads: int, linkage: Linkage, timing: int | None = None) -> ir.Function:
    entry = ir.Function(module, ir.FunctionType(VOID, [PTR]), linkage.prefix + ENTRY)
    if linkage.internal:
        entry.linkage = "internal"
    (buffers,) = entry.args
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    frame = b.alloca(PTR, ir.Constant(I64, max(plan.num_slots, 1)), name="frame")
    passed = plan.num_args + plan.num_outputs
    baked = _baked_constants(module, plan, linkage) if linkage.bake_constants else []
    if not baked:
        passed += len(plan.constants)
    for slot in range(passed):
        pointer = b.load(b.gep(buffers, [ir.Constant(I64, slot)], source_etype=PTR), typ=PTR)
        b.store(pointer, b.gep(frame, [ir.Constant(I64, slot)], source_etype=PTR))
    for slot, value in enumerate(baked, start=passed):
        b.store(value, b.gep(frame, [ir.Constant(I64, slot)], source_etype=PTR))
    workspace = b.load(b.gep(buffers, [ir.Constant(I64, passed)], source_etype=PTR), typ=PTR)
    if plan.dims_slot is not None:
        # The symbol values follow the workspace pointer (docs/dynamic-shapes.md).
        dims = b.load(b.gep(buffers, [ir.Constant(I64, passed + 1)], source_etype=PTR),
                      typ=PTR)
        b.store(dims, b.gep(frame, [ir.Constant(I64, plan.dims_slot)], source_etype=PTR))
        extents.bind(b, dims, plan.symbols)
    for slot, offset in plan.temp_offsets.items():
        pointer = b.gep(workspace, [extents.value(b, offset)], source_etype=I8)
        b.store(pointer, b.gep(frame, [ir.Constant(I64, slot)], source_etype=PTR))
    for slot, (owner, offset) in sorted(plan.views.items()):
        base = b.load(b.gep(frame, [ir.Constant(I64, owner)], source_etype=PTR), typ=PTR)
        pointer = b.gep(base, [extents.value(b, offset)], source_etype=I8)
        b.store(pointer, b.gep(frame, [ir.Constant(I64, slot)], source_etype=PTR))
    parallel_for = None
    clock = _Clock(module, timing) if timing is not None else None
    for index, kernel in enumerate(emitted):
        fn = module.get_global(kernel.name)
        started = clock.now(b) if clock is not None else None
        outer = extents.value(b, kernel.outer)
        if extents.is_constant(kernel.outer) and extents.is_constant(kernel.cost):
            threads = min(num_threads, kernel.outer, max(1, kernel.cost // PARALLEL_GRAIN))
            split = threads > 1
        else:
            # Decided per call: jitc_parallel_for runs one chunk on the caller's thread
            # when the count is 1 (or more than the extent).
            threads = _run_time_threads(b, kernel, num_threads)
            split = num_threads > 1
        if split:
            if parallel_for is None:
                parallel_for = ir.Function(module, ir.FunctionType(
                    VOID, [PTR, PTR, I64, I64]), linkage.parallel_for)
            task = clock.timed_chunks(fn, index) if clock is not None else fn
            b.call(parallel_for, [task, frame, outer, extents.value(b, threads)])
        else:
            b.call(fn, [frame, ir.Constant(I64, 0), outer])
        if clock is not None:
            clock.record(b, index, 0, ir.Constant(I64, 0), outer, started)
    b.ret_void()
    return entry


def _run_time_threads(b: ir.IRBuilder, kernel: kernels.Kernel, num_threads: int) -> ir.Value:
    """min(num_threads, max(1, cost // PARALLEL_GRAIN)) for a cost the call decides (the
    parallel-for call limits it by the extent)."""
    per_grain = b.sdiv(extents.value(b, kernel.cost), ir.Constant(I64, PARALLEL_GRAIN))
    at_least_one = b.select(b.icmp_signed("<", per_grain, ir.Constant(I64, 1)),
                            ir.Constant(I64, 1), per_grain)
    limit = ir.Constant(I64, num_threads)
    return b.select(b.icmp_signed("<", at_least_one, limit), at_least_one, limit)


class _Clock:
    """The profiling hooks of a timed entry (runtime/jitc_profile.c): read the clock before a
    piece of work, record it with its kernel's index after."""

    def __init__(self, module: ir.Module, code: int) -> None:
        self.module, self.code = module, code
        self._now = ir.Function(module, ir.FunctionType(I64, []), PROFILE_NOW)
        self._record = ir.Function(module, ir.FunctionType(VOID, [I64] * 6), PROFILE_RECORD)

    def now(self, b: ir.IRBuilder) -> ir.Value:
        return b.call(self._now, [])

    def record(self, b: ir.IRBuilder, kernel: int, chunk: int, begin: ir.Value, end: ir.Value,
               started: ir.Value) -> None:
        b.call(self._record, [ir.Constant(I64, self.code), ir.Constant(I64, kernel),
                              ir.Constant(I64, chunk), begin, end, started])

    def timed_chunks(self, task: ir.Function, kernel: int) -> ir.Function:
        """`task` with each chunk the pool runs recorded, on the thread that runs it."""
        timed = ir.Function(self.module, ir.FunctionType(VOID, [PTR, I64, I64]),
                            f"{task.name}.timed")
        timed.linkage = "internal"
        frame, begin, end = timed.args
        b = ir.IRBuilder(timed.append_basic_block("entry"))
        started = self.now(b)
        b.call(task, [frame, begin, end])
        self.record(b, kernel, 1, begin, end, started)
        b.ret_void()
        return timed
