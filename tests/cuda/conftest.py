"""The CUDA tests' fixtures."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
from fakedriver import FakeDriver

from jitc.backends.cuda import runtime


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDriver]:
    fake = FakeDriver()
    package = types.ModuleType("pycuda")
    package.driver = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", fake)
    runtime.get_runtime.cache_clear()
    yield fake
    runtime.get_runtime.cache_clear()
