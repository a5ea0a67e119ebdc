"""Fixtures shared by the tests. Every compilation in the tests verifies the IR after each
pass (JITC_VERIFY), and the persistent compile cache is a fresh folder of this test session
(JITC_CACHE_DIR, inherited by the processes the tests start), never the user's own: programs
compiled twice in a session then exercise the cache's load path too."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable

import numpy as np
import pytest

from jitc.ir.core import Module
from jitc.ir.interpreter import interpret
from jitc.ir.types import TensorType

os.environ.setdefault("JITC_VERIFY", "1")
_SESSION_CACHE = tempfile.mkdtemp(prefix="jitc-test-cache-")
os.environ["JITC_CACHE_DIR"] = _SESSION_CACHE
atexit.register(shutil.rmtree, _SESSION_CACHE, ignore_errors=True)


def random_array(type_: TensorType, rng: np.random.Generator) -> np.ndarray:
    """Values that exercise each dtype (signs, zeros, fractions) without nan."""
    dtype = type_.dtype.numpy
    if type_.dtype.is_bool:
        return rng.random(type_.shape) < 0.5
    if type_.dtype.is_int:
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -100), min(int(info.max), 100)
        return rng.integers(lo, hi, type_.shape, endpoint=True).astype(dtype)
    return (rng.standard_normal(type_.shape) * 3).astype(dtype)


def random_arguments(module: Module, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [random_array(t, rng) for t in module.entry.parameter_types]


def _assert_same_results(before: Module, after: Module, seeds: int = 3) -> None:
    """Both modules compute bit-identical outputs on random arguments."""
    for seed in range(seeds):
        args = random_arguments(before, seed)
        expected, got = interpret(before, args), interpret(after, args)
        assert len(expected) == len(got)
        for e, g in zip(expected, got, strict=True):
            assert e.dtype == g.dtype and e.shape == g.shape
            np.testing.assert_array_equal(e, g)


@pytest.fixture
def assert_same_results() -> Callable[..., None]:
    return _assert_same_results


@pytest.fixture
def arguments() -> Callable[[Module, int], list[np.ndarray]]:
    return random_arguments


# The numpy-surface tests check how numpy calls trace into IR, which no backend changes: by
# default they run on the interpreter and cpu. The op table (tests/ops) runs every op case, and
# the fuzzers (tests/fuzz) random programs of every op, on c and cuda-sim too; so the numpy
# tests' c and cuda-sim runs are exhaustive repeats, kept under `-m slow`.
_SLOW_BACKENDS = {"c", "cuda-sim"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (item.nodeid.startswith("tests/numpy/")
                and params.get("backend") in _SLOW_BACKENDS):
            item.add_marker(pytest.mark.slow)


class _StaticExtentsInterpreter:
    """The interpreter posing as a backend whose kernels take static extents only (every
    built-in compiling backend takes run-time extents)."""

    name = "static-extents"

    def __init__(self) -> None:
        from jitc.backends.interpreter import InterpreterBackend
        self._inner = InterpreterBackend()
        self.passes = self._inner.passes
        self.compile = self._inner.compile


@pytest.fixture
def static_extents_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a registered backend without `symbolic_extents`, for this test only."""
    from jitc.backends import base
    monkeypatch.setitem(base._FACTORIES, _StaticExtentsInterpreter.name,
                        _StaticExtentsInterpreter)
    monkeypatch.delitem(base._INSTANCES, _StaticExtentsInterpreter.name, raising=False)
    return _StaticExtentsInterpreter.name
