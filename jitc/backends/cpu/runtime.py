"""The C runtime (thread pool) as seen from JIT-compiled code."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

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
    """Make the thread pool (`jitc_parallel_for`) and the profiling hooks that timed entries
    call resolvable by JIT-compiled code; False when the extension is unavailable."""
    lib = runtime_library()
    if lib is None:
        return False
    for name in ("jitc_parallel_for", "jitc_profile_now", "jitc_profile_record"):
        llvm.add_symbol(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
    return True


@functools.cache
def profile_drain() -> Callable[[int, int], int] | None:
    """`drain(address, capacity)`: runtime/jitc_profile.c's `jitc_profile_drain`, moving the
    kernel records of timed entries into the int64 rows at `address`; None when unavailable."""
    lib = runtime_library()
    if lib is None:
        return None
    drain = lib.jitc_profile_drain
    drain.restype = ctypes.c_int64
    drain.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    return drain


def profile_dropped() -> int:
    """Kernel records lost so far because a thread's log was full (runtime/jitc_profile.c)."""
    lib = runtime_library()
    if lib is None:
        return 0
    lib.jitc_profile_dropped.restype = ctypes.c_int64
    return int(lib.jitc_profile_dropped())


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
