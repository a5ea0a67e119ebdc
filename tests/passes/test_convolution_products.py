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
from jitc.passes.convolution_products import byte_convolution_products, convolution_products
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


FLOAT_BEFORE = ir("""
    func @f {
      %x = parameter() index=0 : f32[2,5,4,3]{3,2,1,0}
      %w = parameter() index=1 : f32[2,2,3,8]{3,2,1,0}
      %0 = convolution(%x, %w) FLOAT_CONV
      return %0
    }
    """).replace("FLOAT_CONV", 'dim_labels="b01f_01io->bf01" strides=[2,1] '
                               'padding=[[0,-1],[0,0]] : f32[2,8,2,3]{3,2,1,0}')
FLOAT_AFTER = ir("""
    func @f {
      %x = parameter() index=0 : f32[2,5,4,3]{3,2,1,0}
      %w = parameter() index=1 : f32[2,2,3,8]{3,2,1,0}
      %0 = transpose(%w) permutation=[3,0,1,2] : f32[8,2,2,3]{3,2,1,0}
      %1 = reshape(%0) : f32[8,12]{1,0}
      %2 = constant() value=0.0 : f32[]
      %3 = pad(%x, %2) low=[0,0,0,0] high=[0,-1,0,0] interior=[0,0,0,0] : f32[2,4,4,3]{3,2,1,0}
      %4 = slice(%3) start=[0,0,0,0] limit=[2,3,3,3] stride=[1,2,1,1] : f32[2,2,3,3]{3,2,1,0}
      %5 = slice(%3) start=[0,0,1,0] limit=[2,3,4,3] stride=[1,2,1,1] : f32[2,2,3,3]{3,2,1,0}
      %6 = slice(%3) start=[0,1,0,0] limit=[2,4,3,3] stride=[1,2,1,1] : f32[2,2,3,3]{3,2,1,0}
      %7 = slice(%3) start=[0,1,1,0] limit=[2,4,4,3] stride=[1,2,1,1] : f32[2,2,3,3]{3,2,1,0}
      %8 = concatenate(%4, %5, %6, %7) dimension=3 : f32[2,2,3,12]{3,2,1,0}
      %9 = dot_general(%8, %1) lhs_contract=[3] rhs_contract=[1] : f32[2,2,3,8]{3,2,1,0}
      %10 = transpose(%9) permutation=[0,3,1,2] : f32[2,8,2,3]{3,2,1,0}
      return %10
    }
    """)


def _interpreted_floats_agree(before, after) -> None:
    rng = np.random.default_rng(2)
    args = [rng.standard_normal(p.shape).astype(p.dtype.numpy)
            for p in before.entry.parameter_types]
    (expected,) = interpret(before, args)
    (result,) = interpret(after, args)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_a_float_convolution_over_input_only_becomes_patches_times_a_float_kernel() -> None:
    """Cropping (negative padding) puts no zero under a tap: a float product, no result=."""
    before = parse_module(FLOAT_BEFORE)
    after = run_passes(before, [convolution_products, dce])
    assert print_module(after) == FLOAT_AFTER
    assert parse_module(FLOAT_AFTER) == after
    _interpreted_floats_agree(before, after)


PADDED_FLOAT = FLOAT_BEFORE.replace("padding=[[0,-1],[0,0]] : f32[2,8,2,3]",
                                    "padding=[[1,0],[0,1]] : f32[2,8,3,4]")
CONSTANT_KERNEL = PADDED_FLOAT.replace("%w = parameter() index=1",
                                       "%w = constant() value=KERNEL")


def _with_kernel(text: str, kernel: np.ndarray) -> str:
    values = np.array2string(kernel, separator=",", threshold=kernel.size + 1,
                             max_line_width=10**6).replace("\n", "").replace(" ", "")
    return text.replace("KERNEL", values)


@pytest.mark.parametrize("text", [
    # A tap over padding adds nothing to the convolution, where 0 * inf in patches is nan.
    PADDED_FLOAT,
    # A hole of the input dilation, likewise.
    FLOAT_BEFORE.replace("padding=[[0,-1],[0,0]] : f32[2,8,2,3]",
                         "lhs_dilation=[1,2] : f32[2,8,2,6]"),
    # float16 has no GEMM.
    FLOAT_BEFORE.replace("f32", "f16"),
], ids=["padded", "lhs-dilated", "float16"])
def test_float_convolutions_that_could_read_a_zero_into_inf_are_left_alone(text: str) -> None:
    module = parse_module(text)
    assert run_passes(module, [convolution_products]) is module


def test_a_finite_constant_kernel_over_padding_becomes_a_product() -> None:
    kernel = np.arange(96, dtype=np.float32).reshape(2, 2, 3, 8) / 7
    before = parse_module(_with_kernel(CONSTANT_KERNEL, kernel))
    after = run_passes(before, [convolution_products, dce])
    text = print_module(after)
    assert "= convolution(" not in text and "dot_general(" in text
    _interpreted_floats_agree(before, after)
    kernel[0, 1, 2, 3] = np.inf
    with_inf = parse_module(_with_kernel(CONSTANT_KERNEL, kernel))
    assert run_passes(with_inf, [convolution_products]) is with_inf


def test_the_c_backends_variant_leaves_floats_alone() -> None:
    module = parse_module(FLOAT_BEFORE)
    assert run_passes(module, [byte_convolution_products]) is module
    assert "result=i32" in print_module(
        run_passes(parse_module(BEFORE), [byte_convolution_products]))
