"""What cannot compile: one clear error per construct, and `explain` lists them all at once."""

from __future__ import annotations

import numpy as np
import pytest

import jitc


def model(x, w):
    h = x @ w
    if h.sum() > 0:  # a data-dependent branch
        h = h * 2
    noise = np.random.normal(size=h.shape)
    print(h)
    s = np.linalg.eigvals(w)
    return h + noise + float(h.max()) + s


def test_explain_reports_every_obstacle_with_its_line_and_fix():
    found = jitc.jit(model).explain(np.ones((2, 3)), np.eye(3))
    expected = [("if h.sum() > 0", "the truth value", "np.where"),
                ("np.random.normal(size=h.shape)", "numpy.random.normal", "pass them in"),
                ("print(h)", "printing a traced array", "print it after the call"),
                ("np.linalg.eigvals(w)", "numpy.linalg.eigvals is not supported", "docs/jit.md"),
                ("float(h.max())", "float() of a traced array", "static")]
    assert len(found) == len(expected)
    for message, fragments in zip(found, expected):
        assert "test_explain.py:" in message
        for fragment in fragments:
            assert fragment in message


def test_explain_is_empty_when_the_call_compiles():
    assert jitc.jit(lambda x: np.tanh(x) * 2).explain(np.ones(3)) == []


def test_a_shape_error_ends_the_explanation():
    def f(x):
        if x.sum() > 0:
            x = x * 2
        return x + np.ones(4)
    found = jitc.jit(f).explain(np.ones(3))
    assert len(found) == 2 and "the truth value" in found[0] and "broadcast" in found[1]


@pytest.mark.parametrize("body,fragment", [
    (lambda x: x + np.random.rand(*x.shape), "numpy.random.rand inside a jitted function"),
    (lambda x: print(x), "printing a traced array"),
    (lambda x: f"{x}", "printing a traced array"),
])
def test_each_construct_is_a_clear_error(body, fragment):
    with pytest.raises(jitc.TraceError, match=fragment):
        jitc.jit(body)(np.ones(3))


def test_shapes_and_dtypes_still_print():
    seen = []
    jitc.jit(lambda x: seen.append(f"{x.shape} {x.dtype}") or x)(np.ones(3))
    assert seen == ["(3,) float64"]
