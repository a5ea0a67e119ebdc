"""`jit(dynamic=...)`: how many compilations a function gets over changing sizes, why each one
happened (`compile_stats`), the guards that keep sizes 0 and 1 exact, and the exact fallback
when a symbolic compilation is refused. Results are compared with numpy at every size."""

from __future__ import annotations

import numpy as np
import pytest

import jitc

RNG = np.random.default_rng(5)
W = RNG.standard_normal((8, 4)).astype(np.float32)


def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def layer(x, w):
    return np.tanh(x @ w) * 2.0


def _reasons(f) -> list[tuple[str, str, bool]]:
    """Per compilation (by signature: compile_stats lists the least recently used first)."""
    return sorted((s["signature"], s["reason"], s["symbolic"]) for s in f.compile_stats())


def _sweep(f, sizes, *rest) -> None:
    for n in sizes:
        x = _floats(n, 8)
        np.testing.assert_allclose(f(x, *rest), layer(x, *rest), rtol=1e-5, atol=1e-6)


def test_a_changed_batch_compiles_once_more_symbolic_and_serves_every_later_size() -> None:
    f = jitc.jit(layer, backend="interpreter")
    _sweep(f, (3, 5, 7, 2, 33, 64, 5), W)
    assert _reasons(f) == [
        ("f32[3,8], f32[8,4]", "first call", False),
        ("f32[x_0,8], f32[8,4]", "dimension 0 of x changed (3 -> 5): now symbolic", True)]
    assert f.cache_size == 2


def test_sizes_0_and_1_keep_exact_compilations() -> None:
    f = jitc.jit(layer, backend="interpreter")
    _sweep(f, (1, 4, 0, 6, 9, 1, 0), W)
    assert _reasons(f) == [
        ("f32[0,8], f32[8,4]", "constraint x_0 >= 2 failed (x_0=0): exact compilation", False),
        ("f32[1,8], f32[8,4]", "first call", False),
        ("f32[x_0,8], f32[8,4]", "dimension 0 of x changed (1 -> 4): now symbolic", True)]


def test_a_sweep_from_1_compiles_twice() -> None:
    # The generate loop's shape: 1 exactly, then one symbolic compilation for 2, 3, ...
    f = jitc.jit(layer, backend="interpreter")
    _sweep(f, range(1, 20), W)
    assert _reasons(f) == [
        ("f32[1,8], f32[8,4]", "first call", False),
        ("f32[x_0,8], f32[8,4]", "dimension 0 of x changed (1 -> 2): now symbolic", True)]


def test_a_change_to_size_0_or_1_compiles_exactly() -> None:
    f = jitc.jit(layer, backend="interpreter")
    _sweep(f, (4, 1, 0), W)
    assert [r[1] for r in _reasons(f)] == [
        "dimension 0 of x changed (1 -> 0); sizes 0 and 1 get exact compilations",
        "dimension 0 of x changed (4 -> 1); sizes 0 and 1 get exact compilations",
        "first call"]


def test_the_guard_sends_a_size_1_call_after_the_symbolic_compilation_to_its_own() -> None:
    f = jitc.jit(layer, backend="interpreter")
    _sweep(f, (3, 5, 1, 1, 8), W)
    assert [r[1] for r in _reasons(f)] == [
        "constraint x_0 >= 2 failed (x_0=1): exact compilation", "first call",
        "dimension 0 of x changed (3 -> 5): now symbolic"]


def test_dimensions_that_change_alike_share_one_symbol() -> None:
    def total(x, y):
        return (x * y).sum(axis=0) + x.sum()

    f = jitc.jit(total, backend="interpreter")
    for n in (3, 6, 10):
        x, y = _floats(n, 4), _floats(n, 4)
        np.testing.assert_allclose(f(x, y), total(x, y), rtol=1e-5, atol=1e-5)
    assert [r[0] for r in _reasons(f)] == ["f32[3,4], f32[3,4]", "f32[x_0,4], f32[x_0,4]"]
    assert f.cache_size == 2


def test_dimensions_that_change_differently_get_their_own_symbols() -> None:
    def sums(x, y):
        return x.sum(axis=0) + y.sum(axis=0)

    f = jitc.jit(sums, backend="interpreter")
    for n, m in ((3, 4), (5, 7), (9, 2), (2, 9)):
        x, y = _floats(n, 4), _floats(m, 4)
        np.testing.assert_allclose(f(x, y), sums(x, y), rtol=1e-5, atol=1e-5)
    assert [r[0] for r in _reasons(f)] == ["f32[3,4], f32[4,4]", "f32[x_0,4], f32[y_0,4]"]


def test_dynamic_false_compiles_each_shape() -> None:
    f = jitc.jit(layer, backend="interpreter", dynamic=False)
    _sweep(f, (3, 5, 7), W)
    assert [r[2] for r in _reasons(f)] == [False, False, False]


def test_dynamic_true_makes_every_dimension_symbolic_from_the_first_call() -> None:
    def scaled(x, y):
        return np.tanh(x) * 2.0 + y

    f = jitc.jit(scaled, backend="interpreter", dynamic=True)
    for shape in ((3, 8), (5, 2), (2, 9), (1, 1)):
        x, y = _floats(*shape), _floats(*shape)
        np.testing.assert_allclose(f(x, y), scaled(x, y), rtol=1e-5, atol=1e-6)
    assert _reasons(f) == [("f32[x_0,x_1], f32[y_0,y_1]",
                            "first call: every dimension symbolic (dynamic=True)", True)]
    x = _floats(3, 4)
    with pytest.raises(ValueError, match="operands could not be broadcast"):
        scaled(x, _floats(2, 4))  # numpy's answer; the constraint x_0 == y_0 refuses it too
    with pytest.raises(ValueError, match="broadcast"):
        f(x, _floats(2, 4))


def test_dynamic_true_records_the_equality_of_contracted_extents() -> None:
    f = jitc.jit(layer, backend="interpreter", dynamic=True)
    _sweep(f, (3, 5), W)
    assert _reasons(f) == [("f32[x_0,x_1], f32[w_0,w_1]",
                            "first call: every dimension symbolic (dynamic=True)", True)]
    # Unequal extents fail the recorded w_0 == x_1: the exact compilation raises numpy's error.
    with pytest.raises(ValueError, match=r"matmul: f32\[2,8\] @ f32\[7,4\]"):
        f(_floats(2, 8), _floats(7, 4))


def test_named_dimensions_are_symbolic_from_the_first_call() -> None:
    f = jitc.jit(layer, backend="interpreter", dynamic={"x": {0: "batch"}})
    _sweep(f, (3, 0, 1, 40), W)
    assert _reasons(f) == [("f32[batch,8], f32[8,4]",
                            "first call: dimension 0 of x is batch (dynamic=...)", True)]


def test_malformed_dynamic_options_are_refused() -> None:
    with pytest.raises(ValueError, match="must be an identifier, not '0 batch'"):
        jitc.jit(layer, dynamic={"x": {0: "0 batch"}})
    with pytest.raises(TypeError, match="takes None, True, False or a dict"):
        jitc.jit(layer, dynamic="batch")
    f = jitc.jit(layer, backend="interpreter", dynamic={"z": {0: "batch"}})
    with pytest.raises(ValueError, match="names argument 'z', but the call's array "
                                         "arguments are x, w"):
        f(_floats(2, 8), W)


def test_a_refused_symbolic_compilation_falls_back_to_exact_ones() -> None:
    def branchy(x, w):
        return layer(x, w) if x.shape[0] > 4 else -layer(x, w)

    f = jitc.jit(branchy, backend="interpreter")
    for n in (3, 5, 7, 2):
        x = _floats(n, 8)
        np.testing.assert_allclose(f(x, W), branchy(x, W), rtol=1e-5, atol=1e-6)
    reasons = dict((r[0], r[1]) for r in _reasons(f))
    assert len(reasons) == 4 and f.cache_size == 4
    assert reasons["f32[5,8], f32[8,4]"].startswith(
        "dimension 0 of x changed (3 -> 5); the symbolic compilation is refused (")
    assert "x.shape[0] > 4" in reasons["f32[5,8], f32[8,4]"]
    # Tried once per signature structure: later sizes name the same refusal without a trace.
    assert reasons["f32[7,8], f32[8,4]"].startswith("dimension 0 of x changed (5 -> 7); the "
                                                    "symbolic compilation is refused (")


# Code that asks about a symbolic extent's value at the call: equality with a number or with
# another extent, containment, a dict or set key. Each answer used to be the structural one
# (the expression `n` is not the number 5), so the trace took the `!= 5` branch and the size-5
# call ran it: a silent wrong answer.
VALUE_QUESTIONS = {
    "== 5": lambda x: x * 2.0 if x.shape[0] == 5 else x + 1.0,
    "!= 4": lambda x: x * 2.0 if x.shape[0] != 4 else x + 1.0,
    "in a tuple": lambda x: x * 3.0 if x.shape[0] in (3, 6) else x,
    "a dict key": lambda x: x * {3: 1.5, 5: 2.5}.get(x.shape[0], 0.5),
    "in a set": lambda x: x * 3.0 if x.shape[0] in {2, 4} else x,
    "two extents": lambda x, y: x.sum() + y.sum() * (2.0 if x.shape[0] == y.shape[0] else 3.0),
}


@pytest.mark.parametrize("question", sorted(VALUE_QUESTIONS))
def test_a_question_about_a_symbolic_extent_s_value_is_answered_per_size(question: str
                                                                          ) -> None:
    fun = VALUE_QUESTIONS[question]
    f = jitc.jit(fun, backend="interpreter")
    for n in (1, 2, 3, 4, 5, 6, 7, 0):
        args = [_floats(n, 3)] + ([_floats(7 - n, 3)] if question == "two extents" else [])
        np.testing.assert_allclose(f(*args), fun(*args), rtol=1e-6, atol=1e-6,
                                   err_msg=f"size {n}")
    # The symbolic compilation is refused with the question named, never run.
    reasons = [reason for _, reason, symbolic in _reasons(f) if not symbolic]
    assert len(reasons) == len(_reasons(f)) == 8
    assert any("the symbolic compilation is refused" in r and "until the call" in r
               for r in reasons)


def test_a_question_that_the_guard_answers_keeps_the_symbolic_compilation() -> None:
    # The automatic policy's guard n >= 2 is known while tracing: an extent is never 0 or 1.
    def f(x):
        if x.shape[0] == 0 or x.shape[0] == 1 or x.shape[0] + 1 == 2:
            return x * 0.0
        return x * (2.0 if x.shape[0] != 1 else 3.0)

    jitted = jitc.jit(f, backend="interpreter")
    for n in (1, 2, 3, 9):
        x = _floats(n, 3)
        np.testing.assert_allclose(jitted(x), f(x), rtol=1e-6)
    assert [r[2] for r in _reasons(jitted)] == [False, True]


def test_extents_that_the_trace_has_made_equal_compare_equal() -> None:
    def f(x, y):
        total = x + y  # records a == b
        return total * (2.0 if x.shape[0] == y.shape[0] else 3.0)

    jitted = jitc.jit(f, backend="interpreter", dynamic={"x": {0: "a"}, "y": {0: "b"}})
    for n in (2, 5):
        x, y = _floats(n, 3), _floats(n, 3)
        np.testing.assert_allclose(jitted(x, y), f(x, y), rtol=1e-6)
    assert [r[2] for r in _reasons(jitted)] == [True]


def test_extents_compare_as_expressions_outside_a_trace() -> None:
    # The compiler's question (the same expression?) outside a trace, the call's value inside.
    from jitc.ir import symbolic
    n = symbolic.symbol("n")
    assert (n == 5) is False and n != 5 and n + 1 != n and n == symbolic.symbol("n")
    assert {n: 1}[symbolic.symbol("n")] == 1
    with symbolic.recording():
        assert n + 1 != n and n == symbolic.symbol("n")  # the same at every size
        with pytest.raises(symbolic.UnknownDimensionError, match="equals 5"):
            _ = n == 5
        with pytest.raises(symbolic.UnknownDimensionError, match="key"):
            _ = {n: 1}


def test_an_extent_used_as_a_float_is_the_call_s_value() -> None:
    def scaled(x):
        return x * (x.shape[0] * 2.0)

    f = jitc.jit(scaled, backend="interpreter")
    for n in (3, 5, 6):
        x = _floats(n, 4)
        np.testing.assert_allclose(f(x), scaled(x), rtol=1e-6)
    assert [r[1:] for r in _reasons(f)] == [
        ("first call", False), ("dimension 0 of x changed (3 -> 5): now symbolic", True)]


def test_a_backend_with_static_extents_compiles_exactly_and_says_why(
        static_extents_backend: str) -> None:
    f = jitc.jit(layer, backend=static_extents_backend)
    _sweep(f, (3, 5, 7), W)
    reasons = _reasons(f)
    assert [r[2] for r in reasons] == [False, False, False]
    assert reasons[2][1] == ("dimension 0 of x changed (5 -> 7); the symbolic compilation is "
                             "refused (the static-extents backend takes static extents only): "
                             "exact "
                             "compilation")


def test_the_cpu_backend_compiles_the_changed_dimension_symbolically() -> None:
    f = jitc.jit(layer)
    _sweep(f, (3, 5, 7, 64), W)
    assert _reasons(f) == [("f32[3,8], f32[8,4]", "first call", False),
                           ("f32[x_0,8], f32[8,4]",
                            "dimension 0 of x changed (3 -> 5): now symbolic", True)]


def _double(x):
    return x * 2.0


def test_a_pickled_jitted_function_keeps_its_policy() -> None:
    import pickle

    f = pickle.loads(pickle.dumps(jitc.jit(_double, backend="interpreter",
                                           dynamic={"x": {0: "n"}})))
    np.testing.assert_array_equal(f(np.ones(3)), np.full(3, 2.0))
    assert _reasons(f) == [("f64[n]", "first call: dimension 0 of x is n (dynamic=...)", True)]


def test_the_symbolic_compilation_in_use_outlives_exact_ones_in_the_bounded_cache() -> None:
    f = jitc.jit(layer, backend="interpreter", cache_limit=2)
    _sweep(f, (3, 5, 1, 6, 0, 7), W)  # 1 and 0 compile exactly; 6 and 7 use the symbolic one
    assert _reasons(f)[-1] == ("f32[x_0,8], f32[8,4]",
                               "dimension 0 of x changed (3 -> 5): now symbolic", True)
    assert f.cache_size == 2


def captured_layer(x):
    return np.tanh(x @ W) * 2.0  # W is read at each call: a captured array


def test_a_symbolic_compilation_serves_later_calls_of_a_function_with_captured_arrays() -> None:
    f = jitc.jit(captured_layer, backend="interpreter")
    for n in (3, 5, 7, 2, 33):
        x = _floats(n, 8)
        np.testing.assert_allclose(f(x), layer(x, W), rtol=1e-5, atol=1e-6)
    assert _reasons(f) == [
        ("f32[3,8], f32[8,4]", "first call", False),
        ("f32[x_0,8], f32[8,4]", "dimension 0 of x changed (3 -> 5): now symbolic", True)]


SHAPES_SEEN: list = []


def logging_layer(x, w):
    SHAPES_SEEN.append(("layer", x.shape))  # a trace-time log, as the dask tests keep
    return np.tanh(x @ w)


def test_a_trace_that_logs_a_symbolic_shape_does_not_retrace_later_calls() -> None:
    SHAPES_SEEN.clear()
    f = jitc.jit(logging_layer, backend="interpreter")
    for n in (5, 3, 5, 9, 5):
        x = _floats(n, 8)
        np.testing.assert_allclose(f(x, W), np.tanh(x @ W), rtol=1e-5, atol=1e-6)
    assert [str(shape) for _, shape in SHAPES_SEEN] == ["(5, 8)", "(Dim(x_0), 8)"]
    assert f.cache_size == 2
