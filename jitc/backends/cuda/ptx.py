"""Kernel IR to PTX through LLVM's NVPTX target, and PTX to machine code through `ptxas`
where it is installed (the tests use it; running on a GPU does not: the driver assembles PTX
itself)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

import llvmlite.binding as llvm

from jitc.backends.cuda import ARCHS, DEFAULT_ARCH
from jitc.backends.cuda.kernel import KernelSpec
from jitc.backends.cuda.wrappers import nvptx_wrappers
from jitc.backends.llvm import target

TRIPLE = "nvptx64-nvidia-cuda"
__all__ = ["ARCHS", "DEFAULT_ARCH", "assemble", "check_arch", "emit_ptx", "entry_names"]


def check_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise ValueError(f"unknown CUDA target {arch!r}; supported: {', '.join(ARCHS)}")
    return arch


def target_machine(arch: str) -> llvm.TargetMachine:
    target.initialize_all()
    nvptx = llvm.Target.from_triple(TRIPLE)
    return nvptx.create_target_machine(cpu=check_arch(arch), opt=3)


def link(kernel_ir: str, wrapper_ir: str, tm: llvm.TargetMachine,
         exported: Sequence[str]) -> llvm.ModuleRef:
    """The kernel IR linked with a wrapper module; everything but `exported` becomes internal,
    so the phases are inlined into their wrappers and vanish."""
    module = target.parse(kernel_ir, tm)
    module.link_in(target.parse(wrapper_ir, tm))
    if "jitc.dp4a." in kernel_ir:  # byte products (dot.py): dp4a on the device only
        from jitc.backends.cuda.dot import dp4a_definitions
        device = tm.triple.startswith("nvptx")
        module.link_in(target.parse(dp4a_definitions(device), tm))
    keep = set(exported)
    for fn in module.functions:
        if not fn.is_declaration and fn.name not in keep:
            fn.linkage = llvm.Linkage.internal
    module.verify()
    return module


def emit_ptx(kernel_ir: str, specs: Sequence[KernelSpec], arch: str = DEFAULT_ARCH) -> str:
    tm = target_machine(arch)
    module = link(kernel_ir, str(nvptx_wrappers(specs)), tm, [s.name for s in specs])
    target.optimize(module, tm)
    return tm.emit_assembly(module)


def entry_names(ptx: str) -> list[str]:
    """The kernels (`.entry`) a PTX module defines."""
    return re.findall(r"^\.visible \.entry (\w+)\(", ptx, re.M)


def function_names(ptx: str) -> list[str]:
    """Device functions (`.func`) a PTX module defines; jitc's PTX should have none."""
    return re.findall(r"^(?:\.visible |\.weak )?\.func\s+(?:\([^)]*\)\s*)?(\w+)", ptx, re.M)


@functools.cache
def find_ptxas() -> str | None:
    return shutil.which("ptxas")


class PtxasError(RuntimeError):
    pass


def assemble(ptx: str, arch: str) -> bytes:
    """`ptxas -arch=<arch>` on the PTX; returns the cubin, raises PtxasError with ptxas's
    messages when it rejects the PTX."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise FileNotFoundError("ptxas is not installed (it comes with the CUDA toolkit)")
    with tempfile.TemporaryDirectory(prefix="jitc-ptxas-") as folder:
        source = os.path.join(folder, "kernels.ptx")
        cubin = os.path.join(folder, "kernels.cubin")
        with open(source, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, f"-arch={check_arch(arch)}", source, "-o", cubin],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise PtxasError(f"ptxas -arch={arch} rejected the PTX:\n{done.stderr}")
        with open(cubin, "rb") as f:
            return f.read()
