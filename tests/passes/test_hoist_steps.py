"""hoist_steps: matrix products of a loop step's row of a loop-invariant array move out of the
loop as one batched product; the loop reads its row of the result."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from jitcheck import check_jit, random

import jitc
from jitc import lax
from jitc.ir import ops
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.verifier import verify
from jitc.passes import hoist_steps


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _loop(step: str, carry: str = "f32[2,3]") -> str:
    """A while over rows of %x (f32[5,2,4]) with %w (f32[4,3]) and carry %h; `step` computes
    %new from %row (the step's row of x), %h, %w and %wt (f32[3,3])."""
    carried = f"i64[], {carry}, f32[5,2,4], f32[4,3], f32[3,3]"
    return ir(f"""
        func @f {{
          %x = parameter() index=0 : f32[5,2,4]
          %h = parameter() index=1 : {carry}
          %w = parameter() index=2 : f32[4,3]
          %wt = parameter() index=3 : f32[3,3]
          %i = constant() value=0 : i64[]
          %r0, %r1, %r2, %r3, %r4 = while(%i, %h, %x, %w, %wt) cond=@c body=@b : {carried}
          return %r1
        }}

        func @c {{
          %k = parameter() index=0 : i64[]
          %h = parameter() index=1 : {carry}
          %x = parameter() index=2 : f32[5,2,4]
          %w = parameter() index=3 : f32[4,3]
          %wt = parameter() index=4 : f32[3,3]
          %n = constant() value=5 : i64[]
          %go = compare(%k, %n) direction=lt : bool[]
          return %go
        }}

        func @b {{
          %k = parameter() index=0 : i64[]
          %h = parameter() index=1 : {carry}
          %x = parameter() index=2 : f32[5,2,4]
          %w = parameter() index=3 : f32[4,3]
          %wt = parameter() index=4 : f32[3,3]
          %zero = constant() value=0 : i64[]
          %s = dynamic_slice(%x, %k, %zero, %zero) sizes=[1,2,4] : f32[1,2,4]
          %row = reshape(%s) : f32[2,4]
          {step}
          %one = constant() value=1 : i64[]
          %next = add(%k, %one) : i64[]
          return %next, %new, %x, %w, %wt
        }}
        """).replace("\n          ", "\n")  # `step` may span lines


MOVES = """%p = dot_general(%row, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,3]
  %q = tanh(%p) : f32[2,3]
  %new = add(%q, %h) : f32[2,3]"""
STAYS = {
    # the product reads the carry
    "carry": """%m = slice(%row) start=[0,0] limit=[2,3] : f32[2,3]
  %p = add(%m, %h) : f32[2,3]
  %new = dot_general(%p, %wt) lhs_contract=[1] rhs_contract=[0] : f32[2,3]""",
    # the row is the right operand: batching it would put the loop axis in the middle
    "rhs": """%t = constant() value=[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]] : f32[3,2]
  %p = dot_general(%t, %row) lhs_contract=[1] rhs_contract=[0] : f32[3,4]
  %r = reshape(%p) : f32[2,6]
  %new = slice(%r) start=[0,0] limit=[2,3] : f32[2,3]""",
    # no product: nothing to batch
    "elementwise": """%p = slice(%row) start=[0,0] limit=[2,3] : f32[2,3]
  %new = add(%p, %h) : f32[2,3]""",
}


def test_a_product_of_the_steps_row_moves_before_the_loop(assert_same_results) -> None:
    module = parse_module(_loop(MOVES))
    hoisted = hoist_steps(module)
    assert hoisted is not module
    entry = print_module(hoisted).split("func @b")[0]
    assert "dot_general(%1, %w) lhs_contract=[2] rhs_contract=[0] : f32[5,2,3]" in entry
    body = hoisted.functions["b"]
    assert len(body.parameters) == 6 and body.outputs[5] is body.parameters[5]
    assert_same_results(module, hoisted)


def test_loop_invariant_work_moves_before_the_loop(assert_same_results) -> None:
    step = """%e = exp(%wt) : f32[3,3]
  %p = dot_general(%h, %e) lhs_contract=[1] rhs_contract=[0] : f32[2,3]
  %unit = constant() value=1.0 : f32[]
  %b = broadcast_in_dim(%unit) dims=[] : f32[2,3]
  %new = add(%p, %b) : f32[2,3]"""
    module = parse_module(_loop(step))
    hoisted = hoist_steps(module)
    body = hoisted.functions["b"]
    assert [i.op.name for i in body.body if i.op is ops.EXP] == []
    assert [i.op.name for i in hoisted.entry.body if i.op is ops.EXP] == ["exp"]
    assert any(i.op is ops.BROADCAST_IN_DIM for i in body.body), "a broadcast stays"
    assert_same_results(module, hoisted)


def test_a_row_picked_by_loop_invariant_arithmetic_moves_too(assert_same_results) -> None:
    """A reversed scan reads row n - 1 - k, where n - 1 moves before the loop too: the row
    that replaces the product reads the body's copy of that index (the copy made once the
    index's operand became a parameter), not the instruction left behind."""
    text = _loop(MOVES).replace(
        "%s = dynamic_slice(%x, %k, %zero, %zero)",
        "%five = constant() value=5 : i64[]\n"
        "%unit = constant() value=1 : i64[]\n"
        "%last = sub(%five, %unit) : i64[]\n"
        "%back = sub(%last, %k) : i64[]\n"
        "%s = dynamic_slice(%x, %back, %zero, %zero)")
    module = parse_module(text)
    hoisted = hoist_steps(module)
    verify(hoisted)
    entry = print_module(hoisted).split("func @b")[0]
    assert "lhs_contract=[2] rhs_contract=[0] : f32[5,2,3]" in entry
    assert_same_results(module, hoisted)


@pytest.mark.parametrize("case", sorted(STAYS))
def test_what_depends_on_the_loop_or_does_not_pay_stays(case: str) -> None:
    module = parse_module(_loop(STAYS[case]))
    assert hoist_steps(module) is module


def rnn(xs, h, wx, wh, b):
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh + b)
    return h


def scanned(xs, h, wx, wh):
    def step(h, x):
        h = np.tanh(x @ wx + h @ wh)
        return h, h * 2
    return lax.scan(step, h, xs)


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "c", "cuda-sim"])
def test_recurrences_read_their_rows_of_one_product(backend: str) -> None:
    args = (random((30, 4, 6)), random((4, 8)), random((6, 8), low=-0.4, high=0.4),
            random((8, 8), low=-0.4, high=0.4), random((8,)))
    check_jit(rnn, *args, backend=backend, rtol=1e-5, atol=1e-5)
    check_jit(scanned, *args[:4], backend=backend, rtol=1e-5, atol=1e-5)
    optimized = jitc.jit(rnn).lower(*args).optimize()
    entry = [i for i in optimized.entry.body if i.op is ops.DOT_GENERAL]
    assert [i.result.type.shape for i in entry] == [(30, 4, 8)]
