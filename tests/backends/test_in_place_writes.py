"""A written argument whose new value is a block update of the old one (`cache[pos] = k`,
`x[-1] = row`, `x[3] += v`) is computed in the argument's own buffer on the cpu and c
backends: the call stores the block and nothing else, where it used to build a whole new
array and copy it back (a row into a 4096x256 float32 cache: 2 ms, now about 1 us; numpy
0.3 us)."""

from __future__ import annotations

import numpy as np
import pytest

import jitc

RNG = np.random.default_rng(11)


def _same_as_numpy(fn, *args, backend: str = "cpu") -> None:
    want_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    want = fn(*want_args)
    got = jitc.jit(fn, backend=backend, disk_cache=False)(*got_args)
    for w, g in zip(want_args, got_args):
        if isinstance(w, np.ndarray):
            np.testing.assert_array_equal(g, w)
    if want is not None:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # float sums


def set_row(cache, k, pos):
    cache[pos] = k


def add_row(cache, k, pos):
    cache[pos] += k


def set_last(cache, k):
    cache[-1] = k * 2.0


def set_then_read(cache, k, pos):
    cache[pos] = k
    return cache.sum(axis=1)


def read_then_set(cache, k, pos):
    before = cache.copy()
    cache[pos] = k
    return before[pos] + cache[pos]


@pytest.mark.parametrize("backend", ["cpu", "c"])
@pytest.mark.parametrize("fn", [set_row, add_row, set_then_read, read_then_set])
@pytest.mark.parametrize("pos", [0, 5, -1, -64, 63])
def test_row_writes_equal_numpy(fn, pos: int, backend: str) -> None:
    _same_as_numpy(fn, RNG.standard_normal((64, 8)).astype(np.float32),
                   RNG.standard_normal(8).astype(np.float32), pos, backend=backend)


def set_head_column(kc, k, pos):
    kc[:, pos] = k  # a KV cache of heads x positions x head size


def add_last_axis(x, v, pos):
    x[..., pos] += v


def set_middle_then_attend(kc, k, pos):
    kc[:, pos] = k
    return (kc @ k[:, :, None])[..., 0]


@pytest.mark.parametrize("backend", ["cpu", "c"])
@pytest.mark.parametrize("pos", [0, 5, -1, -32, 31])
def test_writes_at_a_traced_position_off_the_first_axis_equal_numpy(pos: int,
                                                                    backend: str) -> None:
    kc, k = RNG.standard_normal((4, 32, 8)).astype(np.float32), \
        RNG.standard_normal((4, 8)).astype(np.float32)
    for fn in (set_head_column, set_middle_then_attend):
        _same_as_numpy(fn, kc, k, pos, backend=backend)
    _same_as_numpy(add_last_axis, RNG.standard_normal((3, 5, 32)),
                   RNG.standard_normal((3, 5)), pos, backend=backend)


def test_a_write_at_a_traced_position_off_the_first_axis_is_one_block_update() -> None:
    # It was a scatter over the whole array (6 ms for a 12x256x64 cache).
    kc, k = np.zeros((12, 256, 64), np.float32), np.ones((12, 64), np.float32)
    text = str(jitc.jit(set_head_column, disk_cache=False).lower(kc, k, 3).optimize())
    assert "dynamic_update_slice" in text and "scatter" not in text and "reduce" not in text
    jitc.jit(set_head_column, disk_cache=False)(kc, k, 300)  # out of range: nothing written
    assert not kc.any()


@pytest.mark.parametrize("pos", [64, -65, 1000])
def test_a_row_out_of_range_writes_nothing(pos: int) -> None:
    cache = RNG.standard_normal((64, 8)).astype(np.float32)
    before = cache.copy()
    jitc.jit(set_row, disk_cache=False)(cache, np.ones(8, np.float32), pos)
    np.testing.assert_array_equal(cache, before)


def test_static_block_writes_equal_numpy() -> None:
    _same_as_numpy(set_last, RNG.standard_normal((64, 8)), RNG.standard_normal(8))


@pytest.mark.parametrize("fn, args", [
    (set_row, (np.zeros((64, 8), np.float32), np.ones(8, np.float32), 3)),
    (set_last, (np.zeros((64, 8)), np.ones(8))),
    (add_row, (np.zeros((64, 8), np.float32), np.ones(8, np.float32), 3)),
])
def test_the_update_is_computed_in_the_arguments_buffer(fn, args) -> None:
    compiled = jitc.jit(fn, disk_cache=False).lower(*args).compile()
    # The write-back (the only result) lives in argument 0's buffer.
    assert compiled.executable.entry.donations == {0: 0}
    compiled = jitc.jit(fn, backend="c", disk_cache=False).lower(*args).compile()
    assert compiled.executable.plan.donations == {0: 0}


def test_a_view_of_the_argument_returned_keeps_the_copy() -> None:
    def f(x, v):
        head = x[0:2]
        x[0] = v
        return head * 1.0, head

    x = RNG.standard_normal((8, 4))
    _same_as_numpy(lambda x, v: f(x, v)[0], x, np.ones(4))
    got = jitc.jit(f, disk_cache=False)(x, np.ones(4))[1]
    assert np.shares_memory(got, x) and np.array_equal(got[0], np.ones(4))


@pytest.mark.parametrize("backend", ["cpu", "c"])
def test_an_update_in_place_shares_no_kernel_with_a_copied_one(backend: str) -> None:
    """The same block update of a fresh array and of a written argument: two kernels (one
    stores the whole array, the other the block only)."""
    def f(x, z, v):
        x[0] = v
        w = z.copy()
        w[0] = v
        return w

    x, z = RNG.standard_normal((16, 4)), RNG.standard_normal((16, 4))
    _same_as_numpy(f, x, z, np.ones(4), backend=backend)


@pytest.mark.parametrize("backend", ["cpu", "c"])
def test_non_contiguous_written_arguments_still_get_the_write(backend: str) -> None:
    base = RNG.standard_normal((64, 16)).astype(np.float32)
    _same_as_numpy(set_row, base[:, ::2], np.ones(8, np.float32), 7, backend=backend)


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "c", "cuda-sim"])
def test_a_traced_row_write_compiles_once_for_every_row_count(backend: str) -> None:
    """cache[pos] = k over caches of changing length: one symbolic compilation (rows >= 2)
    beside the exact ones for 1 and 0 rows, each call numpy's (an index out of range writes
    nothing, docs/jit.md)."""
    f = jitc.jit(set_then_read, backend=backend, disk_cache=False)
    for rows in (1, 2, 5, 3, 0):
        for pos in sorted({0, rows - 1, -1, 2, rows, -rows - 1}):
            cache = RNG.standard_normal((rows, 4)).astype(np.float32)
            k = RNG.standard_normal(4).astype(np.float32)
            want, got = cache.copy(), cache.copy()
            if -rows <= pos < rows:
                expected = set_then_read(want, k, pos)
                np.testing.assert_allclose(f(got, k, pos), expected, rtol=1e-5, atol=1e-5)
            else:
                f(got, k, pos)  # out of range: nothing written
            np.testing.assert_array_equal(got, want)
    assert sorted(s["symbolic"] for s in f.compile_stats()) == [False, False, True]


@pytest.mark.parametrize("fn", [set_last, add_row])
def test_row_writes_over_a_symbolic_length_are_computed_in_place(fn) -> None:
    """x[-1] = row (a constant index: the call must have the row, as numpy's IndexError
    requires) and cache[pos] += k compiled for every length still store only the row."""
    from jitc.tracing.function import AbstractArray
    spec = AbstractArray(("n", 8), np.float32)
    extra = (np.ones(8, np.float32),) if fn is set_last else (np.ones(8, np.float32), 3)
    compiled = jitc.jit(fn, disk_cache=False).lower(spec, *extra).compile()
    assert compiled.executable.entry.donations == {0: 0}
    f = jitc.jit(fn, disk_cache=False)
    for rows in (4, 7, 5):
        cache = RNG.standard_normal((rows, 8)).astype(np.float32)
        want, got = cache.copy(), cache.copy()
        fn(want, *extra)
        f(got, *extra)
        np.testing.assert_array_equal(got, want)
    assert sum(s["symbolic"] for s in f.compile_stats()) == 1


@pytest.mark.parametrize("backend", ["cpu", "c"])
def test_an_update_read_by_a_kernel_of_its_shape_stays_in_place(backend: str) -> None:
    """Fusion keeps a written argument's block update out of the kernels that read the new
    array (which would make it their second output, every element written): a decode step's
    cache read right after the write."""
    def step(cache, k, q, pos):
        cache[pos] = k
        return cache.astype(np.float64) @ q

    args = (RNG.standard_normal((64, 8)).astype(np.float32), np.ones(8, np.float32),
            RNG.standard_normal(8), 9)
    _same_as_numpy(step, *args, backend=backend)
    executable = jitc.jit(step, backend=backend, disk_cache=False).lower(*args).compile() \
        .executable
    donations = executable.entry.donations if backend == "cpu" else \
        executable.plan.donations
    assert donations == {1: 0}
