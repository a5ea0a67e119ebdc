"""The backends the op table runs on.

A backend joins every op case (and every model and numpy-surface test) by being appended to
`BACKENDS` in tests/jitcheck.py. A name that is not registered
fails (a typo must not pass silently); a registered backend that cannot run on this machine is
skipped with its reason. A backend says it cannot run by raising ImportError, OSError or
RuntimeError from its factory, or by having an `unavailable_reason()` method that returns a
reason (None when it can run).
"""

from __future__ import annotations

import pytest
from jitcheck import BACKENDS

from jitc.backends import get_backend

__all__ = ["BACKENDS", "require", "unavailable_reason"]


def unavailable_reason(name: str) -> str | None:
    """Why backend `name` cannot run here, or None when it can."""
    try:
        backend = get_backend(name)
    except (ImportError, OSError, RuntimeError) as exc:
        return f"backend {name!r} is unavailable: {exc}"
    check = getattr(backend, "unavailable_reason", None)
    reason = check() if callable(check) else None
    return f"backend {name!r} is unavailable: {reason}" if reason else None


def require(name: str) -> str:
    """Skip the calling test when backend `name` cannot run here; return the name."""
    reason = unavailable_reason(name)
    if reason is not None:
        pytest.skip(reason)
    return name
