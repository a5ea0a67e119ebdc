"""Shape manipulation, joining and splitting, and rearranging functions against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS, check_jit, random

X = random((2, 3, 4))

# (id, function of one array, input)
UNARY = [
    ("reshape -1", lambda x: np.reshape(x, (-1,)), X),
    ("reshape (6,-1)", lambda x: np.reshape(x, (6, -1)), X),
    ("reshape int", lambda x: np.reshape(x, 24), X),
    ("method reshape(2,-1)", lambda x: x.reshape(2, -1), X),
    ("method reshape((4,6))", lambda x: x.reshape((4, 6)), X),
    ("reshape to scalar", lambda x: x.reshape(()), random((1, 1))),
    ("transpose", np.transpose, X),
    ("transpose axes", lambda x: np.transpose(x, (1, 0, 2)), X),
    ("transpose negative axes", lambda x: np.transpose(x, (-1, 0, -2)), X),
    ("method transpose(0,2,1)", lambda x: x.transpose(0, 2, 1), X),
    ("method transpose()", lambda x: x.transpose(), X),
    ("method transpose(tuple)", lambda x: x.transpose((2, 0, 1)), X),
    ("T", lambda x: x.T, X),
    ("T 1-d", lambda x: x.T, random((3,))),
    ("mT", lambda x: x.mT, X),
    ("swapaxes", lambda x: np.swapaxes(x, 0, 2), X),
    ("method swapaxes(-1,-2)", lambda x: x.swapaxes(-1, -2), X),
    ("moveaxis", lambda x: np.moveaxis(x, 0, -1), X),
    ("moveaxis lists", lambda x: np.moveaxis(x, [0, 1], [-1, 0]), X),
    ("expand_dims 0", lambda x: np.expand_dims(x, 0), X),
    ("expand_dims -1", lambda x: np.expand_dims(x, -1), X),
    ("expand_dims tuple", lambda x: np.expand_dims(x, (0, 2)), X),
    ("squeeze", np.squeeze, random((1, 3, 1, 4))),
    ("squeeze axis", lambda x: np.squeeze(x, axis=2), random((1, 3, 1, 4))),
    ("squeeze axes", lambda x: x.squeeze((0, -2)), random((1, 3, 1, 4))),
    ("ravel", np.ravel, X),
    ("method ravel", lambda x: x.ravel(), X),
    ("method flatten", lambda x: x.flatten(), X),
    ("atleast_2d", np.atleast_2d, random((3,))),
    ("broadcast_to", lambda x: np.broadcast_to(x, (5, 3, 4)), random((3, 1))),
    ("flip", np.flip, X),
    ("flip axis", lambda x: np.flip(x, axis=1), X),
    ("flip axes", lambda x: np.flip(x, axis=(0, -1)), X),
    ("fliplr", np.fliplr, X),
    ("flipud", np.flipud, X),
    ("roll", lambda x: np.roll(x, 2), X),
    ("roll axis", lambda x: np.roll(x, -1, axis=2), X),
    ("roll axes", lambda x: np.roll(x, (1, 2), axis=(0, 1)), X),
    ("roll larger than axis", lambda x: np.roll(x, 7, axis=1), X),
    ("repeat", lambda x: np.repeat(x, 2), X),
    ("repeat axis", lambda x: np.repeat(x, 3, axis=1), X),
    ("method repeat", lambda x: x.repeat(2, axis=-1), X),
    ("tile", lambda x: np.tile(x, 2), X),
    ("tile tuple", lambda x: np.tile(x, (2, 1, 3)), X),
    ("tile more reps than dims", lambda x: np.tile(x, (2, 1, 1, 2)), X),
    ("pad", lambda x: np.pad(x, 1), X),
    ("pad widths", lambda x: np.pad(x, ((0, 0), (1, 2), (3, 0))), X),
    ("pad value", lambda x: np.pad(x, ((1, 1), (0, 0), (2, 2)), constant_values=-1.5), X),
    ("pad per-axis pair", lambda x: np.pad(x, (1, 2)), X),
    ("tril", np.tril, random((4, 5))),
    ("tril k", lambda x: np.tril(x, k=-1), random((4, 5))),
    ("triu", np.triu, random((4, 5))),
    ("triu k batched", lambda x: np.triu(x, 1), X),
    ("clip", lambda x: np.clip(x, -1, 1), X),
    ("clip one side", lambda x: np.clip(x, None, 0.5), X),
    ("method clip", lambda x: x.clip(min=0), X),
    ("clip out-of-range int bounds", lambda x: np.clip(abs(x * 9).astype(np.uint8), -1, 300), X),
    ("clip float bounds of ints", lambda x: np.clip(x.astype(np.int8), 0.5, 1.5), X),
    ("clip arrays", lambda x: np.clip(x, np.full(4, -0.5), np.full((3, 1), 0.5)), X),
    ("abs", np.abs, X),
    ("astype int32", lambda x: x.astype(np.int32), X),
    ("astype float64", lambda x: x.astype(np.float64), X),
    ("astype bool", lambda x: x.astype(bool), X),
    ("astype 'float16'", lambda x: x.astype("float16"), X),
    ("astype int", lambda x: (x * 10).astype(int), X),
    ("zeros_like", np.zeros_like, X),
    ("ones_like dtype", lambda x: np.ones_like(x, dtype=np.int32), X),
    ("full_like", lambda x: np.full_like(x, 7.5), X),
    ("full_like int", lambda x: np.full_like(x, 7, dtype=np.int8), X),
    ("empty_like shape", lambda x: np.zeros_like(x, shape=(2, 2)), X),
    ("copy", np.copy, X),
    ("method copy", lambda x: x.copy(), X),
    ("round", np.round, X),
    ("round decimals", lambda x: np.round(x, 2), X),
    ("around", np.around, X),
    ("shape queries", lambda x: x + x.shape[0] * x.ndim + x.size + np.shape(x)[-1], X),
    ("len", lambda x: x * len(x), X),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,x", [pytest.param(f, x, id=name) for name, f, x in UNARY])
def test_unary(fn, x, backend):
    check_jit(fn, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("name", ["transpose", "flip", "roll", "tile", "pad", "tril",
                                  "repeat", "clip", "abs", "astype int32", "astype float64",
                                  "zeros_like", "full_like"])
def test_unary_dtypes(name, dtype, backend):
    fn = next(f for n, f, _ in UNARY if n == name)
    x = random((3, 4), dtype, low=-3, high=3)
    try:
        fn(x)
    except TypeError:
        pytest.skip("numpy rejects this dtype")
    check_jit(fn, x, backend=backend)


A, B, C = random((2, 3), seed=1), random((2, 3), seed=2), random((2, 5), seed=3)

JOINS = [
    ("concatenate", lambda a, b, c: np.concatenate([a, b, c], axis=1)),
    ("concatenate axis 0", lambda a, b, c: np.concatenate((a, b))),
    ("concatenate axis -1", lambda a, b, c: np.concatenate([a, c], axis=-1)),
    ("concatenate None", lambda a, b, c: np.concatenate([a, c], axis=None)),
    ("concatenate mixed dtypes", lambda a, b, c: np.concatenate([a, b.astype(np.int32)])),
    ("concatenate constant", lambda a, b, c: np.concatenate([a, np.zeros((1, 3))])),
    ("stack", lambda a, b, c: np.stack([a, b])),
    ("stack axis -1", lambda a, b, c: np.stack([a, b, a], axis=-1)),
    ("stack axis 1", lambda a, b, c: np.stack((a, b), 1)),
    ("hstack", lambda a, b, c: np.hstack([a, b, c])),
    ("hstack 1-d", lambda a, b, c: np.hstack([a[0], c[1]])),
    ("vstack", lambda a, b, c: np.vstack([a, b])),
    ("vstack 1-d", lambda a, b, c: np.vstack([a[0], b[1]])),
    ("column_stack", lambda a, b, c: np.column_stack([a[0], b[1]])),
    ("split", lambda a, b, c: np.split(c, [1, 3], axis=1)),
    ("split sections", lambda a, b, c: np.split(np.hstack([a, b]), 3, axis=-1)),
    ("split axis 0", lambda a, b, c: np.split(a, 2)),
    ("split out-of-range indices", lambda a, b, c: np.split(c, [2, 9], axis=1)),
    ("split negative indices", lambda a, b, c: np.split(c, [-2], axis=1)),
    ("array_split", lambda a, b, c: np.array_split(c, 3, axis=1)),
    ("array_split more than size", lambda a, b, c: np.array_split(a, 4, axis=1)),
    ("hsplit", lambda a, b, c: np.hsplit(a, 3)),
    ("vsplit", lambda a, b, c: np.vsplit(a, [1])),
    ("broadcast_arrays", lambda a, b, c: np.broadcast_arrays(a, b[0], 1.0)),
    ("tuple unpacking of split", lambda a, b, c: sum(np.split(c[:, :4], 2, axis=1))),
    ("append", lambda a, b, c: np.append(a, c)),
    ("append axis", lambda a, b, c: np.append(a, c, axis=1)),
    ("diff", lambda a, b, c: np.diff(c)),
    ("diff n=2 axis 0", lambda a, b, c: np.diff(np.vstack([a, b, a]), n=2, axis=0)),
    ("diff prepend append", lambda a, b, c: np.diff(c, prepend=0.0, append=c[:, :1])),
    ("diff bool", lambda a, b, c: np.diff(c > 0, axis=-1)),
    ("diff of an empty axis", lambda a, b, c: np.diff(c[:0], n=2, axis=0)),
    ("diff past the length", lambda a, b, c: np.diff(c[:2], n=3, axis=0)),
    ("take_along_axis", lambda a, b, c: np.take_along_axis(c, np.argmax(c, 1)[:, None], 1)),
    ("take_along_axis static", lambda a, b, c: np.take_along_axis(
        c, np.array([[4, 0, 0], [1, 2, 3]]), axis=-1)),
    ("take_along_axis broadcast", lambda a, b, c: np.take_along_axis(
        c, np.array([[0, 4]]), axis=1)),
    ("take_along_axis axis 0", lambda a, b, c: np.take_along_axis(
        c, np.array([[1, 0, 1, 1, 0]]), axis=0)),
    ("take_along_axis None", lambda a, b, c: np.take_along_axis(c, np.array([9, 0, 3]), None)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [pytest.param(f, id=name) for name, f in JOINS])
def test_join_and_split(fn, backend):
    check_jit(fn, A, B, C, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_iteration_and_unpacking(backend):
    check_jit(lambda x: [row * i for i, row in enumerate(x)], A, backend=backend)
    check_jit(lambda x: tuple(x), A, backend=backend)

    def unpack(x):
        first, second = x
        return first - second
    check_jit(unpack, A, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_to_int_conversion_saturates(backend):
    """Deliberately not numpy: numpy's out-of-range float-to-int casts are undefined (they
    wrap on most machines, and nan gives INT_MIN); jitc's convert saturates and maps nan to 0,
    the same on every backend."""
    import jitc
    x = np.array([-300.7, -1.5, 0.5, 127.9, 1e10, np.nan, -np.inf], np.float32)
    got = jitc.jit(lambda x: x.astype(np.int8), backend=backend)(x)
    np.testing.assert_array_equal(got, np.array([-128, -1, 0, 127, 127, 0, -128], np.int8))
    got = jitc.jit(lambda x: x.astype(np.uint8), backend=backend)(x)
    np.testing.assert_array_equal(got, np.array([0, 0, 0, 127, 255, 0, 0], np.uint8))
