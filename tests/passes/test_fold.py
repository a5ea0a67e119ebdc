"""fold: constant folding with the op table's reference semantics, within its size limits."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from test_simplify import check_equal

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Function, Literal, Module, Value
from jitc.ir.opdef import OpDef, Trait
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.types import TensorType
from jitc.passes import dce
from jitc.passes.fold import FOLD_LIMIT, OPERAND_LIMIT, TINY, fold, splat_value
from jitc.passes.pipeline import run_passes


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CASES = {
    "elementwise-literals": (ir("""
        func @f {
          %a = constant() value=[1.0, 2.0, 3.0] : f32[3]
          %b = constant() value=[10.0, 20.0, 30.0] : f32[3]
          %0 = add(%a, %b) : f32[3]
          %1 = compare(%0, %b) direction=gt : bool[3]
          %2 = convert(%1) : i32[3]
          %3 = neg(%2) : i32[3]
          return %3
        }
        """), ir("""
        func @f {
          %0 = constant() value=[-1, -1, -1] : i32[3]
          return %0
        }
        """)),
    "implicit-broadcasting": (ir("""
        func @f {
          %s = constant() value=1.0 : f32[]
          %v = constant() value=[1.0, 2.0, 3.0] : f32[3]
          %0 = sub(%s, %v) : f32[3]
          return %0
        }
        """), ir("""
        func @f {
          %0 = constant() value=[0.0, -1.0, -2.0] : f32[3]
          return %0
        }
        """)),
    "splats-stay-small": (ir("""
        func @f {
          %x = parameter() index=0 : f32[1000,1000]{1,0}
          %two = constant() value=2.0 : f32[]
          %0 = broadcast_in_dim(%two) dims=[] : f32[1000,1000]{1,0}
          %three = constant() value=3.0 : f32[]
          %1 = broadcast_in_dim(%three) dims=[] : f32[1000,1000]{1,0}
          %2 = mul(%0, %1) : f32[1000,1000]{1,0}
          %3 = transpose(%2) permutation=[1,0] : f32[1000,1000]{1,0}
          %4 = reshape(%3) : f32[1000000]
          %5 = reshape(%4) : f32[1000,1000]{1,0}
          %6 = add(%x, %5) : f32[1000,1000]{1,0}
          return %6
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[1000,1000]{1,0}
          %0 = constant() value=6.0 : f32[]
          %1 = broadcast_in_dim(%0) dims=[] : f32[1000,1000]{1,0}
          %2 = add(%x, %1) : f32[1000,1000]{1,0}
          return %2
        }
        """)),
    "splat-of-a-small-shape": (ir("""
        func @f {
          %two = constant() value=2 : i8[]
          %0 = broadcast_in_dim(%two) dims=[] : i8[1,2,2]{2,1,0}
          %1 = slice(%0) start=[0,0,0] limit=[1,2,1] : i8[1,2,1]{2,1,0}
          %2 = reverse(%1) dims=[1] : i8[1,2,1]{2,1,0}
          %3 = shift_left(%2, %2) : i8[1,2,1]{2,1,0}
          return %3
        }
        """), ir("""
        func @f {
          %0 = constant() value=[[[8], [8]]] : i8[1,2,1]{2,1,0}
          return %0
        }
        """)),
    "integer-division-by-zero-and-nan": (ir("""
        func @f {
          %a = constant() value=[7, -128, 5] : i8[3]
          %b = constant() value=[0, -1, 2] : i8[3]
          %0 = div(%a, %b) : i8[3]
          %n = constant() value=nan : f32[]
          %one = constant() value=1.0 : f32[]
          %1 = add(%n, %one) : f32[]
          %2 = max(%1, %one) : f32[]
          %3 = compare(%n, %n) direction=ne : bool[]
          return %0, %2, %3
        }
        """), ir("""
        func @f {
          %0 = constant() value=[0, -128, 2] : i8[3]
          %1 = constant() value=nan : f32[]
          %2 = constant() value=true : bool[]
          return %0, %1, %2
        }
        """)),
    "iota-and-reductions": (ir("""
        func @f {
          %0 = iota() dimension=1 : i32[2,3]{1,0}
          %1 = convert(%0) : f32[2,3]{1,0}
          %2, %3 = reduce(%1, %0) dims=[1] kind=max : f32[2], i32[2]
          %best = argmax(%1) axis=1 : i64[2]
          %4 = dot_general(%1, %1) lhs_contract=[1] rhs_contract=[1] : f32[2,2]{1,0}
          return %2, %3, %best, %4
        }
        """), ir("""
        func @f {
          %0 = constant() value=[2.0, 2.0] : f32[2]
          %1 = constant() value=[2, 2] : i32[2]
          %best = constant() value=[2, 2] : i64[2]
          %2 = constant() value=[[5.0, 5.0], [5.0, 5.0]] : f32[2,2]{1,0}
          return %0, %1, %best, %2
        }
        """)),
}

KEPT = {
    "not-all-operands-constant": ir("""
        func @f {
          %x = parameter() index=0 : f32[3]
          %c = constant() value=[1.0, 2.0, 3.0] : f32[3]
          %0 = add(%x, %c) : f32[3]
          %i = iota() dimension=0 : i32[2000]
          %1 = neg(%i) : i32[2000]
          %2 = constant() value=[1.0, 2.0, 3.0] : f32[3]
          %3 = broadcast_in_dim(%2) dims=[1] : f32[4,3]{1,0}
          return %0, %1, %3
        }
        """),
    "large-results": ir("""
        func @f {
          %c = constant() value=[1.0, 2.0] : f32[2]
          %0 = broadcast_in_dim(%c) dims=[1] : f32[600,2]{1,0}
          %1 = neg(%0) : f32[600,2]{1,0}
          %z = constant() value=0.0 : f32[]
          %2 = pad(%c, %z) low=[2000] high=[0] : f32[2002]
          return %1, %2
        }
        """),
}

@pytest.mark.parametrize("case", sorted(CASES))
def test_text_in_text_out(case: str, assert_same_results) -> None:
    before_text, after_text = CASES[case]
    before = parse_module(before_text)
    after = run_passes(before, [fold, dce])
    assert print_module(after) == after_text
    check_equal(before, after, assert_same_results)
    assert fold(after) is after


@pytest.mark.parametrize("case", sorted(KEPT))
def test_kept_unchanged(case: str) -> None:
    module = parse_module(KEPT[case])
    assert fold(module) is module


# --- limits, on modules too large to write as text ---------------------------------------------

F32 = dtypes.float32


def single(build) -> Module:
    """A module whose function returns what `build(builder)` returns."""
    fn = Function("f")
    fn.outputs = [build(Builder(fn))]
    return Module([fn])


def literal(b: Builder, array: np.ndarray) -> Value:
    return b.emit(ops.CONSTANT, [], {"value": Literal(array)})


def ops_of(module: Module) -> list[str]:
    return [inst.op.name for inst in module.entry.body]


def test_large_results_are_not_folded() -> None:
    values = np.arange(FOLD_LIMIT + 1, dtype=np.float32)
    module = single(lambda b: b.emit(ops.NEG, [literal(b, values)]))
    assert fold(module) is module
    small = single(lambda b: b.emit(ops.NEG, [literal(b, values[:FOLD_LIMIT])]))
    (out,) = run_passes(small, [fold, dce]).entry.body
    np.testing.assert_array_equal(out.attrs["value"].array, -values[:FOLD_LIMIT])


def test_large_operands_are_not_folded() -> None:
    def total(size: int):
        def build(b: Builder) -> Value:
            values = np.arange(size, dtype=np.float32)
            return b.emit(ops.REDUCE, [literal(b, values)], {"dims": [0], "kind": "sum"})
        return build
    module = single(total(OPERAND_LIMIT + 1))
    assert fold(module) is module
    folded = run_passes(single(total(OPERAND_LIMIT)), [fold, dce])
    assert ops_of(folded) == ["constant"]
    assert folded.entry.outputs[0].producer.attrs["value"].array == sum(range(OPERAND_LIMIT))


def test_a_large_splat_literal_folds_to_a_broadcast_scalar() -> None:
    module = single(lambda b: b.emit(ops.NEG, [literal(b, np.full((4, 5), 3.0, np.float32))]))
    after = run_passes(module, [fold, dce])
    assert ops_of(after) == ["constant", "broadcast_in_dim"]
    assert after.entry.body[0].attrs["value"] == Literal(np.float32(-3.0))
    assert after.entry.outputs[0].type == TensorType(F32, (4, 5))


def test_splats_are_recognized_bit_for_bit() -> None:
    def value(array: np.ndarray) -> Value:
        return single(lambda b: literal(b, array)).entry.outputs[0]
    assert splat_value(value(np.full(TINY + 1, np.nan, np.float32))) is not None
    assert splat_value(value(np.array([0.0, -0.0], np.float32))) is None
    assert splat_value(value(np.zeros((0, 3), np.float32))) is None
    assert splat_value(value(np.array(True))) == np.True_


def _effect_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                 declared: Sequence[TensorType] | None) -> Sequence[TensorType]:
    return [types[0]]


def _effect_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                      results: Sequence[TensorType]) -> list[np.ndarray]:
    return [args[0]]


PRINT = OpDef("print", 1, _effect_rule, _effect_reference, "prints its operand",
              traits=frozenset({Trait.SIDE_EFFECT}))


def test_side_effects_are_not_folded() -> None:
    module = single(lambda b: b.emit(PRINT, [literal(b, np.float32(1.0))]))
    assert fold(module) is module


def test_layouts_are_kept() -> None:
    module = parse_module(ir("""
        func @f {
          %0 = iota() dimension=0 : i32[2,3]{0,1}
          return %0
        }
        """))
    after = fold(module)
    assert after.entry.outputs[0].type.layout == (0, 1)
    np.testing.assert_array_equal(after.entry.outputs[0].producer.attrs["value"].array,
                                  [[0, 0, 0], [1, 1, 1]])


@pytest.mark.parametrize("backend", ["interpreter", "cpu", "c", "cuda-sim"])
def test_ops_without_elements_become_empty_constants(backend: str) -> None:
    """A concatenate of operands empty along its axis crashed the cpu and c code generators,
    which had no operand to read an element from."""
    import jitc

    def f(a, b):
        return np.concatenate([a, b], axis=-1) * 2, np.concatenate([a, b], axis=0).sum(axis=0)
    a, b = np.zeros((2, 0)), np.ones((2, 0))
    for got, want in zip(jitc.jit(f, backend=backend)(a, b), f(a, b), strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
