"""Memory comes back: compiling many signatures and dropping them does not grow the process.

Each test compiles rounds of new shapes and clears the cache between rounds. The first round
warms up (LLVM's global state, thread pools, the allocator's arenas); the resident size then
must stay flat. A leak of the size these tests guard against (a pass pipeline, ~70 KiB per
optimized module, several modules per compile) shows as megabytes over a few rounds; the
bound leaves room for the allocator's noise.
"""

from __future__ import annotations

import gc
import itertools
import os

import numpy as np
import pytest

import jitc
from jitc.backends.c import build

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
# Resident growth allowed per compile after warm-up (a leaking pipeline grew ~200 KiB).
BOUND_BYTES = 48 * 1024


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_BYTES


def _body(x):
    return np.tanh(x * 2.0 + 1.0).sum(axis=0)


def compile_rounds(backend: str, rounds: int, per_round: int, first_rows: int = 1,
                   after_round=None) -> list[int]:
    """Resident bytes after each round of `per_round` new signatures, then a clear."""
    f = jitc.jit(_body, backend=backend)
    rows = itertools.count(first_rows)
    sizes = []
    for _ in range(rounds):
        for _ in range(per_round):
            x = np.linspace(-1, 1, 3 * next(rows)).reshape(-1, 3)
            np.testing.assert_allclose(f(x), _body(x), rtol=1e-12)
        f.clear_cache()
        gc.collect()
        sizes.append(resident_bytes())
        if after_round is not None:
            after_round()
    return sizes


@pytest.mark.parametrize("backend", ["cpu", "cuda-sim", "c"])
def test_compiling_and_clearing_does_not_grow_the_process(backend: str) -> None:
    if backend == "c" and build.find_compiler() is None:
        pytest.skip("no C compiler on PATH")
    per_round = 12
    sizes = compile_rounds(backend, rounds=4, per_round=per_round)
    # Rounds 1 and 2 are warm-up; the last two rounds' growth is what a leak adds.
    growth = sizes[-1] - sizes[1]
    assert growth < 2 * per_round * BOUND_BYTES, \
        f"{backend}: {growth / 1024:.0f} KiB over {2 * per_round} compiles"


def _mapped_c_libraries() -> int:
    # Loaded from private files removed once mapped: the maps name them "... (deleted)".
    folder = str(build.build_dir())
    with open("/proc/self/maps") as maps:
        return len({line.split(None, 5)[-1].strip() for line in maps if folder in line})


def test_c_libraries_are_unloaded_when_their_functions_go() -> None:
    if build.find_compiler() is None:
        pytest.skip("no C compiler on PATH")
    mapped = []
    # Shapes no other test compiles: their libraries are not loaded yet.
    compile_rounds("c", rounds=3, per_round=6, first_rows=1000,
                   after_round=lambda: mapped.append(_mapped_c_libraries()))
    assert mapped[-1] <= mapped[0], mapped


def test_a_library_stays_loaded_while_a_function_uses_it() -> None:
    if build.find_compiler() is None:
        pytest.skip("no C compiler on PATH")
    f = jitc.jit(_body, backend="c")
    x = np.arange(12.0).reshape(4, 3)
    g = jitc.jit(_body, backend="c")
    np.testing.assert_array_equal(f(x), _body(x))
    np.testing.assert_array_equal(g(x), _body(x))  # the same library, loaded twice
    f.clear_cache()
    gc.collect()
    np.testing.assert_array_equal(g(x), _body(x))
