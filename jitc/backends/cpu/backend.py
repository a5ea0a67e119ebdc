"""The CPU backend: host machine code compiled in-process with llvmlite's MCJIT."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import llvmlite.binding as llvm
import numpy as np

from jitc.backends.cpu.codegen import ENTRY, Lowering, lower_module
from jitc.backends.cpu.runtime import register_runtime_symbols
from jitc.backends.llvm import target
from jitc.ir.core import Module
from jitc.options import Options
from jitc.passes import DEFAULT_PASSES
from jitc.passes.pipeline import Pass

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class CpuExecutable:
    """A compiled function: owns its execution engine, constants and result allocation."""

    def __init__(self, module: Module, lowering: Lowering, engine: llvm.ExecutionEngine,
                 optimized_ir: str, tm: llvm.TargetMachine, llvm_module: llvm.ModuleRef) -> None:
        self.module = module
        self.plan = lowering.plan
        self.engine = engine  # keeps the machine code (and its target machine) alive
        self.optimized_ir = optimized_ir
        self._llvm_module = llvm_module
        self._tm = tm
        self.entry = _ENTRY_TYPE(engine.get_function_address(ENTRY))
        fn = module.entry
        self.arg_types = [(p.type.shape, p.type.dtype.numpy) for p in fn.parameters]
        self.out_types = [(v.type.shape, v.type.dtype.numpy) for v in fn.outputs]
        self.constants = [np.ascontiguousarray(c) for c in self.plan.constants]
        self.workspace_bytes = self.plan.workspace_bytes
        n = self.plan.num_args + self.plan.num_outputs + len(self.constants) + 1
        self._pointers = (ctypes.c_void_p * n)()
        base = self.plan.num_args + self.plan.num_outputs
        for i, c in enumerate(self.constants):
            self._pointers[base + i] = c.ctypes.data

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        pointers = (ctypes.c_void_p * len(self._pointers))(*self._pointers)
        keep = []
        for i, (arg, (shape, dtype)) in enumerate(zip(args, self.arg_types)):
            array = np.ascontiguousarray(arg, dtype=dtype)
            if array.shape != shape:
                raise TypeError(f"argument {i}: expected shape {shape}, got {array.shape}")
            keep.append(array)
            pointers[i] = array.ctypes.data
        outputs = [np.empty(shape, dtype) for shape, dtype in self.out_types]
        for i, out in enumerate(outputs):
            pointers[self.plan.num_args + i] = out.ctypes.data
        workspace = np.empty(self.workspace_bytes + 64, np.uint8)
        offset = (-workspace.ctypes.data) % 64
        pointers[len(self._pointers) - 1] = workspace.ctypes.data + offset
        self.entry(ctypes.cast(pointers, ctypes.c_void_p))
        return outputs

    def as_text(self, assembly: bool = False) -> str:
        """The optimized LLVM IR, or the host assembly with `assembly=True`."""
        if assembly:
            return self._tm.emit_assembly(self._llvm_module)
        return self.optimized_ir


class CpuBackend:
    name = "cpu"

    def passes(self, options: Options) -> Sequence[Pass]:
        return DEFAULT_PASSES

    def compile(self, module: Module, options: Options) -> CpuExecutable:
        threads = options.num_threads if register_runtime_symbols() else 1
        lowering = lower_module(module, threads)
        tm = target.host_target_machine()
        llvm_module = target.parse(str(lowering.llvm_ir), tm)
        target.optimize(llvm_module, tm)
        optimized_ir = str(llvm_module)
        engine = llvm.create_mcjit_compiler(llvm_module, tm)
        engine.finalize_object()
        return CpuExecutable(module, lowering, engine, optimized_ir, tm, llvm_module)
