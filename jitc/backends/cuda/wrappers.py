"""The two ways to run a kernel's phases: as an NVPTX kernel, and as a host loop over the grid.

Both wrappers live in a module of their own that only declares the phase functions; it is
linked with the kernel IR, so the GPU and the simulator run the very same phases with the
very same launch configuration (see kernel.py for what a phase is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.cuda.kernel import (
    GLOBAL,
    SHARED,
    Barrier,
    KernelSpec,
    Phase,
    ReadOnlyArgument,
    Repeat,
    ShuffleXor,
    StateSlot,
    Step,
)
from jitc.backends.llvm import extents
from jitc.backends.llvm.loops import for_range
from jitc.backends.llvm.types import I8, I32, I64, PTR, VOID, declare

SIM_ENTRY = "jitc_sim_entry"
SHARED_ALIGN = 16

# (thread, block, block size, grid size, iteration) -> the phase call's first five arguments.
Indices = tuple[ir.Value, ir.Value, ir.Value, ir.Value, ir.Value]


def _run_steps(b: ir.IRBuilder, steps: Sequence[Step], iteration: ir.Value,
               phase: Callable[[str, ir.Value], None], shuffle: Callable[[ShuffleXor], None],
               barrier: Callable[[], None]) -> None:
    for step in steps:
        if isinstance(step, Phase):
            phase(step.function, iteration)
        elif isinstance(step, ShuffleXor):
            shuffle(step)
        elif isinstance(step, Repeat):
            with for_range(b, 0, step.count, name="repeat") as i:
                _run_steps(b, step.steps, i, phase, shuffle, barrier)
        else:
            assert isinstance(step, Barrier)
            barrier()


# -- NVPTX --------------------------------------------------------------------------------------

def nvptx_wrappers(specs: Sequence[KernelSpec]) -> ir.Module:
    """One `ptx_kernel` per spec, taking its buffers as global pointers."""
    module = ir.Module(name="jitc_nvptx_wrappers")
    for spec in distinct(specs):
        _nvptx_kernel(module, spec)
    return module


def distinct(specs: Sequence[KernelSpec]) -> list[KernelSpec]:
    """The kernels with code of their own: specs sharing a name launch one kernel's code on
    different buffers (codegen.py)."""
    first: dict[str, KernelSpec] = {}
    for spec in specs:
        first.setdefault(spec.name, spec)
    return list(first.values())


def _special(b: ir.IRBuilder, register: str) -> ir.Value:
    fn = declare(b.module, f"llvm.nvvm.read.ptx.sreg.{register}", ir.FunctionType(I32, []))
    return b.call(fn, [])


def _nvptx_kernel(module: ir.Module, spec: KernelSpec) -> None:
    kernel = ir.Function(module, ir.FunctionType(VOID, [GLOBAL] * len(spec.slots)), spec.name)
    kernel.calling_convention = "ptx_kernel"
    for arg, written, unique in zip(kernel.args, spec.written, spec.noalias):
        arg.attributes = ReadOnlyArgument()
        if unique:
            arg.attributes.add("noalias")
            if not written:
                arg.attributes.add("readonly")
    b = ir.IRBuilder(kernel.append_basic_block("entry"))
    if spec.symbols:  # the count of a Repeat may be symbolic
        extents.bind(b, kernel.args[-1], spec.symbols)
    tid, bid = _special(b, "tid.x"), _special(b, "ctaid.x")
    bdim, gdim = _special(b, "ntid.x"), _special(b, "nctaid.x")
    state: ir.Value = ir.Constant(PTR, None)
    if spec.state_bytes:
        state = b.alloca(ir.ArrayType(I8, spec.state_bytes), name="state")
        state.align = 16
        # llvmlite types an alloca as a typed pointer; the state is addressed by byte
        # offsets like every other pointer here, so it is used as an opaque one.
        state.type = PTR
    shared: ir.Value = ir.Constant(SHARED, None)
    if spec.launch.shared_bytes:
        array = ir.GlobalVariable(module, ir.ArrayType(I8, spec.launch.shared_bytes),
                                  f"{spec.name}_shared", addrspace=3)
        array.linkage = "internal"
        array.align = SHARED_ALIGN
        array.initializer = ir.Constant(array.value_type, ir.Undefined)
        shared = array
    barrier_fn = declare(module, "llvm.nvvm.barrier0", ir.FunctionType(VOID, []))

    def phase(name: str, iteration: ir.Value) -> None:
        fn = declare(module, name, spec.phase_type)
        b.call(fn, [tid, bid, bdim, gdim, iteration, shared, state, *kernel.args])

    def barrier() -> None:
        b.call(barrier_fn, [])

    def shuffle(step: ShuffleXor) -> None:
        value = b.load(_slot_pointer(b, state, step.source), typ=step.source.type)
        b.store(_shuffle_xor(b, value, step.mask), _slot_pointer(b, state, step.target))

    _run_steps(b, spec.steps, ir.Constant(I64, 0), phase, shuffle, barrier)
    b.ret_void()


def _slot_pointer(b: ir.IRBuilder, state: ir.Value, slot: StateSlot) -> ir.Value:
    return b.gep(state, [ir.Constant(I64, slot.offset)], source_etype=I8, inbounds=True)


def _shuffle_xor(b: ir.IRBuilder, value: ir.Value, mask: int) -> ir.Value:
    """`shfl.sync.bfly` of any scalar: moved as one or two 32-bit words."""
    fn = declare(b.module, "llvm.nvvm.shfl.sync.bfly.i32",
                  ir.FunctionType(I32, [I32, I32, I32, I32]))

    def word(w: ir.Value) -> ir.Value:
        return b.call(fn, [ir.Constant(I32, -1), w, ir.Constant(I32, mask),
                           ir.Constant(I32, 31)])
    t = value.type
    bits = t.width if isinstance(t, ir.IntType) else \
        {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(t)]
    as_int = value if isinstance(t, ir.IntType) else b.bitcast(value, ir.IntType(bits))
    if bits == 64:
        low = word(b.trunc(as_int, I32))
        high = word(b.trunc(b.lshr(as_int, ir.Constant(I64, 32)), I32))
        moved = b.or_(b.zext(low, I64), b.shl(b.zext(high, I64), ir.Constant(I64, 32)))
    elif bits == 32:
        moved = word(as_int)
    else:
        moved = b.trunc(word(b.zext(as_int, I32)), ir.IntType(bits))
    return moved if isinstance(t, ir.IntType) else b.bitcast(moved, t)


# -- the simulator ------------------------------------------------------------------------------

def sim_launcher_name(spec: KernelSpec) -> str:
    return f"{spec.name}_sim"


def state_offset(spec: KernelSpec) -> int:
    return -(-spec.launch.shared_bytes // SHARED_ALIGN) * SHARED_ALIGN


def scratch_bytes(spec: KernelSpec) -> int:
    """Host memory one simulated launch needs: one block's shared memory (blocks run one at a
    time) and every thread's state."""
    return state_offset(spec) + spec.state_bytes * spec.launch.block


def sim_wrappers(specs: Sequence[KernelSpec], plan: BufferPlan, entry: bool = True
                 ) -> ir.Module:
    """For each spec `<name>_sim(ptr params, ptr scratch, i64 blocks)`, which runs the whole
    grid (`blocks` blocks for a symbolic launch, the static count otherwise): blocks one after
    the other, each phase for every thread of the block before the next step. With
    `entry`, `jitc_sim_entry(ptr buffers)` (arguments, results, constants, workspace) runs
    them all in order; the scratch memory follows the workspace."""
    module = ir.Module(name="jitc_sim_wrappers")
    made = {spec.name: _sim_launcher(module, spec) for spec in distinct(specs)}
    launchers = [made[spec.name] for spec in specs]
    if entry:
        _sim_entry(module, specs, launchers, plan)
    return module


def _sim_launcher(module: ir.Module, spec: KernelSpec) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, I64]), sim_launcher_name(spec))
    params, scratch, blocks = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    buffers = []
    for n in range(len(spec.slots)):
        address = b.gep(params, [ir.Constant(I64, n)], source_etype=PTR, inbounds=True)
        buffers.append(b.addrspacecast(b.load(address, typ=PTR), GLOBAL))
    if spec.symbols:  # the count of a Repeat may be symbolic
        extents.bind(b, buffers[-1], spec.symbols)
    shared = b.addrspacecast(scratch, SHARED)
    states = b.gep(scratch, [ir.Constant(I64, state_offset(spec))], source_etype=I8)
    launch = spec.launch
    bdim, gdim = ir.Constant(I32, launch.block), ir.Constant(I32, launch.grid)
    grid: int | ir.Value = launch.grid
    if launch.grid_extent is not None:
        grid, gdim = blocks, b.trunc(blocks, I32)

    def thread_state(tid: ir.Value) -> ir.Value:
        return b.gep(states, [b.mul(tid, ir.Constant(I64, spec.state_bytes))], source_etype=I8)

    with for_range(b, 0, grid, name="block") as block:
        bid = b.trunc(block, I32)

        def phase(name: str, iteration: ir.Value) -> None:
            callee = declare(module, name, spec.phase_type)
            with for_range(b, 0, launch.block, name="thread") as thread:
                b.call(callee, [b.trunc(thread, I32), bid, bdim, gdim, iteration, shared,
                                thread_state(thread), *buffers])

        def shuffle(step: ShuffleXor) -> None:
            with for_range(b, 0, launch.block, name="lane") as thread:
                partner = b.xor(thread, ir.Constant(I64, step.mask))
                source = _slot_pointer(b, thread_state(partner), step.source)
                value = b.load(source, typ=step.source.type)
                b.store(value, _slot_pointer(b, thread_state(thread), step.target))

        def barrier() -> None:
            """Nothing to wait for: every thread finished the previous phase already."""

        _run_steps(b, spec.steps, ir.Constant(I64, 0), phase, shuffle, barrier)
    b.ret_void()
    return fn


def _sim_entry(module: ir.Module, specs: Sequence[KernelSpec], launchers: Sequence[ir.Function],
               plan: BufferPlan) -> None:
    entry = ir.Function(module, ir.FunctionType(VOID, [PTR]), SIM_ENTRY)
    (buffers,) = entry.args
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    direct = plan.num_args + plan.num_outputs + len(plan.constants)
    workspace = b.load(b.gep(buffers, [ir.Constant(I64, direct)], source_etype=PTR), typ=PTR)
    scratch = b.gep(workspace, [ir.Constant(I64, workspace_scratch_offset(plan))],
                    source_etype=I8)

    def slot_pointer(slot: int) -> ir.Value:
        offset = plan.temp_offsets.get(slot)
        if offset is not None:
            return b.gep(workspace, [ir.Constant(I64, offset)], source_etype=I8)
        return b.load(b.gep(buffers, [ir.Constant(I64, slot)], source_etype=PTR), typ=PTR)

    for spec, launcher in zip(specs, launchers):
        params = b.alloca(PTR, ir.Constant(I64, max(len(spec.slots), 1)))
        for n, slot in enumerate(spec.slots):
            b.store(slot_pointer(slot), b.gep(params, [ir.Constant(I64, n)], source_etype=PTR))
        b.call(launcher, [params, scratch, ir.Constant(I64, spec.launch.grid)])
    b.ret_void()


def workspace_scratch_offset(plan: BufferPlan) -> int:
    return -(-plan.workspace_bytes // 64) * 64
