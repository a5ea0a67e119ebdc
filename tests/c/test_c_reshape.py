"""Reshapes in the C backend map indices group by group (runs of dimensions with equal
products): merging dimensions is a sum, splitting one a division, and no division and
remainder of the whole array's position is left where the groups line up."""

from __future__ import annotations

import numpy as np
import pytest
from ops.backends import require

import jitc

pytestmark = pytest.mark.usefixtures("c_backend")


@pytest.fixture
def c_backend() -> str:
    return require("c")


@pytest.mark.parametrize("source, target", [
    ((64, 768), (64, 12, 64)), ((2, 3, 4), (6, 4)), ((2, 3, 4), (4, 6)), ((1, 6), (2, 3)),
    ((6,), (1, 2, 3, 1)), ((2, 1, 3), (6,)), ((4, 1), (2, 2, 1)), ((3, 0, 2), (0, 5)),
    ((2, 6, 5), (4, 3, 5)), ((1,), ()),
])
def test_reshapes_match_numpy(source, target) -> None:
    """Through a transpose, so the reshape is computed in a kernel, not a view."""
    x = np.arange(np.prod(source), dtype=np.float32).reshape(source)
    def f(x):
        y = x.reshape(target)
        return y.transpose(*reversed(range(y.ndim))) * 2
    np.testing.assert_array_equal(jitc.jit(f, backend="c")(x), f(x))


def test_splitting_attention_heads_needs_no_division() -> None:
    def heads(qkv):
        q = qkv[:, :768].reshape(64, 12, 64).transpose(1, 0, 2)
        return q * 2
    qkv = np.random.default_rng(0).standard_normal((64, 2304)).astype(np.float32)
    jitted = jitc.jit(heads, backend="c")
    np.testing.assert_array_equal(jitted(qkv), heads(qkv))
    source = jitted.lower(qkv).compile().as_text()
    code = source[source.index("static void k"):source.index("void jitc_entry")]
    assert " % " not in code and " / " not in code, code
