"""jitc.jit itself: the compile cache, pytrees, static and scalar arguments, lowering and
compiling by hand, nesting, constants, verification and dumps."""

from __future__ import annotations

import collections
import functools
import os

import numpy as np
import pytest
from jitcheck import BACKENDS

import jitc

F32 = np.ones((2, 3), np.float32)


@pytest.fixture(params=BACKENDS)
def jit(request):
    """jitc.jit on each backend: the API behaves the same whatever compiles the code."""
    return functools.partial(jitc.jit, backend=request.param)


def scale(x, factor):
    """Multiply x by a factor."""
    return x * factor


# -- the cache ----------------------------------------------------------------------------------

def test_cache_grows_only_for_new_signatures(jit):
    f = jit(lambda x, y: x + y)
    a, b = np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(f(a, b), a)
    np.testing.assert_array_equal(f(b, b), b)  # new values, same signature
    np.testing.assert_array_equal(f(a + 1, a), a * 3)
    assert f.cache_size == 1
    f(np.ones((3, 3), np.float32), b[:1])  # new shape
    assert f.cache_size == 2
    f(a.astype(np.float64), b)  # new dtype
    assert f.cache_size == 3
    f(a, 1.0)  # a Python scalar is a different signature from an array...
    np.testing.assert_array_equal(f(a, 2.0), a * 3)  # ...but its value is not part of it
    assert f.cache_size == 4
    f(a, np.ones((), np.float32))  # a 0-d array is written in place by `s += 1`...
    assert f.cache_size == 5
    f(a, np.float32(1))  # ...where a numpy scalar is immutable and rebinds
    f(a, np.float32(2))
    assert f.cache_size == 6
    f.clear_cache()
    assert f.cache_size == 0


def test_cache_key_includes_the_pytree_structure(jit):
    f = jit(lambda xs: xs[0] * 2)
    f((F32, F32))
    f((F32 + 1, F32))
    assert f.cache_size == 1
    f([F32, F32])  # list, not tuple
    f((F32, F32, F32))  # three leaves
    f((F32, F32 * 2))  # a tuple of two again
    assert f.cache_size == 3
    g = jit(lambda d: d["a"] - d["b"])
    g({"a": F32, "b": F32})
    g({"b": F32, "a": F32})  # key order does not matter
    assert g.cache_size == 1


def test_cache_key_includes_which_optional_arguments_were_passed(jit):
    @jit
    def f(x, y=None, z=None):
        return x + (y if y is not None else 10 * z)
    a, b = np.ones(3), np.full(3, 2.0)
    np.testing.assert_array_equal(f(a, y=b), a + b)
    np.testing.assert_array_equal(f(a, z=b), a + 10 * b)
    assert f.cache_size == 2


def test_python_defaults_are_not_traced(jit):
    @jit
    def softmax(x, axis=-1):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    x = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_allclose(softmax(x).sum(-1), 1)


def test_callables_of_every_shape(jit):
    a = np.ones(3)
    np.testing.assert_array_equal(jit(lambda *xs: sum(xs))(a, a, 2 * a), 4 * a)
    np.testing.assert_array_equal(jit(lambda x, **kw: x * kw["s"])(a, s=a + 1), 2 * a)
    partial = jit(functools.partial(scale, factor=np.full(3, 2.0)))
    np.testing.assert_array_equal(partial(a), 2 * a)

    class Layer:
        weight = np.full(3, 3.0)

        def __call__(self, x):
            return x * self.weight
    layer = Layer()
    np.testing.assert_array_equal(jit(layer)(a), 3 * a)
    np.testing.assert_array_equal(jit(layer.__call__)(a), 3 * a)


def test_the_cache_keeps_the_most_recently_used_signatures_and_frees_the_rest(jit):
    import gc
    import weakref
    f = jit(lambda x: x * 2, cache_limit=3, dynamic=False)  # one compilation per shape
    executables = []
    for n in range(1, 5):
        f(np.ones(n))
        executables.append(weakref.ref(f._cache[next(reversed(f._cache))].executable))
    f(np.ones(2))  # 2 becomes the most recent; 1 was dropped when 4 came
    f(np.ones(5))  # drops 3, the least recently used
    assert f.cache_size == 3
    assert sorted(s["signature"] for s in f.compile_stats()) == ["f64[2]", "f64[4]", "f64[5]"]
    gc.collect()
    assert [ref() is None for ref in executables] == [True, False, True, False]
    np.testing.assert_array_equal(f(np.ones(3)), np.full(3, 2.0))  # compiled again
    with pytest.raises(ValueError, match="cache_limit must be at least 1"):
        jit(lambda x: x, cache_limit=0)


# -- pytrees ------------------------------------------------------------------------------------

Pair = collections.namedtuple("Pair", "weight bias")


def test_pytrees_in_and_out(jit):
    @jit
    def f(layers, inputs):
        (w1, b1), (w2, b2) = layers
        h = np.tanh(inputs["x"] @ w1 + b1)
        return {"out": h @ w2 + b2, "aux": [h, (inputs["x"].sum(), None)],
                "pair": Pair(w1 * 2, b1)}
    rng = np.random.default_rng(0)
    layers = [Pair(rng.standard_normal((3, 4)), rng.standard_normal(4)),
              Pair(rng.standard_normal((4, 2)), rng.standard_normal(2))]
    inputs = {"x": rng.standard_normal((5, 3))}
    out = f(layers, inputs)
    want = f.__wrapped__(layers, inputs)
    assert set(out) == {"out", "aux", "pair"}
    assert isinstance(out["aux"], list) and isinstance(out["aux"][1], tuple)
    assert out["aux"][1][1] is None
    assert isinstance(out["pair"], Pair)
    np.testing.assert_allclose(out["out"], want["out"])
    np.testing.assert_allclose(out["aux"][1][0], want["aux"][1][0])
    np.testing.assert_allclose(out["pair"].weight, want["pair"].weight)
    text = f.lower(layers, inputs).as_text()
    assert "%layers_0_weight = parameter()" in text and "%inputs_x = parameter()" in text


def test_outputs_may_be_inputs_constants_or_python_scalars(jit):
    @jit
    def f(x):
        return x, np.arange(3), 2.5, [x.shape[0]]
    x, arange, scalar, shape = f(F32)
    np.testing.assert_array_equal(x, F32)
    np.testing.assert_array_equal(arange, np.arange(3))
    assert scalar == 2.5 and scalar.dtype == np.float64
    assert shape[0] == 2
    assert x is F32  # as in numpy: the argument itself, not a copy


# -- static and scalar arguments ----------------------------------------------------------------

def test_static_argnums_and_argnames(jit):
    f = jit(lambda x, n, *, mode="sum": getattr(x, mode)(axis=n), static_argnums=1,
                 static_argnames="mode")
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(f(x, 0), x.sum(0))
    np.testing.assert_array_equal(f(x, 1), x.sum(1))
    np.testing.assert_array_equal(f(x, 1, mode="max"), x.max(1))
    f(x, 1)
    assert f.cache_size == 3
    g = jit(scale, static_argnames="factor")
    np.testing.assert_array_equal(g(x, factor=3), x * 3)
    np.testing.assert_array_equal(g(x, 3), x * 3)  # positional or keyword: one signature
    assert g.cache_size == 1


def test_unhashable_static_argument(jit):
    f = jit(lambda x, shape: x.reshape(shape), static_argnums=1)
    with pytest.raises(TypeError, match="static argument 'shape' of <lambda> must be hashable, "
                                        "got list"):
        f(np.zeros(6), [2, 3])
    np.testing.assert_array_equal(f(np.zeros(6), (2, 3)), np.zeros((2, 3)))


def test_bad_static_argnums():
    with pytest.raises(ValueError, match="static_argnums=2 is out of range"):
        jitc.jit(scale, static_argnums=2)
    with pytest.raises(ValueError, match=r"static_argnames \['size'\] are not parameters"):
        jitc.jit(scale, static_argnames="size")


def test_python_scalars_are_weakly_typed(jit):
    f = jit(scale)
    assert f(F32, 2.0).dtype == np.float32
    assert f(F32, 2).dtype == np.float32
    assert f(F32.astype(np.int8), 3).dtype == np.int8
    assert f(F32.astype(np.int8), 3.5).dtype == np.float64
    assert f(F32, np.float64(2.0)).dtype == np.float64  # a numpy scalar is not weak
    assert f(np.float32(2), 3.0).dtype == np.float32
    assert f(2, 3).dtype == np.int64 and f(2, 3) == 6
    np.testing.assert_array_equal(f(F32, 2.5), F32 * 2.5)


def test_python_scalar_arguments_combine_with_python_literals(jit):
    @jit
    def schedule(step, warmup, a, b):
        return step < warmup, np.less(step, 3), step == 2.0, np.where(step < warmup, a, b)
    for step in (1, 5):
        got = schedule(step, 3, F32, F32 * 2)
        want = schedule.__wrapped__(step, 3, F32, F32 * 2)
        for g, w in zip(got, want, strict=True):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_array_equal(g, w)


def test_operators_on_scalars_stay_weak_but_numpy_functions_do_not(jit):
    @jit
    def f(x, s):
        return x * (s * 2 - 1), x * np.exp(s)
    weak, strong = f(F32, 1.0)
    want_weak, want_strong = f.__wrapped__(F32, 1.0)
    assert weak.dtype == want_weak.dtype == np.float32
    assert strong.dtype == want_strong.dtype == np.float64


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_ndarray_subclasses_that_change_semantics_are_refused(jit, tmp_path):
    f = jit(lambda x: x * x)
    f(np.ones((2, 2)))
    f(np.ones((2, 2)))  # the C fast path now holds this signature
    masked = np.ma.array([[1.0, 2.0], [3.0, 4.0]], mask=[[0, 1], [0, 0]])
    with pytest.raises(TypeError, match=r"argument x: numpy\.ma\.MaskedArray .* x\.filled"):
        f(masked)
    with pytest.raises(TypeError, match=r"argument x: numpy\.matrix .* np\.asarray\(x\)"):
        f(np.matrix([[1.0, 2.0], [3.0, 4.0]]))
    captured = jit(lambda x: x + masked)
    with pytest.raises(TypeError, match=r"test_jit\.py:\d+ .*\n.*\n.*MaskedArray"):
        captured(np.ones((2, 2)))
    # A memmap only says where the data lives: it computes as a plain array, as in numpy.
    mapped = np.memmap(tmp_path / "x.bin", np.float64, "w+", shape=(2, 2))
    mapped[:] = [[1.0, 2.0], [3.0, 4.0]]
    np.testing.assert_array_equal(f(mapped), np.asarray(mapped) * mapped)


def unaligned(values: np.ndarray) -> np.ndarray:
    """A copy of `values` one byte past an aligned address: not aligned for its dtype."""
    raw = np.zeros(values.nbytes + 1, np.uint8)[1:]
    array = raw.view(values.dtype).reshape(values.shape)
    array[...] = values
    assert not array.flags.aligned
    return array


def test_unaligned_arrays_are_accepted(jit):
    scale_and_shift = jit(lambda x, y: (x * 2 + y.T, y.sum()))
    x = np.arange(12.0).reshape(3, 4)
    y = np.arange(12, dtype=np.int32).reshape(4, 3)
    for _ in range(2):  # the compile and the cached call
        got = scale_and_shift(unaligned(x), unaligned(y))
        want = (x * 2 + y.T, y.sum())
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    donated = jit(lambda a, b: a * 3 + b, donate_argnums=0)
    np.testing.assert_array_equal(donated(unaligned(x), x), x * 4)


# -- wrapping, lowering and compiling -----------------------------------------------------------

def test_wraps_the_function():
    f = jitc.jit(scale)
    assert f.__wrapped__ is scale
    assert f.__name__ == "scale" and f.__doc__ == "Multiply x by a factor."
    assert f.__module__ == scale.__module__ and f.__qualname__ == "scale"
    assert "scale" in repr(f) and f"backend={jitc.Options().backend}" in repr(f)
    decorated = jitc.jit(backend="interpreter")(scale)
    assert decorated.__name__ == "scale" and decorated(F32, 1.0).shape == (2, 3)


def test_lower_as_text():
    def layer(x, weight, bias):
        return np.maximum(x @ weight + bias, 0)
    lowered = jitc.jit(layer).lower(F32, np.ones((3, 4), np.float32), np.ones(4, np.float32))
    text = lowered.as_text()
    for piece in ("func @layer", "%x = parameter() index=0 : f32[2,3]",
                  "%weight = parameter() index=1 : f32[3,4]", "dot_general(%x, %weight)",
                  "max(", "f32[2,4]", "test_jit.py"):
        assert piece in text, piece
    assert "broadcast_in_dim" not in text  # traced: implicit numpy broadcasting
    optimized = lowered.as_text(optimized=True)
    assert "broadcast_in_dim" in optimized  # legalized: every broadcast explicit
    assert lowered.module.entry.parameter_types[1].shape == (3, 4)


def test_compile_and_call(jit):
    f = jit(scale, disk_cache=False)  # runs the pipeline, whatever compiled `scale` before
    compiled = f.lower(F32, 2.0).compile()
    np.testing.assert_array_equal(compiled(F32 + 1, 3.0), (F32 + 1) * 3)
    assert "mul" in compiled.as_text()
    assert compiled.stats.total_seconds >= 0
    pipeline = [p.name for p in f.lower(F32, 2.0).pipeline().passes]
    assert [p.name for p in compiled.stats.passes] == pipeline
    assert {"legalize_broadcast", "dce"} <= set(pipeline)
    assert f.cache_size == 0  # lowering by hand does not fill the cache


@pytest.mark.parametrize("args,got", [
    ((np.ones((3, 3), np.float32), 2.0), r"f32\[3,3\], f64\[\] \(Python scalar\)"),
    ((F32.astype(np.float64), 2.0), r"f64\[2,3\], f64\[\] \(Python scalar\)"),
    ((F32, F32), r"f32\[2,3\], f32\[2,3\]"),
])
def test_compiled_rejects_other_signatures(args, got, jit):
    f = jit(scale)
    compiled = f.lower(F32, 2.0).compile()
    message = (r"scale: this compiled function takes \(f32\[2,3\], f64\[\] \(Python scalar\)\) "
               rf"but was called with \({got}\); call the jitted function instead")
    with pytest.raises(TypeError, match=message):
        compiled(*args)
    f(*args)  # the jit wrapper compiles for the new signature
    assert f.cache_size == 1


def test_compiled_rejects_other_static_values(jit):
    f = jit(scale, static_argnums=1)
    compiled = f.lower(F32, 2).compile()
    with pytest.raises(TypeError, match=r"compiled for static arguments \{'factor': 2\}, "
                                        r"called with \{'factor': 3\}"):
        compiled(F32, 3)


# -- nesting and constants ----------------------------------------------------------------------

def test_nested_jit_calls_are_inlined(jit):
    inner = jit(lambda x: np.tanh(x) * 2)

    @jit
    def outer(x):
        return inner(x) + inner(x + 1)
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    np.testing.assert_allclose(outer(x), np.tanh(x) * 2 + np.tanh(x + 1) * 2)
    assert inner.cache_size == 0  # never compiled on its own
    text = outer.lower(x).as_text()
    assert text.count("tanh(") == 2 and "func @" in text and text.count("func @") == 1


W_BIG = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
W_SMALL = np.array([1.0, -2.0, 3.0], np.float32)


def test_captured_arrays_are_implicit_arguments_read_at_each_call(jit):
    def f(x):
        return np.tanh(x @ W_BIG) @ W_BIG + W_SMALL.sum()
    x = np.ones((2, 64), np.float32)
    lowered = jit(f).lower(x)
    text = lowered.as_text()
    # x, then each captured array once: nothing is baked in as a constant.
    assert len(lowered.module.entry.parameters) == 3
    assert "const @c" not in text
    np.testing.assert_allclose(jit(f)(x), f(x), rtol=1e-5)


# -- verification and dumps ---------------------------------------------------------------------

def test_verify_and_dump_dir(jit, tmp_path):
    f = jit(lambda x: np.exp(x) + 1.0, verify=True, dump_dir=str(tmp_path))
    np.testing.assert_allclose(f(F32), np.exp(F32) + 1)
    folder = tmp_path / "_lambda_"
    pipeline = f.lower(F32).pipeline()
    assert pipeline.verify  # the verifier runs before and after every pass
    passes = [p.name for p in pipeline.passes]
    files = sorted(os.listdir(folder))
    # One numbered file per top-level pass (inner passes of a fixed point add their own).
    top_level = [f for f in files if f.count(".") == 1]
    assert top_level[0] == "00-input.jir"
    assert [f.split("-after-")[1][:-4] for f in top_level[1:]] == passes
    assert [int(f[:2]) for f in files] == list(range(len(files)))
    legalized = next(f for f in files if f.endswith("-after-legalize_broadcast.jir"))
    assert "broadcast_in_dim" not in (folder / "00-input.jir").read_text()
    assert "broadcast_in_dim" in (folder / legalized).read_text()


def test_disabled_passes(jit):
    f = jit(lambda x: x + 1.0, disabled_passes=["dce"])
    compiled = f.lower(F32).compile()
    ran = [p.name for p in compiled.stats.passes]
    assert "dce" not in ran and "legalize_broadcast" in ran
