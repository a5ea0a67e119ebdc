"""Compilation options: one frozen object, part of every cache key.

Environment variables are read here and nowhere else:
- `JITC_DUMP_DIR`: write the IR after every pass of every compilation to this folder
  (one subfolder per compiled function).
- `JITC_BACKEND`: the default backend when `jitc.jit` is not given one.
- `JITC_VERIFY`: when set to 1, verify the IR after every pass (the tests set it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

DEFAULT_BACKEND = "interpreter"


@dataclass(frozen=True)
class Options:
    backend: str = field(default_factory=lambda: os.environ.get("JITC_BACKEND",
                                                                DEFAULT_BACKEND))
    verify: bool = field(default_factory=lambda: os.environ.get("JITC_VERIFY") == "1")
    dump_dir: str | None = field(default_factory=lambda: os.environ.get("JITC_DUMP_DIR") or None)
    disabled_passes: frozenset[str] = frozenset()

    def with_(self, **changes: object) -> Options:
        return replace(self, **changes)  # type: ignore[arg-type]
