"""Writes at positions along a symbolic axis (`x[0] = 1`, `x[1:] += 1`, `x[::2] = 0`,
`x[-2:] = tail`, docs/dynamic-shapes.md) compile once and agree with numpy for every size:
slice bounds clamp to the call's extent as numpy clamps them, and a size numpy refuses (an
int out of range, a value that does not fit) raises numpy's error type. Sizes a form's reads
constrain (`x[1:]` is read by `x[1:] += 1` and needs `n >= 1`) compile exactly; each form
lists them."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS

import jitc
from jitc.tracing.errors import ShapeError
from jitc.tracing.function import AbstractArray

SIZES = (0, 1, 2, 5, 17)
ROW = np.array([10.0, 20.0, 30.0], np.float32)


def first(x):
    x[0] = 1.0
    return x * 1.0


def last(x):
    x[-1] = ROW
    return x.sum(axis=1)


def shift_up(x):
    x[1:] += 1.0
    return x * 1.0


def halve_but_last(x):
    x[:-1] *= 2.0
    return x * 1.0


def even_rows(x):
    x[::2] = 0.0
    return x * 1.0


def row_two(x):
    x[2] = ROW  # a Python int index: out of range for fewer than 3 rows
    return x * 1.0


def two_last(x):
    x[-2:] = np.array([[1.0], [2.0]], np.float32)  # numpy's broadcast error below 2 rows
    return x * 1.0


def backwards(x):
    x[-2::-3, 1:] = -1.0
    return x * 1.0


def past_the_end(x):
    x[3:100] = 4.0
    x[-100:1] = 5.0
    return x * 1.0


def shifted(x):
    x[1:] = x[:-1]  # numpy copies an overlapping value first
    return x * 1.0


def through_views(x):
    tail = x[1:]  # numpy's view: the writes below show through it
    x[::2] = -1.0
    tail[-1] = 7.0  # and a write through it reaches x
    row = x[0]
    x[:1] += 1.0  # (numpy's IndexError for x[0] at 0 rows comes first)
    return tail * 1.0, row * 1.0


# form, sizes its reads constrain (an exact compilation each)
FORMS = [
    (first, ()), (last, ()), (shift_up, (0,)), (halve_but_last, (0,)), (even_rows, ()),
    (row_two, ()), (two_last, ()), (backwards, ()), (past_the_end, ()), (shifted, (0,)),
    (through_views, ()),
]


def _rows(n: int) -> np.ndarray:
    return np.arange(n * 3, dtype=np.float32).reshape(n, 3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form,exact_sizes", FORMS, ids=[f.__name__ for f, _ in FORMS])
def test_each_write_form_compiles_once_for_every_size(form, exact_sizes, backend: str) -> None:
    f = jitc.jit(form, backend=backend, dynamic={"x": {0: "n"}}, disk_cache=False)
    for n in SIZES:
        want_x, got_x = _rows(n), _rows(n)
        try:
            want = form(want_x)
        except (IndexError, ValueError) as error:
            with pytest.raises(type(error)):
                f(got_x)
            continue
        got = f(got_x)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True):
            np.testing.assert_array_equal(g, w)
            assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(got_x, want_x)  # the write reached the argument
    stats = f.compile_stats()
    assert [s["symbolic"] for s in stats].count(True) == 1
    exact = [s["signature"] for s in stats if not s["symbolic"]]
    assert exact == [f"f32[{n},3]" for n in exact_sizes]


def columns(y):
    y[:, 1:] = y[:, :-1] * 10.0
    y[1, -1] = -3.0
    y[..., ::-2] += 1.0
    return y * 1.0


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_writes_along_two_symbolic_axes(backend: str) -> None:
    f = jitc.jit(columns, backend=backend, dynamic=True, disk_cache=False)
    for rows, cols in ((2, 1), (3, 4), (5, 2), (2, 7)):
        x = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
        want_x, got_x = x.copy(), x.copy()
        np.testing.assert_array_equal(f(got_x), columns(want_x))
        np.testing.assert_array_equal(got_x, want_x)
    assert [s["symbolic"] for s in f.compile_stats()] == [True]


def test_an_index_out_of_range_is_a_constraint_of_the_call() -> None:
    lowered = jitc.jit(last).lower(AbstractArray("f32[n,3]"))
    assert "constraint n >= 1" in lowered.as_text()
    compiled = lowered.compile()
    x = _rows(4)
    np.testing.assert_array_equal(compiled(x), last(_rows(4)))
    with pytest.raises(TypeError, match=r"constraint n >= 1"):
        compiled(_rows(0))


def test_a_value_that_fits_no_size_is_numpy_s_error_at_its_line() -> None:
    def wrong(x):
        x[1:] = np.ones((2, 2), np.float32)
        return x

    with pytest.raises(ShapeError, match=r"(?s)test_symbolic_positions.py:\d+ in wrong.*"
                                         r"could not broadcast input array from shape \(2, 2\)"):
        jitc.jit(wrong).lower(AbstractArray("f32[n,3]"))
