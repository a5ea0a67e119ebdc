"""The C runtime (thread pool) as seen from JIT-compiled code."""

from __future__ import annotations

import ctypes
import functools

import llvmlite.binding as llvm


@functools.cache
def runtime_library() -> ctypes.CDLL | None:
    """The compiled runtime, or None when the extension was not built."""
    try:
        import jitc._runtime as extension
    except ImportError:
        return None
    return ctypes.CDLL(extension.__file__)


@functools.cache
def register_runtime_symbols() -> bool:
    """Make `jitc_parallel_for` resolvable by JIT-compiled code; False when unavailable."""
    lib = runtime_library()
    if lib is None:
        return False
    address = ctypes.cast(lib.jitc_parallel_for, ctypes.c_void_p).value
    llvm.add_symbol("jitc_parallel_for", address)
    return True


def pool_size() -> int:
    lib = runtime_library()
    if lib is None:
        return 0
    lib.jitc_pool_size.restype = ctypes.c_int64
    return int(lib.jitc_pool_size())


def busy_sections() -> int:
    """Parallel sections whose caller ran all their chunks itself because another thread's
    section had the pool (runtime/jitc_runtime.c)."""
    lib = runtime_library()
    if lib is None:
        return 0
    lib.jitc_pool_busy_sections.restype = ctypes.c_int64
    return int(lib.jitc_pool_busy_sections())
