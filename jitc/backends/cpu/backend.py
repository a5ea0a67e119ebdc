"""The CPU backend: host machine code compiled in-process with llvmlite's MCJIT."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import llvmlite.binding as llvm
import numpy as np

from jitc.backends.cpu import objects
from jitc.backends.cpu.codegen import ENTRY, Lowering, lower_module
from jitc.backends.cpu.gemm_routines import declared_routines
from jitc.backends.cpu.plan import contiguous_argument
from jitc.backends.cpu.runtime import register_runtime_symbols
from jitc.backends.llvm import target
from jitc.ir.core import Module
from jitc.options import Options, compile_threads
from jitc.passes import KERNEL_PASSES
from jitc.passes.pipeline import Pass

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# Calls that touch fewer elements than this keep the GIL: releasing it costs more.
RELEASE_GIL_ELEMENTS = 1 << 14


class CpuExecutable:
    """A compiled function: owns its execution engine, constants and result allocation."""

    def __init__(self, module: Module, lowering: Lowering, engine: llvm.ExecutionEngine,
                 parts: Sequence[objects.CompiledObject]) -> None:
        self.module = module
        self.plan = lowering.plan
        self.kernel_count = len(lowering.kernels)
        self.engine = engine  # keeps the machine code alive
        self.optimized_ir = "\n".join(part.optimized_ir for part in parts)
        self._parts = parts
        self.address = engine.get_function_address(ENTRY)
        fn = module.entry
        self.arg_types = [(p.type.shape, p.type.dtype.numpy) for p in fn.parameters]
        self.out_types = [(v.type.shape, v.type.dtype.numpy) for v in fn.outputs]
        self.constants = [np.ascontiguousarray(c) for c in self.plan.constants]
        self.workspace_bytes = self.plan.workspace_bytes
        touched = sum(int(np.prod(s)) for s, _ in self.arg_types + self.out_types)
        self.release_gil = touched + self.plan.workspace_bytes // 4 >= RELEASE_GIL_ELEMENTS
        from jitc._runtime import RESULT_LIST
        self._call = self.dispatcher(RESULT_LIST)

    def dispatcher(self, result_kind: int, writes: Sequence[int] | None = None) -> Callable:
        """A C-level callable for exactly this signature; returns None on any mismatch.
        `writes`: the arguments the last len(writes) results are copied into after a call."""
        from jitc._runtime import Dispatcher
        specs = [(np.dtype(d).num, s) for s, d in self.arg_types]
        outs = [(np.dtype(d).num, s) for s, d in self.out_types]
        donations = [self.plan.donations.get(n, -1) for n in range(len(self.out_types))]
        return Dispatcher(self.address, specs, outs, self.constants, self.plan.workspace_bytes,
                          result_kind, int(self.release_gil), donations, self.engine,
                          self.module.entry.name, writes)

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        result = self._call(tuple(args))
        if result is None:
            # Not C-contiguous, not aligned, or not an ndarray of exactly the dtype (or a
            # donated array that is read-only or shares memory with another argument):
            # convert, then call.
            donors = set(self.plan.donations.values())
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
        if assembly:
            return "\n".join(part.tm.emit_assembly(part.module) for part in self._parts)
        return self.optimized_ir


class CpuBackend:
    name = "cpu"

    def passes(self, options: Options) -> Sequence[Pass]:
        return KERNEL_PASSES

    def compile(self, module: Module, options: Options) -> CpuExecutable:
        threads = options.num_threads if register_runtime_symbols() else 1
        # The kernels go to several modules compiled on as many threads; the GEMM routines
        # they call are compiled once per process (objects.py). Neither changes the code of
        # any function: only where it is compiled.
        lowering = lower_module(module, threads, donated=options.donated,
                                partitions=compile_threads(), external_routines=True,
                                native_ldexp=target.host_has("avx512f"))
        routines = {r for part in lowering.parts for r in declared_routines(part)}
        if len(lowering.parts) == 1 and not routines:
            return self._compile_whole(module, lowering)
        # Routines first: they overlap with printing the kernels' IR here.
        linked = [objects.routine_object(r) for r in sorted(routines, key=lambda r: r.name)]
        others = [objects.submit(str(part)) for part in lowering.parts[1:]]
        # The first module (the entry and kernels) compiles here meanwhile.
        compiled = [objects.compile_object(str(lowering.parts[0]))]
        compiled += [future.result() for future in others]
        tm = target.host_target_machine()
        engine = llvm.create_mcjit_compiler(target.parse("", tm), tm)
        for item in compiled + [future.result() for future in linked]:
            engine.add_object_file(llvm.ObjectFileRef.from_data(item.data))
        engine.finalize_object()
        return CpuExecutable(module, lowering, engine, compiled)

    def _compile_whole(self, module: Module, lowering: Lowering) -> CpuExecutable:
        """One self-contained module: MCJIT compiles it directly, no object handoff."""
        tm = target.host_target_machine()
        llvm_module = target.parse(str(lowering.llvm_ir), tm)
        target.optimize(llvm_module, tm)
        part = objects.CompiledObject(b"", str(llvm_module), llvm_module, tm)
        engine = llvm.create_mcjit_compiler(llvm_module, tm)
        engine.finalize_object()
        return CpuExecutable(module, lowering, engine, [part])
