"""np.broadcast_to returns numpy's read-only view: every write into it raises numpy's
ValueError (at the user's line), and a later write into the array it views shows through it,
also for views taken of the broadcast and under symbolic dimensions."""

from __future__ import annotations

import re

import numpy as np
import pytest
from jitcheck import BACKENDS

import jitc
from jitc.tracing.function import AbstractArray


def _item(b):
    b[0, 0] = 1.0


def _slice_of_it(b):
    b[1:][0] = 2.0


@pytest.mark.parametrize("write", [
    _item,
    lambda b: b.__iadd__(1.0),
    lambda b: np.add(b, 1.0, out=b),
    lambda b: np.copyto(b, 0.0),
    _slice_of_it,
    lambda b: np.copyto(b.T, 0.0),
    lambda b: np.put(b, [0], 5.0),
    lambda b: np.putmask(b, b > 1.0, 0.0),
    lambda b: b.sort(),
], ids=["item", "iadd", "out=", "copyto", "through a slice", "through a transpose", "put",
        "putmask", "sort"])
def test_writes_into_a_broadcast_raise_numpy_s_error(write) -> None:
    def program(x):
        write(np.broadcast_to(x, (3, 4)))
        return x

    with pytest.raises(ValueError, match="read-only") as numpy_error:
        program(np.arange(4.0))
    with pytest.raises(ValueError, match=r"(?s)test_numpy_broadcast_to.py:\d+.*" +
                       re.escape(f"{numpy_error.value} (a view taken with np.broadcast_to")):
        jitc.jit(program)(np.arange(4.0))


def a_later_write_shows_through(x):
    b = np.broadcast_to(x, (3, 4))
    column = np.broadcast_to(x[:, None], (4, 2))  # of a view of x
    same = np.broadcast_to(x, x.shape)  # a view even where nothing stretches
    x[1] = -1.0
    x += 10.0
    return b * 1.0, column * 1.0, same * 1.0, b.sum(), x


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_later_write_into_the_array_shows_through_the_broadcast(backend: str) -> None:
    want_x, got_x = np.arange(4.0), np.arange(4.0)
    want = a_later_write_shows_through(want_x)
    got = jitc.jit(a_later_write_shows_through, backend=backend)(got_x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
        assert np.shape(g) == np.shape(w)
    np.testing.assert_array_equal(got_x, want_x)


def test_a_broadcast_of_a_scalar_is_read_only_too() -> None:
    def program(x):
        b = np.broadcast_to(x.sum(), (3,))
        b[0] = 1.0
        return b

    with pytest.raises(ValueError, match="read-only"):
        program(np.arange(4.0))
    with pytest.raises(ValueError, match=r"(?s)test_numpy_broadcast_to.py:\d+.*read-only"):
        jitc.jit(program)(np.arange(4.0))


def test_a_copy_of_a_broadcast_is_writable() -> None:
    def program(x):
        b = np.broadcast_to(x, (2, 4)).copy()
        b[0, 0] = 9.0
        return b, x

    want = program(np.arange(4.0))
    for g, w in zip(jitc.jit(program)(np.arange(4.0)), want, strict=True):
        np.testing.assert_array_equal(g, w)


def broadcast_rows(row, x):
    b = np.broadcast_to(row, x.shape)
    row *= 2.0  # seen through b
    return b + x


def test_a_broadcast_to_a_symbolic_shape_is_a_view_compiled_once() -> None:
    f = jitc.jit(broadcast_rows, dynamic={"x": {0: "n"}}, disk_cache=False)
    for n in (0, 1, 3, 6):
        x = np.ones((n, 4))
        want_row, got_row = np.arange(4.0), np.arange(4.0)
        np.testing.assert_array_equal(f(got_row, x), broadcast_rows(want_row, x))
        np.testing.assert_array_equal(got_row, want_row)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]

    def write_into_it(x):
        b = np.broadcast_to(x[0], x.shape)
        b[1] = 0.0
        return x

    with pytest.raises(ValueError, match=r"(?s)test_numpy_broadcast_to.py:\d+.*read-only"):
        jitc.jit(write_into_it).lower(AbstractArray("f32[n,4]"))


def test_a_returned_broadcast_of_an_argument_is_numpy_s_read_only_view_of_it() -> None:
    def program(x):
        x += 1.0
        return np.broadcast_to(x, (3, 4))

    x = np.arange(4.0)
    got = jitc.jit(program)(x)
    assert np.shares_memory(got, x) and not got.flags.writeable
    np.testing.assert_array_equal(got, program(np.arange(4.0)))

    rows = jitc.jit(lambda y: np.broadcast_to(y[0], y.shape), dynamic=True, disk_cache=False)
    for n in (2, 3, 5):  # a symbolic shape: the values (numpy has no view to take at the call)
        y = np.arange(n * 4.0).reshape(n, 4)
        np.testing.assert_array_equal(rows(y), np.broadcast_to(y[0], y.shape))
    assert [s["symbolic"] for s in rows.compile_stats()] == [True]
