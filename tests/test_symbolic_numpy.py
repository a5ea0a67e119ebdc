"""numpy code on arrays with symbolic dimensions: one traced module, run by the interpreter,
gives numpy's results (values, shapes, dtypes) for every size its constraints accept, and a
construct it cannot trace fails while tracing with an error naming the user's line."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import jitc
import jitc.numpy as jnp
from jitc.ir.interpreter import ArgumentError
from jitc.tracing.errors import ConcretizationError, TraceError
from jitc.tracing.function import AbstractArray

SIZES = (0, 1, 2, 5, 17)


def _floats(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape) + 3 * len(shape)).standard_normal(shape).astype(
        np.float32)


def _numpy(fun: Callable, args: Sequence[np.ndarray]) -> object:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # mean of an empty axis: numpy warns, gives nan
        return fun(*args)


def _assert_numpy_equal(got: object, want: object) -> None:
    want_leaves = want if isinstance(want, tuple) else (want,)
    got_leaves = got if isinstance(got, (tuple, list)) else (got,)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6, equal_nan=True)


def check_sizes(fun: Callable, types: Sequence[str], make: Callable[[int], list[np.ndarray]],
                sizes: Sequence[int] = SIZES) -> jitc.Lowered:
    """Lower `fun` once on symbolic types and compare the interpreter with numpy per size."""
    lowered = jitc.jit(fun, verify=True).lower(*(AbstractArray(t) for t in types))
    for size in sizes:
        args = make(size)
        _assert_numpy_equal(jitc.interpret(lowered.module, args), _numpy(fun, args))
    return lowered


# -- extents as run-time values --------------------------------------------------------------

@pytest.mark.parametrize("fun", [
    lambda x: x.mean(axis=0),
    lambda x: np.mean(x),
    lambda x: np.mean(x, axis=(0, 1), keepdims=True),
    lambda x: np.var(x, axis=0),
    lambda x: np.var(x, axis=0, ddof=1),
    lambda x: np.var(x, axis=0, ddof=3),
    lambda x: np.std(x),
    lambda x: x.std(axis=0, ddof=1.5),
    lambda x: x.astype(np.float16).mean(axis=0),
    lambda x: x.astype(np.int32).mean(axis=0),
])
def test_mean_var_and_std_over_a_symbolic_axis(fun) -> None:
    lowered = check_sizes(fun, ["f32[n,3]"], lambda n: [_floats(n, 3)])
    assert " = extent() size=[" in lowered.as_text()


@pytest.mark.parametrize("fun", [
    lambda x: x * x.shape[0],
    lambda x: x.shape[0] * x,
    lambda x: x.sum(axis=0) / x.shape[0],
    lambda x: x.shape[0] / x.sum(axis=0),
    lambda x: x / x.size,
    lambda x: np.add(x, x.shape[0] - 1),
    lambda x: x.shape[0] > x.sum(axis=1),
    lambda x: np.arange(3) + x.shape[0],
    lambda x: x.astype(np.int8) + x.shape[0],
    lambda x: np.where(x > 0, x, x.shape[0]),  # promoted as numpy's Python int would be
    lambda x: np.maximum(x, x.shape[0] - 1.5),
    lambda x: np.clip(x, 0, x.shape[0]),
])
def test_an_extent_used_as_a_number_is_the_call_s_value(fun) -> None:
    check_sizes(fun, ["f32[n,3]"], lambda n: [_floats(n, 3)])


@pytest.mark.parametrize(("fun", "smallest"), [
    (lambda x: x * (x.shape[0] * 2.0), 0),
    (lambda x: x * (x.shape[0] / 2), 0),
    (lambda x: x * (x.shape[0] + 0.5), 0),
    (lambda x: x * x.shape[0] ** 0.5, 0),
    (lambda x: x * np.sqrt(x.shape[0]), 0),
    (lambda x: x * (np.float32(2) * x.shape[0]), 0),
    (lambda x: x * (2.0 ** x.shape[0]), 0),
    (lambda x: x[:, :1] * np.ones(x.shape[0] ** 2).reshape(x.shape[0], -1), 1),
    (lambda x: x * (1.0 / x.shape[0]), 1),  # Python raises ZeroDivisionError for 0
    (lambda x: x * x.shape[0] ** -1, 1),
])
def test_python_arithmetic_on_an_extent_that_is_no_extent_is_the_call_s_value(
        fun, smallest: int) -> None:
    lowered = check_sizes(fun, ["f32[n,3]"], lambda n: [_floats(n, 3)],
                          [s for s in SIZES if s >= smallest])
    assert [str(c) for c in lowered.module.constraints] == (["n >= 1"] if smallest else [])


def test_an_integer_power_of_an_extent_is_refused() -> None:
    with pytest.raises(ConcretizationError, match=r"(?s)in <lambda>.*2 \*\* n is a Python "
                                                  r"int of unbounded size.*write 2.0 \*\* n"):
        jitc.jit(lambda x: x * 2 ** x.shape[0]).lower(AbstractArray("f32[n,3]"))


def test_an_extent_as_a_python_float_names_the_line() -> None:
    with pytest.raises(ConcretizationError, match=r"(?s)test_symbolic_numpy.py:\d+ in "
                                                  r"<lambda>.*cannot be used as a Python "
                                                  r"number \(arithmetic on it, n \* 1.0"):
        jitc.jit(lambda x: x * float(x.shape[0])).lower(AbstractArray("f32[n,3]"))


def test_an_extent_prints_parses_and_folds_when_static() -> None:
    lowered = jitc.jit(lambda x: x / x.shape[0]).lower(AbstractArray("f32[n]"))
    assert "= extent() size=[n] : i64[]" in lowered.as_text()
    static = jitc.jit(lambda x: x / x.shape[0]).lower(np.ones(4, np.float32))
    assert "extent" not in static.as_text()


# -- basic indexing of arrays with symbolic dimensions ----------------------------------------

def _table(n: int) -> list[np.ndarray]:
    return [np.arange(n * 3, dtype=np.float32).reshape(n, 3)]


@pytest.mark.parametrize(("fun", "smallest", "result"), [
    (lambda x: x[1:], 1, "f32[n-1,3]"),
    (lambda x: x[:-1], 1, "f32[n-1,3]"),
    (lambda x: x[1:-1], 2, "f32[n-2,3]"),
    (lambda x: x[-1], 1, "f32[3]"),
    (lambda x: x[2], 3, "f32[3]"),
    (lambda x: x[-1, 2], 1, "f32[]"),
    (lambda x: x[::2], 0, "f32[(n+1)//2,3]"),
    (lambda x: x[1::3], 1, "f32[(n+1)//3,3]"),
    (lambda x: x[::-1], 0, "f32[n,3]"),
    (lambda x: x[::-2], 0, "f32[(n+1)//2,3]"),
    (lambda x: x[-2::-1], 1, "f32[n-1,3]"),
    (lambda x: x[3:1], 0, "f32[0,3]"),
    (lambda x: x[:, :2], 0, "f32[n,2]"),
    (lambda x: x[:, 1:3], 0, "f32[n,2]"),
    (lambda x: x[:, -1], 0, "f32[n]"),
    (lambda x: x[:, ::-1], 0, "f32[n,3]"),
    (lambda x: x[None], 0, "f32[1,n,3]"),
    (lambda x: x[..., 0], 0, "f32[n]"),
    (lambda x: x[..., None], 0, "f32[n,3,1]"),
    (lambda x: x[:, None, 1:], 0, "f32[n,1,2]"),
    (lambda x: x.T[1], 0, "f32[n]"),
    (lambda x: x[True], 0, "f32[1,n,3]"),
    (lambda x: x[:x.shape[0] - 1], 1, "f32[n-1,3]"),
    (lambda x: x[:x.shape[0] + 1], 0, "f32[n,3]"),  # past the end for every size: clamped
    (lambda x: x[:, [0, 2]], 0, "f32[n,2]"),
    (lambda x: x[:, np.array([True, False, True])], 0, "f32[n,2]"),
])
def test_basic_indexing_over_a_symbolic_axis(fun, smallest: int, result: str) -> None:
    lowered = check_sizes(fun, ["f32[n,3]"], _table, [s for s in SIZES if s >= smallest])
    assert lowered.module.entry.outputs[0].type.short() == result
    if smallest:
        # numpy would clamp the slice (or raise IndexError): the call names the constraint.
        with pytest.raises(ArgumentError, match=f"constraint n >= {smallest} does not hold: "
                                                f"n={smallest - 1}"):
            jitc.interpret(lowered.module, _table(smallest - 1))


def test_an_integer_index_of_every_axis_is_a_numpy_scalar() -> None:
    last = jitc.jit(lambda x: x[-1], backend="interpreter", dynamic=True)
    for n in (1, 2, 5):
        got = last(np.arange(n, dtype=np.float32))
        assert type(got) is np.float32 and got == n - 1


def test_a_slice_of_a_symbolic_axis_inside_an_advanced_index_is_refused() -> None:
    with pytest.raises(TraceError, match=r"(?s)test_symbolic_numpy.py:\d+ in <lambda>.*"
                                         r"indexing f32\[n,3\] with an integer array or mask "
                                         "together with a slice or integer on a symbolic axis"):
        jitc.jit(lambda x: x[1:, [0, 2]]).lower(AbstractArray("f32[n,3]"))


def test_writing_into_a_symbolic_array_by_an_integer_array_is_refused() -> None:
    def write(x):
        x[[0, 2]] = 1.0  # (ints and slices of a symbolic axis: tests/test_symbolic_positions.py)
        return x

    with pytest.raises(TraceError, match=r"(?s)test_symbolic_numpy.py:\d+ in write.*an indexed "
                                         r"write into f32\[n,3\], which has symbolic"):
        jitc.jit(write).lower(AbstractArray("f32[n,3]"))


def test_numpy_s_index_errors_on_static_axes_stay() -> None:
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for axis 1 with size 3"):
        jitc.jit(lambda x: x[:, 3]).lower(AbstractArray("f32[n,3]"))
    with pytest.raises(IndexError, match=r"too many indices for array"):
        jitc.jit(lambda x: x[0, 0, 0]).lower(AbstractArray("f32[n,3]"))


# -- creation with symbolic sizes ----------------------------------------------------------------

def _square(x):
    return x[:, :1] * x[:, 0]  # f32[n,n]


@pytest.mark.parametrize(("fun", "smallest"), [
    (lambda x: np.tri(x.shape[0]) * x[:, :1], 0),  # the traced function's np: traced creation
    (lambda x: jnp.tri(x.shape[0], dtype=bool), 0),
    (lambda x: np.tri(x.shape[0], 4, k=-1, like=x), 0),
    (lambda x: np.eye(x.shape[0]), 0),
    (lambda x: jnp.eye(x.shape[0], 3, k=1, dtype=np.int32), 0),
    (lambda x: np.identity(x.shape[0]), 0),
    (lambda x: np.arange(x.shape[0]), 0),
    (lambda x: jnp.arange(x.shape[0], dtype=np.float32), 0),
    (lambda x: jnp.arange(1, x.shape[0], 2), 1),
    (lambda x: np.arange(x.shape[0], like=x) * 2, 0),
    (lambda x: jnp.zeros((x.shape[0], 3)), 0),
    (lambda x: np.ones(x.shape[0], np.int32), 0),
    (lambda x: jnp.full((x.shape[0], 2), 7.0, np.float32), 0),
    (lambda x: np.zeros(x.shape[0], like=x), 0),
    (lambda x: np.zeros_like(x), 0),
    (lambda x: np.ones_like(x, dtype=int), 0),
    (lambda x: np.full_like(x, 2.5), 0),
    (lambda x: np.tril(x), 0),
    (lambda x: np.triu(x, 1), 0),
    (lambda x: np.tril(_square(x), -1), 0),
    (lambda x: np.where(jnp.tri(x.shape[0], dtype=bool), _square(x), -1e9), 0),
])
def test_creation_with_a_symbolic_size(fun, smallest: int) -> None:
    check_sizes(fun, ["f32[n,3]"], _table, [s for s in SIZES if s >= smallest])


def _causal_mask(seq):
    return np.tri(seq, dtype=bool)  # numpy's own tri: it never sees a tracer


def _masked(x):
    return np.where(_causal_mask(x.shape[0]), _square(x), -1e9)


def test_numpy_creation_outside_the_traced_function_names_jitc_numpy() -> None:
    with pytest.raises(ConcretizationError, match=r"(?s)test_symbolic_numpy.py:\d+ in "
                                                  r"_causal_mask\n.*np.tri\(seq.*numpy.tri was "
                                                  r"given it as a size.*call jitc.numpy.tri, or "
                                                  r"numpy.tri\(..., like=x\)"):
        jitc.jit(_masked).lower(AbstractArray("f32[n,3]"))
    # The automatic policy then keeps exact compilations, and says why.
    masked = jitc.jit(_masked, backend="interpreter")
    for n in (2, 3, 4):
        np.testing.assert_array_equal(masked(_table(n)[0]), _masked(_table(n)[0]))
    stats = masked.compile_stats()
    assert [s["symbolic"] for s in stats] == [False, False, False]
    assert "numpy.tri was given it as a size" in stats[1]["reason"]


# -- contractions over two symbolic extents ----------------------------------------------------

@pytest.mark.parametrize(("fun", "types", "constraints"), [
    (lambda x, w: x @ w, ["f32[n,k]", "f32[m,4]"], ["k == m"]),
    (lambda x, w: np.matmul(x, w), ["f32[n,k]", "f32[m,4]"], ["k == m"]),
    (lambda x, w: np.dot(x, w), ["f32[n,k]", "f32[m,4]"], ["k == m"]),
    (lambda x, w: np.tensordot(x, w, 1), ["f32[n,k]", "f32[m,4]"], ["k == m"]),
    (lambda x, w: np.einsum("ij,jk->ik", x, w), ["f32[n,k]", "f32[m,4]"], ["k == m"]),
    (lambda x, w: x @ w, ["f32[b,n,k]", "f32[c,m,4]"], ["b == c", "k == m"]),
    (lambda x, w: x[0] @ w, ["f32[n,k]", "f32[m]"], ["n >= 1", "k == m"]),
])
def test_contracted_symbolic_extents_are_required_equal(fun, types, constraints) -> None:
    def make(size: int) -> list[np.ndarray]:
        return [_floats(*(size if d.isalpha() else int(d) for d in t[4:-1].split(",")))
                for t in types]
    lowered = check_sizes(fun, types, make, [s for s in SIZES if s or "n >= 1" not in
                                             constraints])
    assert [str(c) for c in lowered.module.constraints] == constraints


def test_dynamic_true_compiles_a_product_of_two_symbolic_extents_once() -> None:
    product = jitc.jit(lambda x, w: x @ w, backend="interpreter", dynamic=True)
    for n, k in ((3, 4), (5, 2), (1, 7)):
        x, w = _floats(n, k), _floats(k, 3)
        np.testing.assert_allclose(product(x, w), x @ w, rtol=1e-5, atol=1e-6)
    assert [s["symbolic"] for s in product.compile_stats()] == [True]


# -- sizes that depend on the data -------------------------------------------------------------

@pytest.mark.parametrize(("fun", "construct", "alternative"), [
    (lambda x: np.nonzero(x), r"numpy.nonzero", r"np.where\(mask, x, fill\)"),
    (lambda x: x.nonzero(), r"numpy.nonzero", r"np.count_nonzero\(mask\)"),
    (lambda x: x[x > 0], r"indexing with a traced boolean mask", r"np.where\(mask, x, fill\)"),
    (lambda x: x[x[:, 0] > 0], r"indexing with a traced boolean mask", r"np.where"),
    (lambda x: np.unique(x), r"numpy.unique", r"s = np.sort\(x\)"),
    (lambda x: np.argwhere(x), r"numpy.argwhere", r"np.where\(mask, x, fill\)"),
    (lambda x: np.compress(x[:, 0] > 0, x, axis=0), r"numpy.compress", r"np.where"),
    (lambda x: np.where(x > 0), r"numpy.where with one argument", r"np.where\(cond, x, y\)"),
])
def test_data_dependent_sizes_name_the_call_and_the_alternative(fun, construct: str,
                                                                alternative: str) -> None:
    with pytest.raises(TraceError, match=rf"(?s)test_symbolic_numpy.py:\d+ in <lambda>.*"
                                         rf"{construct}.*{alternative}"):
        jitc.jit(fun).lower(AbstractArray("f32[n,3]"))


def test_a_constant_mask_on_a_symbolic_axis_says_it_cannot_match() -> None:
    with pytest.raises(IndexError, match=r"(?s)in <lambda>.*a constant boolean index of shape "
                                         r"\(3,\) cannot match the symbolic extents \(n\)"):
        jitc.jit(lambda x: x[np.array([True, False, True])]).lower(AbstractArray("f32[n,3]"))


# -- the GPT-2 block of the benchmarks -----------------------------------------------------------

def _gpt2_weights(d: int) -> list[np.ndarray]:
    rng = np.random.default_rng(2)

    def normal(*shape: int, scale: float = 0.02, around: float = 0.0) -> np.ndarray:
        return (around + scale * rng.standard_normal(shape)).astype(np.float32)
    return [normal(d, scale=0.1, around=1), normal(d, scale=0.1), normal(d, 3 * d),
            normal(3 * d), normal(d, d), normal(d), normal(d, scale=0.1, around=1),
            normal(d, scale=0.1), normal(d, 4 * d), normal(4 * d), normal(4 * d, d), normal(d)]


def _gpt2(x, *weights):
    from bench.workloads import gpt2_block
    return gpt2_block(jnp, x, *weights)


def test_the_gpt2_block_lowers_once_for_every_sequence_length() -> None:
    weights = _gpt2_weights(768)
    lowered = jitc.jit(_gpt2).lower(AbstractArray("f32[S,768]"), *weights)
    assert [str(c) for c in lowered.module.constraints] == ["S >= 1"]
    for seq in range(1, 10):
        x = _floats(seq, 768)
        (got,) = jitc.interpret(lowered.module, [x, *weights])
        np.testing.assert_allclose(got, _gpt2(x, *weights), rtol=1e-4, atol=1e-5)


def test_a_sequence_sweep_of_the_gpt2_block_compiles_twice() -> None:
    from bench.runner import bind_numpy
    from bench.workloads import gpt2_block
    weights = _gpt2_weights(48)
    block = bind_numpy(gpt2_block)  # plain numpy code: its xp is the traced function's np
    jitted = jitc.jit(block, backend="interpreter", disk_cache=False)
    for seq in range(1, 49):
        x = _floats(seq, 48)
        np.testing.assert_allclose(jitted(x, *weights), block(x, *weights), rtol=1e-4,
                                   atol=1e-5)
    assert [s["symbolic"] for s in jitted.compile_stats()] == [False, True]


@pytest.mark.parametrize("fun", [
    lambda x: np.sort(x, axis=0),
    lambda x: np.argsort(x, axis=0),
    lambda x: np.sort(x.T),
])
def test_sorting_along_a_symbolic_axis(fun) -> None:
    check_sizes(fun, ["f32[n,3]"], lambda n: [_floats(n, 3)])


@pytest.mark.parametrize("fun", [
    lambda x: np.linspace(0, 1, x.shape[0])[:, None] * x,
    lambda x: np.linspace(-2.0, 3.0, x.shape[0], endpoint=False)[:, None] + x,
    lambda x: np.linspace(x[0], x[-1], x.shape[0]),
    lambda x: np.linspace(0, 5, x.shape[0], retstep=True)[1] * x,
    lambda x: np.linspace(0, 10, x.shape[0], dtype=np.int32)[:, None] + x,
    lambda x: np.linspace(1.0, 1.0, x.shape[0])[:, None] * x,
])
def test_linspace_with_a_symbolic_number_of_samples(fun) -> None:
    # numpy's rounding step for step (it was refused: numpy's linspace needs an int). One
    # sample divides by zero in numpy's branch for more: the call needs n >= 2 (or 1 without
    # the endpoint), and other sizes compile exactly.
    lowered = check_sizes(fun, ["f64[n,3]"], lambda n: [_floats(n, 3).astype(np.float64)],
                          sizes=(2, 3, 7, 50))
    assert "constraint n >= " in lowered.as_text()


@pytest.mark.parametrize("fun", [
    lambda x: np.cumsum(x, axis=0),
    lambda x: np.cumprod(x, axis=0),
    lambda x: np.cumsum(x),
    lambda x: np.add.accumulate(x.T, axis=1),
    lambda x: np.cumsum(x.astype(np.int32), axis=0),
    lambda x: np.maximum.accumulate(x, axis=0),
])
def test_accumulating_along_a_symbolic_axis_in_numpy_s_order(fun) -> None:
    lowered = check_sizes(fun, ["f32[n,3]"], lambda n: [_floats(n, 3)])
    assert " = while(" in lowered.as_text()
    for n in SIZES:  # one element after another, as numpy adds: the very same bits
        x = _floats(n, 3)
        np.testing.assert_array_equal(jitc.interpret(lowered.module, [x])[0], fun(x))


@pytest.mark.parametrize(("fun", "smallest"), [
    (lambda x: np.median(x, axis=0), 1),
    (lambda x: np.median(x), 1),
    (lambda x: np.median(x.astype(np.int32), axis=0), 1),
    (lambda x: np.median(x, axis=1), 0),
    (lambda x: np.average(x, axis=0), 0),
    (lambda x: np.average(x, axis=1), 1),  # numpy: ZeroDivisionError for an empty result
    (lambda x: np.average(x, axis=0, returned=True), 0),
])
def test_median_and_average_over_a_symbolic_axis(fun, smallest: int) -> None:
    check_sizes(fun, ["f32[n,3]"], lambda n: [_floats(n, 3)],
                [s for s in SIZES if s >= smallest])


@pytest.mark.parametrize("fun", [
    lambda x: np.percentile(x, 30, axis=0),
    lambda x: np.quantile(x, [0.1, 0.5, 0.99], axis=0),
    lambda x: np.quantile(x, np.float32(0.25)),
    lambda x: np.percentile(x.astype(np.int32), 50, axis=0),
    lambda x: np.quantile(x, 1, axis=0),
    lambda x: np.quantile(x.astype(np.float16), 0.3, axis=0),
    lambda x: np.nanpercentile(np.where(x > 1, np.nan, x), 40, axis=0),
    lambda x: np.nanquantile(x, [0.2, 0.9], axis=0),
])
def test_quantiles_over_a_symbolic_axis_are_numpy_s_bits(fun) -> None:
    lowered = check_sizes(fun, ["f32[n,3]"], lambda n: [_floats(n, 3)], [1, 2, 5, 17])
    assert [str(c) for c in lowered.module.constraints] == ["n >= 1"]
    for n in (2, 5, 17):  # positions and weights computed as numpy computes them
        x = _floats(n, 3)
        np.testing.assert_array_equal(jitc.interpret(lowered.module, [x])[0], fun(x))


@pytest.mark.parametrize("fun", [
    lambda x: np.roll(x, 1, axis=0),
    lambda x: np.roll(x, -7, axis=0),
    lambda x: np.roll(x, 3),
    lambda x: np.roll(x, (2, 1), axis=(0, 1)),
])
def test_roll_along_a_symbolic_axis(fun) -> None:
    lowered = check_sizes(fun, ["f32[n,3]"], _table)
    assert not lowered.module.constraints


def test_the_divisor_of_var_is_never_negative() -> None:
    # numpy divides by max(n - ddof, 0): 0/0, not 0/-2 (which was -0.0).
    x = np.ones(1, np.float32)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(jitc.jit(lambda x: np.var(x, ddof=3))(x))
        assert np.isnan(np.var(x, ddof=3))


@pytest.mark.parametrize(("fun", "smallest", "result"), [
    (lambda x: x.reshape(x.shape[0], -1), 1, "f32[n,12]"),
    (lambda x: x.reshape(x.shape[1], -1), 0, "f32[4,3*n]"),
    (lambda x: x.reshape(-1, 2), 0, "f32[6*n,2]"),
    (lambda x: x.reshape(x.shape[0] * 2, 6), 0, "f32[2*n,6]"),
])
def test_reshape_with_symbolic_extents(fun, smallest: int, result: str) -> None:
    lowered = check_sizes(fun, ["f32[n,4,3]"], lambda n: [_floats(n, 4, 3)],
                          [s for s in SIZES if s >= smallest])
    assert lowered.module.entry.outputs[0].type.short() == result


# -- integer arrays over symbolic extents --------------------------------------------------------

TABLE = np.arange(40, dtype=np.float32).reshape(10, 4)


@pytest.mark.parametrize(("fun", "types", "make", "smallest", "constraints"), [
    (lambda x: x[[0, 2]], ["f32[n,3]"], _table, 3, ["n >= 3"]),
    (lambda x: x[[-1, 0]], ["f32[n,3]"], _table, 1, ["n >= 1"]),
    (lambda x: x[[1], [2]], ["f32[n,3]"], _table, 2, ["n >= 2"]),
    (lambda ids, table: table[ids], ["i64[S]", "f32[10,4]"],
     lambda n: [np.arange(n) * 3 % 10, TABLE], 0, []),
    (lambda ids, table: jnp.take(table, ids, axis=0), ["i64[S]", "f32[10,4]"],
     lambda n: [np.arange(n) % 10, TABLE], 0, []),
    (lambda x, t: x[t], ["f32[n,3]", "i64[]"], lambda n: [*_table(n), np.int64(n // 2)], 1,
     ["n >= 1"]),
    (lambda x, t: x[-t - 1], ["f32[n,3]", "i64[]"], lambda n: [*_table(n), np.int64(n // 2)],
     1, ["n >= 1"]),
])
def test_integer_arrays_index_symbolic_extents(fun, types, make, smallest: int,
                                               constraints: list[str]) -> None:
    lowered = check_sizes(fun, types, make, [s for s in SIZES if s >= smallest])
    assert [str(c) for c in lowered.module.constraints] == constraints


def test_an_embedding_lookup_of_a_captured_table_compiles_once() -> None:
    lookup = jitc.jit(lambda ids: TABLE[ids] * 2, backend="interpreter", dynamic=True)
    for n in (0, 1, 5, 17):
        ids = np.arange(n) * 7 % 10
        np.testing.assert_array_equal(lookup(ids), TABLE[ids] * 2)
    assert [s["symbolic"] for s in lookup.compile_stats()] == [True]


@pytest.mark.parametrize(("fun", "message"), [
    (lambda x: x * (7 % x.shape[0]), "a remainder or quotient of 7 and the symbolic "
                                     "dimension n"),
    (lambda x: np.array_split(x, 2)[0], "n % 2 depends on the value"),
    (lambda x: np.cov(x.T), "cannot be used as a Python number"),
])
def test_numpy_functions_that_need_an_extent_as_a_number_name_the_line(fun, message) -> None:
    # Not traced over a symbolic axis yet (docs/dynamic-shapes.md): a located error, never a
    # bare TypeError from inside numpy.
    with pytest.raises(ConcretizationError, match=rf"(?s)test_symbolic_numpy.py:\d+ in "
                                                  rf"<lambda>.*{message}"):
        jitc.jit(fun).lower(AbstractArray("f32[n,3]"))


def test_the_median_of_rows_of_an_empty_batch_is_empty() -> None:
    # Static shapes too: merging the reduced axes with -1 beside the empty batch axis failed.
    x = np.zeros((0, 3), np.float32)
    got = jitc.jit(lambda x: np.median(x, axis=1))(x)
    assert got.shape == (0,) and got.dtype == np.float32
