"""exp and tanh in the C backend are the CPU backend's kernels written out as C
(jitc/backends/c/vmath.py): the same bits as the CPU backend, special values included, in a
form the C compiler vectorizes."""

from __future__ import annotations

import numpy as np
import pytest
from ops.backends import require

import jitc

pytestmark = pytest.mark.usefixtures("c_backend")


@pytest.fixture
def c_backend() -> str:
    return require("c")


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 0.55, -0.55, 9.0, 10.5, 19.0,
           88.7, 89.5, -103.9, -110.0, 709.0, 710.0, -745.0, -1e-310]


@pytest.mark.parametrize("function", [np.exp, np.tanh], ids=["exp", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_exp_and_tanh_match_the_cpu_backend_bit_for_bit(function, dtype) -> None:
    rng = np.random.default_rng(0)
    with np.errstate(over="ignore"):
        x = np.concatenate([rng.standard_normal(20000) * 8, rng.standard_normal(2000) * 300,
                            SPECIAL]).astype(dtype)
    jitted_c = jitc.jit(lambda x: function(x), backend="c")
    jitted_cpu = jitc.jit(lambda x: function(x), backend="cpu")
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    np.testing.assert_array_equal(jitted_c(x).view(bits), jitted_cpu(x).view(bits))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(jitted_c(x), function(x), rtol=4e-7 if dtype != np.float16
                                   else 1e-3, atol=0)
    source = jitted_c.lower(x).compile().as_text()
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("//"))
    name = function.__name__
    assert f"jitc_v{name}_" in code and f" {name}f(" not in code and f" {name}(" not in code
