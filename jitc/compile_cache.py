"""Compiled functions kept on disk, keyed by their traced IR (docs/cache.md).

`Lowered.compile` asks here before it optimizes: a hit loads the machine code a previous
process compiled for the same program and skips the optimizer and the backend altogether. The
key is the traced module's full text (every instruction, attribute, constant byte and source
location), the options that change code, the backend and what its code depends on
(`backend.cache_identity`: for the CPU the LLVM version and the host CPU with its features),
and jitc's own version and source hash. Keying by the traced IR rather than the optimized IR
is what lets a hit skip the optimizer (0.2 s of a GPT-2 forward's 5 s compile); the pipeline is
a pure function of the IR, the options and jitc's source, all of which are in the key.

A backend takes part by having `cache_identity(options)`, `save(executable)` and
`load(meta, blobs, rebuild)`; the CPU backend does. Others compile as before (the C backend
keeps its shared libraries in the same store, keyed by their C source: c/build.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from jitc import diskcache
from jitc.ir.core import Module
from jitc.ir.printer import print_module
from jitc.options import Options

NAMESPACE = "cpu"
# Options that change nothing in the compiled code: checking the IR, dumping it, and whether
# to use this cache.
NOT_IN_KEY = frozenset({"verify", "dump_dir", "disk_cache"})


def wanted(options: Options) -> bool:
    """Whether a compile with these options uses the persistent cache. A compile that dumps
    the IR after every pass (`dump_dir`) always runs the pipeline."""
    return options.disk_cache and options.dump_dir is None and diskcache.root() is not None


def _option_text(options: Options) -> str:
    parts = []
    for field in fields(Options):
        if field.name in NOT_IN_KEY:
            continue
        value = getattr(options, field.name)
        if isinstance(value, frozenset):  # its iteration order is not the same in every process
            value = sorted(value)
        parts.append(f"{field.name}={value!r}")
    return " ".join(parts)


def key(module: Module, options: Options, backend: Any) -> str | None:
    """The key of compiling traced `module` with `options` on `backend`, or None when this
    compile does not use the cache."""
    identity = getattr(backend, "cache_identity", None)
    if identity is None or not wanted(options):
        return None
    return "\n".join([diskcache.code_identity(), f"backend {backend.name}", identity(options),
                      _option_text(options), print_module(module)])


def load(cache_key: str | None, backend: Any, rebuild: Callable[[], Any]) -> Any | None:
    """The executable stored under `cache_key`, or None. `rebuild()` compiles it again, for
    listings the stored machine code cannot give."""
    if cache_key is None:
        return None
    entry = diskcache.get(NAMESPACE, cache_key)
    if entry is None:
        return None
    try:
        return backend.load(entry.meta, entry.blobs, rebuild)
    except (KeyError, ValueError, TypeError, RuntimeError):
        # Verified bytes that still do not load (written by a jitc whose format differed
        # without a change of key): compile again, which overwrites it.
        return None


def store(cache_key: str | None, backend: Any, executable: Any) -> None:
    if cache_key is None:
        return
    saved = backend.save(executable)
    if saved is not None:
        diskcache.put(NAMESPACE, cache_key, *saved)


__all__ = ["key", "load", "store", "wanted"]
