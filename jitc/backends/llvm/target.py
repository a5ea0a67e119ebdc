"""llvmlite target machines and the optimisation pipeline, shared by the JIT and AOT paths."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import llvmlite.binding as llvm


@functools.cache
def initialize_native() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.cache
def initialize_all() -> None:
    # Both are needed for a non-host target: without the asm printers a target machine
    # "can't emit a file of this type".
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def host_target_machine(reloc: str = "default", codemodel: str = "jitdefault"
                        ) -> llvm.TargetMachine:
    """A fresh target machine for the host CPU with all its features.

    Each execution engine takes ownership of its target machine, so callers must never share
    one between engines.
    """
    initialize_native()
    target = llvm.Target.from_default_triple()
    cpu, features = host_cpu()
    return target.create_target_machine(cpu=cpu, features=features, opt=3, reloc=reloc,
                                        codemodel=codemodel)


# LLVM tunes some AVX-512 CPUs (Ice Lake to Emerald Rapids, Rocket Lake) to vectorize loops
# 256 bits wide, against early AVX-512 parts slowing their clock for 512-bit instructions.
# jitc's loops are long and arithmetic-heavy (vmath polynomials, row kernels): on an Emerald
# Rapids host 512-bit loops ran softmax 4096x1024 in 2.8 ms instead of 4.2 ms on one thread,
# and layernorm in 1.3 ms instead of 1.7 ms. The products choose their width themselves.
WIDE_VECTORS = "-prefer-256-bit"


@functools.cache
def host_cpu() -> tuple[str, str]:
    """The host CPU's name and its features as LLVM spells them (asking LLVM takes longer
    than making the target machine, and every compile makes one or two), with 512-bit loops
    where the CPU has AVX-512 (WIDE_VECTORS)."""
    initialize_native()
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" in features.split(","):
        features += "," + WIDE_VECTORS
    return llvm.get_host_cpu_name(), features


def host_has(feature: str) -> bool:
    """Whether the host CPU has `feature` (LLVM's name, e.g. "avx512f")."""
    return f"+{feature}" in host_cpu()[1].split(",")


def tuning_options(speed_level: int = 3) -> llvm.PipelineTuningOptions:
    """-O3 with loop and SLP vectorization.

    Loop unrolling is off: the vectorizer already interleaves its vector loops, and unrolling
    on top of that tripled the code (and the compile time) of a transformer block for no
    measurable speed.
    """
    options = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    options.loop_vectorization = True
    options.slp_vectorization = True
    options.loop_unrolling = False
    return options


@contextlib.contextmanager
def default_pipeline(tm: llvm.TargetMachine, speed_level: int = 3
                     ) -> Iterator[tuple[llvm.ModulePassManager, llvm.PassBuilder]]:
    """The -O`speed_level` pipeline for `tm` and its pass builder, freed on exit.

    A pass builder is made per pipeline: it keeps `tm`, which lives no longer than its engine,
    and each run registers callbacks on it that point into that run's stack frame.
    """
    builder = llvm.create_pass_builder(tm, tuning_options(speed_level))
    try:
        with module_pass_manager(builder.getModulePassManager()) as manager:
            yield manager, builder
    finally:
        builder.close()


@contextlib.contextmanager
def module_pass_manager(manager: llvm.ModulePassManager) -> Iterator[llvm.ModulePassManager]:
    """`manager`, freed on exit.

    llvmlite never frees a module pass manager: `ModulePassManager` lists `ObjectRef` before
    `NewPassManager`, so ObjectRef's empty `_dispose` hides the one that frees it. That leaked
    the whole O3 pipeline, with what its passes keep from their run (~68 KiB), per module.
    Detaching after freeing keeps a later llvmlite, with that fixed, from freeing it twice.
    """
    try:
        yield manager
    finally:
        llvm.ffi.lib.LLVMPY_DisposeNewModulePassManger(manager)
        manager.detach()


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine, speed_level: int = 3) -> None:
    """The new pass manager's pipeline with `tuning_options`, tuned for `tm`."""
    with default_pipeline(tm, speed_level) as (manager, builder):
        manager.run(module, builder)
        # The loop vectorizer calls the vector variants of functions it widened (vmath's
        # huge-argument trigonometry): inline them now, so their test is a branch in the loop.
        with module_pass_manager(llvm.create_new_module_pass_manager()) as inline:
            inline.add_always_inliner_pass()
            inline.run(module, builder)


def parse(text: str, tm: llvm.TargetMachine, context: llvm.ContextRef | None = None
          ) -> llvm.ModuleRef:
    """`text` as a module for `tm`, in `context` (default: LLVM's global context, which only
    one thread at a time may use)."""
    module = llvm.parse_assembly(text, context)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    module.verify()
    return module
