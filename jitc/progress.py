"""Progress of long compiles on stderr.

A compile that runs past FIRST_REPORT_SECONDS prints where it is, then again every
REPORT_EVERY_SECONDS, and one line when it is done:

    jitc: compiling step(f32[64,784], f32[784,512]): 2.0 s, in pass simplification.cse
    jitc: compiled step in 3.4 s

It prints when stderr is a terminal, or always with JITC_LOG=info; JITC_LOG=off silences it.
A short compile prints nothing. The stages come from `stage()` calls on the compile path
(each optimizer pass, codegen); a timer thread does the printing, so nothing is added to
the compile but a thread-local write per stage.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator

from jitc.options import log_level

FIRST_REPORT_SECONDS = 2.0
REPORT_EVERY_SECONDS = 5.0

_local = threading.local()


def _wanted() -> bool:
    level = log_level()
    if level == "off":
        return False
    if level == "info":
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


class _Watch:
    def __init__(self, what: str) -> None:
        self.what = what
        self.stage = "tracing"
        self.start = time.perf_counter()
        self.reported = False
        self._lock = threading.Lock()
        self._done = False
        self._timer: threading.Timer | None = None
        self._schedule(FIRST_REPORT_SECONDS)

    def _schedule(self, delay: float) -> None:
        timer = threading.Timer(delay, self._report)
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _report(self) -> None:
        with self._lock:
            if self._done:
                return
            elapsed = time.perf_counter() - self.start
            _print(f"jitc: compiling {self.what}: {elapsed:.1f} s, in {self.stage}")
            self.reported = True
            self._schedule(REPORT_EVERY_SECONDS)

    def finish(self, name: str) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
            elapsed = time.perf_counter() - self.start
            if self.reported or elapsed >= FIRST_REPORT_SECONDS:
                _print(f"jitc: compiled {name} in {elapsed:.1f} s")


def _print(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def watch(name: str, signature: str) -> Iterator[None]:
    """Report on the compile of `name` for `signature` if it runs long (see the module
    docstring). Nested watches on one thread (a compile inside a jit call) report once."""
    if getattr(_local, "watch", None) is not None or not _wanted():
        yield
        return
    current = _Watch(f"{name}({signature})")
    _local.watch = current
    try:
        yield
    finally:
        _local.watch = None
        current.finish(name)


def stage(name: str) -> None:
    """The compile on this thread is now in `name` (a pass, `codegen`)."""
    current = getattr(_local, "watch", None)
    if current is not None:
        current.stage = name
