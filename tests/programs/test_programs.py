"""Small but real numpy programs, run unmodified under `jitc.jit` and with plain numpy.

Each program is a `make(jit)` that builds its own state (arguments, globals, closures,
objects), runs the program with `jit` applied where a user would apply `jitc.jit` (the identity
for the numpy run), and returns everything the program could touch: return values and the
final contents of every array and counter. The two runs must agree on all of it, including
arrays the function did not return.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from jitcheck import BACKENDS, TOLERANCES

import jitc
from jitc.tracing import pytree
from programs import state as module_state

PROGRAMS: dict[str, Callable] = {}


def program(fn: Callable) -> Callable:
    PROGRAMS[fn.__name__] = fn
    return fn


def rng() -> np.random.Generator:
    return np.random.default_rng(7)


# -- writes into arguments ----------------------------------------------------------------------


@program
def smoothing_stencil_fills_output(jit):
    def stencil(out, x):
        out[1:-1] = (x[:-2] + x[1:-1] + x[2:]) / 3
        out[0] = x[0]
        out[-1] = x[-1]
    x = rng().standard_normal(17)
    out = np.full(17, np.nan)
    result = jit(stencil)(out, x)
    return {"result": result, "out": out, "x": x}


@program
def standardize_in_place(jit):
    def standardize(x):
        x -= x.mean(axis=0)
        x /= x.std(axis=0) + 1e-8
    x = rng().standard_normal((9, 3))
    jit(standardize)(x)
    return {"x": x}


@program
def ufunc_out_and_copyto(jit):
    def combine(a, b, c, d):
        np.add(a, b, out=c)
        np.multiply(c, 2, out=c)
        np.copyto(d, c - a)
        np.copyto(a, b, where=b > 0)
        return c.sum()
    r = rng()
    a, b = r.standard_normal(6), r.standard_normal(6)
    c, d = np.zeros(6), np.zeros(6)
    s = jit(combine)(a, b, c, d)
    return {"s": s, "a": a, "b": b, "c": c, "d": d}


@program
def mutated_argument_is_returned(jit):
    def scale(x):
        x *= 2
        return x
    x = rng().standard_normal(5)
    y = jit(scale)(x)
    assert y is x
    return {"x": x}


@program
def writes_through_views(jit):
    def edit(a):
        row = a[1]
        row += 10
        col = a[:, 0]
        col *= -1
        a.T[2] = 7.0
        flat = a.reshape(-1)
        flat[::5] = 0.5
        a[1:, ::2] *= 3
        return row.sum() + col.sum()
    a = rng().standard_normal((4, 5))
    s = jit(edit)(a)
    return {"s": s, "a": a}


@program
def reads_see_earlier_writes_through_views(jit):
    def f(a):
        first = a[0]
        a[0, 1] = 100.0
        total = first.sum()  # the view sees the write
        a += 1
        return total, first * 1, a[0]
    a = np.arange(12.0).reshape(3, 4)
    out = jit(f)(a)
    return {"out": out, "a": a}


@program
def game_of_life_step_writes_grid(jit):
    def life(grid):
        n = sum(np.roll(np.roll(grid, i, 0), j, 1)
                for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))
        grid[...] = ((n == 3) | ((grid == 1) & (n == 2))).astype(grid.dtype)
    grid = (rng().random((8, 8)) < 0.4).astype(np.int32)
    step = jit(life)
    for _ in range(3):
        step(grid)
    return {"grid": grid}


@program
def sgd_step_updates_param_dict(jit):
    def sgd(params, grads, lr):
        for k in params:
            params[k] -= lr * grads[k]
        return sum(float(0) + (g * g).sum() for g in grads.values())
    r = rng()
    params = {"w": r.standard_normal((3, 2)), "b": r.standard_normal(2)}
    grads = {"w": r.standard_normal((3, 2)), "b": r.standard_normal(2)}
    norm = jit(sgd)(params, grads, 0.1)
    return {"norm": norm, "params": params, "grads": grads}


@program
def gradient_descent_loop_updates_weights(jit):
    def fit(w, x, y):
        for _ in range(4):
            grad = x.T @ (x @ w - y) / len(y)
            w -= 0.1 * grad
        return ((x @ w - y) ** 2).mean()
    r = rng()
    x, y = r.standard_normal((20, 3)), r.standard_normal(20)
    w = np.zeros(3)
    loss = jit(fit)(w, x, y)
    return {"loss": loss, "w": w}


@program
def softmax_in_place(jit):
    def softmax_(x):
        x -= x.max(axis=-1, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(axis=-1, keepdims=True)
    x = rng().standard_normal((4, 7)).astype(np.float32)
    jit(softmax_)(x)
    return {"x": x}


@program
def returns_a_view_of_its_argument(jit):
    def tail(x):
        x[0] = -1.0
        return x[1:]
    x = rng().standard_normal(6)
    t = jit(tail)(x)
    assert np.shares_memory(t, x)
    return {"t": t, "x": x}


@program
def numpy_scalar_argument_rebinds(jit):
    def f(x, s):
        s += 1
        x *= s
        return s
    x = rng().standard_normal(3)
    s = np.float64(2.0)
    out = jit(f)(x, s)
    return {"out": out, "x": x, "s": s}


@program
def non_contiguous_argument_written(jit):
    def f(x):
        x += np.arange(x.shape[1])
    base = rng().standard_normal((6, 8))
    jit(f)(base[::2, 1::3])
    return {"base": base}


# -- arrays created inside the function ----------------------------------------------------------


@program
def fill_rows_in_a_python_loop(jit):
    def features(x):
        y = np.zeros((x.shape[0], 3))
        for i in range(x.shape[0]):
            y[i, 0] = x[i].sum()
            y[i, 1:] = x[i, :2] * i
        return y
    return {"y": jit(features)(rng().standard_normal((6, 4)))}


@program
def local_accumulator(jit):
    def moments(x):
        acc = np.zeros(x.shape[1])
        sq = np.zeros_like(acc)
        for row in x:
            acc += row
            sq += row * row
        mean = acc / len(x)
        return mean, sq / len(x) - mean ** 2
    return {"out": jit(moments)(rng().standard_normal((7, 3)))}


@program
def sliding_window_fill(jit):
    def windows(out, x):
        for i in range(out.shape[0]):
            out[i] = x[i:i + 3].sum()
    x = rng().standard_normal(10)
    out = np.zeros(8)
    jit(windows)(out, x)
    return {"out": out}


@program
def many_row_updates_do_not_recurse(jit):
    def fill(x):
        y = np.empty_like(x)
        for i in range(x.shape[0]):
            y[i] = x[i] * (i % 7)
        return y
    return {"y": jit(fill)(rng().standard_normal((120, 2)))}


@program
def arange_then_updates(jit):
    def build(x):
        idx = np.arange(x.shape[0], dtype=np.float64)
        idx[::2] = x[::2]
        idx[-1] += 100
        return idx
    return {"idx": jit(build)(rng().standard_normal(9))}


# -- captured state: globals, closures, objects ----------------------------------------------------


@program
def global_weights_change_between_calls(jit):
    module_state.reset(rng())
    x = rng().standard_normal((2, 6))
    f = jit(module_state.mlp)
    first = f(x)
    module_state.W1 *= 2  # in place
    second = f(x)
    module_state.B1 = np.ones(4)  # rebound
    third = f(x)
    return {"out": (first, second, third)}


@program
def helpers_of_another_module_read_its_globals(jit):
    module_state.reset(rng())

    def forward(x):
        return module_state.mlp(x) * 2  # W1 and B1 are read by mlp, in module_state

    f = jit(forward)
    x = rng().standard_normal((2, 6))
    first = f(x)
    module_state.W1 *= 2
    second = f(x)
    module_state.B1 = np.ones(4)
    module_state.EPS = 0.5  # not read: no retrace needed, none harmful
    return {"out": (first, second, f(x))}


@program
def helper_of_another_module_accumulates_into_its_globals(jit):
    module_state.reset(rng())
    r = rng()
    w, u = r.standard_normal((3, 6)), r.standard_normal((6, 6))

    def train(xs, h):
        for x in xs:
            h = module_state.rnn_accumulate(x, h, w, u)  # writes GRAD_W, GRAD_B, STEP there
        return h

    f = jit(train)
    h = np.zeros((4, 6))
    for _ in range(2):
        h = f(r.standard_normal((2, 4, 3)), h)
    return {"h": h, "gw": module_state.GRAD_W, "gb": module_state.GRAD_B,
            "step": module_state.STEP}


@program
def helper_function_in_a_closure(jit):
    table = rng().standard_normal((5, 3))

    def lookup(ids):
        return table[ids]

    def embed(ids):
        return lookup(ids).sum(axis=0)

    f = jit(embed)
    ids = np.array([0, 3, 3, 1])
    first = f(ids)
    table[3] = 100.0
    return {"out": (first, f(ids)), "table": table}


@program
def closure_weights_change_between_calls(jit):
    w = rng().standard_normal((3, 3))

    def make():
        def apply(x):
            return x @ w
        return apply
    f = jit(make())
    x = np.eye(3)
    first = f(x)
    w[0] = 5.0
    return {"out": (first, f(x)), "w": w}


@program
def rnn_step_accumulates_gradients_in_globals(jit):
    module_state.reset(rng())
    r = rng()
    w, u = r.standard_normal((3, 6)), r.standard_normal((6, 6))
    h = np.zeros((4, 6))
    step = jit(module_state.rnn_accumulate)
    for _ in range(3):
        h = step(r.standard_normal((4, 3)), h, w, u)
    return {"h": h, "gw": module_state.GRAD_W, "gb": module_state.GRAD_B,
            "step": module_state.STEP}


@program
def running_statistics_in_a_global_dict(jit):
    module_state.reset(rng())
    r = rng()
    f = jit(module_state.running_stats)
    outs = [f(r.standard_normal((5, 4))) for _ in range(3)]
    return {"outs": outs, "mean": module_state.STATS["mean"],
            "count": module_state.STATS["count"]}


@program
def kv_cache_decode_loop_on_objects(jit):
    r = rng()
    dim, steps = 4, 5

    class Attention:
        def __init__(self):
            self.wq, self.wk, self.wv = (r.standard_normal((dim, dim)) for _ in range(3))
            self.cache_k = np.zeros((8, dim))
            self.cache_v = np.zeros((8, dim))
            self.pos = 0

        def step(self, x):
            q, k, v = x @ self.wq, x @ self.wk, x @ self.wv
            self.cache_k[self.pos] = k
            self.cache_v[self.pos] = v
            self.pos += 1
            keys = self.cache_k[:self.pos]
            scores = keys @ q / np.sqrt(dim)
            p = np.exp(scores - scores.max())
            return (p / p.sum()) @ self.cache_v[:self.pos]
        step = jit(step)

    class Model:
        def __init__(self):
            self.layers = [Attention(), Attention()]

        def decode(self, x):
            for layer in self.layers:
                x = x + layer.step(x)
            return x

    model = Model()
    x = r.standard_normal(dim)
    outs = []
    for _ in range(steps):
        x = model.decode(x) * 0.5
        outs.append(x)
    return {"outs": outs, "k": [a.cache_k for a in model.layers],
            "v": [a.cache_v for a in model.layers], "pos": [a.pos for a in model.layers]}


class GrowingCache:
    """Attention over a KV cache on `self` that grows by one row per token: the state's
    shape changes at every call."""

    def __init__(self, dim: int = 4):
        r = rng()
        self.wq, self.wk, self.wv = (r.standard_normal((dim, dim)) for _ in range(3))
        self.keys = np.zeros((0, dim))
        self.values = np.zeros((0, dim))

    def step(self, x):
        self.keys = np.concatenate([self.keys, (x @ self.wk)[None]])
        self.values = np.concatenate([self.values, (x @ self.wv)[None]])
        scores = self.keys @ (x @ self.wq) / np.sqrt(x.shape[0])
        p = np.exp(scores - scores.max())
        return (p / p.sum()) @ self.values


@program
def kv_cache_grows_on_self(jit):
    cache = GrowingCache()
    step = jit(cache.step)
    x = rng().standard_normal(4)
    outs = []
    for _ in range(7):
        x = np.tanh(step(x))
        outs.append(x)
    return {"outs": outs, "keys": cache.keys, "values": cache.values}


@program
def jitted_bound_method_reads_nested_state(jit):
    r = rng()

    class Layer:
        def __init__(self):
            self.w = r.standard_normal((3, 3))

    class Net:
        def __init__(self):
            self.layers = [Layer(), Layer()]
            self.scale = 0.5

        def forward(self, x):
            for layer in self.layers:
                x = np.tanh(x @ layer.w) * self.scale
            return x

    net = Net()
    forward = jit(net.forward)
    x = r.standard_normal((2, 3))
    first = forward(x)
    net.layers[1].w[:] = 0.25  # in place, two objects down
    second = forward(x)
    net.scale = 2.0  # a scalar guard
    third = forward(x)
    return {"out": (first, second, third)}


@program
def adam_state_on_object_rebinds_arrays(jit):
    r = rng()

    class Adam:
        def __init__(self, params):
            self.m = {k: np.zeros_like(v) for k, v in params.items()}
            self.v = {k: np.zeros_like(v) for k, v in params.items()}
            self.t = 0

        def update(self, params, grads):
            self.t += 1
            for k in params:
                self.m[k] = 0.9 * self.m[k] + 0.1 * grads[k]
                self.v[k] = 0.999 * self.v[k] + 0.001 * grads[k] ** 2
                m_hat = self.m[k] / (1 - 0.9 ** self.t)
                v_hat = self.v[k] / (1 - 0.999 ** self.t)
                params[k] -= 0.01 * m_hat / (np.sqrt(v_hat) + 1e-8)
        update = jit(update)

    params = {"w": r.standard_normal((2, 3)), "b": r.standard_normal(3)}
    opt = Adam(params)
    for _ in range(3):
        grads = {k: r.standard_normal(v.shape) for k, v in params.items()}
        opt.update(params, grads)
    return {"params": params, "m": opt.m, "v": opt.v, "t": opt.t}


@program
def counter_attribute_and_buffer(jit):
    class Meter:
        def __init__(self):
            self.total = np.zeros(3)
            self.n = 0

        def add(self, x):
            self.total += x.sum(axis=0)
            self.n += len(x)
            return self.total / self.n
        add = jit(add)

    meter = Meter()
    r = rng()
    outs = [meter.add(r.standard_normal((k + 1, 3))) for k in range(3)]
    return {"outs": outs, "total": meter.total, "n": meter.n}


@program
def one_function_many_shapes(jit):
    def normalize(x):
        out = x - x.mean(axis=-1, keepdims=True)
        out /= np.sqrt((out ** 2).mean(axis=-1, keepdims=True)) + 1e-6
        return out
    f = jit(normalize)
    r = rng()
    return {"outs": [f(r.standard_normal(s)) for s in [(3,), (2, 5), (1, 1), (4, 2, 3)]]}


@program
def captured_buffer_written_and_returned_over_many_sizes(jit):
    # The third size is compiled symbolically; the returned buffer is the captured array
    # itself, as numpy returns it, on every call.
    total = np.zeros(3)

    def accumulate(x):
        total[:] += x.sum()
        return total

    f = jit(accumulate)
    r = rng()
    outs = [f(r.standard_normal(n)) for n in (4, 5, 6, 7)]
    return {"outs": [o.copy() for o in outs], "total": total,
            "returns_the_buffer": all(o is total for o in outs)}


@program
def lazily_created_attribute(jit):
    class Buffer:
        def push(self, x):
            if not hasattr(self, "data"):
                self.data = np.zeros_like(x)
            self.data += x
            return self.data.copy()
        push = jit(push)

    b = Buffer()
    outs = [b.push(np.full(3, float(i))) for i in range(3)]
    return {"outs": outs, "data": b.data}


def assert_same_world(got: object, want: object) -> None:
    """Same structure; arrays of the same type, shape, dtype and (close) values; numpy and
    Python scalars of the same type and value."""
    def is_leaf(x: object) -> bool:
        return isinstance(x, (np.ndarray, np.generic, bool, int, float, str, type(None)))
    got_leaves, got_tree = pytree.flatten(got, is_leaf)
    want_leaves, want_tree = pytree.flatten(want, is_leaf)
    assert got_tree == want_tree
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        if isinstance(w, np.generic) and isinstance(g, np.ndarray) and g.ndim == 0:
            g = g[()]  # jitc returns numpy's scalars as 0-d arrays (docs/jit.md)
        assert type(g) is type(w), f"leaf {i}: {type(g)} != {type(w)}"
        if isinstance(w, (np.ndarray, np.generic)):
            assert g.shape == w.shape and g.dtype == w.dtype, f"leaf {i}: {g!r} != {w!r}"
            rtol, atol = TOLERANCES.get(w.dtype, (0, 0))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"leaf {i}")
        else:
            assert g == w, f"leaf {i}: {g!r} != {w!r}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_numpy(name: str, backend: str) -> None:
    make = PROGRAMS[name]
    want = make(lambda f: f)
    got = make(lambda f: jitc.jit(f, backend=backend))
    assert_same_world(got, want)


# -- what numpy refuses, jitc refuses the same way -----------------------------------------------


def test_written_argument_aliasing_another_is_an_error_not_a_wrong_answer() -> None:
    def f(a, b):
        a += b[::-1]
    a = np.arange(6.0)
    with pytest.raises(ValueError, match="shares memory"):
        jitc.jit(f)(a, a)
    with pytest.raises(ValueError, match="shares memory"):
        jitc.jit(f)(a[1:4], a[:3])
    jitc.jit(f)(a[:3], a[3:])  # disjoint views of one buffer are fine
    expected = np.arange(6.0)
    expected[:3] += expected[3:][::-1]
    np.testing.assert_array_equal(a, expected)


def test_read_only_argument_written_raises_like_numpy() -> None:
    x = np.ones(3)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        jitc.jit(lambda x: x.__iadd__(1))(x)


def test_in_place_cast_follows_numpy() -> None:
    def f(x):
        x += 1.5
    with pytest.raises(TypeError, match="same_kind"):
        jitc.jit(f)(np.arange(3))
    with pytest.raises(TypeError):
        f(np.arange(3))


def test_list_append_to_captured_state_is_refused_clearly() -> None:
    history: list = []

    def f(x):
        history.append(x)
        return x * 2
    with pytest.raises(jitc.TraceError, match="list appends"):
        jitc.jit(f)(np.ones(2))
    assert history == []


def _fill_rows(x):
    y = np.empty_like(x)
    for i in range(x.shape[0]):
        y[i] = x[i] * (i % 7)
    return y


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_2000_row_fill_is_one_loop_or_one_write(backend: str) -> None:
    """Thousands of row writes neither recurse nor stay thousands of writes: tracing's copies
    fold back into one loop; with folding off, the simplifier joins the adjacent blocks into
    one concatenate."""
    x = np.random.default_rng(0).standard_normal((2000, 2))
    jitted = jitc.jit(_fill_rows, backend=backend)
    np.testing.assert_array_equal(jitted(x), _fill_rows(x))
    assert jitted.lower(x).as_text().count(" = while(") == 1
    unrolled = jitc.jit(_fill_rows, backend="interpreter", disabled_passes={"reroll"})
    np.testing.assert_array_equal(unrolled(x), _fill_rows(x))
    text = unrolled.lower(x).as_text(optimized=True)
    assert text.count("dynamic_update_slice") == 0 and text.count("concatenate(") == 1


@pytest.mark.parametrize("backend", ["cpu", "c"])
def test_writes_into_arguments_take_the_c_fast_path(backend: str) -> None:
    def scale_into(out, x):
        out[:] = x * 2
    def bump(x):
        x += 1
        return x.sum()
    write, count = jitc.jit(scale_into, backend=backend), jitc.jit(bump, backend=backend)
    out, x = np.zeros(4), np.arange(4.0)
    for _ in range(3):  # the first call compiles, the others run in C
        assert write(out, x) is None
        total = count(x)
    assert write._fast is not None and count._fast is not None
    plain = jitc.jit(lambda a: a + 1, backend=backend)  # no state: the C path as before
    plain(x)
    assert plain._fast is not None
    np.testing.assert_array_equal(out, (np.arange(4.0) + 2) * 2)
    np.testing.assert_array_equal(x, np.arange(4.0) + 3)
    assert total == (np.arange(4.0) + 3).sum()
    # What C cannot do, the Python path does, or refuses as numpy would.
    with pytest.raises(ValueError, match="shares memory"):
        write(x, x)
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        write(frozen, x)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_int_arguments_used_as_python_ints_are_specialized(backend: str) -> None:
    """An int argument used as a loop count compiles per value; one used as a slice bound is
    an extent (0 and 1 exactly, then one symbolic compilation, with numpy's shorter slice
    at the end)."""
    def pad_rows(x, n):
        out = np.zeros((n, x.shape[0]))
        for i in range(n):
            out[i] = x * i
        return out

    def window(x, t):
        return x[t:t + 2] * t

    rows, slide = jitc.jit(pad_rows, backend=backend), jitc.jit(window, backend=backend)
    x = np.arange(4.0)
    for n in (1, 3, 3, 2):
        np.testing.assert_array_equal(rows(x, n), pad_rows(x, n))
    assert rows.cache_size == 3
    x = np.arange(8.0)
    for t in (0, 1, 2, 1, 3, 5, 6):
        np.testing.assert_array_equal(slide(x, t), window(x, t))
    assert slide.cache_size == 3 and sum(s["symbolic"] for s in slide.compile_stats()) == 1
    np.testing.assert_array_equal(slide(x, 7), window(x, 7))  # numpy's one element
    assert slide.cache_size == 4


@pytest.mark.parametrize("backend", ["cpu", "c"])
def test_state_read_through_globals_and_helpers_takes_the_c_path(backend: str) -> None:
    """Captured arrays and scalars found without lists, dicts or objects on the way are read
    by a small check before the C call; any change is still seen."""
    module_state.reset(rng())

    def forward(x):
        return module_state.mlp(x) * SCALE_FOR_TEST

    f = jitc.jit(forward, backend=backend)
    x = rng().standard_normal((2, 6))
    f(x)
    assert f._fast is not None
    for _ in range(2):
        np.testing.assert_allclose(f(x), forward(x))
    module_state.W1 *= 2  # in place
    np.testing.assert_allclose(f(x), forward(x))
    module_state.B1 = np.ones(4)  # rebound
    np.testing.assert_allclose(f(x), forward(x))
    global SCALE_FOR_TEST
    SCALE_FOR_TEST = 3.0  # a guard: compiles anew
    np.testing.assert_allclose(f(x), forward(x))
    module_state.W1 = module_state.W1[:, :2].copy()  # a new shape: compiles anew
    module_state.B1 = np.ones(2)
    np.testing.assert_allclose(f(x), forward(x))
    SCALE_FOR_TEST = 2.0


SCALE_FOR_TEST = 2.0


def test_growing_captured_state_compiles_symbolically_once() -> None:
    """A cache on `self` that grows by a row per call compiles for 0 and 1 rows exactly,
    then once with its length symbolic, like an argument whose extent changes."""
    cache = GrowingCache()
    step = jitc.jit(cache.step)
    x = np.ones(4)
    for _ in range(9):
        step(x)
    stats = step.compile_stats()
    assert [s["symbolic"] for s in stats] == [False, False, True]
    assert stats[-1]["reason"] == ("dimension 0 of self.keys changed (1 -> 2), dimension 0 of "
                                   "self.values changed (1 -> 2): now symbolic")
    assert cache.keys.shape == (9, 4)
