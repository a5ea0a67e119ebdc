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


def fill_rows(x):
    """Every row of an np.empty array written in a Python loop: one concatenate of all rows."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i, :] = x[i, :] * 2 + i
    return out


def uneven_blocks(x):
    """Blocks of 1, 2 and 3 rows: a concatenate of 24 pieces of three sizes."""
    return np.concatenate([x[k:k + k % 3 + 1] * (k + 1) for k in range(24)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program,rows", [(fill_rows, 120), (uneven_blocks, 30)])
def test_a_concatenate_of_many_pieces_matches_numpy(backend, program, rows) -> None:
    x = np.random.default_rng(0).standard_normal((rows, 5))
    np.testing.assert_array_equal(jitc.jit(program, backend=require(backend))(x), program(x))


def test_an_element_of_a_concatenate_of_many_pieces_computes_only_its_piece() -> None:
    """With a select over every piece at every element, a 2000-row fill did work quadratic in
    the rows, in the kernel and in LLVM compiling it; a switch runs the piece's code alone."""
    from jitc.backends.cpu.codegen import lower_module
    for program, rows in ((fill_rows, 64), (uneven_blocks, 30)):
        module = jitc.jit(program, disabled_passes={"reroll"}).lower(
            np.ones((rows, 5))).optimize()
        assert "switch i64" in str(lower_module(module).llvm_ir)
    # The C backend likewise (a chain of conditional expressions before).
    compiled = jitc.jit(fill_rows, backend=require("c"), disabled_passes={"reroll"}).lower(
        np.ones((64, 5))).compile()
    assert "switch (" in compiled.as_text()
