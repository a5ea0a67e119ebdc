"""Compiling LLVM IR to host object code on several threads, and the per-process cache of
the GEMM routines' objects.

LLVM itself compiles independent modules concurrently when each has its own context and
target machine, but llvmlite serializes every call into LLVM behind one lock. The two calls
that take the time (the optimization pipeline and machine-code generation) are made here
without it: each worker owns everything those calls touch (context, module, target machine,
pass builder), so they share no LLVM state. Everything else goes through llvmlite's locked
wrappers as usual.

The CPU backend splits a function's kernels into a few modules (codegen.py), compiles them
here in parallel and links the objects into one MCJIT engine. The strip and pack routines of
the blocked GEMM (gemm_routines.py) are compiled once per process, on first use, and their
objects linked into every engine that calls them; they are kept in the persistent cache
(jitc/diskcache.py) for later processes.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import llvmlite
import llvmlite.binding as llvm

from jitc import diskcache, profiling
from jitc.backends.cpu.gemm_routines import Routine, routine_module
from jitc.backends.llvm import target
from jitc.options import compile_threads


@dataclass
class CompiledObject:
    """One module compiled to host object code."""

    data: bytes             # the relocatable object, for ExecutionEngine.add_object_file
    optimized_ir: str       # the module after the optimization pipeline
    module: llvm.ModuleRef | None  # kept (with its target machine) for assembly listings;
    tm: llvm.TargetMachine | None  # None for a GEMM routine read from the disk cache


def _unlocked(name: str) -> Callable[..., Any]:
    """llvmlite's C function `name` without its global lock (the locked wrapper when this
    llvmlite does not expose the raw function: correct, only not concurrent)."""
    wrapper = getattr(llvm.ffi.lib, name)
    return getattr(wrapper, "_cfn", wrapper)


def _optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    """target.optimize, with the pipeline run outside llvmlite's lock."""
    with target.default_pipeline(tm) as (manager, builder):
        _unlocked("LLVMPY_RunNewModulePassManager")(manager, module, builder)


def _emit_object(module: llvm.ModuleRef, tm: llvm.TargetMachine) -> bytes:
    """tm.emit_object(module), with code generation run outside llvmlite's lock."""
    with llvm.ffi.OutputString() as error:
        buffer = _unlocked("LLVMPY_TargetMachineEmitToMemory")(tm, module, 1, error)
        if not buffer:
            raise RuntimeError(str(error))
    try:
        return ctypes.string_at(llvm.ffi.lib.LLVMPY_GetBufferStart(buffer),
                                llvm.ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        llvm.ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


def compile_object(text: str) -> CompiledObject:
    """Parse, optimize and compile LLVM IR `text` for the host, in a context of its own (safe
    to call from several threads at once)."""
    with profiling.span("LLVM module", "codegen", ir_bytes=len(text)):
        tm = target.host_target_machine()
        module = target.parse(text, tm, llvm.create_context())
        _optimize(module, tm)
        optimized_ir = str(module)
        return CompiledObject(_emit_object(module, tm), optimized_ir, module, tm)


_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_lock = threading.Lock()
_routines: dict[Routine, Future[CompiledObject]] = {}


def _executor() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _lock:
        # A forked child inherits the pool object but not its threads: start a new one.
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(compile_threads(), thread_name_prefix="jitc-compile")
            _pool_pid = os.getpid()
            _routines.clear()
        return _pool


def submit(text: str) -> Future[CompiledObject]:
    """Compile `text` on the compile threads (or right here with only one)."""
    if compile_threads() == 1:
        future: Future[CompiledObject] = Future()
        try:
            future.set_result(compile_object(text))
        except BaseException as exc:  # handed to whoever waits for the result
            future.set_exception(exc)
        return future
    return _executor().submit(compile_object, text)


def routine_object(routine: Routine) -> Future[CompiledObject]:
    """The object defining GEMM routine `routine`: compiled on first request, then shared by
    every engine of the process (its code does not depend on the caller), and kept in the
    persistent cache for later processes on this machine."""
    _executor()  # resets the cache in a forked child
    with _lock:
        future = _routines.get(routine)
    if future is None:
        key = _cache_key(routine)
        entry = None if key is None else diskcache.get(ROUTINES, key)
        if entry is not None and len(entry.blobs) == 1:
            future = Future()
            future.set_result(CompiledObject(entry.blobs[0], "", None, None))
        else:
            future = submit(str(routine_module(routine)))
            if key is not None:
                future.add_done_callback(lambda done: _store(key, done))
        with _lock:
            future = _routines.setdefault(routine, future)
    return future


# The GEMM routines are our own library code, the same for every function: like a BLAS they
# are compiled once per machine, not once per process (that cost 30 ms of the first product
# a process compiles). The key covers everything the object depends on: the routine's
# parameters, jitc's source (which generates it), the LLVM version, and the host CPU and its
# features. A function's executable holds copies of the routines it calls (compile_cache.py),
# so these entries serve the compiles that are not cache hits.
ROUTINES = "routines"


def _cache_key(routine: Routine) -> str | None:
    if diskcache.root() is None:
        return None
    return "\n".join([repr(routine), diskcache.code_identity(), repr(llvm.llvm_version_info),
                      llvmlite.__version__, *target.host_cpu()])


def _store(key: str, done: Future[CompiledObject]) -> None:
    if done.exception() is None:
        diskcache.put(ROUTINES, key, {}, [done.result().data])
