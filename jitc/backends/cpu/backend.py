"""The CPU backend: host machine code compiled in-process with llvmlite's MCJIT."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm
import numpy as np

from jitc import compile_cache, profiling, progress
from jitc.backends.cpu import objects
from jitc.backends.cpu.codegen import ENTRY, Lowering, lower_module
from jitc.backends.cpu.gemm_routines import declared_routines
from jitc.backends.cpu.plan import aligned_copy, contiguous_argument
from jitc.backends.cpu.runtime import register_runtime_symbols
from jitc.backends.cpu.symbolic_call import Signature, SymbolicEntry
from jitc.backends.llvm import target
from jitc.backends.llvm.extents import SymbolicExtentError
from jitc.ir.core import Module
from jitc.ir.dim_text import parse_constraint, parse_dim
from jitc.ir.parser import parse_type
from jitc.ir.symbolic import Constraint, DimLike, UnknownDimensionError
from jitc.options import Options, compile_threads
from jitc.passes import KERNEL_PASSES
from jitc.passes.convolution_products import convolution_products, cpu_convolution_products
from jitc.passes.pipeline import Pass

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# Calls that touch fewer elements than this keep the GIL: releasing it costs more.
RELEASE_GIL_ELEMENTS = 1 << 14


@dataclass
class EntryPoint:
    """What calling a function's machine code needs beside the code: its signature, its array
    constants, its workspace size and which results reuse which arguments' buffers."""

    name: str  # the function's name, for error messages
    arg_types: list[tuple[tuple[int, ...], np.dtype]]
    out_types: list[tuple[tuple[int, ...], np.dtype]]
    constants: list[np.ndarray]
    workspace_bytes: int
    donations: dict[int, int]  # result index -> argument index
    kernel_count: int
    # Per kernel, the entry body index of the instruction it computes (None: a copy into a
    # donated result); only timed executables (profiling) keep it.
    kernel_positions: list[int | None] | None = None
    # A symbolic entry (docs/dynamic-shapes.md): the function its calls bind symbols with,
    # the constraints they check and the order of the symbol values; shapes and the
    # workspace size above are then expressions.
    symbolic: tuple[Signature, tuple[Constraint, ...], tuple[str, ...]] | None = None

    @classmethod
    def of(cls, module: Module, lowering: Lowering) -> EntryPoint:
        fn, plan = module.entry, lowering.plan
        entry = cls(fn.name, [(p.type.shape, np.dtype(p.type.dtype.numpy))
                              for p in fn.parameters],
                    [(v.type.shape, np.dtype(v.type.dtype.numpy)) for v in fn.outputs],
                    [np.ascontiguousarray(c) for c in plan.constants], plan.workspace_bytes,
                    dict(plan.donations), len(lowering.kernels))
        if plan.dims_slot is not None:
            entry.symbolic = (Signature(fn.name, tuple(fn.parameter_types)),
                              tuple(module.constraints), plan.symbols)
        return entry


class CpuExecutable:
    """A compiled function: owns its execution engine, constants and result allocation.

    `objects` are the relocatable objects the engine was made of (kept only for the persistent
    cache, which stores them); `rebuild` compiles the function again, for the listings of an
    executable loaded from that cache (which has only machine code)."""

    def __init__(self, entry: EntryPoint, engine: llvm.ExecutionEngine,
                 parts: Sequence[objects.CompiledObject], objects_: list[bytes] | None = None,
                 rebuild: Callable[[], CpuExecutable] | None = None) -> None:
        self.entry = entry
        self.kernel_count = entry.kernel_count
        self.engine = engine  # keeps the machine code alive
        self.objects = objects_
        self._parts = parts
        self._rebuild = rebuild
        self._rebuilt_executable: CpuExecutable | None = None
        self.address = engine.get_function_address(ENTRY)
        self.arg_types = entry.arg_types
        self.out_types = entry.out_types
        self.constants = entry.constants
        self.workspace_bytes = entry.workspace_bytes
        if entry.symbolic is not None:
            fn, constraints, symbols = entry.symbolic
            self.release_gil = True  # decided per call, from the bound sizes
            self._call = SymbolicEntry(self.address, engine, fn, constraints, symbols,
                                       self.out_types, self.constants, self.workspace_bytes,
                                       entry.donations, RELEASE_GIL_ELEMENTS)
            return
        touched = sum(int(np.prod(s)) for s, _ in self.arg_types + self.out_types)
        self.release_gil = touched + self.workspace_bytes // 4 >= RELEASE_GIL_ELEMENTS
        from jitc._runtime import RESULT_LIST
        self._call = self.dispatcher(RESULT_LIST)

    @property
    def optimized_ir(self) -> str:
        if self._rebuild is not None:
            return self._rebuilt().optimized_ir
        return "\n".join(part.optimized_ir for part in self._parts)

    def _rebuilt(self) -> CpuExecutable:
        """The same function compiled again (for its listings), once."""
        if self._rebuilt_executable is None:
            assert self._rebuild is not None
            self._rebuilt_executable = self._rebuild()
        return self._rebuilt_executable

    def dispatcher(self, result_kind: int, writes: Sequence[int] | None = None,
                   types: tuple[list, list] | None = None) -> Callable:
        """A C-level callable for exactly this signature; returns None on any mismatch.
        `writes`: the arguments the last len(writes) results are copied into after a call.
        `types`: the (shape, dtype) of the arguments and results callers pass and get, when
        they differ from the code's but have its bytes (complex arrays for float pairs).
        A symbolic entry's dispatcher binds and checks the symbols (symbolic_call.py); it
        has none (None) when `types` differ from the code's."""
        if self.entry.symbolic is not None:
            return None if types is not None else self._call.dispatcher(result_kind, writes)
        from jitc._runtime import Dispatcher
        arg_types, out_types = types or (self.arg_types, self.out_types)
        specs = [(d.num, s) for s, d in arg_types]
        outs = [(d.num, s) for s, d in out_types]
        donations = [self.entry.donations.get(n, -1) for n in range(len(self.out_types))]
        return Dispatcher(self.address, specs, outs, self.constants, self.workspace_bytes,
                          result_kind, int(self.release_gil), donations, self.engine,
                          self.entry.name, writes)

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.entry.symbolic is not None:
            return self._call(args)
        result = self._call(tuple(args))
        if result is None:
            # Not C-contiguous, not aligned, or not an ndarray of exactly the dtype (or a
            # donated array that is read-only or shares memory with another argument):
            # convert, then call.
            donors = set(self.entry.donations.values())
            arrays = tuple(contiguous_argument(a, d, n in donors)
                           for n, (a, (_, d)) in enumerate(zip(args, self.arg_types)))
            result = self._call(arrays)
            if result is None:
                want = ", ".join(f"{np.dtype(d)}{list(s)}" for s, d in self.arg_types)
                got = ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays)
                raise TypeError(f"compiled for ({want}), called with ({got})")
        return result

    def as_text(self, assembly: bool = False) -> str:
        """The optimized LLVM IR, or the host assembly with `assembly=True`."""
        if self._rebuild is not None:
            return self._rebuilt().as_text(assembly)
        if assembly:
            return "\n".join(part.tm.emit_assembly(part.module) for part in self._parts)
        return self.optimized_ir


# Float convolutions with few output features stay on the direct loop, faster here.
CPU_PASSES: tuple[Pass, ...] = tuple(
    cpu_convolution_products if p is convolution_products else p for p in KERNEL_PASSES)


class CpuBackend:
    name = "cpu"
    # Symbolic modules compile once for every size their constraints accept (a construct
    # the kernels cannot take symbolically yet is refused at compile time).
    symbolic_extents = True
    # A profile calls a variant of each function that times its kernels (`compile(timing=)`).
    times_kernels = True

    def passes(self, options: Options) -> Sequence[Pass]:
        return CPU_PASSES

    def compile(self, module: Module, options: Options,
                timing: int | None = None) -> CpuExecutable:
        """The machine code of `module`; with `timing` (a profile's number for it, see
        jitc/profiling.py) the variant whose entry records each kernel's time."""
        threads = options.num_threads if register_runtime_symbols() else 1
        symbols = sorted(set().union(*(t.symbols for t in module.entry.parameter_types)))
        if symbols:
            try:
                return self._compile(module, options, timing, threads)
            except (UnknownDimensionError, SymbolicExtentError, TypeError,
                    RuntimeError) as exc:
                # Every construct the kernels cannot take symbolically ends here, loudly,
                # before any code runs (a `Dim` that leaked into an LLVM constant fails
                # LLVM's parser: RuntimeError); jit's policy then compiles each shape exactly.
                raise SymbolicExtentError(
                    f"the cpu backend cannot compile {module.entry.name} with symbolic "
                    f"dimensions ({', '.join(symbols)}) yet: {exc}") from exc
        return self._compile(module, options, timing, threads)

    def _compile(self, module: Module, options: Options, timing: int | None,
                 threads: int) -> CpuExecutable:
        # The kernels go to several modules compiled on as many threads; the GEMM routines
        # they call are compiled once per process (objects.py). Neither changes the code of
        # any function: only where it is compiled.
        progress.stage("codegen: lowering to LLVM IR")
        with profiling.span("lower to LLVM IR", "codegen") as span:
            lowering = lower_module(module, threads, donated=options.donated,
                                    writebacks=options.writebacks,
                                    partitions=compile_threads(), external_routines=True,
                                    native_ldexp=target.host_has("avx512f"),
                                    native_vnni=target.host_has("avx512vnni"), timing=timing)
            span.note(kernels=len(lowering.kernels), modules=len(lowering.parts))
        entry = EntryPoint.of(module, lowering)
        if timing is not None:
            entry.kernel_positions = lowering.positions
        progress.stage(f"codegen: LLVM compiling {len(lowering.parts)} module(s)")
        keep = compile_cache.wanted(options) and timing is None
        routines = {r for part in lowering.parts for r in declared_routines(part)}
        if len(lowering.parts) == 1 and not routines:
            return self._compile_whole(entry, lowering, keep)
        # Routines first: they overlap with printing the kernels' IR here.
        linked = [objects.routine_object(r) for r in sorted(routines, key=lambda r: r.name)]
        others = [objects.submit(str(part)) for part in lowering.parts[1:]]
        # The first module (the entry and kernels) compiles here meanwhile.
        compiled = [objects.compile_object(str(lowering.parts[0]))]
        compiled += [future.result() for future in others]
        data = [item.data for item in compiled + [future.result() for future in linked]]
        return CpuExecutable(entry, _link(data), compiled, data if keep else None)

    def _compile_whole(self, entry: EntryPoint, lowering: Lowering,
                       keep: bool) -> CpuExecutable:
        """One self-contained module: MCJIT compiles it directly, no object handoff (the
        object it makes is kept, when asked, through MCJIT's object cache hook)."""
        with profiling.span("LLVM module", "codegen", module=0, whole=True):
            tm = target.host_target_machine()
            llvm_module = target.parse(str(lowering.llvm_ir), tm)
            target.optimize(llvm_module, tm)
            part = objects.CompiledObject(b"", str(llvm_module), llvm_module, tm)
            engine = llvm.create_mcjit_compiler(llvm_module, tm)
            made: list[bytes] = []
            if keep:
                engine.set_object_cache(lambda module, data: made.append(data))
            engine.finalize_object()
        return CpuExecutable(entry, engine, [part], made if keep and made else None)

    # -- the persistent cache (jitc/compile_cache.py) -------------------------------------

    def cache_identity(self, options: Options) -> str:
        """What the machine code depends on beside the IR and jitc itself: LLVM, the host CPU
        and its features, and the thread count the code is split for."""
        threads = options.num_threads if register_runtime_symbols() else 1
        name, features = target.host_cpu()
        return (f"llvm {llvm.llvm_version_info} llvmlite {llvmlite.__version__} "
                f"cpu {name} {features} threads {threads}")

    def save(self, executable: CpuExecutable) -> tuple[dict, list[bytes]] | None:
        """The executable as metadata and blobs (its objects, then its constants); None when
        it did not keep its objects."""
        data, entry = executable.objects, executable.entry
        if data is None:
            return None
        executable.objects = None  # only the cache wanted them
        meta = {"entry": entry.name, "kernels": entry.kernel_count,
                "workspace": _dim_json(entry.workspace_bytes), "objects": len(data),
                "args": [[[_dim_json(n) for n in s], d.str] for s, d in entry.arg_types],
                "outs": [[[_dim_json(n) for n in s], d.str] for s, d in entry.out_types],
                "constants": [[list(c.shape), c.dtype.str] for c in entry.constants],
                "donations": sorted(entry.donations.items())}
        if entry.symbolic is not None:  # extents as the IR writes them
            fn, constraints, symbols = entry.symbolic
            meta["symbolic"] = {"name": fn.name,
                                "parameters": [str(t) for t in fn.parameter_types],
                                "constraints": [str(c) for c in constraints],
                                "symbols": list(symbols)}
        return meta, [*data, *(c.tobytes() for c in entry.constants)]

    def load(self, meta: dict, blobs: list[bytes],
             rebuild: Callable[[], CpuExecutable]) -> CpuExecutable:
        """An executable from what `save` made: its objects linked into a new engine."""
        register_runtime_symbols()
        count = int(meta["objects"])
        constants = [aligned_copy(np.frombuffer(blob, np.dtype(d)).reshape(s))
                     for blob, (s, d) in zip(blobs[count:], meta["constants"], strict=True)]
        def types(listed: list) -> list[tuple[tuple[DimLike, ...], np.dtype]]:
            return [(tuple(_dim_of_json(n) for n in s), np.dtype(d)) for s, d in listed]
        entry = EntryPoint(meta["entry"], types(meta["args"]), types(meta["outs"]), constants,
                           _dim_of_json(meta["workspace"]),
                           {int(r): int(a) for r, a in meta["donations"]}, int(meta["kernels"]))
        symbolic = meta.get("symbolic")
        if symbolic is not None:
            signature = Signature(symbolic["name"],
                                  tuple(parse_type(t) for t in symbolic["parameters"]))
            entry.symbolic = (signature, tuple(parse_constraint(c)
                                               for c in symbolic["constraints"]),
                              tuple(symbolic["symbols"]))
        return CpuExecutable(entry, _link(blobs[:count]), [], None, rebuild)


def _dim_json(extent: DimLike) -> int | str:
    """An extent for the cache's metadata: a number, or a symbolic one as the IR writes it."""
    return extent if isinstance(extent, int) else str(extent)


def _dim_of_json(extent: int | str) -> DimLike:
    return parse_dim(extent) if isinstance(extent, str) else int(extent)


def _link(data: Sequence[bytes]) -> llvm.ExecutionEngine:
    """One MCJIT engine holding the machine code of these relocatable objects."""
    with profiling.span("link", "codegen", objects=len(data)):
        tm = target.host_target_machine()
        engine = llvm.create_mcjit_compiler(target.parse("", tm), tm)
        for item in data:
            engine.add_object_file(llvm.ObjectFileRef.from_data(item))
        engine.finalize_object()
    return engine
