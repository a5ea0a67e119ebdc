"""Threads: concurrent first calls compile once, and compiled code outlives the cache entry
of a call that is still running."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import jitc

THREADS = 8


def run_together(count: int, work) -> list:
    """`work(i)` on `count` threads released at once by a barrier; exceptions re-raised."""
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:  # re-raised on the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_concurrent_first_calls_trace_and_compile_once() -> None:
    traces = []

    @jitc.jit
    def f(x):
        traces.append(1)
        return np.tanh(x * 2.0 + 1.0).sum(axis=0)

    x = np.linspace(-2, 2, 4096 * 8).reshape(4096, 8)
    results = run_together(THREADS, lambda i: f(x))
    assert len(traces) == 1
    assert f.cache_size == 1
    for r in results:
        np.testing.assert_allclose(r, np.tanh(x * 2.0 + 1.0).sum(axis=0), rtol=1e-12)


def test_thread_pool_map_over_batches_of_new_shapes() -> None:
    traces = []

    def g(x):
        traces.append(x.shape)
        return (x - x.mean(axis=-1, keepdims=True)) / (x.std(axis=-1, keepdims=True) + 1e-5)

    jg = jitc.jit(g, dynamic=False)  # one exact compilation per shape, each traced once
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((n % 3 + 1, 64 + n % 4)) for n in range(48)]
    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(jg, batches))
    assert sorted(traces) == sorted({b.shape for b in batches})
    for b, r in zip(batches, results):
        np.testing.assert_allclose(r, g(b), rtol=1e-12, atol=1e-12)


def test_clear_cache_while_other_threads_call() -> None:
    """Dropping the cache (and the fast path) must not free code another thread is running."""
    f = jitc.jit(lambda x: np.sqrt(x * x + 1.0))
    x = np.ones(1 << 16)
    expected = np.sqrt(x * x + 1.0)
    stop = threading.Event()

    def clear() -> None:
        while not stop.is_set():
            f.clear_cache()

    clearer = threading.Thread(target=clear)
    clearer.start()
    try:
        results = run_together(4, lambda i: [f(x) for _ in range(20)])
    finally:
        stop.set()
        clearer.join()
    for per_thread in results:
        for r in per_thread:
            np.testing.assert_array_equal(r, expected)


def test_stress_sixteen_threads_new_shapes_and_repeated_calls() -> None:
    """16 threads call one function with a mix of new and repeated shapes for a bounded time:
    no crash, every result right, each signature traced exactly once."""
    import time

    traces: dict[tuple, int] = {}
    lock = threading.Lock()

    def f(x, y):
        with lock:
            traces[x.shape] = traces.get(x.shape, 0) + 1
        return np.tanh(x * 0.5 + y).sum(axis=-1) + (x * y).mean()

    jf = jitc.jit(f, dynamic=False)  # counts one exact trace per signature
    rng = np.random.default_rng(5)
    shapes = [(n % 4 + 1, 8 + n % 6) for n in range(24)]
    inputs = [(rng.standard_normal(s), rng.standard_normal(s)) for s in shapes]
    deadline = time.perf_counter() + 4.0

    def work(i: int) -> int:
        calls = 0
        k = i
        while time.perf_counter() < deadline:
            x, y = inputs[k % len(inputs)]
            np.testing.assert_allclose(jf(x, y), np.tanh(x * 0.5 + y).sum(axis=-1)
                                       + (x * y).mean(), rtol=1e-12, atol=1e-12)
            calls += 1
            k += 7
        return calls

    with ThreadPoolExecutor(16) as pool:
        counts = list(pool.map(work, range(16)))
    assert min(counts) > 0
    assert traces == {s: 1 for s in set(shapes)}


def test_a_section_that_finds_the_pool_busy_runs_on_its_caller() -> None:
    """Two threads calling parallel kernels at once: the second does not queue for the pool
    (nor add threads to it) but runs the same chunks itself, so its results are the same."""
    from jitc.backends.cpu.runtime import busy_sections, pool_size

    f = jitc.jit(lambda x: np.tanh(x * 2.0 + 1.0) * x, num_threads=2)
    x = np.linspace(-3, 3, 512 * 512, dtype=np.float32).reshape(512, 512)
    alone = f(x)
    if pool_size() == 0:
        pytest.skip("the CPU backend split no kernel across threads (no C runtime)")
    np.testing.assert_allclose(alone, np.tanh(x * 2.0 + 1.0) * x, rtol=1e-6, atol=1e-7)
    before = busy_sections()
    results = run_together(2, lambda i: [f(x) for _ in range(200)])
    assert busy_sections() > before
    for result in (r for batch in results for r in batch):
        np.testing.assert_array_equal(result, alone)


def test_the_default_thread_count_honours_omp_num_threads(monkeypatch) -> None:
    """Schedulers (Dask's nanny among them) set OMP_NUM_THREADS per worker process; an
    explicit JITC_NUM_THREADS wins over it."""
    monkeypatch.delenv("JITC_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert jitc.Options().num_threads == 1
    assert jitc.jit(lambda x: x + 1).options.num_threads == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3,1")
    assert jitc.Options().num_threads == 3
    monkeypatch.setenv("JITC_NUM_THREADS", "2")
    assert jitc.Options().num_threads == 2
    monkeypatch.delenv("JITC_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "")
    assert jitc.Options().num_threads == jitc.options.usable_cpus()


def test_new_sizes_from_many_threads_make_one_symbolic_compilation() -> None:
    """After one exact compilation, 16 threads call at once with 16 new sizes: the default
    policy makes one symbolic compilation for all of them (not one per thread that asked), and
    every result is right."""
    traces: list[tuple] = []
    lock = threading.Lock()

    def f(x, y):
        with lock:
            traces.append(tuple(d if isinstance(d, int) else "n" for d in x.shape))
        return np.tanh(x * 0.5 + y).sum(axis=-1) + (x * y).mean()

    jf = jitc.jit(f)
    rng = np.random.default_rng(6)
    inputs = [(rng.standard_normal((n, 8)), rng.standard_normal((n, 8))) for n in range(2, 19)]
    jf(*inputs[0])
    start = threading.Barrier(16)

    def work(i: int) -> None:
        x, y = inputs[i + 1]
        start.wait()
        for _ in range(3):
            np.testing.assert_allclose(jf(x, y), np.tanh(x * 0.5 + y).sum(axis=-1)
                                       + (x * y).mean(), rtol=1e-12, atol=1e-12)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(work, range(16)))
    assert traces == [(2, 8), ("n", 8)], traces
