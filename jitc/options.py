"""Compilation options: one frozen object, part of every cache key.

Environment variables are read here and nowhere else:
- `JITC_DUMP_DIR`: write the IR after every pass of every compilation to this folder
  (one subfolder per compiled function).
- `JITC_BACKEND`: the default backend when `jitc.jit` is not given one.
- `JITC_NUM_THREADS`: threads the CPU and C backends may use (default: `OMP_NUM_THREADS` when
  that is set, else the CPUs this process may run on).
- `OMP_NUM_THREADS`: read only when `JITC_NUM_THREADS` is not set. Schedulers that run several
  processes or threads per machine set it to say how many threads each may use (Dask's nanny
  sets it to 1 in every worker process, docs/scale-out.md); jitc's pool honours it like
  OpenMP's and BLAS's pools do, instead of multiplying them.
- `JITC_COMPILE_THREADS`: threads the CPU backend compiles LLVM modules on (default: the
  CPUs this process may run on, at most 4); not part of the cache key, the machine code is the same.
- `JITC_CACHE_DIR`: the persistent compile cache (jitc/diskcache.py, docs/cache.md): compiled
  functions, GEMM routines and C libraries kept on disk for later processes (default
  $XDG_CACHE_HOME/jitc or ~/.cache/jitc; "" or "off" turns it off; so does
  `jit(..., disk_cache=False)` for one function).
- `JITC_CACHE_MAX_MB`: the bound on the persistent cache's total size, in MiB (default 1024);
  past it the least recently used entries are deleted.
- `JITC_RESULT_CACHE_MB`: read by the C runtime at import: how much freed result memory it
  keeps for reuse (default 256; 0 turns reuse off).
- `JITC_VERIFY`: when set to 1, verify the IR after every pass (the tests set it).
- `JITC_PROFILE`: profile the whole process (`jitc.profile`, docs/profiling.md) and write the
  Chrome trace-event file to this path at exit (`{pid}` in it: the process id).
- `JITC_LOG`: `info` prints the progress of long compiles to stderr even when it is not a
  terminal; `off` never prints it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

DEFAULT_BACKEND = "cpu"


@dataclass(frozen=True)
class Options:
    backend: str = field(default_factory=lambda: os.environ.get("JITC_BACKEND",
                                                                DEFAULT_BACKEND))
    verify: bool = field(default_factory=lambda: os.environ.get("JITC_VERIFY") == "1")
    dump_dir: str | None = field(default_factory=lambda: os.environ.get("JITC_DUMP_DIR") or None)
    disabled_passes: frozenset[str] = frozenset()
    # Argument positions (flattened array arguments) whose buffers results may reuse.
    donated: frozenset[int] = frozenset()
    # Argument positions the last len(writebacks) results are copied back into after a call
    # (arguments the function writes in place): a backend may compute such a result in its
    # argument's buffer, writing only what changed.
    writebacks: tuple[int, ...] = ()
    num_threads: int = field(default_factory=lambda: default_num_threads())
    # Whether compiles look in and write to the persistent cache (where: cache_dir()).
    disk_cache: bool = True

    def with_(self, **changes: object) -> Options:
        return replace(self, **changes)  # type: ignore[arg-type]


def compile_threads() -> int:
    """JITC_COMPILE_THREADS, default the CPUs this process may run on, up to 4: a function
    rarely has enough independent kernels to keep more threads busy."""
    configured = os.environ.get("JITC_COMPILE_THREADS")
    if configured:
        return max(1, int(configured))
    return min(usable_cpus(), 4)


def cache_dir() -> str | None:
    """JITC_CACHE_DIR, else $XDG_CACHE_HOME/jitc or ~/.cache/jitc; None when it is set to ""
    or "off"."""
    configured = os.environ.get("JITC_CACHE_DIR")
    if configured is not None:
        return None if configured in ("", "off") else configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jitc")


DEFAULT_CACHE_MAX_MB = 1024


def cache_max_bytes() -> int:
    """JITC_CACHE_MAX_MB (default 1024) in bytes: the persistent cache's size bound."""
    configured = os.environ.get("JITC_CACHE_MAX_MB")
    megabytes = float(configured) if configured else DEFAULT_CACHE_MAX_MB
    return max(0, int(megabytes * (1 << 20)))


def default_num_threads() -> int:
    """JITC_NUM_THREADS, else OMP_NUM_THREADS (its first level, as in "4,2"), else the CPUs
    this process may run on."""
    configured = os.environ.get("JITC_NUM_THREADS")
    if configured:
        return max(1, int(configured))
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp)
    return usable_cpus()


def profile_path() -> str | None:
    """JITC_PROFILE: where a whole-process profile goes (None: no profile)."""
    return os.environ.get("JITC_PROFILE") or None


def log_level() -> str:
    """JITC_LOG ("info", "off", or "" for the default: progress only on a terminal)."""
    return os.environ.get("JITC_LOG", "").strip().lower()


def usable_cpus() -> int:
    """The CPUs this process may run on (taskset, cgroups' cpusets), not all the machine has:
    more threads than that only queue behind each other."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no sched_getaffinity on this platform
        return os.cpu_count() or 1
