"""The optimizer pipelines on modules with symbolic dimensions: every pass runs, keeps the
module's constraints, and takes its general path where it would compare a symbolic size with a
threshold. The optimized module, run by the interpreter, agrees with numpy for every size."""

from __future__ import annotations

import numpy as np
import pytest
from symbolic_programs import layernorm, mlp, softmax

import jitc
from jitc.backends.c.backend import C_PASSES
from jitc.ir import ops
from jitc.ir.interpreter import ArgumentError
from jitc.ir.symbolic import at_most, symbol
from jitc.passes import DEFAULT_PASSES, KERNEL_PASSES
from jitc.passes.pipeline import Pipeline
from jitc.tracing.function import AbstractArray

RNG = np.random.default_rng(11)
W1 = RNG.standard_normal((48, 32)).astype(np.float32)
B1 = RNG.standard_normal(32).astype(np.float32)
W2 = RNG.standard_normal((32, 10)).astype(np.float32)
GAIN = RNG.standard_normal(16).astype(np.float32)
SIZES = (0, 1, 2, 7, 33)
PIPELINES = {"interpreter": DEFAULT_PASSES, "cpu": KERNEL_PASSES, "c": C_PASSES}


def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# (program, the spec of its first argument, the first argument for a size, the other arguments)
PROGRAMS = {
    "mlp": (mlp, "f32[B,48]", lambda n: _floats(n, 48), (W1, B1, W2)),
    "softmax over a symbolic batch": (softmax, "f32[B,10]", lambda n: _floats(n, 10), ()),
    "softmax along a symbolic axis": (softmax, "f32[4,S]", lambda n: _floats(4, n), ()),
    "layernorm": (layernorm, "f32[B,16]", lambda n: _floats(n, 16), (GAIN,)),
    "column sums": (lambda x: x.sum(axis=0) * 2.0, "f32[B,16]", lambda n: _floats(n, 16), ()),
    "whole sum": (lambda x: x.sum() + 1.0, "f32[B,16]", lambda n: _floats(n, 16), ()),
    "transpose and flatten": (lambda x: (x.T * 3.0).reshape(-1), "f32[B,16]",
                              lambda n: _floats(n, 16), ()),
    "concatenate": (lambda x: np.concatenate([x, x * 2.0]) + 1.0, "f32[B,16]",
                    lambda n: _floats(n, 16), ()),
    "reverse": (lambda x: np.flip(x, axis=0) - 1.0, "f32[B,3]", lambda n: _floats(n, 3), ()),
}


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_optimized_symbolic_module_agrees_with_numpy_for_every_size(program: str,
                                                                    pipeline: str) -> None:
    fun, spec, first, rest = PROGRAMS[program]
    lowered = jitc.jit(fun).lower(AbstractArray(spec), *rest)
    optimized = Pipeline(pipeline, list(PIPELINES[pipeline])).run(lowered.module)
    assert optimized.entry.parameter_types[0].symbols  # still one module for every size
    for size in SIZES:
        args = [first(size), *rest]
        try:
            expected = fun(*args)
        except ValueError:  # numpy's max of an empty axis: the call's constraint check refuses
            with pytest.raises(ArgumentError, match=r"constraint S >= 1 does not hold: S=0"):
                jitc.interpret(optimized, args)
            continue
        (got,) = jitc.interpret(optimized, args)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_the_pipeline_keeps_the_constraints_of_the_module() -> None:
    def add(x, y):
        return np.exp(x + y) * 2.0

    lowered = jitc.jit(add).lower(AbstractArray("f32[n]"), AbstractArray("f32[m]"))
    assert [str(c) for c in lowered.module.constraints] == ["m == n"]
    optimized = Pipeline("cpu", list(KERNEL_PASSES)).run(lowered.module)
    assert [str(c) for c in optimized.constraints] == ["m == n"]
    x, y = _floats(5), _floats(5)
    (got,) = jitc.interpret(optimized, [x, y])
    np.testing.assert_allclose(got, add(x, y), rtol=1e-6)
    with pytest.raises(ArgumentError, match="constraint m == n does not hold: m=3, n=5"):
        jitc.interpret(optimized, [x, _floats(3)])


def test_a_splat_of_symbolic_size_stays_a_broadcast_of_a_scalar() -> None:
    lowered = jitc.jit(lambda x: x * 2.0).lower(AbstractArray("f32[B,3]"))
    optimized = Pipeline("interpreter", list(DEFAULT_PASSES)).run(lowered.module)
    constants = [i for i in optimized.entry if i.op is ops.CONSTANT]
    assert [c.result.type.shape for c in constants] == [()]


def test_a_symbolic_extent_is_never_known_small() -> None:
    n = symbol("n")
    assert at_most(3, 3) and not at_most(4, 3)
    assert not at_most(n, 1_000_000) and not at_most(n - n + n, 0)
    assert at_most(n - n + 2, 2)  # an expression that cancels to a constant is static


def test_max_along_a_symbolic_axis_requires_it_non_empty_like_numpy() -> None:
    lowered = jitc.jit(lambda x: x.max(axis=-1)).lower(AbstractArray("f32[4,S]"))
    assert [str(c) for c in lowered.module.constraints] == ["S >= 1"]
    with pytest.raises(ValueError, match="zero-size array"):
        np.max(np.zeros((4, 0), np.float32), axis=-1)
    with pytest.raises(ArgumentError, match=r"constraint S >= 1 does not hold: S=0"):
        jitc.interpret(lowered.module, [np.zeros((4, 0), np.float32)])
    x = _floats(4, 3)
    np.testing.assert_array_equal(jitc.interpret(lowered.module, [x])[0], x.max(axis=-1))
