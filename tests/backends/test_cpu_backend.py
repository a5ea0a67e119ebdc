"""CPU backend specifics: thread-count invariance, generated code text, compile statistics,
dispatch paths and buffer reuse."""

from __future__ import annotations

import numpy as np
import pytest
from ops.backends import require

import jitc

RNG = np.random.default_rng(0)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mixed(x, w):
    h = np.tanh(x @ w) + x[:, : w.shape[1]]
    return h.sum(axis=0), h.max(axis=1), softmax(h)


WORKLOADS = [
    ("elementwise", lambda x: np.tanh(x * 2.0 + 1.0) * 0.5 + x, (RNG.standard_normal((300, 500)),)),
    ("softmax", softmax, (RNG.standard_normal((257, 300)),)),
    ("sums", lambda x: (x.sum(), x.sum(axis=0), x.sum(axis=1)), (RNG.standard_normal((400, 300)),)),
    ("mixed", mixed, (RNG.standard_normal((200, 300)), RNG.standard_normal((300, 120)))),
]


@pytest.mark.parametrize("name,fn,args", WORKLOADS, ids=[w[0] for w in WORKLOADS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_results_do_not_depend_on_the_thread_count(name, fn, args, dtype) -> None:
    args = tuple(a.astype(dtype) for a in args)
    results = [_flat(_with_threads(fn, args, threads)(*args)) for threads in (1, 2, 3)]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            np.testing.assert_allclose(b, a, rtol=rtol, atol=rtol)
    for a, b in zip(results[0], _flat(fn(*args)), strict=True):
        np.testing.assert_allclose(a, b, rtol=100 * rtol, atol=100 * rtol)


def _flat(result) -> list[np.ndarray]:
    return list(result) if isinstance(result, tuple) else [result]


def _with_threads(fn, args, threads: int):
    f = jitc.jit(fn, backend="cpu")
    f.options = f.options.with_(num_threads=threads)
    return f.lower(*args).compile()


def test_large_kernels_are_split_across_threads() -> None:
    x = RNG.standard_normal((512, 1024)).astype(np.float32)
    text = _with_threads(softmax, (x,), 2).as_text()
    assert "jitc_parallel_for" in text
    assert "jitc_parallel_for" not in _with_threads(softmax, (x,), 1).as_text()


def test_as_text_gives_optimized_llvm_ir_and_assembly() -> None:
    x = RNG.standard_normal(1000).astype(np.float32)
    compiled = jitc.jit(lambda x: np.exp(x) * 2).lower(x).compile()
    ir_text = compiled.as_text()
    assert "define void @jitc_entry" in ir_text
    assert "<16 x float>" in ir_text or "<8 x float>" in ir_text  # vectorized
    assert "@expf" not in ir_text and "call float @llvm.exp" not in ir_text  # our own exp
    assembly = compiled.as_text(assembly=True)
    assert "jitc_entry:" in assembly


def test_loops_use_512_bit_vectors_where_the_host_has_avx512() -> None:
    """LLVM tunes Ice Lake to Emerald Rapids for 256-bit loops; jitc asks for the full width
    (softmax 4096x1024 took 2.8 ms instead of 4.2 ms on one Emerald Rapids thread)."""
    from jitc.backends.llvm import target
    if not target.host_has("avx512f"):
        pytest.skip("the host has no AVX-512: 256-bit loops are its widest")
    x = RNG.standard_normal((64, 1024)).astype(np.float32)
    assembly = jitc.jit(softmax).lower(x).compile().as_text(assembly=True)
    exp_lines = [line for line in assembly.splitlines() if "vscalefps" in line]
    assert exp_lines and all("%zmm" in line for line in exp_lines), exp_lines
    np.testing.assert_allclose(jitc.jit(softmax)(x), softmax(x), rtol=2e-6, atol=1e-9)


def test_a_kernel_called_once_is_compiled_once() -> None:
    # The kernel is internal: LLVM inlines it into the entry and drops it, instead of also
    # compiling an external copy that nothing calls.
    x = RNG.standard_normal(1000).astype(np.float32)
    text = jitc.jit(lambda x: np.tanh(x) * 2).lower(x).compile().as_text()
    assert [line.split("(")[0] for line in text.splitlines() if line.startswith("define")] \
        == ["define void @jitc_entry"]


def test_the_garbage_collector_is_paused_while_compiling_and_restored() -> None:
    import gc
    seen = []
    f = jitc.jit(lambda x: seen.append(gc.isenabled()) or x * 2)
    assert gc.isenabled()
    f(np.ones(3, np.float32))
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        f(np.ones(4, np.float32))  # a user who turned it off keeps it off
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ZeroDivisionError):
        jitc.jit(lambda x: 1 / 0)(np.ones(3, np.float32))
    assert gc.isenabled()


def test_compile_stats_are_reported_per_signature() -> None:
    f = jitc.jit(lambda x: x * 2 + 1)
    f(np.ones(3, np.float32))
    f(np.ones((2, 2), np.float32))
    stats = f.compile_stats()
    assert len(stats) == 2
    for s in stats:
        assert s["total_seconds"] > 0 and s["codegen_seconds"] > 0
        assert s["passes"][0][0] == "hoist_steps"


def test_the_fast_call_path_checks_its_arguments() -> None:
    f = jitc.jit(lambda x, y: x * y)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(f(a, a), a * a)
    strided = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]  # same type, not contiguous
    np.testing.assert_array_equal(f(strided, a), strided * a)
    assert f.cache_size == 1
    # Other dtype, other shape: each compiles anew and still gives numpy's answer.
    np.testing.assert_array_equal(f(a.astype(np.float64), a), a.astype(np.float64) * a)
    np.testing.assert_array_equal(f(a[:1], a[:1]), a[:1] * a[:1])
    assert f.cache_size == 3


def test_workspace_is_reused_between_temporaries() -> None:
    def chain(x, w):
        for _ in range(6):
            x = np.tanh(x @ w)
        return x
    x, w = RNG.standard_normal((64, 64)).astype(np.float32), RNG.standard_normal((64, 64)) * 0.1
    compiled = jitc.jit(chain).lower(x, w.astype(np.float32)).compile()
    memory = compiled.memory_analysis()
    assert memory["temp_bytes"] <= 2 * 64 * 64 * 4 < memory["intermediate_bytes"]
    np.testing.assert_allclose(compiled(x, w.astype(np.float32)),
                               chain(x, w.astype(np.float32)), rtol=1e-4, atol=1e-5)


def test_donated_argument_buffers_hold_results_computed_in_step() -> None:
    def step(x, g):
        return x - 0.5 * g, (g * g).sum()
    f = jitc.jit(step, donate_argnums=0)
    x, g = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    expected = step(x.copy(), g)
    result, norm = f(x, g)
    assert result is x  # computed in place in the donated array
    np.testing.assert_array_equal(result, expected[0])
    assert norm == expected[1]
    compiled = f.lower(x, g).compile()
    assert compiled.memory_analysis()["temp_bytes"] <= 64


def test_donation_is_skipped_where_in_place_would_be_wrong() -> None:
    f = jitc.jit(lambda x: x[::-1] + 1, donate_argnums=0)  # reads other elements: no reuse
    x = np.arange(5.0)
    result = f(x)
    assert result is not x
    np.testing.assert_array_equal(result, np.arange(5.0)[::-1] + 1)
    np.testing.assert_array_equal(x, np.arange(5.0))


def test_donating_a_read_only_array_copies_it_first() -> None:
    f = jitc.jit(lambda x: x * 2, donate_argnums=0)
    x = np.arange(4.0)
    x.setflags(write=False)
    np.testing.assert_array_equal(f(x), np.arange(4.0) * 2)
    np.testing.assert_array_equal(x, np.arange(4.0))


@pytest.mark.parametrize("backend", ["cpu", "c"])
def test_a_donated_argument_that_another_argument_reads_is_copied_first(backend: str) -> None:
    """`s(a, a)`: writing a's buffer in place would clobber the elements v[::-1] still reads."""
    def reverse_add(x, v):
        return x + v[::-1]
    f = jitc.jit(reverse_add, backend=require(backend), donate_argnums=0)
    for _ in range(2):  # the first call compiles; the second takes the C fast path
        a = np.arange(8.0)
        np.testing.assert_array_equal(f(a, a), reverse_add(np.arange(8.0), np.arange(8.0)))
        buffer = np.arange(9.0)  # two overlapping windows of one buffer
        expected = reverse_add(buffer[:-1].copy(), buffer[1:].copy())
        np.testing.assert_array_equal(f(buffer[:-1], buffer[1:]), expected)
    apart = np.arange(8.0)
    assert f(apart, np.ones(8)) is apart  # no overlap: still computed in place


def test_a_workspace_too_large_to_allocate_is_a_memory_error_that_says_what_and_why() -> None:
    from jitc._runtime import RESULT_SINGLE, Dispatcher
    huge = 1 << 62  # no host can map it; the code (at address 0) is never reached
    call = Dispatcher(0, [], [], [], huge, RESULT_SINGLE, 0, None, None, "pairwise")
    with pytest.raises(MemoryError, match=r"pairwise: cannot allocate the 4294967296\.0 GiB "
                                          r"\(4611686018427387904 bytes\) .* temporaries.*"
                                          r"memory_analysis.*smaller pieces"):
        call(())


def test_donate_argnums_must_name_an_array() -> None:
    f = jitc.jit(lambda xs: xs[0] + xs[1], donate_argnums=0)
    with pytest.raises(TypeError, match="not a single array"):
        f((np.ones(2), np.ones(2)))


def test_the_pool_survives_sections_of_every_size_from_several_threads() -> None:
    """Sections with fewer chunks than workers, a growing pool and concurrent callers: the
    pool's spin-then-sleep handshake must neither lose a chunk nor deadlock."""
    import threading
    import time

    x = RNG.standard_normal((256, 512)).astype(np.float32)
    want = softmax(x)
    compiled = [_with_threads(softmax, (x,), threads) for threads in (2, 4, 3, 1)]
    failures: list[str] = []

    def hammer(offset: int) -> None:
        for i in range(60):
            if i % 20 == 0:
                time.sleep(0.002)  # long enough for the workers to go to sleep
            got = compiled[(i + offset) % len(compiled)](x)
            if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                failures.append(f"caller {offset}, call {i}")

    callers = [threading.Thread(target=hammer, args=(k,)) for k in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in callers), "a parallel section never finished"
    assert not failures


def test_large_results_reuse_freed_memory_and_stay_ordinary_arrays() -> None:
    from jitc import _runtime

    x = RNG.standard_normal((512, 1024)).astype(np.float32)  # 2 MiB results
    f = jitc.jit(lambda x: x * 2.0 + 1.0)
    first = f(x)
    address = first.ctypes.data
    assert first.flags.owndata and first.base is None and address % 64 == 0
    second = f(x)  # `first` is alive: its memory must not be handed out again
    assert second.ctypes.data != address
    np.testing.assert_array_equal(first, x * 2.0 + 1.0)
    del first
    third = f(x)
    assert third.ctypes.data == address  # the freed block came back
    np.testing.assert_array_equal(third, x * 2.0 + 1.0)
    third.resize((1024, 512), refcheck=False)  # numpy may reallocate through our handler
    np.testing.assert_array_equal(third.ravel(), (x * 2.0 + 1.0).ravel())
    del second, third
    _runtime.release_recycled_results()
    np.testing.assert_array_equal(f(x), x * 2.0 + 1.0)


@pytest.mark.parametrize("shape,axes", [((6, 5, 7), (1, 2)), ((3, 1), (1,)), ((0, 4), (1,)),
                                        ((2, 3, 129), (2,))])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_row_kernels_keep_reduced_transcendentals_in_a_row_buffer(shape, axes, dtype) -> None:
    """softmax's exp is reduced and then divided: the row kernel keeps it in a row buffer
    between the two passes instead of computing it twice."""
    def softmaxes(x):
        e = np.exp(x - x.max(axis=axes, keepdims=True))
        t = np.tanh(x)
        return e / e.sum(axis=axes, keepdims=True), t * t.sum(axis=axes, keepdims=True)

    x = RNG.standard_normal(shape).astype(dtype)
    got = jitc.jit(softmaxes, backend="cpu")(x)
    want = jitc.jit(softmaxes, backend="interpreter")(x)
    tol = 2e-3 if dtype == np.float16 else 1e-5
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_gemm_routines_are_cached_on_disk_and_a_damaged_entry_is_recompiled(
        tmp_path, monkeypatch) -> None:
    from jitc.backends.cpu import objects

    a = RNG.standard_normal((96, 80)).astype(np.float32)
    b = RNG.standard_normal((80, 64)).astype(np.float32)

    def fresh_product() -> np.ndarray:
        objects._routines.clear()  # forget this process's copies: go to the disk cache
        # The function itself stays out of the cache (its entry would hold the routines).
        return jitc.jit(lambda a, b: a @ b + 0.0, disk_cache=False)(a, b)

    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    np.testing.assert_allclose(fresh_product(), a @ b, rtol=1e-5, atol=1e-5)
    for _ in range(100):  # the write happens when the compile finishes
        entries = sorted((tmp_path / "routines").glob("*.jce"))
        if entries:
            break
        import time
        time.sleep(0.01)
    assert entries, "no routine was cached"
    for entry in entries:
        entry.write_bytes(b"not an object file" * 8)
    np.testing.assert_allclose(fresh_product(), a @ b, rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("JITC_CACHE_DIR", "off")
    np.testing.assert_allclose(fresh_product(), a @ b, rtol=1e-5, atol=1e-5)
    objects._routines.clear()


def test_a_forked_child_gets_a_pool_of_its_own() -> None:
    """The parent's workers do not exist in a child: it must start its own, with its
    affinity left alone, and compute correctly."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import os, numpy as np, jitc
        f = jitc.jit(lambda x: np.exp(x) * 2.0 + 1.0, num_threads=2)
        x = np.ones((512, 1024), np.float32)
        f(x)
        before = os.sched_getaffinity(0)
        pid = os.fork()
        if pid == 0:
            ok = all(np.allclose(f(x), np.exp(x) * 2 + 1) for _ in range(5))
            os._exit(0 if ok and os.sched_getaffinity(0) == before else 1)
        _, status = os.waitpid(pid, 0)
        raise SystemExit(os.waitstatus_to_exitcode(status))
        """)
    done = subprocess.run([sys.executable, "-c", script], timeout=120)
    assert done.returncode == 0


def _patches(x):
    """A 3x3 convolution's patches: nine shifted windows joined along the features."""
    return np.concatenate([x[:, i:i + 6, j:j + 5, :] for i in range(3) for j in range(3)], -1)


def _uneven_pieces(x):
    return np.concatenate([x[..., :1], x[..., :0], x[:, ::-1, :, ::-1] * 2, x[:, :, ::-1, 1:]],
                          axis=3)


@pytest.mark.parametrize("fn", [_patches, _uneven_pieces, lambda x: np.concatenate(
    [x, x[::-1], x + 1], axis=0), lambda x: np.concatenate([x.T, x.T], axis=2)],
    ids=["patches", "uneven", "outermost-axis", "transposed"])
def test_a_concatenate_along_an_inner_axis_copies_piece_by_piece(fn) -> None:
    """Each piece is copied by a loop of its own: a loop over the result branching to the
    piece of each element ran a 3x3 convolution's int8 patches 40 times slower than numpy."""
    x = RNG.integers(-128, 128, (4, 8, 7, 3)).astype(np.int8)
    compiled = jitc.jit(fn).lower(x).compile()
    np.testing.assert_array_equal(jitc.jit(fn)(x), fn(x))
    if fn in (_patches, _uneven_pieces):
        assert " switch " not in compiled.as_text()


def test_reshapes_map_indexes_by_dimension_groups_without_dividing() -> None:
    """Splitting a row into heads (GPT-2's q, k and v) and merging them back map each output
    index by the dimensions whose sizes pair up: no division or remainder per element, which
    kept the loops from vectorizing (3-4x slower kernels)."""
    def split_heads(x):
        return x.reshape(x.shape[0], 12, 64).transpose(1, 0, 2) * 2.0 + 1.0

    def merge_heads(x):
        return x.transpose(1, 0, 2).reshape(x.shape[1], 768) * 2.0 + 1.0

    for fn, x in ((split_heads, RNG.standard_normal((32, 768)).astype(np.float32)),
                  (merge_heads, RNG.standard_normal((12, 32, 64)).astype(np.float32))):
        compiled = jitc.jit(fn, disk_cache=False).lower(x).compile()
        np.testing.assert_array_equal(compiled(x), fn(x))
        text = compiled.as_text()
        assert " udiv " not in text and " urem " not in text, fn.__name__
