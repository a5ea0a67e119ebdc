"""np.lib.stride_tricks.sliding_window_view against numpy: values, shapes, dtypes, the view it
is of its array (a later write into the array shows through, a write into it is refused as
numpy refuses it) and numpy's errors."""

from __future__ import annotations

import re

import numpy as np
import numpy.lib.stride_tricks
import pytest
from jitcheck import BACKENDS, check_jit, random
from numpy.lib.stride_tricks import sliding_window_view

import jitc
from jitc.tracing.errors import TraceError
from jitc.tracing.function import AbstractArray

# (shape, window_shape, axis): size-0 and size-1 axes, windows as long as their axis, empty
# windows, repeated and negative axes.
CASES = [
    ((7,), 3, None),
    ((7,), 7, -1),
    ((7,), 1, 0),
    ((7,), 0, 0),
    ((0,), 0, None),
    ((1,), (1,), (0,)),
    ((4, 5), (2, 3), None),
    ((4, 5), 2, 1),
    ((4, 5), (2, 2), (0, 0)),
    ((4, 5), (3, 1, 2), (1, -2, 1)),
    ((4, 5), (), ()),
    ((0, 5), 2, 1),
    ((3, 0), (0, 3), (1, 0)),
    ((2, 3, 6), (2, 4, 2), (-1, -1, 1)),
    ((), (), None),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_windows_as_numpy(backend):
    for shape, window, axis in CASES:
        x = random(shape, np.float32, seed=len(shape))
        check_jit(lambda x, w=window, a=axis: sliding_window_view(x, w, axis=a), x,
                  backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.float64, np.bool_])
def test_dtypes_and_non_contiguous_inputs(dtype, backend):
    x = random((5, 6), dtype)
    check_jit(lambda x: (numpy.lib.stride_tricks.sliding_window_view(x.T, (2, 3)),
                         np.lib.stride_tricks.sliding_window_view(x[::2, 1::2], 2, axis=0),
                         sliding_window_view(x[:, ::-1], (4, 2), axis=(1, 1))), x,
              backend=backend)


def conv(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return (np.einsum("bchwij,ocij->bohw", win, w),
            np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3])))


def moving_average(x, k):
    return np.lib.stride_tricks.sliding_window_view(x, k, axis=-1).mean(axis=-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_convolution_and_moving_average(backend):
    x, w = random((2, 3, 6, 5)), random((4, 3, 3, 3), seed=1)
    check_jit(conv, x, w, backend=backend, rtol=1e-5, atol=1e-5)
    v = random((3, 40), np.float64)
    check_jit(moving_average, v, 16, backend=backend, static_argnums=(1,))
    check_jit(lambda v: np.median(sliding_window_view(v, (2, 5)), axis=(-2, -1)), v,
              backend=backend)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_write_into_the_array_shows_through_its_windows(backend):
    def write_after(x):
        win = sliding_window_view(x, 3, axis=-1)
        row = win[1]
        x[0, 2] = 100
        x[1:] *= 2
        return win.sum(axis=-1), row, win.T.copy()

    def windows_of_a_view(x):
        win = sliding_window_view(x[:, 1:], (2, 2))
        x += 1
        return win
    check_jit(write_after, random((3, 6), np.int32), backend=backend)
    check_jit(windows_of_a_view, random((3, 6), np.float32), backend=backend)


def test_windows_of_an_argument_are_its_read_only_view():
    x = np.arange(10.0)
    win = jitc.jit(lambda x: sliding_window_view(x, 4))(x)
    assert np.shares_memory(win, x) and not win.flags.writeable
    np.testing.assert_array_equal(win, sliding_window_view(x, 4))


def _write_into(win):
    win[0, 0] = 1


@pytest.mark.parametrize("write", [
    _write_into,
    lambda win: win.__iadd__(1),
    lambda win: np.add(win, 1, out=win),
    lambda win: _write_into(win[1:]),
    lambda win: np.copyto(win.T, 0),
])
def test_writes_into_windows_raise_numpy_error(write):
    def program(x):
        write(sliding_window_view(x, 3))
        return x
    with pytest.raises(ValueError, match="read-only") as numpy_error:
        program(np.arange(6.0))
    with pytest.raises(ValueError, match=r"(?s)test_numpy_windows.py:\d+.*" +
                       re.escape(str(numpy_error.value))):
        jitc.jit(program)(np.arange(6.0))


def test_a_copy_of_windows_is_writable():
    def program(x):
        win = sliding_window_view(x, 3).copy()
        win[0, 0] = 7
        return win, x
    check_jit(program, np.arange(6.0))


def test_writes_through_writeable_windows_are_refused():
    def program(x):
        win = sliding_window_view(x, 3, writeable=True)
        win[0] = 1
        return x
    with pytest.raises(TraceError, match=r"(?s)test_numpy_windows.py:\d+.*overlap.*"
                                         "Compute the new array instead"):
        jitc.jit(program)(np.arange(6.0))
    # Without a write, writeable windows are numpy's windows.
    check_jit(lambda x: sliding_window_view(x, 3, writeable=True, subok=True) * 2,
              np.arange(6.0))


@pytest.mark.parametrize("args, message", [
    (((3,), 4, None), "window shape cannot be larger than input array shape"),
    (((3,), -1, None), "cannot contain negative values"),
    (((3, 4), 2, None), "Since axis is `None`, must provide window_shape for all dimensions"),
    (((3, 4), (2, 2), 1), "Must provide matching length window_shape and axis"),
    (((3, 4), 2, 2), "out of bounds"),
])
def test_errors_as_numpy(args, message):
    shape, window, axis = args
    x = np.zeros(shape)
    with pytest.raises(ValueError, match=message):
        sliding_window_view(x, window, axis=axis)
    with pytest.raises(ValueError, match=rf"(?s)test_numpy_windows.py:\d+.*{message}"):
        jitc.jit(lambda x: sliding_window_view(x, window, axis=axis))(x)


def test_windows_over_static_axes_of_a_symbolic_batch():
    lowered = jitc.jit(moving_average, static_argnums=(1,), verify=True).lower(
        AbstractArray("f32[n,20]"), 4)
    for n in (0, 1, 5):
        x = random((n, 20))
        np.testing.assert_allclose(jitc.interpret(lowered.module, [x])[0], moving_average(x, 4),
                                   rtol=1e-6)


def test_windows_along_a_symbolic_axis_are_refused():
    with pytest.raises(TraceError, match=r"(?s)test_numpy_windows.py:\d+.*extent is symbolic"):
        jitc.jit(moving_average, static_argnums=(1,)).lower(AbstractArray("f32[n]"), 4)


def test_a_product_over_windows_reads_them_as_one_matrix_on_cpu():
    """The windows a tensordot contracts are copied into the GEMM kernel's layout (batch,
    free, then contracting dimensions, major to minor) rather than read through a transposed
    bitcast the kernel cannot collapse into a matrix (ten times slower on the 3x3
    convolution of docs/jit.md)."""
    from jitc.ir import ops
    from jitc.passes import KERNEL_PASSES, run_passes

    def patches_product(x, w):
        win = sliding_window_view(x, (3, 3), axis=(2, 3))
        return np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))
    x, w = random((2, 8, 10, 10)), random((16, 8, 3, 3), seed=1)
    module = run_passes(jitc.jit(patches_product).lower(x, w).module, KERNEL_PASSES)
    dots = [i for i in module.entry.body if i.op is ops.DOT_GENERAL]
    assert [d.operands[0].type.layout for d in dots] == [(5, 4, 1, 3, 2, 0)]
    check_jit(patches_product, x, w, backend="cpu", rtol=1e-5, atol=1e-5)


def test_writes_beside_windows_of_a_symbolic_batch():
    """With a symbolic batch axis the windows are computed as a copy: a write into them still
    raises numpy's ValueError, and a later write into the array, which numpy's view would
    see, is refused rather than left unseen."""
    def write_windows(x):
        sliding_window_view(x, 3, axis=1)[0, 0] = 1
        return x

    def add_into_windows(x):
        win = sliding_window_view(x, 3, axis=1)
        win += 1
        return x

    def write_array(x):
        win = sliding_window_view(x, 3, axis=1)
        x[0] = 0
        return win
    with pytest.raises(ValueError, match=r"(?s)test_numpy_windows.py:\d+.*read-only"):
        jitc.jit(write_windows).lower(AbstractArray("f32[n,5]"))
    with pytest.raises(ValueError, match=r"(?s)test_numpy_windows.py:\d+.*read-only"):
        jitc.jit(add_into_windows).lower(AbstractArray("f32[n,5]"))
    with pytest.raises(TraceError, match=r"(?s)test_numpy_windows.py:\d+.*symbolic dimensions"):
        jitc.jit(write_array).lower(AbstractArray("f32[n,5]"))
