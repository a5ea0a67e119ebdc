"""The `cuda` and `cuda-sim` backends.

`cuda` compiles to PTX on any machine (no GPU, no pycuda needed: `f.lower(x).compile()` and
`as_text()` work anywhere) and runs through pycuda on the first call. `cuda-sim` compiles the
same kernel IR for the host and runs it on the grid simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from jitc.backends.cuda import DEFAULT_ARCH
from jitc.backends.cuda.codegen import Lowering, lower_module
from jitc.backends.cuda.passes import GPU_PASSES
from jitc.backends.cuda.ptx import check_arch, emit_ptx
from jitc.backends.cuda.simulator import SimExecutable
from jitc.backends.llvm.extents import SymbolicExtentError
from jitc.ir.core import Module
from jitc.ir.symbolic import UnknownDimensionError
from jitc.options import Options
from jitc.passes.pipeline import Pass

if TYPE_CHECKING:
    from jitc.backends.cuda.device import DeviceArray
    from jitc.backends.cuda.runtime import LoadedProgram


class CudaExecutable:
    """PTX for one call signature; loaded onto the GPU at the first call."""

    def __init__(self, module: Module, lowering: Lowering, arch: str) -> None:
        self.module = module
        self.lowering = lowering
        self.arch = arch
        self.kernel_count = len(lowering.specs)
        # None for a symbolic program, as on the c backend: its size is known per call.
        workspace = lowering.plan.workspace_bytes
        self.workspace_bytes = workspace if isinstance(workspace, int) else None
        self._ptx = {arch: emit_ptx(lowering.kernel_ir, lowering.specs, arch)}
        self._loaded: LoadedProgram | None = None

    def ptx(self, arch: str | None = None) -> str:
        """The PTX for this executable's target, or for another one from the same kernel IR."""
        arch = check_arch(arch or self.arch)
        if arch not in self._ptx:
            self._ptx[arch] = emit_ptx(self.lowering.kernel_ir, self.lowering.specs, arch)
        return self._ptx[arch]

    def __call__(self, args: Sequence[object]) -> list[DeviceArray]:
        if self._loaded is None:
            from jitc.backends.cuda.runtime import LoadedProgram
            self._loaded = LoadedProgram(self.module, self.lowering, self.ptx())
        return self._loaded(args)

    def as_text(self) -> str:
        """The PTX."""
        return self.ptx()


class CudaBackend:
    """Kernels for an NVIDIA GPU of compute capability `arch` or newer."""

    # Symbolic modules compile once: kernels read the symbol values from a device buffer and
    # the host sizes grids and buffers per call (code that needs a static extent is refused
    # at compile time).
    symbolic_extents = True

    def __init__(self, arch: str = DEFAULT_ARCH) -> None:
        self.arch = check_arch(arch)
        self.name = "cuda" if arch == DEFAULT_ARCH else f"cuda:{arch}"

    def passes(self, options: Options) -> Sequence[Pass]:
        return GPU_PASSES

    def compile(self, module: Module, options: Options) -> CudaExecutable:
        return CudaExecutable(module, lower_symbolic_checked(self.name, module), self.arch)

    def unavailable_reason(self) -> str | None:
        """Why kernels cannot run here (compiling always works)."""
        from jitc.backends.cuda.runtime import runtime_unavailable_reason
        return runtime_unavailable_reason()


class CudaSimBackend:
    """The CUDA backend's kernels run on the CPU by the grid simulator."""

    name = "cuda-sim"
    symbolic_extents = True

    def passes(self, options: Options) -> Sequence[Pass]:
        return GPU_PASSES

    def compile(self, module: Module, options: Options) -> SimExecutable:
        return SimExecutable(module, lower_symbolic_checked(self.name, module))


def lower_symbolic_checked(backend: str, module: Module) -> Lowering:
    """`lower_module`; for a module with symbolic dimensions, any code path that needs a
    static extent ends here, loudly, before any code runs (jit's automatic policy then
    compiles each shape exactly)."""
    symbols = sorted(set().union(*(t.symbols for t in module.entry.parameter_types)))
    if not symbols:
        return lower_module(module)
    try:
        return lower_module(module)
    except (UnknownDimensionError, SymbolicExtentError, TypeError) as exc:
        raise SymbolicExtentError(
            f"the {backend} backend cannot compile {module.entry.name} with symbolic "
            f"dimensions ({', '.join(symbols)}) yet: {exc}") from exc
