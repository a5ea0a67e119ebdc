"""Randomized op tests where random search finds more than hand-picked cases: broadcastable
shape pairs and mixed dtypes for binary ufuncs, basic index expressions, reduction axes.

Each example is checked like an op case (`checks.check`): against numpy, the interpreter on the
traced and on the optimized module, and through the cache.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from jitc.ir import dtypes
from jitc.numpy.complexes import COMPLEX_AS_IS, COMPLEX_UFUNCS

from .backends import BACKENDS, require
from .checks import APPROX, EXACT, check
from .values import ANY, FACTORS, INF, SMALL, Values, with_layout

DTYPES = [d.numpy for d in dtypes.ALL]
SETTINGS = settings(max_examples=50, deadline=None, derandomize=True)

BINARY_UFUNCS = [np.add, np.subtract, np.multiply, np.true_divide, np.maximum, np.minimum,
                 np.equal, np.not_equal, np.less, np.greater_equal, np.logical_and,
                 np.logical_xor, np.bitwise_and, np.bitwise_or, np.arctan2, np.power,
                 np.floor_divide, np.remainder, np.fmod]


def _supported(dtype: np.dtype) -> bool:
    return dtypes.is_supported_numpy(dtype)


def _numpy_loop(ufunc: np.ufunc, keys: tuple[object, ...]) -> tuple[np.dtype, ...] | None:
    """numpy's loop dtypes for these inputs, or None when numpy (or jitc) has no loop."""
    try:
        loop = ufunc.resolve_dtypes(keys + (None,))
    except (TypeError, np.exceptions.DTypePromotionError):
        return None
    if any(d.kind == "c" for d in loop) and ufunc not in COMPLEX_AS_IS | set(COMPLEX_UFUNCS):
        return None  # jitc refuses it by name (tests/numpy/test_numpy_complex.py)
    return loop if all(_supported(d) for d in loop) else None


def _array(draw: st.DrawFn, shape: tuple[int, ...], dtype: np.dtype, values: Values
           ) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    layout = draw(st.sampled_from("CFTSN"))
    return with_layout(values.array(dtype, shape, rng), layout)


def _binary_combinations() -> list[tuple[np.ufunc, np.dtype, object]]:
    """(ufunc, x dtype, y dtype or Python scalar type) wherever numpy and jitc have a loop.
    Integer powers are left to the op table, which bounds their values (numpy overflows and
    rejects negative exponents)."""
    combos = []
    for ufunc in BINARY_UFUNCS:
        for x in DTYPES:
            for y in [*DTYPES, bool, int, float, complex]:
                # numpy promotes a Python bool as its own bool dtype (not weakly).
                loop = _numpy_loop(ufunc, (x, np.dtype(bool) if y is bool else y))
                if loop is not None and not (ufunc is np.power and loop[0].kind in "iu"):
                    combos.append((ufunc, x, y))
    return combos


BINARY_COMBINATIONS = _binary_combinations()
PYTHON_VALUES = {bool: [False, True], int: [0, 1, 3, 100], float: [0.0, -0.0, 2.5, -1.75, INF],
                 complex: [0j, 1j, 2.5 - 1.75j, complex(INF, 0)]}


@st.composite
def binary_calls(draw: st.DrawFn) -> tuple[np.ufunc, list[object]]:
    """A ufunc with two broadcastable arguments of dtypes numpy (and jitc) has a loop for;
    sometimes the second argument is a Python scalar (weakly typed)."""
    ufunc, x_dtype, y_key = draw(st.sampled_from(BINARY_COMBINATIONS))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4))
    x = _array(draw, shapes.input_shapes[0], x_dtype, ANY)
    if isinstance(y_key, np.dtype):
        y = _array(draw, shapes.input_shapes[1], y_key, ANY)
    else:
        y = draw(st.sampled_from(PYTHON_VALUES[y_key]))
    return ufunc, [x, y]


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(call=binary_calls())
def test_binary_ufunc_broadcast_and_promotion(backend: str, call) -> None:
    require(backend)
    ufunc, args = call
    check(lambda x, y: ufunc(x, y), args, backend, tol=APPROX)


@st.composite
def basic_index_calls(draw: st.DrawFn) -> tuple[object, np.ndarray]:
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    index = draw(hnp.basic_indices(shape, min_dims=0, allow_newaxis=True,
                                   allow_ellipsis=True))
    x = _array(draw, shape, draw(st.sampled_from(DTYPES)), ANY)
    return index, x


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(call=basic_index_calls())
def test_basic_indexing(backend: str, call) -> None:
    """Ints, slices with any steps, None and Ellipsis: the same elements as numpy's view."""
    require(backend)
    index, x = call
    check(lambda x: x[index], [x], backend, tol=EXACT, signed_zeros=True)


REDUCERS = {
    "sum": (np.sum, SMALL), "prod": (np.prod, FACTORS), "mean": (np.mean, SMALL),
    "max": (np.max, ANY), "min": (np.min, ANY), "any": (np.any, ANY), "all": (np.all, ANY),
    "argmax": (np.argmax, ANY), "argmin": (np.argmin, ANY),
}


@st.composite
def reduce_calls(draw: st.DrawFn) -> tuple[str, dict[str, object], np.ndarray]:
    name = draw(st.sampled_from(sorted(REDUCERS)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    dtype = draw(st.sampled_from(DTYPES))
    if np.dtype(dtype).kind == "c" and name not in ("sum", "prod", "mean"):
        dtype = np.dtype(np.float32)  # complex values have no order (jitc refuses max of them)
    rank = len(shape)
    axes = st.integers(-rank, rank - 1) if rank else st.sampled_from([0, -1])
    if rank == 0 and name == "mean":
        axis = None  # numpy's mean, unlike its other reductions, takes no axis of a 0-d array
    elif name.startswith("arg") or rank == 0:
        # (numpy takes an int axis of a 0-d array, but no tuple of axes)
        axis = draw(st.none() | axes)
    else:
        axis = draw(st.none() | axes | st.lists(axes, unique_by=lambda a: a % max(rank, 1))
                    .map(tuple))
    kwargs: dict[str, object] = {"axis": axis, "keepdims": draw(st.booleans())}
    reduced = range(rank) if axis is None else \
        [a % max(rank, 1) for a in (axis if isinstance(axis, tuple) else (axis,))]
    empty = any(shape[a] == 0 for a in reduced) if rank else False
    if name.startswith("arg") and (empty or (axis is None and 0 in shape)):
        shape = tuple(max(d, 1) for d in shape)  # numpy raises on an empty argmax
    elif name in ("max", "min") and empty:
        kwargs["initial"] = 0  # numpy needs an initial value for an empty max
    x = _array(draw, shape, np.dtype(dtype), REDUCERS[name][1])
    return name, kwargs, x


@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(call=reduce_calls())
def test_reductions_over_random_axes(backend: str, call) -> None:
    require(backend)
    name, kwargs, x = call
    reducer = REDUCERS[name][0]
    check(lambda x: reducer(x, **kwargs), [x], backend, tol=APPROX)


INTEGER_DTYPES = [d.numpy for d in dtypes.INTS]
WRAPPING = {
    "add": lambda x, y: x + y, "subtract": lambda x, y: x - y, "multiply": lambda x, y: x * y,
    "negative": lambda x, y: -x, "absolute": lambda x, y: np.abs(x),
    "floor_divide": lambda x, y: x // y, "remainder": lambda x, y: x % y,
    "fmod": lambda x, y: np.fmod(x, y), "true_divide": lambda x, y: x / y,
    "power": lambda x, y: x ** (y & 3), "sign": lambda x, y: np.sign(x),
    "shifts": lambda x, y: (x << (y & 7), x >> (y & 7), ~x ^ y),
    "compare": lambda x, y: (x < y, x == y, np.maximum(x, y), np.minimum(x, y)),
    "reductions": lambda x, y: ((x + y).sum(), x.prod(), x.max(axis=0), x.argmin()),
    "astype": lambda x, y: (x.astype(y.dtype), y.astype(x.dtype)),
    # to float and back within range: numpy truncates toward zero, as the IR does
    "floats": lambda x, y: (x.astype(np.float32), x.astype(np.float16), (x / 3).astype(x.dtype)),
}


@st.composite
def integer_calls(draw: st.DrawFn) -> tuple[str, np.ndarray, np.ndarray]:
    """Integers over their whole range, where hypothesis favours the bounds: numpy wraps
    around them (two's complement), and so must every backend."""
    name = draw(st.sampled_from(sorted(WRAPPING)))
    dtype = draw(st.sampled_from(INTEGER_DTYPES))
    other = dtype if name != "astype" else draw(st.sampled_from(INTEGER_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=4))
    return name, draw(hnp.arrays(dtype, shape)), draw(hnp.arrays(other, shape))


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=25, deadline=None, derandomize=True)
@given(call=integer_calls())
def test_integers_wrap_around_like_numpy(backend: str, call) -> None:
    require(backend)
    name, x, y = call
    check(WRAPPING[name], [x, y], backend, tol=EXACT)
