"""A GPU kernel as a program of phases, written once and run by the GPU and the simulator.

A kernel is a list of steps:

- `Phase`: an LLVM function every thread of every block runs, taking its thread and block
  index, the block and grid sizes, the iteration of the enclosing `Repeat`, the block's
  shared memory, the thread's own state and the kernel's buffers;
- `Barrier`: `__syncthreads()` between phases;
- `ShuffleXor`: each thread receives a state slot of the lane `mask` away in its warp
  (`shfl.sync.bfly`), into another state slot;
- `Repeat`: steps run `count` times (a loop every thread of the block takes together, such
  as the k-tiles of a matrix product).

A kernel of a symbolic program (docs/dynamic-shapes.md) takes one more buffer, last: the
call's symbol values (`int64_t dims[]` in `sorted(symbols)` order, in device memory), which
every phase binds on entry so that `extents.value` turns a `Dim` into arithmetic on them.

The phase functions are the kernel IR. The NVPTX wrapper calls them in order inside one
`ptx_kernel` that reads the special registers, keeps the thread's state in an alloca (which
the optimizer turns into registers once the phases are inlined) and puts real barriers and
shuffles between them. The simulator's wrapper calls each phase for every thread of a block
before the next phase starts, so every phase boundary acts as a barrier, and does a shuffle
by copying state slots between threads. A value that must outlive a phase therefore lives in
state or shared memory, never in an SSA register.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from llvmlite import ir
from llvmlite.ir.values import ArgumentAttributes

from jitc.backends.cpu.plan import BufferPlan
from jitc.backends.cuda.fmod import emit_fmod
from jitc.backends.cuda.launch import WARP, LaunchConfig
from jitc.backends.llvm import extents
from jitc.backends.llvm.elemental import RULES, ElementalEmitter, Rule, elementwise_operands
from jitc.backends.llvm.types import I32, I64, PTR, VOID
from jitc.ir.core import Instruction, Value
from jitc.ir.dtypes import Kind
from jitc.ir.symbolic import DimLike
from jitc.ir.types import TensorType

GLOBAL = ir.PointerType(addrspace=1)
SHARED = ir.PointerType(addrspace=3)
STATE_ALIGN = 16


class ReadOnlyArgument(ArgumentAttributes):
    """llvmlite's table of parameter attributes lacks `readonly`, which (with `noalias`) is
    what lets NVPTX load a kernel input through the non-coherent cache (`ld.global.nc`)."""

    _known: Mapping[str, bool] = {**ArgumentAttributes._known, "readonly": False}


@dataclass(frozen=True)
class StateSlot:
    """`count` values of `type` at byte `offset` of each thread's state."""

    offset: int
    type: ir.Type
    count: int = 1


@dataclass(frozen=True)
class SharedArray:
    """`count` values of `type` at byte `offset` of the block's shared memory."""

    offset: int
    type: ir.Type
    count: int


@dataclass(frozen=True)
class Phase:
    function: str


@dataclass(frozen=True)
class Barrier:
    pass


@dataclass(frozen=True)
class ShuffleXor:
    source: StateSlot
    target: StateSlot
    mask: int


@dataclass(frozen=True)
class Repeat:
    count: DimLike   # symbolic: the wrappers bind the symbol values to compute it
    steps: tuple[Step, ...]


Step = Phase | Barrier | ShuffleXor | Repeat


@dataclass(frozen=True)
class KernelSpec:
    """Everything a wrapper and a runtime need to know about one kernel."""

    name: str
    launch: LaunchConfig
    state_bytes: int
    steps: tuple[Step, ...]
    slots: tuple[int, ...]        # the frame slot of each buffer parameter
    written: tuple[bool, ...]     # whether the kernel writes that buffer
    noalias: tuple[bool, ...]     # whether no other parameter reaches the same memory
    # The symbols of a symbolic program, whose values the last buffer holds.
    symbols: tuple[str, ...] = ()

    @property
    def phase_type(self) -> ir.FunctionType:
        return phase_type(len(self.slots))


def phase_type(buffers: int) -> ir.FunctionType:
    return ir.FunctionType(VOID, [I32, I32, I32, I32, I64, SHARED, PTR] + [GLOBAL] * buffers)


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def _exact_rem(e: ElementalEmitter, inst: Instruction, index: list[ir.Value]) -> ir.Value:
    if inst.operands[0].type.dtype.kind is not Kind.FLOAT:
        return RULES["rem"](e, inst, index)
    x, y = elementwise_operands(e, inst, index)
    return emit_fmod(e.builder, x, y)


class GpuEmitter(ElementalEmitter):
    """The shared elemental emitter with the rules a GPU kernel needs instead of the CPU's:
    floating-point remainder is computed exactly in integer arithmetic, because NVPTX lowers
    `frem` to `x - trunc(x / y) * y`, which is wrong once the quotient is large."""

    rules: Mapping[str, Rule] = {**RULES, "rem": _exact_rem}


class PhaseContext:
    """What a phase's code generator works with."""

    def __init__(self, fn: ir.Function, emitter: ElementalEmitter, launch: LaunchConfig) -> None:
        self.function = fn
        self.builder = emitter.builder
        self.emitter = emitter
        self.launch = launch
        self.tid, self.bid, self.bdim, self.gdim, self.iteration, self.shared, self.state = \
            fn.args[:7]

    # -- thread positions as i64 -----------------------------------------------------------
    def thread(self) -> ir.Value:
        return self.builder.zext(self.tid, I64)

    def block(self) -> ir.Value:
        return self.builder.zext(self.bid, I64)

    def global_thread(self) -> ir.Value:
        b = self.builder
        return b.add(b.mul(self.block(), ir.Constant(I64, self.launch.block)), self.thread())

    def threads(self) -> int | ir.Value:
        """The threads of the whole grid: a constant, or what a symbolic launch got."""
        if self.launch.grid_extent is None:
            return self.launch.threads
        b = self.builder
        return b.mul(b.zext(self.gdim, I64), ir.Constant(I64, self.launch.block))

    # -- state and shared memory -------------------------------------------------------------
    def state_pointer(self, slot: StateSlot, index: int | ir.Value = 0) -> ir.Value:
        b = self.builder
        base = b.gep(self.state, [ir.Constant(I64, slot.offset)], source_etype=ir.IntType(8),
                     inbounds=True)
        i = ir.Constant(I64, index) if isinstance(index, int) else index
        return b.gep(base, [i], source_etype=slot.type, inbounds=True)

    def load_state(self, slot: StateSlot, index: int | ir.Value = 0) -> ir.Value:
        return self.builder.load(self.state_pointer(slot, index), typ=slot.type)

    def store_state(self, slot: StateSlot, value: ir.Value, index: int | ir.Value = 0) -> None:
        self.builder.store(value, self.state_pointer(slot, index))

    def shared_pointer(self, array: SharedArray, index: ir.Value | int) -> ir.Value:
        b = self.builder
        base = b.gep(self.shared, [ir.Constant(I64, array.offset)], source_etype=ir.IntType(8),
                     inbounds=True)
        i = ir.Constant(I64, index) if isinstance(index, int) else index
        return b.gep(base, [i], source_etype=array.type, inbounds=True)

    def load_shared(self, array: SharedArray, index: ir.Value | int) -> ir.Value:
        return self.builder.load(self.shared_pointer(array, index), typ=array.type)

    def store_shared(self, array: SharedArray, index: ir.Value | int, value: ir.Value) -> None:
        self.builder.store(value, self.shared_pointer(array, index))

    def pointer(self, value: Value) -> ir.Value:
        return self.emitter.buffers[id(value)]


class KernelBuilder:
    """Builds the phases of one kernel into the module's kernel IR and records its steps.

    `values` are the IR values whose buffers the kernel reads or writes (`written` among
    them); `extra` adds buffers that no IR value names (the output slot of a copy).
    """

    def __init__(self, module: ir.Module, plan: BufferPlan, name: str, values: Sequence[Value],
                 written: Sequence[Value], launch: LaunchConfig,
                 extra: Sequence[tuple[int, TensorType]] = ()) -> None:
        self.module = module
        self.name = name
        self.launch = launch
        self.values = list(values)
        written_ids = {id(v) for v in written}
        slots = [plan.slot(v) for v in self.values]
        assert all(s is not None for s in slots), "a kernel buffer has no slot"
        self.slots: list[int] = [s for s in slots if s is not None] + [s for s, _ in extra]
        self.written = [id(v) in written_ids for v in self.values] + [True] * len(extra)
        self.extra_types = [t for _, t in extra]
        # The symbol values of a symbolic program: a read-only buffer after all the others.
        self.symbols = plan.symbols if plan.dims_slot is not None else ()
        if plan.dims_slot is not None:
            self.slots.append(plan.dims_slot)
            self.written.append(False)
        self.noalias = _noalias(plan, self.slots, self.written)
        self.aliases: dict[int, Value] = {}
        self.state_bytes = 0
        self.shared_bytes = 0
        self._steps: list[list[Step]] = [[]]
        self._phases = 0

    # -- memory ------------------------------------------------------------------------------
    def state(self, type_: ir.Type, count: int = 1) -> StateSlot:
        size = byte_size(type_)
        offset = _align(self.state_bytes, min(size, 8))
        self.state_bytes = offset + size * count
        return StateSlot(offset, type_, count)

    def shared(self, type_: ir.Type, count: int) -> SharedArray:
        size = byte_size(type_)
        offset = _align(self.shared_bytes, min(size, 8))
        self.shared_bytes = offset + size * count
        assert self.shared_bytes <= self.launch.shared_bytes, \
            f"{self.name}: shared memory beyond what its launch reserves"
        return SharedArray(offset, type_, count)

    # -- steps -------------------------------------------------------------------------------
    @contextmanager
    def phase(self) -> Iterator[PhaseContext]:
        fn = ir.Function(self.module, phase_type(len(self.slots)),
                         f"{self.name}_p{self._phases}")
        self._phases += 1
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        buffers = fn.args[7:]
        for arg, unique in zip(buffers, self.noalias):
            if unique:
                arg.add_attribute("noalias")
        for arg in fn.args[5:7]:
            arg.add_attribute("noalias")
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        if self.symbols:
            extents.bind(builder, fn.args[-1], self.symbols)
        emitter = GpuEmitter(builder, {id(v): a for v, a in zip(self.values, buffers)})
        emitter.aliases.update(self.aliases)
        yield PhaseContext(fn, emitter, self.launch)
        builder.ret_void()
        self._steps[-1].append(Phase(fn.name))

    def extra_buffer(self, ctx: PhaseContext, n: int) -> ir.Value:
        return ctx.function.args[7 + len(self.values) + n]

    def barrier(self) -> None:
        self._steps[-1].append(Barrier())

    def shuffle_xor(self, source: StateSlot, target: StateSlot, mask: int) -> None:
        assert self.launch.block % WARP == 0, "shuffles need whole warps"
        assert 0 < mask < WARP and source.type == target.type
        self._steps[-1].append(ShuffleXor(source, target, mask))

    @contextmanager
    def repeat(self, count: DimLike) -> Iterator[None]:
        self._steps.append([])
        yield
        steps = self._steps.pop()
        self._steps[-1].append(Repeat(count, tuple(steps)))

    def finish(self) -> KernelSpec:
        assert len(self._steps) == 1, "an unfinished repeat"
        return KernelSpec(self.name, self.launch, _align(self.state_bytes, STATE_ALIGN),
                          tuple(self._steps[0]), tuple(self.slots), tuple(self.written),
                          tuple(self.noalias), tuple(self.symbols))


def byte_size(t: ir.Type) -> int:
    if isinstance(t, ir.IntType):
        return max(1, t.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(t)]


def _noalias(plan: BufferPlan, slots: Sequence[int], written: Sequence[bool]) -> list[bool]:
    """A buffer parameter is `noalias` unless another parameter reaches the same memory and
    one of the two is written (an in-place update, or a value and its bitcast)."""
    def storage(slot: int) -> tuple[str, int]:
        offset = plan.temp_offsets.get(slot)
        return ("slot", slot) if offset is None else ("workspace", offset)
    keys = [storage(s) for s in slots]
    result = []
    for i, key in enumerate(keys):
        clash = any(keys[j] == key and (written[i] or written[j])
                    for j in range(len(keys)) if j != i)
        result.append(not clash)
    return result
