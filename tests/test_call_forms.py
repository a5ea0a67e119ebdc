"""Fast calls of every form (jitc.dispatch, jitc.tracing.guards): each gives numpy's answer,
takes the fast path when called again the same way, and falls back to the general path (which
traces anew or raises numpy's error) as soon as anything differs."""

from __future__ import annotations

import collections
import functools

import numpy as np
import pytest

import jitc
from jitc import api

Pair = collections.namedtuple("Pair", "a b")


@pytest.fixture
def general_calls(monkeypatch):
    """How many calls took the general path (binding, walking, cache lookup)."""
    count = [0]
    original = api.Jitted._call_once

    def counted(self, *args, **kwargs):
        count[0] += 1
        return original(self, *args, **kwargs)
    monkeypatch.setattr(api.Jitted, "_call_once", counted)
    return count


def _arrays(*shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _logged(fun):
    def wrapper(*args, **kwargs):  # no functools.wraps: the signature is (*args, **kwargs)
        return fun(*args, **kwargs)
    return wrapper


def _wrapped(fun):
    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        return fun(*args, **kwargs)
    return wrapper


def scaled(x, y, scale=2.0):
    return x * scale + y


def total(x, axis):
    return x.sum(axis=axis)


def first_plus_second(*xs):
    return xs[0] + xs[1]


def affine(x, p):
    return x * p["w"] + p["b"]


def keyword_only(x, *, y, z=None):
    return x - y if z is None else x - y * z


def dict_out(x, y):
    return {"sum": x + y, "parts": (x, y * 2), "none": None}


def pair_sum(p: Pair):
    return p.a + p.b


def kwargs_sum(x, **named):
    return x + sum(named.values())


FORMS = [
    ("keyword", lambda x, y: x + y, lambda f, x, y: f(x, y=y), {}),
    ("all keywords", lambda x, y: x - y, lambda f, x, y: f(y=y, x=x), {}),
    ("default", scaled, lambda f, x, y: f(x, y), {}),
    ("default given", scaled, lambda f, x, y: f(x, y, 3.0), {}),
    ("default by keyword", scaled, lambda f, x, y: f(x, y, scale=0.5), {}),
    ("static", total, lambda f, x, y: f(x, axis=0), {"static_argnames": "axis"}),
    ("static positional", total, lambda f, x, y: f(x, 1), {"static_argnums": 1}),
    ("varargs", first_plus_second, lambda f, x, y: f(x, y, x), {}),
    ("dict of weights", affine, lambda f, x, y: f(x, {"w": y, "b": x}), {}),
    ("keyword-only", keyword_only, lambda f, x, y: f(x, y=y, z=y), {}),
    ("pytree result", dict_out, lambda f, x, y: f(x, y), {}),
    ("namedtuple", pair_sum, lambda f, x, y: f(Pair(x, y)), {}),
    ("**kwargs", kwargs_sum, lambda f, x, y: f(x, a=y, b=x), {}),
    ("decorated", _logged(lambda x, y: x * y), lambda f, x, y: f(x, y), {}),
    ("decorated with wraps", _wrapped(scaled), lambda f, x, y: f(x, y), {}),
    ("numpy scalar", scaled, lambda f, x, y: f(x, y, np.float32(1.5)), {}),
]


def _same(got, want):
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for key in want:
            _same(got[key], want[key])
    elif isinstance(want, tuple):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif want is None:
        assert got is None
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert np.asarray(got).dtype == np.asarray(want).dtype
        assert np.shape(got) == np.shape(want)


@pytest.mark.parametrize("name, fun, call, options", FORMS, ids=[f[0] for f in FORMS])
def test_form_is_numpy_and_fast(name, fun, call, options, general_calls):
    # Exact compilations: the second shape gets a fast path of its own (a symbolic
    # compilation would serve it through the general path).
    f = jitc.jit(fun, dynamic=False, **options)
    x, y = _arrays((3, 4), (3, 4))
    for _ in range(3):
        _same(call(f, x, y), call(fun, x, y))
    assert general_calls[0] == 1, "calls after the first should take the fast path"
    x2, y2 = _arrays((5, 4), (5, 4), seed=1)  # a new shape: the general path compiles it
    _same(call(f, x2, y2), call(fun, x2, y2))
    assert general_calls[0] == 2
    _same(call(f, x, y), call(fun, x, y))  # back to the first: its fast path again
    _same(call(f, x, y), call(fun, x, y))
    assert general_calls[0] == 3 and f.cache_size == 2


def test_static_value_change_recompiles():
    f = jitc.jit(total, static_argnames="axis")
    (x,) = _arrays((3, 4))
    for axis in (0, 1, 0, -1, 1):
        _same(f(x, axis=axis), x.sum(axis=axis))
    assert f.cache_size == 3


def test_static_value_of_another_type_is_not_taken_for_it():
    def pick(x, flag):
        return x * 2 if flag is True else x * 3
    f = jitc.jit(pick, static_argnames="flag")
    (x,) = _arrays((4,))
    _same(f(x, flag=True), pick(x, True))
    _same(f(x, flag=1), pick(x, 1))


def test_python_scalar_type_and_bounds_are_checked():
    f = jitc.jit(lambda x, s: x + s)
    x = np.arange(4, dtype=np.int8)
    _same(f(x, s=3), x + 3)
    _same(f(x, s=3.5), x + 3.5)          # a float now: float64, as numpy
    _same(f(x, s=True), x + True)
    _same(f(x, s=100), x + 100)
    with pytest.raises(OverflowError):
        f(x, s=300)                      # out of int8's bounds, as numpy raises
    _same(f(x, s=-128), x + -128)


@pytest.mark.parametrize("other", [
    {"w": None, "b": None}, {"w": 1, "b": 2, "c": 3}, {"w": 1}, {"v": 1, "b": 2},
    collections.OrderedDict(w=1, b=2), [1, 2]])
def test_dict_structure_change_takes_the_general_path(other):
    f = jitc.jit(affine)
    x, w, b = _arrays((4,), (4,), (4,))
    _same(f(x, {"w": w, "b": b}), affine(x, {"w": w, "b": b}))
    _same(f(x, {"w": w, "b": b}), affine(x, {"w": w, "b": b}))
    params = {k: (w if k != "b" else b) for k in other} if isinstance(other, dict) else other
    try:
        want = affine(x, params)
    except Exception as exc:  # numpy's error, or jitc's for a non-array leaf
        with pytest.raises(type(exc) if not isinstance(exc, TypeError) else Exception):
            f(x, params)
        return
    _same(f(x, params), want)


def test_written_pytree_leaf_and_returned_argument():
    def step(params, grads, lr):
        params["w"] -= lr * grads["w"]
        params["b"] -= lr * grads["b"]
        return params["w"]
    f = jitc.jit(step)
    for call in range(3):
        w, b, gw, gb = _arrays((3, 2), (2,), (3, 2), (2,), seed=call)
        p1 = {"w": w.copy(), "b": b.copy()}
        p2 = {"w": w.copy(), "b": b.copy()}
        got = f(p1, {"w": gw, "b": gb}, lr=0.1)
        want = step(p2, {"w": gw, "b": gb}, lr=0.1)
        _same(p1, p2)
        assert got is p1["w"]
        _same(got, want)


def test_writes_refused_on_read_only_and_aliased_arguments():
    def bump(x, *, y):
        x += y
    f = jitc.jit(bump)
    x, y = _arrays((4,), (4,))
    f(x, y=y)
    f(x, y=y)
    frozen = x.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        f(frozen, y=y)
    with pytest.raises(ValueError, match="shares memory"):
        f(x, y=x)


def test_methods_read_their_state_at_each_call(general_calls):
    class Layer:
        def __init__(self, w):
            self.w = w
            self.scale = 1.0

        @jitc.jit
        def forward(self, x, *, bias=0.0):
            return x @ self.w * self.scale + bias

        def reference(self, x, bias=0.0):
            return x @ self.w * self.scale + bias

    layer = Layer(_arrays((4, 4))[0])
    (x,) = _arrays((2, 4), seed=1)
    for _ in range(3):
        _same(layer.forward(x), layer.reference(x))
        _same(layer.forward(x, bias=1.0), layer.reference(x, 1.0))
    assert general_calls[0] == 2
    layer.w *= 2                      # in place: the fast path reads the array anew
    _same(layer.forward(x), layer.reference(x))
    layer.w = layer.w[:, :3].copy()   # rebound to another shape: compiled anew
    _same(layer.forward(x), layer.reference(x))
    layer.scale = 0.5                 # a guarded scalar
    _same(layer.forward(x), layer.reference(x))
    other = Layer(_arrays((4, 4), seed=2)[0])  # another instance of the same structure
    _same(other.forward(x), other.reference(x))
    assert general_calls[0] == 5


class _Block:
    def __init__(self, w):
        self.w = w


class _GatedBlock(_Block):
    pass


def _model_forward(model, x):
    for block in model.blocks:
        x = np.tanh(x @ block.w) * model.gain
    model.calls[0] += 1.0
    return x


class _Model:
    def __init__(self, n):
        self.blocks = [_Block(w) for w in _arrays(*[(3, 3)] * n, seed=n)]
        self.gain = 1.0
        self.calls = np.zeros(1)
        self.shared = self.blocks[0]

    forward = jitc.jit(_model_forward)


MUTATIONS = {
    "none": lambda m: None,
    "in place": lambda m: m.blocks[1].w.__imul__(2),
    "append a block": lambda m: m.blocks.append(_Block(np.eye(3, dtype=np.float32))),
    "drop a block": lambda m: m.blocks.pop(),
    "rebind an array": lambda m: setattr(m.blocks[0], "w", np.ones((3, 3), np.float32)),
    "another dtype": lambda m: setattr(m.blocks[0], "w", np.ones((3, 3))),
    "a new attribute": lambda m: setattr(m.blocks[0], "b", np.ones(3)),
    "a scalar": lambda m: setattr(m, "gain", 3.0),
    "nan scalar": lambda m: setattr(m, "gain", float("nan")),
    "another class": lambda m: m.blocks.__setitem__(0, _GatedBlock(m.blocks[0].w)),
    "unshare": lambda m: setattr(m, "shared", _Block(m.blocks[0].w.copy())),
    "share an array": lambda m: setattr(m.blocks[1], "w", m.blocks[0].w),
    "replace the list": lambda m: setattr(m, "blocks", list(m.blocks)),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_state_changes_between_calls(mutation):
    """After any change to the state, the next call (fast or not) is numpy's."""
    jitted, plain = _Model(3), _Model(3)
    (x,) = _arrays((2, 3), seed=7)
    for _ in range(2):
        _same(jitted.forward(x), _model_forward(plain, x))
    MUTATIONS[mutation](jitted)
    MUTATIONS[mutation](plain)
    for _ in range(2):
        _same(jitted.forward(x), _model_forward(plain, x))
    _same(jitted.calls, plain.calls)


ACTIVATION_SCALE = np.ones(3, np.float32)


def _activation(x):
    return np.tanh(x) * ACTIVATION_SCALE


def test_rebinding_a_helper_function_is_seen():
    global _activation
    original = _activation
    f = jitc.jit(lambda x: _activation(x) + 1)
    (x,) = _arrays((3,))
    try:
        _same(f(x), np.tanh(x) + 1)
        _same(f(x), np.tanh(x) + 1)
        _activation = lambda x: x * 2  # noqa: E731
        _same(f(x), x * 2 + 1)
        _same(f(x), x * 2 + 1)
    finally:
        _activation = original


class Config:
    table = np.arange(3, dtype=np.float32)
    offset = 1.0


def test_class_attributes_are_read_at_call_time():
    class Scaler:
        weights = np.ones(3, np.float32)

        @jitc.jit
        def apply(self, x):
            return x * self.weights + Config.table * Config.offset

    s = Scaler()
    (x,) = _arrays((3,))
    saved = Config.table.copy()
    try:
        for _ in range(2):
            _same(s.apply(x), x * Scaler.weights + Config.table * Config.offset)
        Scaler.weights *= 3       # in place, on the class
        Config.table += 1         # in place, on a global class
        _same(s.apply(x), x * Scaler.weights + Config.table * Config.offset)
        Config.offset = 2.0       # a class scalar
        Scaler.weights = np.full(3, 5, np.float32)  # rebound on the class
        _same(s.apply(x), x * Scaler.weights + Config.table * Config.offset)
        s.weights = np.zeros(3, np.float32)         # an instance attribute hides it
        _same(s.apply(x), Config.table * Config.offset)
    finally:
        Config.table, Config.offset = saved, 1.0


def test_writes_through_self_land_in_the_class_array():
    class Counter:
        seen = np.zeros(3, np.float32)

        @jitc.jit
        def add(self, x):
            self.seen += x
            return self.seen.sum()

    c = Counter()
    (x,) = _arrays((3,))
    for _ in range(3):
        c.add(x)
    np.testing.assert_allclose(Counter.seen, 3 * x, rtol=1e-6)
    assert "seen" not in vars(c)


def test_fast_path_inside_a_trace_inlines():
    inner = jitc.jit(lambda x, *, k: x * k)
    outer = jitc.jit(lambda x: inner(x, k=2.0) + 1)
    (x,) = _arrays((3,))
    inner(x, k=2.0)
    inner(x, k=2.0)  # its fast path exists; a traced call must not take it
    _same(outer(x), x * 2 + 1)
    _same(outer(x), x * 2 + 1)


def test_c_backend_forms():
    f = jitc.jit(affine, backend="c")
    x, w, b = _arrays((4,), (4,), (4,))
    for _ in range(2):
        _same(f(x, {"w": w, "b": b}), affine(x, {"w": w, "b": b}))
    assert f._forms


@pytest.fixture
def python_calls(monkeypatch):
    """How many calls reached the Python side of the call at all (`_general_call`)."""
    count = [0]
    original = api.Jitted._general_call

    def counted(self, args, kwargs):
        count[0] += 1
        return original(self, args, kwargs)
    monkeypatch.setattr(api.Jitted, "_general_call", counted)
    return count


def test_positional_calls_never_enter_python_once_compiled(python_calls):
    f = jitc.jit(lambda x, y: x * y + 1)
    x, y = _arrays((3, 4), (4,))
    f(x, y)
    first = python_calls[0]
    for _ in range(5):
        np.testing.assert_array_equal(f(x, y), x * y + 1)
    assert python_calls[0] == first  # all five from C (FastCall)
    f(x, y=y)  # a keyword: the general side
    assert python_calls[0] == first + 1


def test_a_tuple_argument_is_not_taken_for_the_positional_arrays(python_calls):
    """`g((a, b))` is one argument: the C path of `g(a, b)` must not run it as two."""
    g = jitc.jit(lambda a, b=None: a if b is None else a + b)
    a, b = _arrays((3,), (3,))
    np.testing.assert_array_equal(g(a, b), a + b)
    pair = g((a, b))  # one argument (a tuple), b defaulted: numpy gives the tuple's stack
    np.testing.assert_array_equal(np.asarray(pair), np.asarray((a, b)))


def _helper_double(x):
    return x * 2


def _calls_helper(x):
    return _helper_double(x) + 1


def test_a_rebound_helper_is_seen_by_the_c_guards(python_calls):
    """A function calling a helper through its globals runs from C with the helper's identity
    checked there: rebinding the helper must retrace, not run the old code."""
    global _helper_double
    f = jitc.jit(_calls_helper)
    (x,) = _arrays((5,))
    f(x)
    assert type(f._fast).__name__ == "Guarded"
    first = python_calls[0]
    np.testing.assert_array_equal(f(x), x * 2 + 1)
    assert python_calls[0] == first
    saved = _helper_double
    try:
        _helper_double = lambda x: x * 3  # noqa: E731
        np.testing.assert_array_equal(f(x), x * 3 + 1)
        assert python_calls[0] == first + 1
        del _helper_double  # now missing: numpy raises NameError, so must we
        with pytest.raises(NameError):
            f(x)
    finally:
        _helper_double = saved
    np.testing.assert_array_equal(f(x), x * 2 + 1)


def test_a_helper_reading_a_user_module_attribute(tmp_path, monkeypatch):
    """`helper` (in module b) reads `layers.SCALE` (module a): rebinding that attribute, or
    the module name, retraces; the fast path checks both."""
    (tmp_path / "jitc_test_layers.py").write_text("SCALE = 2.0\n")
    (tmp_path / "jitc_test_model.py").write_text(
        "import jitc_test_layers as layers\n\n"
        "def helper(x):\n    return x * layers.SCALE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import jitc_test_layers
    import jitc_test_model
    try:
        f = jitc.jit(lambda x: jitc_test_model.helper(x) + 1)
        (x,) = _arrays((3,))
        np.testing.assert_array_equal(f(x), x * 2 + 1)
        np.testing.assert_array_equal(f(x), x * 2 + 1)
        jitc_test_layers.SCALE = 3.0
        np.testing.assert_array_equal(f(x), x * 3 + 1)
        other = type(jitc_test_layers)("jitc_test_other")
        other.SCALE = 5.0
        jitc_test_model.layers = other
        np.testing.assert_array_equal(f(x), x * 5 + 1)
    finally:
        import sys
        sys.modules.pop("jitc_test_layers", None)
        sys.modules.pop("jitc_test_model", None)


def test_a_rebound_library_function_or_ufunc_in_a_cell_is_seen():
    """`helper = np.tanh` then `np.sin`; `np.mean` then `np.sum`: both retrace (a silent stale
    result before: only the type was checked, and the key did not hold library callables)."""
    (x,) = _arrays((4,))
    for first, second in ((np.tanh, np.sin), (np.mean, np.sum)):
        fun, rebind = _rebindable(first)
        f = jitc.jit(fun)
        np.testing.assert_allclose(f(x), fun(x), rtol=1e-6)
        np.testing.assert_allclose(f(x), fun(x), rtol=1e-6)
        rebind(second)
        np.testing.assert_allclose(f(x), fun(x), rtol=1e-6)  # the C path
        np.testing.assert_allclose(f(x=x), fun(x), rtol=1e-6)  # the general path


def _rebindable(helper):
    def f(x):
        return helper(x) * 2

    def rebind(new):
        nonlocal helper
        helper = new
    return f, rebind
