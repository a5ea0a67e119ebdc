"""Programs thousands of ops deep: every stage that follows def-use chains (tracing, passes,
fusion, element emitters, printer, parser, verifier) must neither recurse once per op nor take
quadratic time. A fused chain of 242 ops used to end in RecursionError."""

from __future__ import annotations

import numpy as np
import pytest
from jitcheck import BACKENDS
from ops.backends import require

import jitc
from jitc.ir import parse_module
from jitc.ir.printer import print_module
from jitc.ir.verifier import verify


def affine_chain(steps: int):
    def chain(x):
        for _ in range(steps):
            x = x * 1.0001 + 0.0001
        return x
    return chain


def branching_chain(steps: int):
    """Each value used twice at the same element: generated once, not 2**steps times."""
    def chain(x):
        for _ in range(steps):
            x = x * 0.5 + x * 0.25
        return x
    return chain


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program,steps", [(affine_chain, 1500), (branching_chain, 300)])
def test_a_fused_chain_of_thousands_of_ops_compiles_and_matches_numpy(backend, program,
                                                                      steps) -> None:
    chain = program(steps)
    x = np.linspace(-1.0, 1.0, 33)
    np.testing.assert_allclose(jitc.jit(chain, backend=require(backend))(x), chain(x),
                               rtol=1e-12)


def test_the_ir_of_a_5000_op_chain_prints_parses_and_verifies() -> None:
    lowered = jitc.jit(affine_chain(2500)).lower(np.ones(4))
    text = print_module(lowered.module)
    parsed = parse_module(text)
    verify(parsed)
    assert print_module(parsed) == text
    assert lowered.as_text(optimized=True).count("\n") > 10


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fused_chain_of_10000_ops_compiles_and_matches_numpy(backend) -> None:
    chain = affine_chain(5000)
    x = np.linspace(-1.0, 1.0, 33)
    np.testing.assert_allclose(jitc.jit(chain, backend=require(backend), verify=True)(x),
                               chain(x), rtol=1e-12)
