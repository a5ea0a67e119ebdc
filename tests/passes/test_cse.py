"""cse: equal instructions computed once; commutative operands in either order."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Function, Module
from jitc.ir.opdef import OpDef, Trait
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.types import TensorType
from jitc.passes.cse import cse
from jitc.passes.pipeline import run_passes


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CASES = {
    "xla-example": (ir("""
        func @f {
          %b = parameter() index=0 : f32[4]
          %c = parameter() index=1 : f32[4]
          %g = parameter() index=2 : f32[4]
          %e = parameter() index=3 : f32[4]
          %0 = mul(%b, %c) : f32[4]
          %a = add(%0, %g) : f32[4]
          %1 = mul(%b, %c) : f32[4]
          %d = mul(%1, %e) : f32[4]
          return %a, %d
        }
        """), ir("""
        func @f {
          %b = parameter() index=0 : f32[4]
          %c = parameter() index=1 : f32[4]
          %g = parameter() index=2 : f32[4]
          %e = parameter() index=3 : f32[4]
          %0 = mul(%b, %c) : f32[4]
          %a = add(%0, %g) : f32[4]
          %d = mul(%0, %e) : f32[4]
          return %a, %d
        }
        """)),
    "commutative-operands-match-swapped": (ir("""
        func @f {
          %x = parameter() index=0 : i32[3]
          %y = parameter() index=1 : i32[2,3]{1,0}
          %0 = add(%x, %y) : i32[2,3]{1,0}
          %1 = add(%y, %x) : i32[2,3]{1,0}
          %2 = sub(%x, %y) : i32[2,3]{1,0}
          %3 = sub(%y, %x) : i32[2,3]{1,0}
          %4 = max(%1, %0) : i32[2,3]{1,0}
          %5 = max(%0, %0) : i32[2,3]{1,0}
          return %2, %3, %4, %5
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : i32[3]
          %y = parameter() index=1 : i32[2,3]{1,0}
          %0 = add(%x, %y) : i32[2,3]{1,0}
          %1 = sub(%x, %y) : i32[2,3]{1,0}
          %2 = sub(%y, %x) : i32[2,3]{1,0}
          %3 = max(%0, %0) : i32[2,3]{1,0}
          return %1, %2, %3, %3
        }
        """)),
    "chains-merge-in-one-pass": (ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %0 = exp(%x) : f32[2,3]{1,0}
          %1 = transpose(%0) permutation=[1,0] : f32[3,2]{1,0}
          %2 = exp(%x) : f32[2,3]{1,0}
          %3 = transpose(%2) permutation=[1,0] : f32[3,2]{1,0}
          %4 = sub(%1, %3) : f32[3,2]{1,0}
          return %4
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %0 = exp(%x) : f32[2,3]{1,0}
          %1 = transpose(%0) permutation=[1,0] : f32[3,2]{1,0}
          %2 = sub(%1, %1) : f32[3,2]{1,0}
          return %2
        }
        """)),
    "constants-merge-by-value": (ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %0 = constant() value=1.5 : f32[]
          %1 = constant() value=1.5 : f32[]
          %2 = constant() value=1.5 : f64[]
          %3 = constant() value=0.0 : f32[]
          %4 = constant() value=-0.0 : f32[]
          %5 = constant() value=nan : f32[]
          %6 = constant() value=nan : f32[]
          %7 = constant() value=[1.5, 1.5, 1.5] : f32[3]
          %8 = mul(%x, %0) : f32[3]
          %9 = mul(%8, %1) : f32[3]
          %10 = convert(%2) : f32[]
          %11 = add(%9, %10) : f32[3]
          %12 = add(%11, %3) : f32[3]
          %13 = add(%12, %4) : f32[3]
          %14 = max(%13, %5) : f32[3]
          %15 = max(%14, %6) : f32[3]
          %16 = sub(%15, %7) : f32[3]
          return %16
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %0 = constant() value=1.5 : f32[]
          %1 = constant() value=1.5 : f64[]
          %2 = constant() value=0.0 : f32[]
          %3 = constant() value=-0.0 : f32[]
          %4 = constant() value=nan : f32[]
          %5 = constant() value=[1.5, 1.5, 1.5] : f32[3]
          %6 = mul(%x, %0) : f32[3]
          %7 = mul(%6, %0) : f32[3]
          %8 = convert(%1) : f32[]
          %9 = add(%7, %8) : f32[3]
          %10 = add(%9, %2) : f32[3]
          %11 = add(%10, %3) : f32[3]
          %12 = max(%11, %4) : f32[3]
          %13 = max(%12, %4) : f32[3]
          %14 = sub(%13, %5) : f32[3]
          return %14
        }
        """)),
    "multi-result-reduce": (ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %y = parameter() index=1 : i32[2,3]{1,0}
          %0, %1 = reduce(%x, %y) dims=[1] kind=max : f32[2], i32[2]
          %2, %3 = reduce(%x, %y) dims=[1] kind=max : f32[2], i32[2]
          %4, %5 = reduce(%y, %x) dims=[1] kind=max : i32[2], f32[2]
          %6 = reduce(%x) dims=[1] kind=max : f32[2]
          return %0, %3, %5, %6, %1, %2, %4
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %y = parameter() index=1 : i32[2,3]{1,0}
          %0, %1 = reduce(%x, %y) dims=[1] kind=max : f32[2], i32[2]
          %2, %3 = reduce(%y, %x) dims=[1] kind=max : i32[2], f32[2]
          %4 = reduce(%x) dims=[1] kind=max : f32[2]
          return %0, %1, %3, %4, %1, %0, %2
        }
        """)),
}

KEPT = {
    "different-attributes-or-types": ir("""
        func @f {
          %x = parameter() index=0 : f32[2,2]{1,0}
          %0 = compare(%x, %x) direction=lt : bool[2,2]{1,0}
          %1 = compare(%x, %x) direction=gt : bool[2,2]{1,0}
          %2 = reduce(%x) dims=[0] kind=sum : f32[2]
          %3 = reduce(%x) dims=[1] kind=sum : f32[2]
          %4 = reduce(%x) dims=[1] kind=max : f32[2]
          %5 = transpose(%x) permutation=[1,0] : f32[2,2]{1,0}
          %6 = transpose(%x) permutation=[1,0] : f32[2,2]{0,1}
          %7 = convert(%x) : f64[2,2]{1,0}
          %8 = convert(%x) : f16[2,2]{1,0}
          %9 = iota() dimension=0 : i32[2,2]{1,0}
          %10 = iota() dimension=1 : i32[2,2]{1,0}
          return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10
        }
        """),
}

@pytest.mark.parametrize("case", sorted(CASES))
def test_text_in_text_out(case: str, assert_same_results) -> None:
    before_text, after_text = CASES[case]
    before = parse_module(before_text)
    after = run_passes(before, [cse])
    assert print_module(after) == after_text
    assert_same_results(before, after)
    assert cse(after) is after


@pytest.mark.parametrize("case", sorted(KEPT))
def test_kept_unchanged(case: str) -> None:
    module = parse_module(KEPT[case])
    assert cse(module) is module


def test_the_xla_example_multiplies_once() -> None:
    after = cse(parse_module(CASES["xla-example"][0]))
    assert [inst.op for inst in after.entry.body].count(ops.MUL) == 2


def test_unchanged_functions_are_kept() -> None:
    text = CASES["xla-example"][0] + "\n" + KEPT["different-attributes-or-types"].replace(
        "@f", "@g")
    before = parse_module(text)
    after = cse(before)
    assert after.functions["g"] is before.functions["g"]
    assert after.functions["f"] is not before.functions["f"]


def _effect_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                 declared: Sequence[TensorType] | None) -> Sequence[TensorType]:
    return [types[0]]


def _effect_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                      results: Sequence[TensorType]) -> list[np.ndarray]:
    return [args[0]]


PRINT = OpDef("print", 1, _effect_rule, _effect_reference, "prints its operand",
              traits=frozenset({Trait.SIDE_EFFECT}))


def test_side_effects_never_merge() -> None:
    fn = Function("f")
    b = Builder(fn)
    x = b.emit(ops.PARAMETER, [], {"index": 0}, TensorType(dtypes.float32, (2,)))
    first, second = b.emit(PRINT, [x]), b.emit(PRINT, [x])
    fn.outputs = [b.emit(ops.ADD, [first, second]), b.emit(ops.ADD, [second, first])]
    after = cse(Module([fn]))
    assert [inst.op.name for inst in after.entry.body] == ["parameter", "print", "print", "add"]
