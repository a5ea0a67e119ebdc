"""simplify: each algebraic rule as IR text before and after, with interpreter equality.

Every case runs `simplify` then `dce` (so the text shows only what is left) and is checked on
random arguments and on arguments full of special values (nan, inf, signed zeros, integer
extremes), comparing floats bit for bit up to nan payloads, signs of zeros included.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Sequence

import numpy as np
import pytest

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Instruction, Module, Value
from jitc.ir.interpreter import interpret
from jitc.ir.ops.elementwise import convert_array
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.types import TensorType
from jitc.passes import dce
from jitc.passes.pipeline import run_passes
from jitc.passes.simplify import RULES, exact_reciprocal, exact_widening, simplify


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CASES = {
    "add_zero/int-either-side": (ir("""
        func @f {
          %x = parameter() index=0 : i32[2,3]{1,0}
          %z = constant() value=0 : i32[]
          %0 = add(%x, %z) : i32[2,3]{1,0}
          %1 = add(%z, %0) : i32[2,3]{1,0}
          return %1
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i32[2,3]{1,0}
          return %x
        }
        """)),
    "add_zero/float-negative-zero": (ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %z = constant() value=-0.0 : f32[]
          %0 = broadcast_in_dim(%z) dims=[] : f32[3]
          %1 = add(%0, %x) : f32[3]
          return %1
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          return %x
        }
        """)),
    "sub_zero/float": (ir("""
        func @f {
          %x = parameter() index=0 : f64[4]
          %z = constant() value=[0.0, 0.0, 0.0, 0.0] : f64[4]
          %0 = sub(%x, %z) : f64[4]
          return %0
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f64[4]
          return %x
        }
        """)),
    "mul_one/either-side": (ir("""
        func @f {
          %x = parameter() index=0 : f32[64,64]{1,0}
          %one = constant() value=1.0 : f32[]
          %0 = broadcast_in_dim(%one) dims=[] : f32[64,64]{1,0}
          %1 = mul(%x, %0) : f32[64,64]{1,0}
          %2 = mul(%0, %1) : f32[64,64]{1,0}
          return %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[64,64]{1,0}
          return %x
        }
        """)),
    "mul_zero_int/int": (ir("""
        func @f {
          %x = parameter() index=0 : i8[2,2]{1,0}
          %z = constant() value=0 : i8[]
          %0 = mul(%z, %x) : i8[2,2]{1,0}
          return %0
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i8[2,2]{1,0}
          %0 = constant() value=[[0, 0], [0, 0]] : i8[2,2]{1,0}
          return %0
        }
        """)),
    "div_one/int-and-float": (ir("""
        func @f {
          %x = parameter() index=0 : i64[3]
          %y = parameter() index=1 : f16[3]
          %one = constant() value=1 : i64[]
          %fone = constant() value=[1.0, 1.0, 1.0] : f16[3]
          %0 = div(%x, %one) : i64[3]
          %1 = div(%y, %fone) : f16[3]
          return %0, %1
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i64[3]
          %y = parameter() index=1 : f16[3]
          return %x, %y
        }
        """)),
    "div_by_power_of_two/float": (ir("""
        func @f {
          %x = parameter() index=0 : f32[40]
          %four = constant() value=4.0 : f32[]
          %0 = broadcast_in_dim(%four) dims=[] : f32[40]
          %1 = div(%x, %0) : f32[40]
          %half = constant() value=-0.5 : f32[]
          %2 = div(%1, %half) : f32[40]
          return %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[40]
          %0 = constant() value=0.25 : f32[]
          %1 = broadcast_in_dim(%0) dims=[] : f32[40]
          %2 = mul(%x, %1) : f32[40]
          %3 = constant() value=-2.0 : f32[]
          %4 = mul(%2, %3) : f32[40]
          return %4
        }
        """)),
    "involution/neg-and-not": (ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %p = parameter() index=1 : bool[3]
          %k = parameter() index=2 : u8[3]
          %0 = neg(%x) : f32[3]
          %1 = neg(%0) : f32[3]
          %2 = not(%p) : bool[3]
          %3 = not(%2) : bool[3]
          %4 = not(%k) : u8[3]
          %5 = not(%4) : u8[3]
          %6 = not(%5) : u8[3]
          return %1, %3, %6
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %p = parameter() index=1 : bool[3]
          %k = parameter() index=2 : u8[3]
          %0 = not(%k) : u8[3]
          return %x, %p, %0
        }
        """)),
    "idempotent/max-min-and-or": (ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %p = parameter() index=1 : bool[3]
          %0 = max(%x, %x) : f32[3]
          %1 = min(%0, %0) : f32[3]
          %2 = and(%p, %p) : bool[3]
          %3 = or(%2, %2) : bool[3]
          return %1, %3
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %p = parameter() index=1 : bool[3]
          return %x, %p
        }
        """)),
    "select_known/constant-predicate": (ir("""
        func @f {
          %x = parameter() index=0 : i32[2,3]{1,0}
          %y = parameter() index=1 : i32[2,3]{1,0}
          %t = constant() value=true : bool[]
          %0 = broadcast_in_dim(%t) dims=[] : bool[2,3]{1,0}
          %1 = select(%0, %x, %y) : i32[2,3]{1,0}
          %f = constant() value=[false, false, false] : bool[3]
          %2 = select(%f, %1, %y) : i32[2,3]{1,0}
          return %1, %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i32[2,3]{1,0}
          %y = parameter() index=1 : i32[2,3]{1,0}
          return %x, %y
        }
        """)),
    "select_known/same-branches": (ir("""
        func @f {
          %p = parameter() index=0 : bool[3]
          %x = parameter() index=1 : f32[3]
          %0 = select(%p, %x, %x) : f32[3]
          return %0
        }
        """), ir("""
        func @f {
          %p = parameter() index=0 : bool[3]
          %x = parameter() index=1 : f32[3]
          return %x
        }
        """)),
    "convert_after_widening/chains": (ir("""
        func @f {
          %x = parameter() index=0 : i8[3]
          %y = parameter() index=1 : f32[3]
          %0 = convert(%x) : i32[3]
          %1 = convert(%0) : f32[3]
          %2 = convert(%y) : f64[3]
          %3 = convert(%2) : f32[3]
          %4 = convert(%x) : f16[3]
          %5 = convert(%4) : i8[3]
          return %1, %3, %5
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i8[3]
          %y = parameter() index=1 : f32[3]
          %0 = convert(%x) : f32[3]
          return %0, %y, %x
        }
        """)),
    "transpose_of_transpose/compose": (ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3,4]{2,1,0}
          %0 = transpose(%x) permutation=[1,2,0] : f32[3,4,2]{2,1,0}
          %1 = transpose(%0) permutation=[2,0,1] : f32[2,3,4]{2,1,0}
          %2 = transpose(%0) permutation=[1,0,2] : f32[4,3,2]{2,1,0}
          return %1, %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3,4]{2,1,0}
          %0 = transpose(%x) permutation=[2,1,0] : f32[4,3,2]{2,1,0}
          return %x, %0
        }
        """)),
    "reshape_of_reshape/compose": (ir("""
        func @f {
          %x = parameter() index=0 : i32[2,3]{1,0}
          %0 = reshape(%x) : i32[6]
          %1 = reshape(%0) : i32[3,2]{1,0}
          %2 = reshape(%1) : i32[2,3]{1,0}
          return %1, %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i32[2,3]{1,0}
          %0 = reshape(%x) : i32[3,2]{1,0}
          return %0, %x
        }
        """)),
    "broadcast_of_broadcast/compose": (ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %0 = broadcast_in_dim(%x) dims=[1] : f32[1,3]{1,0}
          %1 = broadcast_in_dim(%0) dims=[0,2] : f32[1,2,3]{2,1,0}
          %2 = broadcast_in_dim(%1) dims=[0,1,3] : f32[1,2,4,3]{3,2,1,0}
          return %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %0 = broadcast_in_dim(%x) dims=[3] : f32[1,2,4,3]{3,2,1,0}
          return %0
        }
        """)),
    "broadcast_tiny_constant/splat-and-row": (ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %two = constant() value=2.0 : f32[]
          %0 = broadcast_in_dim(%two) dims=[] : f32[2,3]{1,0}
          %row = constant() value=[1.0, 2.0, 3.0] : f32[3]
          %1 = broadcast_in_dim(%row) dims=[1] : f32[2,3]{1,0}
          %2 = mul(%x, %0) : f32[2,3]{1,0}
          %3 = add(%2, %1) : f32[2,3]{1,0}
          return %3
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %0 = constant() value=[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]] : f32[2,3]{1,0}
          %1 = constant() value=[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]] : f32[2,3]{1,0}
          %2 = mul(%x, %0) : f32[2,3]{1,0}
          %3 = add(%2, %1) : f32[2,3]{1,0}
          return %3
        }
        """)),
    "reverse_trivial_dims/none-and-size-one": (ir("""
        func @f {
          %x = parameter() index=0 : i32[1,4,1]{2,1,0}
          %0 = reverse(%x) dims=[] : i32[1,4,1]{2,1,0}
          %1 = reverse(%0) dims=[0,2] : i32[1,4,1]{2,1,0}
          %2 = reverse(%x) dims=[0,1,2] : i32[1,4,1]{2,1,0}
          return %1, %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i32[1,4,1]{2,1,0}
          %0 = reverse(%x) dims=[1] : i32[1,4,1]{2,1,0}
          return %x, %0
        }
        """)),
    "reduce_no_dims/multi-result": (ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %y = parameter() index=1 : i32[2,3]{1,0}
          %0, %1 = reduce(%x, %y) dims=[] kind=max : f32[2,3]{1,0}, i32[2,3]{1,0}
          return %0, %1
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %y = parameter() index=1 : i32[2,3]{1,0}
          return %x, %y
        }
        """)),
    "add_zero/implicit-broadcasting-of-the-zero": (ir("""
        func @f {
          %x = parameter() index=0 : i32[2,3]{1,0}
          %z = constant() value=0 : i32[]
          %0 = add(%x, %z) : i32[2,3]{1,0}
          return %0
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i32[2,3]{1,0}
          return %x
        }
        """)),
    "identities/shape-and-type": (ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %0 = transpose(%x) permutation=[0,1] : f32[2,3]{1,0}
          %1 = reshape(%0) : f32[2,3]{1,0}
          %2 = broadcast_in_dim(%1) dims=[0,1] : f32[2,3]{1,0}
          %3 = convert(%2) : f32[2,3]{1,0}
          %4 = concatenate(%3) dimension=1 : f32[2,3]{1,0}
          %5 = slice(%4) start=[0,0] limit=[2,3] : f32[2,3]{1,0}
          %6 = slice(%5) start=[0,0] limit=[2,3] stride=[1,1] : f32[2,3]{1,0}
          %v = constant() value=0.0 : f32[]
          %7 = pad(%6, %v) low=[0,0] high=[0,0] : f32[2,3]{1,0}
          %8 = pad(%7, %v) low=[0,0] high=[0,0] interior=[0,0] : f32[2,3]{1,0}
          return %8
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          return %x
        }
        """)),
    "update_adjacent/rows-in-order-become-one-concatenate": (ir("""
        func @f {
          %x = parameter() index=0 : f32[3,2]{1,0}
          %a = parameter() index=1 : f32[1,2]{1,0}
          %b = parameter() index=2 : f32[1,2]{1,0}
          %c = parameter() index=3 : f32[1,2]{1,0}
          %i0 = constant() value=0 : i64[]
          %i1 = constant() value=1 : i64[]
          %i2 = constant() value=2 : i64[]
          %0 = dynamic_update_slice(%x, %a, %i0, %i0) : f32[3,2]{1,0}
          %1 = dynamic_update_slice(%0, %b, %i1, %i0) : f32[3,2]{1,0}
          %2 = dynamic_update_slice(%1, %c, %i2, %i0) : f32[3,2]{1,0}
          return %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[3,2]{1,0}
          %a = parameter() index=1 : f32[1,2]{1,0}
          %b = parameter() index=2 : f32[1,2]{1,0}
          %c = parameter() index=3 : f32[1,2]{1,0}
          %0 = concatenate(%a, %b, %c) dimension=0 : f32[3,2]{1,0}
          return %0
        }
        """)),
    "update_adjacent/same-block-twice-and-backwards": (ir("""
        func @f {
          %x = parameter() index=0 : f32[4,3]{1,0}
          %a = parameter() index=1 : f32[4,1]{1,0}
          %b = parameter() index=2 : f32[4,1]{1,0}
          %c = parameter() index=3 : f32[4,1]{1,0}
          %i0 = constant() value=0 : i64[]
          %i1 = constant() value=1 : i64[]
          %i2 = constant() value=2 : i64[]
          %0 = dynamic_update_slice(%x, %a, %i0, %i2) : f32[4,3]{1,0}
          %1 = dynamic_update_slice(%0, %b, %i0, %i2) : f32[4,3]{1,0}
          %2 = dynamic_update_slice(%1, %c, %i0, %i1) : f32[4,3]{1,0}
          return %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[4,3]{1,0}
          %a = parameter() index=1 : f32[4,1]{1,0}
          %b = parameter() index=2 : f32[4,1]{1,0}
          %c = parameter() index=3 : f32[4,1]{1,0}
          %i0 = constant() value=0 : i64[]
          %i1 = constant() value=1 : i64[]
          %0 = concatenate(%c, %b) dimension=1 : f32[4,2]{1,0}
          %1 = dynamic_update_slice(%x, %0, %i0, %i1) : f32[4,3]{1,0}
          return %1
        }
        """)),
    "update_whole/a-write-of-everything-is-the-update": (ir("""
        func @f {
          %x = parameter() index=0 : i32[2,2]{1,0}
          %y = parameter() index=1 : i32[2,2]{1,0}
          %i0 = constant() value=0 : i64[]
          %0 = dynamic_update_slice(%x, %y, %i0, %i0) : i32[2,2]{1,0}
          return %0
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i32[2,2]{1,0}
          %y = parameter() index=1 : i32[2,2]{1,0}
          return %y
        }
        """)),
}

KEPT = {
    "signed-zeros-and-float-zero-products": ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %y = parameter() index=1 : f64[4]
          %z = constant() value=0.0 : f32[]
          %0 = add(%x, %z) : f32[3]
          %1 = mul(%z, %0) : f32[3]
          %nz = constant() value=-0.0 : f64[]
          %2 = sub(%y, %nz) : f64[4]
          %3 = reduce(%x) dims=[] kind=sum : f32[3]
          return %1, %2, %3
        }
        """),
    "no-exact-reciprocal-or-not-a-constant": ir("""
        func @f {
          %x = parameter() index=0 : f16[3]
          %y = parameter() index=1 : i32[3]
          %three = constant() value=3.0 : f16[]
          %0 = div(%x, %three) : f16[3]
          %tiny = constant() value=6e-08 : f16[]
          %1 = div(%0, %tiny) : f16[3]
          %four = constant() value=4 : i32[]
          %2 = div(%y, %four) : i32[3]
          %p = constant() value=[true, false, true] : bool[3]
          %3 = select(%p, %0, %1) : f16[3]
          return %3, %2
        }
        """),
    "convert-after-narrowing": ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %y = parameter() index=1 : i64[3]
          %0 = convert(%x) : f16[3]
          %1 = convert(%0) : f32[3]
          %2 = convert(%y) : f64[3]
          %3 = convert(%2) : i64[3]
          %4 = convert(%y) : i32[3]
          %5 = convert(%4) : i64[3]
          return %1, %3, %5
        }
        """),
    "shapes-and-layouts": ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{0,1}
          %0 = transpose(%x) permutation=[1,0] : f32[3,2]{1,0}
          %1 = transpose(%0) permutation=[1,0] : f32[2,3]{1,0}
          %r = parameter() index=1 : f32[1,3]{1,0}
          %2 = broadcast_in_dim(%r) dims=[0,1] : f32[2,3]{1,0}
          %3 = slice(%2) start=[0,0] limit=[2,3] stride=[1,2] : f32[2,2]{1,0}
          %4 = slice(%1) start=[0,1] limit=[2,3] : f32[2,2]{1,0}
          %5 = add(%3, %4) : f32[2,2]{1,0}
          %two = constant() value=2.0 : f32[]
          %6 = broadcast_in_dim(%two) dims=[] : f32[1024,1024]{1,0}
          return %5, %6
        }
        """),
    "implicit-broadcasting": ir("""
        func @f {
          %x = parameter() index=0 : f32[]
          %y = parameter() index=1 : f32[3]
          %p = parameter() index=2 : bool[2,3]{1,0}
          %nz = constant() value=[-0.0, -0.0, -0.0] : f32[3]
          %0 = add(%x, %nz) : f32[3]
          %one = constant() value=[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]] : f32[2,3]{1,0}
          %1 = mul(%y, %one) : f32[2,3]{1,0}
          %2 = select(%p, %0, %0) : f32[2,3]{1,0}
          %t = constant() value=true : bool[]
          %3 = select(%t, %y, %1) : f32[2,3]{1,0}
          %two = constant() value=[2.0, 2.0, 2.0] : f32[3]
          %4 = pow(%x, %two) : f32[3]
          return %0, %1, %2, %3, %4
        }
        """),
}

POW_CASES = {
    "pow_small/square-and-one": (ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %n = parameter() index=1 : i32[3]
          %two = constant() value=2.0 : f32[]
          %0 = pow(%x, %two) : f32[3]
          %one = constant() value=[1.0, 1.0, 1.0] : f32[3]
          %1 = pow(%0, %one) : f32[3]
          %itwo = constant() value=2 : i32[]
          %2 = pow(%n, %itwo) : i32[3]
          return %1, %2
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %n = parameter() index=1 : i32[3]
          %0 = mul(%x, %x) : f32[3]
          %1 = mul(%n, %n) : i32[3]
          return %0, %1
        }
        """)),
}

# --- checking ----------------------------------------------------------------------------------

SPECIAL_FLOATS = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, -3.75, 1e-45, 6e-8,
                  65504.0, 3e38]


def special_array(type_: TensorType) -> np.ndarray:
    dtype = type_.dtype.numpy
    if type_.dtype.is_bool:
        values = [True, False, False]
    elif type_.dtype.is_int:
        info = np.iinfo(dtype)
        values = [0, 1, info.max, info.min, 7, info.max - 1]
    else:
        values = SPECIAL_FLOATS
    cycle = itertools.islice(itertools.cycle(values), type_.size)
    with np.errstate(over="ignore"):
        return np.array(list(cycle), dtype).reshape(type_.shape)


def assert_identical(before: Module, after: Module, args: Sequence[np.ndarray]) -> None:
    """Same dtypes, shapes and values; floats also agree in the sign of zeros and in nan."""
    for e, g in zip(interpret(before, args), interpret(after, args), strict=True):
        assert e.dtype == g.dtype and e.shape == g.shape
        np.testing.assert_array_equal(e, g)
        if e.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(e), np.signbit(g))


def check_equal(before: Module, after: Module, assert_same_results) -> None:
    assert_same_results(before, after)
    specials = [special_array(t) for t in before.entry.parameter_types]
    assert_identical(before, after, specials)


# --- the tests ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_text_in_text_out(case: str, assert_same_results) -> None:
    before_text, after_text = CASES[case]
    before = parse_module(before_text)
    after = run_passes(before, [simplify, dce])
    assert print_module(after) == after_text
    check_equal(before, after, assert_same_results)


@pytest.mark.parametrize("case", sorted(CASES))
def test_results_are_a_fixed_point(case: str) -> None:
    after = parse_module(CASES[case][1])
    assert simplify(after) is after


@pytest.mark.parametrize("case", sorted(KEPT))
def test_kept_unchanged(case: str) -> None:
    module = parse_module(KEPT[case])
    assert simplify(module) is module


@pytest.mark.parametrize("case", sorted(POW_CASES))
def test_pow_by_multiplication(case: str, arguments) -> None:
    before_text, after_text = POW_CASES[case]
    before = parse_module(before_text)
    after = run_passes(before, [simplify, dce])
    assert print_module(after) == after_text
    # x * x is the correctly rounded square; numpy's vectorized pow, the interpreter's, may be
    # a unit in the last place away from it (and even pow(x, 1) from x, for float32).
    for args in (arguments(before, 0), [special_array(t) for t in before.entry.parameter_types]):
        for e, g in zip(interpret(before, args), interpret(after, args), strict=True):
            assert e.dtype == g.dtype
            if e.dtype.kind == "f":
                close = np.abs(e - g) <= np.spacing(np.abs(g))
                assert np.all(close | (e == g) | (np.isnan(e) & np.isnan(g)))
            else:
                np.testing.assert_array_equal(e, g)


def test_every_rule_fires_in_some_case(monkeypatch) -> None:
    fired: set[str] = set()

    def recording(fn):
        def wrapper(b: Builder, inst: Instruction, operands: Sequence[Value]):
            out = fn(b, inst, operands)
            values = (out,) if isinstance(out, Value) else out
            if values is not None and [v.type for v in values] == [v.type for v in inst.results]:
                fired.add(fn.__name__)
            return out
        return wrapper

    names = {fn.__name__ for rules in RULES.values() for fn in rules}
    for op, rules in list(RULES.items()):
        monkeypatch.setitem(RULES, op, [recording(fn) for fn in rules])
    for before_text, _ in [*CASES.values(), *POW_CASES.values()]:
        simplify(parse_module(before_text))
    assert fired == names


def test_a_rejected_rule_leaves_nothing_behind(monkeypatch) -> None:
    def wrong_shape(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Value:
        return b.emit(ops.REDUCE, [operands[0]], {"dims": [0], "kind": "sum"})

    monkeypatch.setitem(RULES, ops.NEG, [wrong_shape])
    module = parse_module(ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %0 = neg(%x) : f32[3]
          return %0
        }
        """))
    assert simplify(module) is module


def test_exact_widening_keeps_every_value() -> None:
    for source, target in itertools.product(dtypes.ALL, repeat=2):
        if not exact_widening(source, target):
            continue
        values = special_array(TensorType(source, (16,)))
        back = convert_array(convert_array(values, target.numpy), source.numpy)
        assert back.tobytes() == values.tobytes(), (source, target)
    d = dtypes
    assert exact_widening(d.int8, d.float16) and exact_widening(d.int32, d.float64)
    assert exact_widening(d.uint8, d.int32) and exact_widening(d.bool_, d.float16)
    for source, target in [(d.int64, d.float64), (d.int32, d.float32), (d.int8, d.uint8),
                           (d.float64, d.float32), (d.float16, d.int64), (d.int8, d.bool_),
                           (d.int64, d.complex64), (d.int32, d.complex64),
                           (d.complex64, d.float64), (d.complex128, d.complex64)]:
        assert not exact_widening(source, target), (source, target)
    assert exact_widening(d.float32, d.complex64) and exact_widening(d.complex64, d.complex128)
    assert exact_widening(d.int32, d.complex128) and exact_widening(d.bool_, d.complex64)


@pytest.mark.parametrize("dtype", dtypes.FLOATS, ids=str)
def test_exact_reciprocal(dtype) -> None:
    info = np.finfo(dtype.numpy)
    x = np.random.default_rng(0).standard_normal(1000).astype(dtype.numpy) * 100
    powers = [np.asarray(np.ldexp(sign, k), dtype.numpy) for sign in (1.0, -1.0)
              for k in range(info.minexp - info.nmant, info.maxexp)]
    for c in powers:
        r = exact_reciprocal(c)
        if r is None:  # its reciprocal overflows or is not exactly the dtype's
            assert abs(int(np.frexp(c)[1]) - 1) >= info.maxexp - 1
            continue
        with np.errstate(all="ignore"):
            assert np.array_equal(x / c, x * r)
    for c in (3.0, 0.0, -0.0, np.inf, np.nan, 0.75):
        assert exact_reciprocal(np.asarray(c, dtype.numpy)) is None


def _fill_rows(rows: int) -> Module:
    """`out[i] = x[i] * 2 + i` for every row of an np.empty array, as traced."""
    import jitc

    def fill(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] * 2 + i
        return out
    return jitc.jit(fill, disabled_passes={"reroll"}).lower(np.ones((rows, 3))).module


def test_a_row_by_row_fill_joins_in_linear_work() -> None:
    """Joined update by update, the k-th row made a concatenate of k pieces: 2000 rows built
    two million operands. One round of simplify now builds a number of operands linear in the
    rows (the dead copies of the chain's updates included), for 100 rows as for 800."""
    for rows in (100, 800):
        simplified = simplify(_fill_rows(rows))
        operands = sum(len(inst.operands) for inst in simplified.entry.body)
        assert operands < 20 * rows, (rows, operands)  # about 12 per row
        (root,) = [i for i in run_passes(simplified, [dce]).entry.body
                   if i.op is ops.CONCATENATE]
        assert len(root.operands) == rows


def writes(x):
    """Rows backwards, a read of the array half way, then column tiles of one row."""
    out = np.zeros_like(x)
    for i in range(x.shape[0] - 1, 2, -1):
        out[i] = x[i] + i
    partial = out.sum(axis=1)
    for i in range(3):
        out[i] = x[i] * i
    for j in range(x.shape[1]):
        out[1, j:j + 1] = x[0, j:j + 1] - j
    return out, partial


def test_chains_of_writes_in_any_order_match_numpy() -> None:
    import jitc
    x = np.random.default_rng(0).standard_normal((7, 4))
    for got, want in zip(jitc.jit(writes)(x), writes(x), strict=True):
        np.testing.assert_array_equal(got, want)
