"""Building C source into a shared library with the system C compiler, and loading it.

Libraries are kept in the persistent compile cache (jitc/diskcache.py, namespace "c"), keyed
by their source, the compiler, its version and the flags: compiling the same function again,
in this process or a later one, loads the library built before. They are built, and loaded
from, a folder of the temporary directory that only the current user may write
(`jitc-c-<uid>`).
"""

from __future__ import annotations

import _ctypes
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path

from jitc import diskcache

COMPILERS = ("cc", "gcc", "clang")
# Strict C99; no contraction of a*b+c into fma (results must not depend on the target's FMA);
# math functions may skip setting errno (the code never reads it), which lets the compiler
# treat them as pure. -O3 with the host's vector instructions: the loops vectorize 16 lanes
# wide where -O2 and baseline SSE2 gave 4 (a 2-layer GPT-2 forward 2.6x faster), with the same
# results (no contraction, no reassociation, the same libm calls). The library is built for
# this host only: the cache key names its CPU.
FLAGS = ("-std=c99", "-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=off",
         "-fno-math-errno")
# GCC only, speed only: a tiled matrix product keeps its sums in registers across the
# contracting loop (tiled_dot.py), which GCC's loop interchange would otherwise move inward
# for some shapes (a 64x3072 by 3072x768 product: 4x slower, the sums in memory). The kernels'
# loops already run in memory order.
GCC_FLAGS = ("-fno-loop-interchange",)
LIBRARIES = ("-lm",)
NAMESPACE = "c"


class CompileError(RuntimeError):
    """The C compiler rejected generated code (a bug in the C backend)."""


@functools.cache
def find_compiler() -> str | None:
    """The first of cc, gcc and clang on PATH, or None."""
    for name in COMPILERS:
        path = shutil.which(name)
        if path is not None:
            return path
    return None


@functools.cache
def compiler_identity(compiler: str) -> str:
    """The compiler's version line: part of the cache key, so an upgrade rebuilds."""
    try:
        result = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                timeout=30)
        return result.stdout.splitlines()[0] if result.stdout else compiler
    except (OSError, subprocess.SubprocessError):
        return compiler


@functools.cache
def build_dir() -> Path:
    """Where sources are compiled and libraries loaded from: a folder of the temporary
    directory that only the current user may write."""
    base = Path(tempfile.gettempdir()) / f"jitc-c-{os.getuid() if hasattr(os, 'getuid') else 0}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        # Never load libraries from a folder someone else could have written.
        if hasattr(os, "getuid") and base.stat().st_uid != os.getuid():
            raise PermissionError(base)
        return base
    except OSError:
        return Path(tempfile.mkdtemp(prefix="jitc-c-"))


def flags(compiler: str) -> tuple[str, ...]:
    """FLAGS, and GCC_FLAGS unless the compiler is clang (whose version line names it)."""
    return FLAGS if "clang" in compiler_identity(compiler).lower() else FLAGS + GCC_FLAGS


def command(compiler: str, source: Path, output: Path) -> list[str]:
    return [compiler, *flags(compiler), "-o", str(output), str(source), *LIBRARIES]


@functools.cache
def host_identity() -> str:
    """The CPU the libraries are built for (-march=native): its model and feature flags."""
    try:
        with open("/proc/cpuinfo") as info:
            lines = [line for line in info if line.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return f"{platform.machine()} {platform.processor()}"


def cache_key(source: str, compiler: str) -> str:
    """What the library depends on: the compiler, its version, the flags, the host CPU and
    the source."""
    return "\0".join([compiler, compiler_identity(compiler), *flags(compiler), *LIBRARIES,
                      host_identity(), source])


def compile_library(source: str, compiler: str) -> bytes:
    """The shared library built from `source`, as bytes."""
    # Under private names: concurrent builds (threads, processes) never share a file.
    private = f"{digest(source)[:16]}.{os.getpid()}.{threading.get_ident()}"
    folder = build_dir()
    source_path = folder / f"{private}.c"
    source_path.write_text(source)
    output = folder / f"{private}.so"
    try:
        result = subprocess.run(command(compiler, source_path, output), capture_output=True,
                                text=True)
        if result.returncode != 0:
            # The source stays, for the error message to point at.
            raise CompileError(f"{Path(compiler).name} failed on {source_path}:\n"
                               f"{result.stderr}")
        source_path.unlink()
        return output.read_bytes()
    finally:
        output.unlink(missing_ok=True)


# The libraries loaded now, by key: one mapping per library while anything uses it.
_LOADED: weakref.WeakValueDictionary[str, Library] = weakref.WeakValueDictionary()
_LOADED_LOCK = threading.Lock()


def library(source: str, compiler: str) -> Library:
    """`source` compiled and loaded: from this process's libraries, from the persistent
    cache (jitc/diskcache.py; verified before loading), or built now and stored there."""
    key = cache_key(source, compiler)
    with _LOADED_LOCK:
        loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    entry = diskcache.get(NAMESPACE, key)
    if entry is not None and len(entry.blobs) == 1:
        data = entry.blobs[0]
    else:
        data = compile_library(source, compiler)
        diskcache.put(NAMESPACE, key, {}, [data])
    loaded = _load_bytes(data)
    with _LOADED_LOCK:
        return _LOADED.setdefault(key, loaded)


class Library(ctypes.CDLL):
    """A loaded library, unloaded when the last object using it lets go.

    ctypes never unloads a library; every compiled signature loaded one, so a process that
    compiled many shapes kept them all mapped (~20 KiB each) after they were dropped. Whatever
    may still run the code holds this object: the executable, each function pointer taken
    from it (ctypes keeps the library in the pointer) and each C dispatcher (its owner).
    """

    def __del__(self) -> None:
        # At interpreter exit modules may already be torn down; the process unmaps it anyway.
        if not sys.is_finalizing():
            _ctypes.dlclose(self._handle)


def _load_bytes(data: bytes) -> Library:
    """dlopen wants a file: these checked bytes go to a private one, removed once mapped."""
    fd, path = tempfile.mkstemp(dir=build_dir(), suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return Library(path)
    finally:
        os.unlink(path)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


__all__ = ["CompileError", "Library", "build_dir", "cache_key", "command", "compile_library",
           "find_compiler", "library"]
