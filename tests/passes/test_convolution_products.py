"""convolution_products: a convolution of bytes widened to int32 becomes patches of the bytes
and one byte product."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from jitc.ir.interpreter import interpret
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.passes import dce
from jitc.passes.convolution_products import convolution_products
from jitc.passes.pipeline import run_passes


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CONV = ('dim_labels="bf01_oi01->bf01" strides=[2,1] padding=[[1,0],[0,1]] '
        ': i32[2,8,3,4]{3,2,1,0}')
BEFORE = ir("""
    func @f {
      %x = parameter() index=0 : u8[2,3,5,4]{3,2,1,0}
      %w = parameter() index=1 : i8[8,3,2,2]{3,2,1,0}
      %0 = convert(%x) : i32[2,3,5,4]{3,2,1,0}
      %1 = convert(%w) : i32[8,3,2,2]{3,2,1,0}
      %2 = convolution(%0, %1) CONV
      return %2
    }
    """).replace("CONV", CONV)
AFTER = ir("""
    func @f {
      %x = parameter() index=0 : u8[2,3,5,4]{3,2,1,0}
      %w = parameter() index=1 : i8[8,3,2,2]{3,2,1,0}
      %0 = transpose(%x) permutation=[0,2,3,1] : u8[2,5,4,3]{3,2,1,0}
      %1 = transpose(%w) permutation=[0,2,3,1] : i8[8,2,2,3]{3,2,1,0}
      %2 = reshape(%1) : i8[8,12]{1,0}
      %3 = constant() value=0 : u8[]
      %4 = pad(%0, %3) low=[0,1,0,0] high=[0,0,1,0] interior=[0,0,0,0] : u8[2,6,5,3]{3,2,1,0}
      %5 = slice(%4) start=[0,0,0,0] limit=[2,5,4,3] stride=[1,2,1,1] : u8[2,3,4,3]{3,2,1,0}
      %6 = slice(%4) start=[0,0,1,0] limit=[2,5,5,3] stride=[1,2,1,1] : u8[2,3,4,3]{3,2,1,0}
      %7 = slice(%4) start=[0,1,0,0] limit=[2,6,4,3] stride=[1,2,1,1] : u8[2,3,4,3]{3,2,1,0}
      %8 = slice(%4) start=[0,1,1,0] limit=[2,6,5,3] stride=[1,2,1,1] : u8[2,3,4,3]{3,2,1,0}
      %9 = concatenate(%5, %6, %7, %8) dimension=3 : u8[2,3,4,12]{3,2,1,0}
      %10 = dot_general(%9, %2) lhs_contract=[3] rhs_contract=[1] result=i32 : i32[2,3,4,8]{3,2,1,0}
      %11 = transpose(%10) permutation=[0,3,1,2] : i32[2,8,3,4]{3,2,1,0}
      return %11
    }
    """)


def test_widened_bytes_convolve_as_patches_times_a_byte_kernel() -> None:
    before = parse_module(BEFORE)
    after = run_passes(before, [convolution_products, dce])
    assert print_module(after) == AFTER
    assert parse_module(AFTER) == after
    _check_interpreted(before, after, seed=0)


def _check_interpreted(before, after, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (2, 3, 5, 4)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 3, 2, 2)).astype(np.int8)
    (expected,) = interpret(before, [x, w])
    (result,) = interpret(after, [x, w])
    np.testing.assert_array_equal(result, expected)


GROUPED = ir("""
    func @f {
      %x = parameter() index=0 : u8[2,3,5,4]{3,2,1,0}
      %w = parameter() index=1 : i8[9,1,2,2]{3,2,1,0}
      %0 = convert(%x) : i32[2,3,5,4]{3,2,1,0}
      %1 = convert(%w) : i32[9,1,2,2]{3,2,1,0}
      %2 = convolution(%0, %1) GROUPS
      return %2
    }
    """).replace("GROUPS", 'dim_labels="bf01_oi01->bf01" feature_group_count=3 '
                           ': i32[2,9,4,3]{3,2,1,0}')


@pytest.mark.parametrize("text", [
    # Widened to int64: int32 accumulation would wrap where numpy's does not.
    BEFORE.replace("i32", "i64"),
    # Widened to float32: float sums round, and in another order they round differently.
    BEFORE.replace("i32", "f32"),
    # One operand already int32: its values need not fit a byte.
    BEFORE.replace("%1 = convert(%w) : i32[8,3,2,2]{3,2,1,0}",
                   "%1 = parameter() index=2 : i32[8,3,2,2]{3,2,1,0}"),
    # Fewer output features than the byte kernel's tile wants: the direct loop is faster.
    BEFORE.replace("[8,", "[4,").replace("[2,8,", "[2,4,"),
    # Groups of 3 output features: too few per group, as above.
    GROUPED,
], ids=["int64", "float", "int32-operand", "few-features", "groups"])
def test_other_convolutions_are_left_alone(text: str) -> None:
    module = parse_module(text)
    assert run_passes(module, [convolution_products]) is module


def test_a_batch_whose_patches_are_too_large_is_done_in_chunks(monkeypatch) -> None:
    # Each batch entry's patches are 3 x 4 positions x 12 taps x features = 144 bytes.
    module = sys.modules["jitc.passes.convolution_products"]
    monkeypatch.setattr(module, "MAX_PATCH_BYTES", 144)
    before = parse_module(BEFORE)
    after = run_passes(before, [convolution_products, dce])
    text = print_module(after)
    assert text.count("result=i32") == 2 and "= convolution(" not in text
    assert "concatenate(%" in text.split("result=i32")[-1]     # the two products joined
    _check_interpreted(before, after, seed=1)
    monkeypatch.setattr(module, "MAX_PATCH_BYTES", 143)        # one entry alone is too large
    assert run_passes(before, [convolution_products]) is before
