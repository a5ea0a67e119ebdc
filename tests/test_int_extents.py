"""Python int arguments used as extents (`cache[:pos + 1]`, `np.zeros(n)`): compiled for a
value, then, once the value changes, as a symbolic dimension (docs/dynamic-shapes.md, "Int
arguments as extents"). Every call is compared with numpy: results, shapes, dtypes, errors and
the arrays the function wrote."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import jitc

RNG = np.random.default_rng(7)
CACHE = RNG.standard_normal((16, 4)).astype(np.float32)
QUERY = RNG.standard_normal(4).astype(np.float32)
# In range, 0 and 1, past the end, negative (numpy counts from the end), and back.
POSITIONS = (3, 5, 0, 1, 7, 15, 16, 17, 40, -1, -3, 2, 9, -20, 4, 6)


def _same(got: object, want: object, what: str) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for g, w in zip(got, want):
            _same(g, w, what)
        return
    assert np.shape(got) == np.shape(want), what
    assert np.asarray(got).dtype == np.asarray(want).dtype, what
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=what)


def _against_numpy(fn, make, values) -> jitc.jit:
    """Call `fn` jitted and plain on `make(v)` for each v: the same results, errors and
    writes into the arguments."""
    jitted = jitc.jit(fn)
    for value in values:
        plain_args = make(value)
        jit_args = copy.deepcopy(plain_args)
        try:
            want = fn(*plain_args)
        except Exception as exc:  # numpy's error: jit must raise the same kind
            with pytest.raises(type(exc)):
                jitted(*jit_args)
            continue
        _same(jitted(*jit_args), want, f"{fn.__name__}({value})")
        for mine, theirs in zip(jit_args, plain_args):
            if isinstance(theirs, np.ndarray):
                np.testing.assert_array_equal(mine, theirs,
                                              err_msg=f"{fn.__name__}({value}): argument")
    return jitted


def _symbolic_count(jitted) -> int:
    return sum(s["symbolic"] for s in jitted.compile_stats())


def attend(cache, q, pos):
    scores = cache[:pos + 1] @ q
    weights = np.exp(scores - scores.max())
    return weights / weights.sum()


def test_a_prefix_of_an_int_argument_compiles_once_symbolically() -> None:
    jitted = _against_numpy(attend, lambda p: (CACHE.copy(), QUERY, p), range(16))
    stats = jitted.compile_stats()
    # 0 and 1 exactly, then one symbolic compilation for 2..15.
    assert len(stats) == 3 and _symbolic_count(jitted) == 1
    assert any("dimension 0 of pos changed (1 -> 2)" in s["reason"] for s in stats
               if s["symbolic"])
    assert any("int 1 (an extent)" in s["signature"] for s in stats)


def test_out_of_range_and_negative_values_get_numpy_s_answer() -> None:
    def suffix(cache, pos):
        return cache[pos:].sum(0)

    def floor_half(cache, pos):
        return cache[:pos // 2]

    for fn in (attend, suffix, floor_half):
        args = (lambda p: (CACHE.copy(), QUERY, p)) if fn is attend else \
            (lambda p: (CACHE.copy(), p))
        _against_numpy(fn, args, POSITIONS)


def write_row(cache, k, pos):
    cache[pos] = k
    window = cache[pos - 1:pos + 1]
    window += 1
    return cache[:pos + 1].sum(0)


def test_writes_at_an_int_position_reach_the_argument() -> None:
    jitted = _against_numpy(write_row, lambda p: (CACHE.copy(), QUERY.copy(), p), POSITIONS)
    assert _symbolic_count(jitted) == 1


@pytest.mark.parametrize("backend", ["interpreter", "c", "cuda-sim"])
def test_every_backend_takes_an_int_extent(backend: str) -> None:
    jitted = jitc.jit(write_row, backend=backend)
    for pos in (3, 5, 0, 1, 7, 15, 2, -4):
        plain_cache, jit_cache = CACHE.copy(), CACHE.copy()
        _same(jitted(jit_cache, QUERY, pos), write_row(plain_cache, QUERY, pos), str(pos))
        np.testing.assert_array_equal(jit_cache, plain_cache)
    assert _symbolic_count(jitted) == 1


def test_a_scalar_at_an_int_position_is_read_before_the_write() -> None:
    def bump(v, pos):
        old = v[pos]
        v[pos] = old * 2 + 1
        return old, v[:pos].sum()

    jitted = _against_numpy(bump, lambda p: (np.arange(16, dtype=np.float32), p), POSITIONS)
    assert _symbolic_count(jitted) == 1


def test_a_returned_view_at_an_int_position_is_a_view_of_the_argument() -> None:
    def row_view(cache, pos):
        row = cache[pos]
        row[0] = -1.0
        return row, cache[1:pos + 2]

    jitted = _against_numpy(row_view, lambda p: (CACHE.copy(), p), POSITIONS)
    assert _symbolic_count(jitted) == 1
    cache = CACHE.copy()
    row, window = jitted(cache, 6)
    assert np.shares_memory(row, cache) and np.shares_memory(window, cache)
    row[1] = 42.0  # numpy's view: the write lands in the caller's array
    assert cache[6, 1] == 42.0 and window[5, 1] == 42.0


def test_sizes_from_an_int_argument() -> None:
    def grid(x, n):
        return np.zeros(n) + x, np.arange(n) * 2, np.ones((n, 2), np.float32)

    jitted = _against_numpy(grid, lambda n: (1.5, n), (3, 4, 0, 1, 5, 9, 2))
    assert _symbolic_count(jitted) == 1


def test_an_int_needed_as_a_python_value_compiles_per_value() -> None:
    def prefix_sum(v, n):
        total = v[0] * 0
        for i in range(n):  # range() needs the value: each n compiles exactly
            total = total + v[i]
        return total if n > 2 else -total

    jitted = _against_numpy(prefix_sum, lambda n: (CACHE[:, 0].copy(), n), (3, 4, 5, 1, 2))
    assert _symbolic_count(jitted) == 0 and len(jitted.compile_stats()) == 5
    assert all("refused" in s["reason"] for s in jitted.compile_stats()[1:3])


def test_dynamic_false_compiles_each_value() -> None:
    jitted = jitc.jit(attend, dynamic=False)
    for pos in (2, 3, 4, 3):
        _same(jitted(CACHE, QUERY, pos), attend(CACHE, QUERY, pos), str(pos))
    assert len(jitted.compile_stats()) == 3 and _symbolic_count(jitted) == 0


def test_an_array_in_place_of_the_int_is_not_taken_for_it() -> None:
    jitted = jitc.jit(lambda cache, pos: cache[:pos].sum(0))
    jitted(CACHE, 3)
    jitted(CACHE, 4)
    assert _symbolic_count(jitted) == 1
    # An int8 array shaped like the int's carrier is an array, as numpy sees it.
    carrier = np.zeros((5, 0), np.int8)
    with pytest.raises(TypeError):
        CACHE[:carrier]
    with pytest.raises(TypeError):
        jitted(CACHE, carrier)
    np.testing.assert_allclose(jitted(CACHE, 5), CACHE[:5].sum(0), rtol=1e-6)


def decode(x, keys, values, pos, w_q, w_k, w_v):
    """One token of single-head attention with its KV cache written at `pos`."""
    keys[pos] = x @ w_k
    values[pos] = x @ w_v
    scores = keys[:pos + 1] @ (x @ w_q) / np.sqrt(np.float32(keys.shape[1]))
    weights = np.exp(scores - scores.max())
    return (weights / weights.sum()) @ values[:pos + 1]


def test_a_decode_loop_with_an_int_position_compiles_three_times() -> None:
    width, length = 8, 32
    w_q, w_k, w_v = (RNG.standard_normal((width, width)).astype(np.float32) * 0.3
                     for _ in range(3))
    state = {name: np.zeros((length, width), np.float32) for name in ("jit", "numpy")}
    values = {name: np.zeros((length, width), np.float32) for name in ("jit", "numpy")}
    jitted = jitc.jit(decode)
    x_jit = x_numpy = RNG.standard_normal(width).astype(np.float32)
    for pos in range(24):
        x_numpy = np.tanh(decode(x_numpy, state["numpy"], values["numpy"], pos, w_q, w_k, w_v))
        x_jit = np.tanh(jitted(x_jit, state["jit"], values["jit"], pos, w_q, w_k, w_v))
        np.testing.assert_allclose(x_jit, x_numpy, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state["jit"], state["numpy"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(values["jit"], values["numpy"], rtol=1e-4, atol=1e-5)
    assert len(jitted.compile_stats()) == 3 and _symbolic_count(jitted) == 1


# -- captured ints: `self.pos`, a global counter ------------------------------------------------

class Attention:
    """Single-head attention with its KV cache and position on `self`, as numpy code keeps
    them: the position is a Python int that every step advances."""

    def __init__(self, length: int = 8, width: int = 4) -> None:
        rng = np.random.default_rng(3)
        self.wq, self.wk, self.wv = (rng.standard_normal((width, width)) for _ in range(3))
        self.cache_k = np.zeros((length, width))
        self.cache_v = np.zeros((length, width))
        self.pos = 0

    def step(self, x):
        q, k, v = x @ self.wq, x @ self.wk, x @ self.wv
        self.cache_k[self.pos] = k
        self.cache_v[self.pos] = v
        self.pos += 1
        scores = self.cache_k[:self.pos] @ q / np.sqrt(q.shape[0])
        p = np.exp(scores - scores.max())
        return (p / p.sum()) @ self.cache_v[:self.pos]

    jitted_step = jitc.jit(step)


def test_a_position_on_self_becomes_an_extent_after_it_changes() -> None:
    plain, jitted = Attention(), Attention()
    x = y = np.linspace(-1.0, 1.0, 4)
    for _ in range(8):
        x = np.tanh(plain.step(x))
        y = np.tanh(jitted.jitted_step(y))
        np.testing.assert_allclose(y, x, rtol=1e-12)
        assert type(jitted.pos) is int and jitted.pos == plain.pos
    np.testing.assert_allclose(jitted.cache_k, plain.cache_k, rtol=1e-12)
    np.testing.assert_allclose(jitted.cache_v, plain.cache_v, rtol=1e-12)
    stats = Attention.jitted_step.compile_stats()
    assert [s["symbolic"] for s in stats] == [False, False, True]
    assert stats[1]["reason"] == "self.pos changed (0 -> 1): an extent from now on"
    assert stats[2]["reason"] == "dimension 0 of self.pos changed (1 -> 2): now symbolic"
    # Past the cache numpy raises IndexError before advancing the position: so does jit.
    with pytest.raises(IndexError):
        plain.step(x)
    with pytest.raises(IndexError):
        jitted.jitted_step(y)
    assert jitted.pos == plain.pos == 8


STEP = 0
LIMIT = 3


def count_and_scale(x):
    global STEP
    STEP += 1
    return x * STEP + np.arange(STEP)[:x.shape[0]].sum()


def first_rows(x):
    return x[:LIMIT].sum(0)


def test_a_global_counter_compiles_three_times() -> None:
    global STEP
    jitted = jitc.jit(count_and_scale)
    x = np.ones(3, np.float32)
    for _ in range(12):
        STEP_before = STEP
        want = count_and_scale(x)
        STEP = STEP_before
        got = jitted(x)
        _same(got, want, f"STEP={STEP}")
        assert type(STEP) is int and STEP == STEP_before + 1
    assert len(jitted.compile_stats()) == 3


def test_a_global_the_caller_changes_is_read_at_each_call() -> None:
    global LIMIT
    jitted = jitc.jit(first_rows)
    for LIMIT in (3, 5, 2, 7, 4, 0, -2, 9, 12, 6):
        _same(jitted(CACHE), first_rows(CACHE), f"LIMIT={LIMIT}")
        _same(jitted(CACHE), first_rows(CACHE), f"LIMIT={LIMIT}, again")
    assert _symbolic_count(jitted) == 1


def test_a_lowered_compilation_takes_the_int_it_was_lowered_for() -> None:
    jitted = jitc.jit(lambda cache, pos: cache[:pos + 1].sum(0))
    jitted(CACHE, 3)  # pos is an extent from here on
    compiled = jitted.lower(CACHE, 5).compile()
    assert "i8[5,0]" in compiled.lowered.as_text()
    _same(compiled(CACHE, 5), CACHE[:6].sum(0), "lowered for 5")
    with pytest.raises(TypeError, match="int 6 \\(an extent\\)"):
        compiled(CACHE, 6)


def test_numpy_functions_given_an_int_argument_as_a_size() -> None:
    """numpy converts these sizes itself (np.asarray, operator.index): the int argument is
    compiled for (np.pad, np.repeat) or becomes an extent (np.arange), never refused."""
    def sized(x, p):
        return (np.arange(p) * x[0, 1], np.outer(np.arange(p), x[0]),
                np.pad(x, ((p, 1), (0, 0))), np.repeat(x[:2], p, axis=0))

    _against_numpy(sized, lambda p: (CACHE.copy(), p), (3, 5, 0, 1, 2, -1, 4))


def test_negative_pad_widths_raise_as_numpy_does() -> None:
    with pytest.raises(ValueError, match="negative"):
        np.pad(CACHE, ((-1, 1), (0, 0)))
    with pytest.raises(ValueError, match="negative"):
        jitc.jit(lambda x: np.pad(x, ((-1, 1), (0, 0))))(CACHE)
