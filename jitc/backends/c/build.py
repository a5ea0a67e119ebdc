"""Building C source into a shared library with the system C compiler, and loading it.

Libraries are cached by the hash of their source, the compiler and its flags, in a folder of
the temporary directory that only the current user may write (`jitc-c-<uid>`): compiling the
same function again, in this process or a later one, loads the library built before.
"""

from __future__ import annotations

import _ctypes
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

COMPILERS = ("cc", "gcc", "clang")
# Strict C99; no contraction of a*b+c into fma (results must not depend on the target's FMA);
# math functions may skip setting errno (the code never reads it), which lets the compiler
# treat them as pure.
FLAGS = ("-std=c99", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno")
LIBRARIES = ("-lm",)
# Libraries the cache keeps (sources change with every edit of the traced code: its line
# numbers are in the comments).
MAX_LIBRARIES = 4096


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
def cache_dir() -> Path:
    base = Path(tempfile.gettempdir()) / f"jitc-c-{os.getuid() if hasattr(os, 'getuid') else 0}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        # Never load libraries from a folder someone else could have written.
        if hasattr(os, "getuid") and base.stat().st_uid != os.getuid():
            raise PermissionError(base)
        return base
    except OSError:
        return Path(tempfile.mkdtemp(prefix="jitc-c-"))


def command(compiler: str, source: Path, output: Path) -> list[str]:
    return [compiler, *FLAGS, "-o", str(output), str(source), *LIBRARIES]


def build(source: str, compiler: str) -> Path:
    """The shared library of `source`, compiled now or found in the cache."""
    key = hashlib.sha256("\0".join([compiler_identity(compiler), *FLAGS, *LIBRARIES,
                                    source]).encode()).hexdigest()[:32]
    folder = cache_dir()
    library = folder / f"{key}.so"
    if library.exists():
        return library
    # Write and build under private names, then rename: a concurrent build of the same
    # source (another process) never reads a half-written file or loads a half-written
    # library.
    private = f"{key}.{os.getpid()}.{threading.get_ident()}"
    source_path = folder / f"{private}.c"
    source_path.write_text(source)
    partial = folder / f"{private}.so"
    result = subprocess.run(command(compiler, source_path, partial), capture_output=True,
                            text=True)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise CompileError(f"{Path(compiler).name} failed on {source_path}:\n{result.stderr}")
    os.replace(source_path, folder / f"{key}.c")
    os.replace(partial, library)
    prune(folder)
    return library


def prune(folder: Path, keep: int | None = None) -> None:
    """Keep the cache from growing without bound: past `MAX_LIBRARIES` libraries, delete the
    least recently built quarter (a process that has one loaded keeps its mapping)."""
    limit = MAX_LIBRARIES if keep is None else keep
    libraries = [entry for entry in os.scandir(folder)
                 if entry.name.endswith(".so") and entry.name.count(".") == 1]
    if len(libraries) <= limit:
        return
    libraries.sort(key=lambda entry: entry.stat().st_mtime)
    for entry in libraries[:len(libraries) - limit * 3 // 4]:
        for path in (Path(entry.path), Path(entry.path).with_suffix(".c")):
            path.unlink(missing_ok=True)


class Library(ctypes.CDLL):
    """A loaded library, unloaded when the last object using it lets go.

    ctypes never unloads a library; every compiled signature loaded one, so a process that
    compiled many shapes kept them all mapped (~20 KiB each) after they were dropped. Whatever
    may still run the code holds this object: the executable, each function pointer taken
    from it (ctypes keeps the library in the pointer) and each C dispatcher (its owner).
    Loading one path twice gives two handles of one mapping, which stays until both go.
    """

    def __del__(self) -> None:
        # At interpreter exit modules may already be torn down; the process unmaps it anyway.
        if not sys.is_finalizing():
            _ctypes.dlclose(self._handle)


def load(library: Path) -> Library:
    return Library(str(library))


__all__ = ["CompileError", "Library", "build", "cache_dir", "command", "find_compiler", "load",
           "prune"]
