"""legalize_broadcast: implicit numpy broadcasting becomes explicit broadcast_in_dim."""

from __future__ import annotations

import textwrap

import pytest

from jitc.ir.opdef import OPS, Trait
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.passes import legalize_broadcast
from jitc.passes.pipeline import run_passes


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CASES = {
    "scalar": (ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %s = constant() value=2.0 : f32[]
          %0 = mul(%x, %s) : f32[2,3]{1,0}  # model.py:5 (f)
          return %0
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %s = constant() value=2.0 : f32[]
          %0 = broadcast_in_dim(%s) dims=[] : f32[2,3]{1,0}  # model.py:5 (f)
          %1 = mul(%x, %0) : f32[2,3]{1,0}  # model.py:5 (f)
          return %1
        }
        """)),
    "rank-promotion-aligns-trailing-dimensions": (ir("""
        func @f {
          %x = parameter() index=0 : i32[4,2,3]{2,1,0}
          %row = parameter() index=1 : i32[3]
          %m = parameter() index=2 : i32[2,3]{1,0}
          %0 = add(%row, %x) : i32[4,2,3]{2,1,0}
          %sum = sub(%0, %m) : i32[4,2,3]{2,1,0}
          return %sum
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i32[4,2,3]{2,1,0}
          %row = parameter() index=1 : i32[3]
          %m = parameter() index=2 : i32[2,3]{1,0}
          %0 = broadcast_in_dim(%row) dims=[2] : i32[4,2,3]{2,1,0}
          %1 = add(%0, %x) : i32[4,2,3]{2,1,0}
          %2 = broadcast_in_dim(%m) dims=[1,2] : i32[4,2,3]{2,1,0}
          %sum = sub(%1, %2) : i32[4,2,3]{2,1,0}
          return %sum
        }
        """)),
    "size-one-expands-on-both-sides": (ir("""
        func @f {
          %col = parameter() index=0 : f64[3,1]{1,0}
          %row = parameter() index=1 : f64[1,4]{1,0}
          %0 = atan2(%col, %row) : f64[3,4]{0,1}
          return %0
        }
        """), ir("""
        func @f {
          %col = parameter() index=0 : f64[3,1]{1,0}
          %row = parameter() index=1 : f64[1,4]{1,0}
          %0 = broadcast_in_dim(%col) dims=[0,1] : f64[3,4]{1,0}
          %1 = broadcast_in_dim(%row) dims=[0,1] : f64[3,4]{1,0}
          %2 = atan2(%0, %1) : f64[3,4]{0,1}
          return %2
        }
        """)),
    "select-clamp-compare": (ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %lo = constant() value=0.0 : f32[]
          %hi = parameter() index=1 : f32[2,1]{1,0}
          %big = compare(%x, %lo) direction=gt : bool[3]
          %0 = select(%big, %x, %lo) : f32[3]
          %1 = clamp(%lo, %0, %hi) : f32[2,3]{1,0}
          return %1
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %lo = constant() value=0.0 : f32[]
          %hi = parameter() index=1 : f32[2,1]{1,0}
          %0 = broadcast_in_dim(%lo) dims=[] : f32[3]
          %big = compare(%x, %0) direction=gt : bool[3]
          %1 = broadcast_in_dim(%lo) dims=[] : f32[3]
          %2 = select(%big, %x, %1) : f32[3]
          %3 = broadcast_in_dim(%lo) dims=[] : f32[2,3]{1,0}
          %4 = broadcast_in_dim(%2) dims=[1] : f32[2,3]{1,0}
          %5 = broadcast_in_dim(%hi) dims=[0,1] : f32[2,3]{1,0}
          %6 = clamp(%3, %4, %5) : f32[2,3]{1,0}
          return %6
        }
        """)),
    "only-the-changed-function-is-rebuilt": (ir("""
        func @main {
          %x = parameter() index=0 : u8[2,2]{1,0}
          %y = parameter() index=1 : u8[2]
          %0 = shift_left(%x, %y) : u8[2,2]{1,0}
          return %0
        }

        func @other {
          %x = parameter() index=0 : u8[2]
          %0 = not(%x) : u8[2]
          return %0
        }
        """), ir("""
        func @main {
          %x = parameter() index=0 : u8[2,2]{1,0}
          %y = parameter() index=1 : u8[2]
          %0 = broadcast_in_dim(%y) dims=[1] : u8[2,2]{1,0}
          %1 = shift_left(%x, %0) : u8[2,2]{1,0}
          return %1
        }

        func @other {
          %x = parameter() index=0 : u8[2]
          %0 = not(%x) : u8[2]
          return %0
        }
        """)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_text_in_text_out(case: str, assert_same_results) -> None:
    before_text, after_text = CASES[case]
    before = parse_module(before_text)
    assert print_module(before) == before_text
    after = run_passes(before, [legalize_broadcast])
    assert print_module(after) == after_text
    assert_same_results(before, after)


def test_locations_and_names_carry_over() -> None:
    before = parse_module(CASES["scalar"][0])
    after = legalize_broadcast(before)
    broadcast, mul = after.entry.body[2:]
    assert broadcast.loc == mul.loc == before.entry.body[2].loc
    assert print_module(after).count("# model.py:5 (f)") == 2


def test_unchanged_functions_are_kept() -> None:
    before = parse_module(CASES["only-the-changed-function-is-rebuilt"][0])
    after = legalize_broadcast(before)
    assert after is not before
    assert after.functions["other"] is before.functions["other"]
    assert after.functions["main"] is not before.functions["main"]


def test_nothing_to_do_returns_the_same_module() -> None:
    text = ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %y = parameter() index=1 : f32[3]
          %0 = neg(%x) : f32[2,3]{1,0}
          %1 = broadcast_in_dim(%y) dims=[1] : f32[2,3]{1,0}
          %2 = add(%0, %1) : f32[2,3]{1,0}
          %3 = reduce(%2) dims=[1] kind=sum : f32[2]
          %4 = dot_general(%2, %y) lhs_contract=[1] rhs_contract=[0] : f32[2]
          return %3, %4
        }
        """)
    module = parse_module(text)
    assert legalize_broadcast(module) is module
    once = legalize_broadcast(parse_module(CASES["select-clamp-compare"][0]))
    assert legalize_broadcast(once) is once


def test_afterwards_operands_have_the_result_shape() -> None:
    for before_text, _ in CASES.values():
        after = legalize_broadcast(parse_module(before_text))
        for fn in after.functions.values():
            for inst in fn.body:
                if inst.op.has(Trait.BROADCASTS):
                    shape = inst.results[0].type.shape
                    assert all(v.type.shape == shape for v in inst.operands), inst


def test_the_broadcasting_ops_are_the_elementwise_ones() -> None:
    # The pass relies on each BROADCASTS op computing element i from operand elements i.
    for op in OPS.values():
        if op.has(Trait.BROADCASTS):
            assert op.has(Trait.ELEMENTWISE), op.name
