"""integer_dots: byte operands widened to int32, then multiplied, become one byte product."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from jitc.ir.interpreter import interpret
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.passes import dce
from jitc.passes.integer_dots import integer_dots
from jitc.passes.pipeline import run_passes


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


BEFORE = ir("""
    func @f {
      %a = parameter() index=0 : i8[5,7]{1,0}
      %b = parameter() index=1 : u8[7,3]{1,0}
      %0 = convert(%a) : i32[5,7]{1,0}
      %1 = convert(%b) : i32[7,3]{1,0}
      %2 = dot_general(%0, %1) lhs_contract=[1] rhs_contract=[0] : i32[5,3]{1,0}
      return %2
    }
    """)
AFTER = ir("""
    func @f {
      %a = parameter() index=0 : i8[5,7]{1,0}
      %b = parameter() index=1 : u8[7,3]{1,0}
      %0 = dot_general(%a, %b) lhs_contract=[1] rhs_contract=[0] result=i32 : i32[5,3]{1,0}
      return %0
    }
    """)


def test_widened_bytes_multiply_as_bytes_with_the_same_result() -> None:
    before = parse_module(BEFORE)
    after = run_passes(before, [integer_dots, dce])
    assert print_module(after) == AFTER
    assert parse_module(AFTER) == after
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (5, 7)).astype(np.int8)
    b = rng.integers(0, 256, (7, 3)).astype(np.uint8)
    expected = a.astype(np.int32) @ b.astype(np.int32)
    for module in (before, after):
        (result,) = interpret(module, [a, b])
        np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("text", [
    # Widened to int64: int32 accumulation would wrap where numpy's does not.
    BEFORE.replace("i32", "i64"),
    # One operand already int32: its values need not fit a byte.
    BEFORE.replace("%1 = convert(%b) : i32[7,3]{1,0}", "%1 = parameter() index=2 : i32[7,3]{1,0}"),
    # Widened to float32: a float product rounds, a byte product would not.
    BEFORE.replace("i32", "f32"),
], ids=["int64", "int32-operand", "float"])
def test_other_products_are_left_alone(text: str) -> None:
    module = parse_module(text)
    assert run_passes(module, [integer_dots]) is module


def test_a_convert_read_elsewhere_stays() -> None:
    text = BEFORE.replace("return %2", "%3 = add(%0, %0) : i32[5,7]{1,0}\n  return %2, %3")
    after = print_module(run_passes(parse_module(text), [integer_dots, dce]))
    assert "convert(%a)" in after and "result=i32" in after and "convert(%b)" not in after


def test_moves_after_the_widening_move_the_bytes() -> None:
    before = ir("""
        func @f {
          %a = parameter() index=0 : u8[7]
          %b = parameter() index=1 : i8[3,7]{1,0}
          %0 = convert(%a) : i32[7]
          %1 = reshape(%0) : i32[1,7]{1,0}
          %2 = convert(%b) : i32[3,7]{1,0}
          %3 = transpose(%2) permutation=[1,0] : i32[7,3]{1,0}
          %4 = dot_general(%1, %3) lhs_contract=[1] rhs_contract=[0] : i32[1,3]{1,0}
          return %4
        }
        """)
    after = print_module(run_passes(parse_module(before), [integer_dots, dce]))
    assert after == ir("""
        func @f {
          %a = parameter() index=0 : u8[7]
          %b = parameter() index=1 : i8[3,7]{1,0}
          %0 = reshape(%a) : u8[1,7]{1,0}
          %1 = transpose(%b) permutation=[1,0] : i8[7,3]{1,0}
          %2 = dot_general(%0, %1) lhs_contract=[1] rhs_contract=[0] result=i32 : i32[1,3]{1,0}
          return %2
        }
        """)


ZERO_POINTS = ir("""
    func @f {
      %a = parameter() index=0 : u8[5,7]{1,0}
      %b = parameter() index=1 : i8[7,3]{1,0}
      %za = parameter() index=2 : i32[]
      %zb = parameter() index=3 : i32[]
      %0 = convert(%a) : i32[5,7]{1,0}
      %1 = broadcast_in_dim(%za) dims=[] : i32[5,7]{1,0}
      %2 = sub(%0, %1) : i32[5,7]{1,0}
      %3 = convert(%b) : i32[7,3]{1,0}
      %4 = broadcast_in_dim(%zb) dims=[] : i32[7,3]{1,0}
      %5 = sub(%3, %4) : i32[7,3]{1,0}
      %6 = dot_general(%2, %5) lhs_contract=[1] rhs_contract=[0] : i32[5,3]{1,0}
      return %6
    }
    """)


def test_zero_points_are_taken_out_of_the_byte_product() -> None:
    before = parse_module(ZERO_POINTS)
    after = run_passes(before, [integer_dots, dce])
    text = print_module(after)
    assert "dot_general(%a, %b)" in text and "result=i32" in text
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (5, 7)).astype(np.uint8)
    b = rng.integers(-128, 128, (7, 3)).astype(np.int8)
    # Zero points near 2^31 make every correction wrap around int32.
    for za, zb in [(128, -3), (2**31 - 5, -(2**30) - 7)]:
        args = [a, b, np.int32(za), np.int32(zb)]
        with np.errstate(over="ignore"):
            expected = (a.astype(np.int32) - np.int32(za)) @ (b.astype(np.int32) - np.int32(zb))
        for module in (before, after):
            (result,) = interpret(module, args)
            np.testing.assert_array_equal(result, expected)
