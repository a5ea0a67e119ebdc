"""The grid simulator: the GPU kernels' phases compiled for the host and run over the grid.

Each kernel's launcher walks the blocks one after another and runs every phase for all
threads of the block before the next step, which is exactly the ordering a barrier
guarantees; shuffles copy state between threads. The phases are the same LLVM IR the PTX
is made from, with the same launch configurations, so a kernel that computes the right
result here computes it on the GPU, up to races the program of phases rules out (state
crosses phases only through state slots and shared memory, see kernel.py).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import llvmlite.binding as llvm
import numpy as np

from jitc.backends.cuda.codegen import Lowering
from jitc.backends.cuda.host import HostProgram
from jitc.backends.cuda.kernel import KernelSpec
from jitc.backends.cuda.symbolic_call import SymbolicCall
from jitc.backends.cuda.wrappers import (
    SIM_ENTRY,
    scratch_bytes,
    sim_launcher_name,
    sim_wrappers,
    workspace_scratch_offset,
)
from jitc.backends.llvm import target
from jitc.ir.core import Module

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_LAUNCHER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class SimulatedKernels:
    """The host build of a lowering: the whole program (`run`) and each kernel's launcher
    (`launch`, which a runtime can call with its own buffers)."""

    def __init__(self, lowering: Lowering) -> None:
        self.lowering = lowering
        self.specs = lowering.specs
        tm = target.host_target_machine()
        # One entry running every kernel in order serves a static program without control
        # flow; otherwise the host drives the kernels (host.py).
        self.has_entry = not lowering.program.has_control_flow and \
            lowering.plan.dims_slot is None
        exported = [SIM_ENTRY] * self.has_entry + [sim_launcher_name(s) for s in self.specs]
        wrappers = sim_wrappers(self.specs, lowering.plan, entry=self.has_entry)
        from jitc.backends.cuda.ptx import link
        module = link(lowering.kernel_ir, str(wrappers), tm, exported)
        target.optimize(module, tm)
        self.optimized_ir = str(module)
        self._engine = llvm.create_mcjit_compiler(module, tm)
        self._engine.finalize_object()
        self._entry = _ENTRY(self._engine.get_function_address(SIM_ENTRY)) \
            if self.has_entry else None
        self._launchers = {s.name: _LAUNCHER(self._engine.get_function_address(
            sim_launcher_name(s))) for s in self.specs}
        self.scratch_bytes = max((scratch_bytes(s) for s in self.specs), default=0)

    def run(self, buffers: Sequence[int]) -> None:
        """Run every kernel in order on the frame `buffers` (argument, result and constant
        pointers, then the workspace, whose tail holds the scratch memory)."""
        assert self._entry is not None, "a program with control flow runs through host.py"
        frame = (ctypes.c_void_p * len(buffers))(*buffers)
        self._entry(frame)

    def launch(self, name: str, pointers: Sequence[int], scratch: int, blocks: int) -> None:
        """Run kernel `name` on `blocks` blocks (which a static launch ignores)."""
        params = (ctypes.c_void_p * max(len(pointers), 1))(*pointers)
        self._launchers[name](params, scratch, blocks)


class SimDevice:
    """The host program's device (host.py) in the simulator: host memory, launches run the
    kernels' host builds one after another."""

    def __init__(self, kernels: SimulatedKernels) -> None:
        self.kernels = kernels
        self.scratch = np.empty(max(kernels.scratch_bytes, 1), np.uint8)

    def launch(self, spec: KernelSpec, pointers: Sequence[int], blocks: int) -> None:
        self.kernels.launch(spec.name, pointers, self.scratch.ctypes.data, blocks)

    def copy(self, target: int, source: int, nbytes: int) -> None:
        ctypes.memmove(target, source, nbytes)

    def read(self, source: int, nbytes: int) -> bytes:
        return ctypes.string_at(source, nbytes)


class SimExecutable:
    def __init__(self, module: Module, lowering: Lowering) -> None:
        self.module = module
        self.lowering = lowering
        self.plan = lowering.plan
        self.kernels = SimulatedKernels(lowering)
        self.kernel_count = len(lowering.specs)
        fn = module.entry
        self.arg_types = [(p.type.shape, p.type.dtype.numpy) for p in fn.parameters]
        self.out_types = [(v.type.shape, v.type.dtype.numpy) for v in fn.outputs]
        self.arrays = [np.asarray(a, order="C") for a in lowering.arrays]
        self.constants = [self.arrays[k] for k in lowering.program.constants]
        self.host = None if self.kernels.has_entry else HostProgram(
            SimDevice(self.kernels), [a.ctypes.data for a in self.arrays])
        workspace = self.plan.workspace_bytes  # None when symbolic: known per call
        self.workspace_bytes = workspace if isinstance(workspace, int) else None
        self.symbolic = SymbolicCall.of(module, self.plan)
        if self.symbolic is None:
            self._workspace_size = workspace_scratch_offset(self.plan) + \
                self.kernels.scratch_bytes

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.symbolic is not None:
            return self._call_symbolic(args)
        arrays = [np.asarray(a, dtype=d, order="C") for a, (_, d) in zip(args, self.arg_types)]
        for a, (shape, _) in zip(arrays, self.arg_types):
            if a.shape != tuple(shape):
                want = ", ".join(f"{np.dtype(t)}{list(s)}" for s, t in self.arg_types)
                raise TypeError(f"compiled for ({want}), got {a.dtype}{list(a.shape)}")
        outputs = [np.empty(shape, d) for shape, d in self.out_types]
        workspace = np.empty(max(self._workspace_size, 1), np.uint8)
        if self.host is not None:
            self.host.run(self.lowering.program, [a.ctypes.data for a in arrays],
                          [a.ctypes.data for a in outputs], workspace.ctypes.data)
            return outputs
        pointers = [a.ctypes.data for a in arrays + outputs + self.constants]
        self.kernels.run(pointers + [workspace.ctypes.data])
        return outputs

    def _call_symbolic(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Bind the symbols from the arguments' shapes (checking the constraints), size the
        results and the workspace with them, and let the host launch the kernels."""
        assert self.symbolic is not None and self.host is not None
        arrays = [np.asarray(a, dtype=d, order="C") for a, (_, d) in zip(args, self.arg_types)]
        call = self.symbolic.bind(arrays)
        outputs = [np.empty(shape, d) for shape, (_, d) in zip(call.shapes, self.out_types)]
        workspace = np.empty(max(call.workspace_bytes, 1), np.uint8)
        self.host.run(self.lowering.program, [a.ctypes.data for a in arrays],
                      [a.ctypes.data for a in outputs], workspace.ctypes.data, call.symbols,
                      call.dims.ctypes.data)
        return outputs

    def as_text(self) -> str:
        """The optimized host LLVM IR of the simulated kernels."""
        return self.kernels.optimized_ir
