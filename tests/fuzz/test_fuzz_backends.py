"""Differential fuzzing: random IR programs over every op of the table (fuzz/programs.py),
compiled by each backend through its own pipeline, against the reference interpreter.

Exact values must agree bit for bit (nan matching any nan); an approximate value within its
dtype's tolerance of the reference, plus an absolute slack scaled by what its error depends
on: for a sum or product the same reduction of the operands' magnitudes, for a contraction the
contraction of the magnitudes, for a bounded transcendental 1. The default run is short and
deterministic (two programs per op and backend); `python -m pytest -m slow tests/fuzz` runs
1000 programs per backend from a random seed (about a minute each).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ops.backends import require

from jitc.backends import get_backend
from jitc.ir import ops
from jitc.ir.core import Function, Module, Value
from jitc.ir.interpreter import interpret
from jitc.ir.opdef import OPS
from jitc.options import Options
from jitc.passes.pipeline import Pipeline

from .programs import MAKERS, NOT_DRAWN, Program

BACKENDS = ["cpu", "c", "cuda-sim"]
RTOL = {np.dtype(np.float16): 4e-3, np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12}
# Transcendental functions whose error is relative to their value, also near zero.
RELATIVE = {ops.EXP, ops.EXPM1, ops.LOG1P, ops.RSQRT, ops.POW, ops.LOGISTIC, ops.TANH}
QUICK = settings(max_examples=2, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DEEP = settings(max_examples=1000, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def compile_and_run(backend_name: str, module: Module, args: list[np.ndarray]
                    ) -> list[np.ndarray]:
    backend = get_backend(backend_name)
    options = Options(backend=backend_name, verify=True)
    optimized = Pipeline(backend_name, list(backend.passes(options)), verify=True).run(module)
    return [np.asarray(r) for r in backend.compile(optimized, options)(args)]


def every_value(module: Module, args: list[np.ndarray]) -> dict[int, np.ndarray]:
    """The reference value of each value of the entry function, by id."""
    fn = module.entry
    values = [v for inst in fn.body for v in inst.results]
    probe = Function(fn.name, fn.body)
    probe.outputs = values
    return {id(v): a for v, a in zip(values, interpret(Module([probe]), args))}


def _largest(array: np.ndarray) -> float:
    finite = np.abs(array[np.isfinite(array)]) if array.size else array
    return float(finite.max()) if finite.size else 0.0


def error_scales(program: Program, reference: dict[int, np.ndarray]) -> dict[int, float]:
    """Per approximate value, the absolute size its rounding error is relative to."""
    scales: dict[int, float] = {}
    for inst in program.fn.body:
        for value in inst.results:
            if not program.is_approximate(value):
                continue
            operands = [reference[id(v)] for v in inst.operands]
            inherited = [scales.get(id(v), 0.0) for v in inst.operands]
            if inst.op in (ops.REDUCE, ops.DOT_GENERAL, ops.CONVOLUTION):
                with np.errstate(all="ignore"):
                    magnitudes = inst.op.reference([np.abs(a) for a in operands], inst.attrs,
                                                   [r.type for r in inst.results])
                own = max(_largest(np.asarray(m)) for m in magnitudes)
            elif inst.op in RELATIVE:
                own = 0.0
            elif inst.op.name in ("log", "sin", "cos", "atan2"):
                own = 1.0
            else:
                own = 0.0
            scales[id(value)] = max([own, *inherited])
    return scales


def assert_output_matches(got: np.ndarray, want: np.ndarray, approximate: bool, scale: float,
                          what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}"
    if not approximate:
        np.testing.assert_array_equal(got, want, err_msg=what, strict=True)
        return
    rtol = RTOL[want.dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=rtol * scale + float(np.finfo(want.dtype).smallest_normal),
                               equal_nan=True, err_msg=what)


def check_program(backend: str, data: st.DataObject, first: str | None = None) -> None:
    program = Program(data)
    module = program.build(first)
    args = program.arguments
    reference = every_value(module, args)
    scales = error_scales(program, reference)
    got = compile_and_run(backend, module, [a.copy() for a in args])
    outputs = module.entry.outputs
    assert len(got) == len(outputs)
    for i, (value, array) in enumerate(zip(outputs, got)):
        want = args[value.producer.attrs["index"]] if value.producer.op is ops.PARAMETER \
            else reference[id(value)]
        assert_output_matches(array, want, program.is_approximate(value),
                              scales.get(id(value), 0.0),
                              f"{backend}, output {i} ({_describe(value)}) of\n{module}")


def _describe(value: Value) -> str:
    return f"{value.producer.op.name} -> {value.type.short()}"


def test_every_op_of_the_table_is_drawn() -> None:
    assert set(MAKERS) == set(OPS) - NOT_DRAWN


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("first", sorted(MAKERS))
@QUICK
@given(data=st.data())
def test_random_programs_starting_with_each_op(backend: str, first: str,
                                                data: st.DataObject) -> None:
    """Every op on every backend, in a short random program (hypothesis alone draws some ops
    far more often than others)."""
    require(backend)
    check_program(backend, data, first)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@DEEP
@given(data=st.data())
def test_random_programs_match_the_interpreter(backend: str, data: st.DataObject) -> None:
    require(backend)
    check_program(backend, data)
