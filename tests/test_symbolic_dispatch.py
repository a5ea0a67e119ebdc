"""Symbolic calls through the C dispatcher (runtime/dispatcher.c, docs/dynamic-shapes.md): the
dispatcher binds the symbols from the argument shapes and looks the binding up in a table that
Python fills once per key; whatever it cannot take (a failed constraint, a dtype, a layout,
a donated buffer another argument reads) is a miss, and the general path converts, compiles
exactly or raises, as numpy would."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
from jitc._runtime import RESULT_LIST, RESULT_SINGLE, Dispatcher, Guarded
from symbolic_programs import agree_in_place, floats, mlp, normalize_in_place

import jitc
from jitc.backends.cpu.symbolic_call import SymbolicEntry
from jitc.ir.interpreter import ArgumentError
from jitc.tracing.function import AbstractArray

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((16, 32)).astype(np.float32)
B1 = RNG.standard_normal(32).astype(np.float32)
W2 = RNG.standard_normal((32, 8)).astype(np.float32)


def _symbolic_executable(fun, *specs: str):
    return jitc.jit(fun).lower(*(AbstractArray(s) for s in specs)).compile().executable


def _counting_binder(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """The shapes each new dispatcher's binder is asked about."""
    asked: list[tuple] = []
    binding = SymbolicEntry._binding

    def counted(self, arrays):
        asked.append(tuple(a.shape for a in arrays))
        return binding(self, arrays)
    monkeypatch.setattr(SymbolicEntry, "_binding", counted)
    return asked


@pytest.mark.parametrize("backend", ["cpu", "c"])
def test_jit_serves_every_size_from_the_c_dispatcher_as_numpy_computes(backend: str) -> None:
    f = jitc.jit(mlp, backend=backend, disk_cache=False)
    for n in (3, 5):  # the first size compiles exactly, the second symbolically
        f(floats(n, 16), W1, B1, W2)
    assert type(f._fast) in (Dispatcher, Guarded)
    for n in (0, 1, 2, 13, 64, 13, 2):
        x = floats(n, 16)
        np.testing.assert_allclose(f(x, W1, B1, W2), mlp(x, W1, B1, W2), rtol=1e-4, atol=1e-4)
    stats = sorted((s["signature"], s["symbolic"]) for s in f.compile_stats())
    # The guard x_0 >= 2 sends 0 and 1 rows to exact compilations; the others run the
    # symbolic one.
    assert stats == sorted([("f32[3,16], f32[16,32], f32[32], f32[32,8]", False),
                     ("f32[x_0,16], f32[16,32], f32[32], f32[32,8]", True),
                     ("f32[0,16], f32[16,32], f32[32], f32[32,8]", False),
                     ("f32[1,16], f32[16,32], f32[32], f32[32,8]", False)])


def test_each_shape_is_bound_once_and_a_refused_one_is_remembered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _counting_binder(monkeypatch)
    dispatch = _symbolic_executable(lambda x: x[1:] * 2.0, "f32[n,3]").dispatcher(RESULT_SINGLE)
    for _ in range(3):
        for n in (4, 9):
            x = floats(n, 3)
            np.testing.assert_array_equal(dispatch(x), x[1:] * 2.0)
        assert dispatch(floats(0, 3)) is None  # n >= 1 fails: the general path's to answer
    assert asked == [((4, 3),), ((9, 3),), ((0, 3),)]


def test_more_shapes_than_the_table_holds_still_bind_correctly() -> None:
    dispatch = _symbolic_executable(lambda x: x.sum(axis=1) + x.shape[0],
                                    "f32[n,5]").dispatcher(RESULT_SINGLE)
    for _ in range(2):
        for n in range(0, 80, 3):
            x = floats(n, 5)
            np.testing.assert_allclose(dispatch(x), x.sum(axis=1) + n, rtol=1e-5, atol=1e-5)


def test_arguments_the_code_cannot_take_as_they_are_miss() -> None:
    executable = _symbolic_executable(lambda x, y: x * y + 1.0, "f32[n,4]", "f32[n,4]")
    dispatch = executable.dispatcher(RESULT_SINGLE)
    x, y = floats(6, 4), floats(6, 4)
    np.testing.assert_array_equal(dispatch(x, y), x * y + 1.0)
    assert dispatch(x.astype(np.float64), y) is None
    assert dispatch(np.asfortranarray(floats(6, 4)), y) is None
    assert dispatch(floats(6, 8)[:, ::2], y) is None
    assert dispatch(x, floats(5, 4)) is None  # the symbol n bound twice, unequal
    assert dispatch(x.tolist(), y) is None
    assert dispatch(x) is None
    # The executable's own call converts what it can and names what it cannot.
    strided = floats(6, 8)[:, ::2]
    np.testing.assert_array_equal(executable([strided, y])[0], strided * y + 1.0)
    with pytest.raises(ArgumentError, match=r"symbol n is 6 .* and 5"):
        executable([x, floats(5, 4)])


def test_a_dimension_that_is_an_expression_is_checked() -> None:
    executable = _symbolic_executable(lambda x, y: x[1:] + y, "f32[n]", "f32[n-1]")
    dispatch = executable.dispatcher(RESULT_SINGLE)
    x, y = floats(7), floats(6)
    np.testing.assert_array_equal(dispatch(x, y), x[1:] + y)
    assert dispatch(x, floats(5)) is None
    assert dispatch(x, floats(7)) is None
    np.testing.assert_array_equal(dispatch(x, y), x[1:] + y)


def test_a_donated_argument_read_by_another_falls_back_to_a_copy() -> None:
    f = jitc.jit(lambda x, y: x * 2.0 + y, donate_argnums=(0,), dynamic=True)
    x, y = floats(7, 4), floats(7, 4)
    expected = x * 2.0 + y
    got = f(x, y)
    assert got is x
    np.testing.assert_array_equal(got, expected)
    a = floats(7, 4)
    expected = a * 2.0 + a
    got = f(a, a)  # donated and read: the code runs on a copy, the caller's array stays
    np.testing.assert_array_equal(got, expected)
    assert got is not a
    read_only = floats(7, 4)
    read_only.flags.writeable = False
    np.testing.assert_array_equal(f(read_only, y), read_only * 2.0 + y)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


@pytest.mark.parametrize("n", [2, 13, 64])
def test_in_place_writes_reach_the_arguments_through_the_c_dispatcher(n: int) -> None:
    f = jitc.jit(normalize_in_place)
    for warm in (3, 5):
        agree_in_place(f, warm)
    assert type(f._fast) in (Dispatcher, Guarded)
    agree_in_place(f, n)
    assert [s["symbolic"] for s in f.compile_stats()] == [False, True]


def test_two_threads_calling_with_different_sizes_get_their_own_results() -> None:
    dispatch = _symbolic_executable(mlp, "f32[n,16]", "f32[16,32]", "f32[32]",
                                    "f32[32,8]").dispatcher(RESULT_LIST)
    failures: list[str] = []

    def calls(sizes: tuple[int, ...]) -> None:
        for _ in range(40):
            for n in sizes:
                x = floats(n, 16)
                (got,) = dispatch(x, W1, B1, W2)
                if not np.allclose(got, mlp(x, W1, B1, W2), rtol=1e-4, atol=1e-4):
                    failures.append(f"{n} rows")
    threads = [threading.Thread(target=calls, args=(sizes,))
               for sizes in ((2, 700, 13), (1500, 5, 64))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_malformed_binding_is_an_error_not_a_call() -> None:
    executable = _symbolic_executable(lambda x: x + 1.0, "f32[n]")
    entry = executable._call
    dispatch = Dispatcher(entry._address, [(np.dtype(np.float32).num, (-1,))],
                          [(np.dtype(np.float32).num, (-1,))], [], 0, RESULT_SINGLE, 1, None,
                          None, "f", None, (lambda args: ((3,), ((2, 2),), 0), 1, 1, True, 1))
    with pytest.raises(ValueError, match="wrong rank"):
        dispatch(floats(3))
    with pytest.raises(ValueError, match="names no key slot"):
        Dispatcher(entry._address, [(np.dtype(np.float32).num, (-2,))],
                   [(np.dtype(np.float32).num, (-1,))], [], 0, RESULT_SINGLE, 1, None, None,
                   "f", None, (lambda args: None, 1, 1, True, 1))


def test_an_entry_and_its_dispatchers_are_freed_together() -> None:
    """The binder is the entry's method and the entry holds a dispatcher: a cycle the garbage
    collector must see through."""
    f = jitc.jit(lambda x: x * 2.0, dynamic=True, disk_cache=False)
    f(floats(3, 2))
    (compiled,) = f._symbolic.values()
    entry = weakref.ref(compiled.executable._call)
    del compiled, f
    gc.collect()
    assert entry() is None
