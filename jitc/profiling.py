"""`jitc.profile(path)`: a Chrome trace-event file of what the compiler and compiled code did.

    with jitc.profile("trace.json"):
        f(x)        # traced, optimized, compiled, called
        f(x)        # called again

The file opens in Perfetto (ui.perfetto.dev) and chrome://tracing. It holds complete events
("ph": "X") that nest on each thread:

- `call f`: each call of a jitted function, with its signature, whether the signature was
  already compiled (`signature_cache`), the path it took, and the kernels it runs with their
  cost-model figures (bytes, flops; jitc/ir/analysis.py `kernel_costs`).
- inside it, on the CPU backend, a span per kernel with those figures and the achieved GB/s and
  GFLOP/s, and a span per chunk of a kernel split over the thread pool, on the track of the
  thread that ran it. A profile calls a variant of each compiled function whose entry records
  these times (`kernels_timed`: compiled once per signature, shown as `compile f (kernels
  timed)`; runtime/jitc_profile.c); other backends' calls have no kernel spans.
- `compile f`: trace, reroll, the optimizer (one span per pass, fixed points holding their
  rounds' passes) and codegen; on the CPU backend codegen holds `lower to LLVM IR` and one
  `LLVM module` span per module compiled (on the compile threads) and `link`.
- instant events for the persistent cache (`disk cache hit` / `miss`).

`JITC_PROFILE=path` in the environment profiles the whole process and writes the file at
exit; `{pid}` in the path becomes the process id, so that the worker processes of a
multiprocessing pool (which import jitc afresh and inherit the variable) write files of their
own instead of each replacing the same one.

Nothing here runs when not profiling: compiled code is called through the same C fast path
as ever, into machine code without any clock reads; a profile, while it lasts, puts a timing
wrapper in front of the timed variant's fast path.

`profile(path, chart="kernels.svg")` also draws each kernel's total time as a bar chart
(jitc/plots.py; matplotlib, the `plot` extra).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from jitc.ir import ops
from jitc.ir.symbolic import is_static
from jitc.options import profile_path

if TYPE_CHECKING:
    from jitc.api import Compiled, Jitted


class Profiler:
    """The events of one profile, from any thread, written as one JSON file by `write`."""

    def __init__(self, path: str | os.PathLike[str],
                 chart: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path)
        self.chart = os.fspath(chart) if chart is not None else None
        self.events: list[dict[str, Any]] = []
        self._records: list[np.ndarray] = []  # kernel records (runtime/jitc_profile.c)
        self._lock = threading.Lock()
        self._threads: dict[int, str] = {}
        self._origin = time.perf_counter_ns()
        from jitc.backends.cpu.runtime import profile_dropped
        self._dropped_before = profile_dropped()

    def _stamp(self, at_ns: int) -> float:
        return (at_ns - self._origin) / 1000  # trace events count microseconds

    def complete(self, name: str, category: str, start_ns: int, end_ns: int,
                 args: dict[str, Any] | None = None) -> None:
        """One span, from `start_ns` to `end_ns` (time.perf_counter_ns) on this thread."""
        event = {"name": name, "cat": category, "ph": "X", "ts": self._stamp(start_ns),
                 "dur": (end_ns - start_ns) / 1000, "pid": os.getpid(), "tid": self._tid()}
        if args:
            event["args"] = args
        with self._lock:
            self.events.append(event)

    def instant(self, name: str, category: str, args: dict[str, Any] | None = None) -> None:
        event = {"name": name, "cat": category, "ph": "i", "s": "t",
                 "ts": self._stamp(time.perf_counter_ns()), "pid": os.getpid(),
                 "tid": self._tid()}
        if args:
            event["args"] = args
        with self._lock:
            self.events.append(event)

    def _tid(self) -> int:
        tid = threading.get_native_id()
        if tid not in self._threads:
            self._threads[tid] = threading.current_thread().name
        return tid

    def collect_kernels(self) -> None:
        """Take the kernel records the timed entries left (on any thread); they become spans
        when the trace is written (`trace`), so that a call pays only for the copy."""
        records = _drain()
        if len(records):
            with self._lock:
                self._records.append(records)

    def _kernel_events(self, records: np.ndarray) -> list[dict[str, Any]]:
        events = []
        pid = os.getpid()
        for code, kernel, chunk, begin, end, start_ns, end_ns, tid in records.tolist():
            described = _timed_kernels.get(code)
            if described is None or kernel >= len(described) or start_ns < self._origin:
                continue  # (left by a call that ran before this profile began)
            name, figures = described[kernel]
            seconds = max(end_ns - start_ns, 1) * 1e-9
            if chunk:
                name, args = f"{name} [{begin}:{end}]", {"kernel": figures["kernel"],
                                                          "rows": end - begin}
            elif isinstance(figures["bytes"], str) or isinstance(figures["flops"], str):
                args = figures  # a symbolic compilation's figures are expressions
            else:
                args = {**figures, "GB/s": round(figures["bytes"] / seconds * 1e-9, 3),
                        "GFLOP/s": round(figures["flops"] / seconds * 1e-9, 3)}
            events.append({"name": name, "cat": "chunk" if chunk else "kernel", "ph": "X",
                           "ts": self._stamp(start_ns), "dur": (end_ns - start_ns) / 1000,
                           "pid": pid, "tid": tid, "args": args})
        return events

    def trace(self) -> dict[str, Any]:
        """The trace-event JSON object: the events, then each thread's name."""
        self.collect_kernels()
        with self._lock:
            events = list(self.events)
            threads = dict(self._threads)
            records = list(self._records)
        for part in records:
            kernels = self._kernel_events(part)
            events += kernels
            for event in kernels:  # threads Python never ran: the pool's workers
                threads.setdefault(event["tid"], "jitc pool worker")
        names = [{"name": "thread_name", "ph": "M", "pid": os.getpid(), "tid": tid,
                  "args": {"name": name}} for tid, name in threads.items()]
        from jitc.backends.cpu.runtime import profile_dropped
        # A call that ran more than a log holds (4096 kernels and chunks on one thread) loses
        # the rest of its kernel spans: the file says how many.
        dropped = profile_dropped() - self._dropped_before
        return {"traceEvents": events + names, "displayTimeUnit": "ms",
                "otherData": {"dropped_kernel_records": dropped}}

    def write(self) -> None:
        folder = os.path.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        trace = self.trace()
        with open(self.path, "w") as f:
            json.dump(trace, f, default=str)  # symbolic extents (Dim) as their text
        if self.chart is not None:
            from jitc import plots
            plots.kernel_chart(trace, self.chart)


class Span:
    """A span being timed; `note(key=value)` adds arguments known only inside it."""

    def __init__(self, profiler: Profiler, name: str, category: str,
                 args: dict[str, Any]) -> None:
        self.profiler, self.name, self.category, self.args = profiler, name, category, args

    def note(self, **args: Any) -> None:
        self.args.update(args)

    def __enter__(self) -> Span:
        self.start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        self.profiler.complete(self.name, self.category, self.start, time.perf_counter_ns(),
                               self.args)


class _NoSpan:
    """What `span` gives when not profiling: nothing timed, nothing kept."""

    def note(self, **args: Any) -> None:
        pass

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


_NO_SPAN = _NoSpan()
_active: Profiler | None = None
_active_lock = threading.Lock()
# Every jitted function, so that a profile's start and end can drop their fast paths: the
# next call of each installs them again, timed or not (Jitted._remember_form).
_jitted: weakref.WeakSet[Jitted] = weakref.WeakSet()


def active() -> Profiler | None:
    """The profile in progress, or None."""
    return _active


def span(name: str, category: str, **args: Any) -> Span | _NoSpan:
    """`with span("trace", "compile", function="f") as s:` times its body when profiling."""
    profiler = _active
    if profiler is None:
        return _NO_SPAN
    return Span(profiler, name, category, args)


def instant(name: str, category: str, **args: Any) -> None:
    profiler = _active
    if profiler is not None:
        profiler.instant(name, category, args)


def register(jitted: Jitted) -> None:
    _jitted.add(jitted)


def _forget_fast_paths() -> None:
    for jitted in list(_jitted):
        jitted.forget_fast_paths()


def start(path: str | os.PathLike[str],
          chart: str | os.PathLike[str] | None = None) -> Profiler:
    """Begin a profile (one at a time per process); `stop` ends it and writes the file (and
    the kernel chart, when asked for one)."""
    global _active
    if chart is not None:
        from jitc import plots
        plots.require_matplotlib("jitc.profile(chart=...)")
    with _active_lock:
        if _active is not None:
            raise RuntimeError(f"jitc is already profiling to {_active.path!r}; one profile "
                               "at a time (end it first, or unset JITC_PROFILE)")
        _active = Profiler(path, chart)
    _forget_fast_paths()
    return _active


def stop() -> Profiler | None:
    """End the profile in progress and write its file; returns it (None when there was none)."""
    global _active
    with _active_lock:
        profiler, _active = _active, None
    if profiler is None:
        return None
    _forget_fast_paths()
    profiler.write()
    return profiler


@contextlib.contextmanager
def profile(path: str | os.PathLike[str],
            chart: str | os.PathLike[str] | None = None) -> Iterator[Profiler]:
    """Profile the compiles and calls of jitted functions inside the block; the trace-event
    file is written to `path` at its end (see this module's docstring), and with `chart` a bar
    chart of each kernel's time (PNG, SVG or PDF by its suffix; needs matplotlib)."""
    profiler = start(path, chart)
    try:
        yield profiler
    finally:
        if _active is profiler:
            stop()


def start_from_environment() -> None:
    """JITC_PROFILE=path: profile the whole process, write the file at exit."""
    path = profile_path()
    if path and _active is None:
        start(path.replace("{pid}", str(os.getpid())))
        atexit.register(stop)


# -- calls -------------------------------------------------------------------------------

def _call_args(compiled: Compiled, signature_cache: str, path: str) -> dict[str, Any]:
    return {"signature": ", ".join(str(s) for s in compiled.lowered.specs),
            "signature_cache": signature_cache, "path": path,
            "backend": compiled.lowered.options.backend, "kernels": compiled.kernel_costs}


def timed(fast: Callable, compiled: Compiled, miss: object, path: str) -> Callable:
    """`fast` (a fast path: it returns `miss` for a call not of its form) with each call it
    serves recorded as a `call` span."""
    name = f"call {compiled.lowered.name}"
    args = _call_args(compiled, "hit", path)  # shared by its events: the file repeats it

    def timed_fast(*call: Any) -> Any:
        profiler = _active
        start_ns = time.perf_counter_ns()
        result = fast(*call)
        end_ns = time.perf_counter_ns()
        if profiler is not None and result is not miss:
            profiler.complete(name, "call", start_ns, end_ns, args)
            profiler.collect_kernels()
        return result
    return timed_fast


class _CallSpan(Span):
    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.profiler.collect_kernels()


def call_span(compiled: Compiled, signature_cache: str) -> Span | _NoSpan:
    """The span of a call that took the general path (jitc.api)."""
    profiler = _active
    if profiler is None:
        return _NO_SPAN
    return _CallSpan(profiler, f"call {compiled.lowered.name}", "call",
                     _call_args(compiled, signature_cache, "general"))


# -- kernel times (runtime/jitc_profile.c) -------------------------------------------------

# Per timed executable's number (its entry passes it to each record): each kernel's span
# name and cost figures, by the kernel's position in the entry.
_timed_kernels: dict[int, list[tuple[str, dict[str, Any]]]] = {}
_timed_numbers = itertools.count(1)
_timed_lock = threading.Lock()
_DRAIN_RECORDS = 1024
_RECORD_FIELDS = 8  # code, kernel, chunk, begin, end, start_ns, end_ns, tid
_drain_buffer = np.empty((_DRAIN_RECORDS, _RECORD_FIELDS), np.int64)
_drain_address = _drain_buffer.ctypes.data
_drain_lock = threading.Lock()
_drain_function: Callable[[int, int], int] | None = None


def kernels_timed(compiled: Compiled) -> Compiled:
    """The variant of `compiled` that records each kernel's time, compiled on first use and
    kept with it; `compiled` itself where the backend cannot time kernels."""
    timed = compiled.__dict__.get("_kernels_timed")
    if timed is not None:
        return timed
    from jitc.backends import complex_pairs, get_backend
    from jitc.backends.cpu.runtime import register_runtime_symbols
    low = compiled.lowered
    backend = get_backend(low.options.backend)
    if not getattr(backend, "times_kernels", False) or not register_runtime_symbols():
        compiled.__dict__["_kernels_timed"] = compiled
        return compiled
    with _timed_lock:
        timed = compiled.__dict__.get("_kernels_timed")
        if timed is not None:
            return timed
        number = next(_timed_numbers)
        module = compiled.optimized_module
        with span(f"compile {low.name} (kernels timed)", "compile", backend=backend.name):
            executable = backend.compile(module, low.options, timing=number)
        _timed_kernels[number] = _kernel_descriptions(compiled, executable.entry.kernel_positions)
        # Complex arguments and results cross as float pairs, as in `Lowered.compile`.
        executable = complex_pairs.wrap(executable, low.complex_boundary)
        timed = type(compiled)(low, module, executable, compiled.stats)
        compiled.__dict__["_kernels_timed"] = timed
    return timed


def _kernel_descriptions(compiled: Compiled, positions: list[int | None]
                         ) -> list[tuple[str, dict[str, Any]]]:
    """Each machine-code kernel's span name and figures: those of the instruction it computes
    (analysis.kernel_costs) with its operand and result types, or a copy's (into a donated
    result)."""
    body = compiled.optimized_module.entry.body
    kernels = [n for n, inst in enumerate(body) if inst.op not in (ops.PARAMETER, ops.CONSTANT)]
    costs = dict(zip(kernels, compiled.kernel_costs, strict=True))
    function = compiled.lowered.name
    described = []
    copies = itertools.count()
    for position in positions:
        if position is None:
            figures = {"kernel": f"copy{next(copies)}", "op": "copy", "source": "", "flops": 0,
                       "transcendentals": 0, "bytes": 0}
        else:
            inst = body[position]
            types = (", ".join(str(v.type) for v in inst.operands) + " -> "
                     + ", ".join(str(v.type) for v in inst.results))
            figures = {**costs[position], "shapes": types}
        figures["function"] = function
        # Figures of symbolic extents are expressions (`2*B*784`), as text.
        figures = {k: v if is_static(v) else str(v) for k, v in figures.items()}
        described.append((f"{figures['kernel']} {figures['op']}", figures))
    return described


def _drain() -> np.ndarray:
    """Every kernel record the timed entries left since the last drain, one row each."""
    global _drain_function
    if _drain_function is None:
        from jitc.backends.cpu.runtime import profile_drain
        _drain_function = profile_drain() or (lambda address, capacity: 0)
    drain = _drain_function
    rows = []
    with _drain_lock:  # one buffer, reused: a drain follows every profiled call
        while True:
            count = drain(_drain_address, _DRAIN_RECORDS)
            rows.append(_drain_buffer[:count].copy())
            if count < _DRAIN_RECORDS:
                return rows[0] if len(rows) == 1 else np.concatenate(rows)
