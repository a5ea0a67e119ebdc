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
objects linked into every engine that calls them.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import inspect
import os
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import llvmlite
import llvmlite.binding as llvm

from jitc.backends.cpu.gemm_routines import Routine, routine_module
from jitc.backends.llvm import target
from jitc.options import cache_dir, compile_threads


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
    disk cache for later processes on this machine."""
    _executor()  # resets the cache in a forked child
    with _lock:
        future = _routines.get(routine)
    if future is None:
        path = _cached_path(routine)
        data = _read(path)
        if data is not None:
            future = Future()
            future.set_result(CompiledObject(data, "", None, None))
        else:
            future = submit(str(routine_module(routine)))
            if path is not None:
                future.add_done_callback(lambda done: _write(path, done))
        with _lock:
            future = _routines.setdefault(routine, future)
    return future


# The GEMM routines are our own library code, the same for every function: like a BLAS they
# are compiled once per machine, not once per process (that cost 30 ms of the first product
# a process compiles). The key covers everything the object depends on: the routine's
# parameters and the code generating it, the LLVM version, and the host CPU and its features
# (options.cache_dir says where). User
# functions are never cached on disk.
@functools.cache
def _generator_source() -> str:
    """The code that generates the routines' IR: part of their cache key, so that a changed
    generator never links an old object (hashing the routine's IR instead means building it,
    13 ms of the first product of a process)."""
    from jitc.backends.cpu import gemm_routines
    from jitc.backends.llvm import loops, types
    return "".join(inspect.getsource(m) for m in (gemm_routines, loops, types, target))


def _cached_path(routine: Routine) -> str | None:
    folder = cache_dir()
    if folder is None:
        return None
    key = "\n".join([repr(routine), _generator_source(), repr(llvm.llvm_version_info),
                     llvmlite.__version__, *target.host_cpu()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return os.path.join(folder, "routines", f"{routine.name}-{digest}.o")


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            stored = f.read()
    except OSError:
        return None
    # The object is followed by its SHA-256: a damaged file is recompiled, never linked.
    data, check = stored[:-32], stored[-32:]
    return data if len(stored) > 32 and hashlib.sha256(data).digest() == check else None


def _write(path: str, done: Future[CompiledObject]) -> None:
    """Write atomically (another process may be writing the same routine); a cache that
    cannot be written is only a missed saving."""
    if done.exception() is not None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            data = done.result().data
            f.write(data + hashlib.sha256(data).digest())
        os.replace(temporary, path)
    except OSError:
        pass
