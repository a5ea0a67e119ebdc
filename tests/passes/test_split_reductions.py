"""split_reductions: a large reduction to a scalar becomes rows first, then the row results."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import jitc
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.passes.pipeline import run_passes
from jitc.passes.split_reductions import split_reductions


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_a_large_full_reduction_is_split(assert_same_results) -> None:
    before = parse_module(ir("""
        func @f {
          %x = parameter() index=0 : f32[1024,4,256]{2,1,0}
          %0 = reduce(%x) dims=[0,1,2] kind=max : f32[]
          return %0
        }
        """))
    after = run_passes(before, [split_reductions])
    assert print_module(after) == ir("""
        func @f {
          %x = parameter() index=0 : f32[1024,4,256]{2,1,0}
          %0 = reduce(%x) dims=[1,2] kind=max : f32[1024]
          %1 = reduce(%0) dims=[0] kind=max : f32[]
          return %1
        }
        """)
    assert_same_results(before, after)
    assert split_reductions(after) is after


@pytest.mark.parametrize("text", [
    # too small to be worth a second kernel
    "%x = parameter() index=0 : f32[64,64]\n%0 = reduce(%x) dims=[0,1] kind=sum : f32[]",
    # too few rows to share among threads
    "%x = parameter() index=0 : f32[2,1048576]\n%0 = reduce(%x) dims=[0,1] kind=sum : f32[]",
    # float16 row results would be rounded
    "%x = parameter() index=0 : f16[1024,1024]\n%0 = reduce(%x) dims=[0,1] kind=sum : f16[]",
    # not every dimension
    "%x = parameter() index=0 : f32[1024,1024]\n%0 = reduce(%x) dims=[1] kind=sum : f32[1024]",
])
def test_other_reductions_are_kept(text: str) -> None:
    body = "\n".join("  " + line for line in text.splitlines())
    module = parse_module(f"func @f {{\n{body}\n  return %0\n}}\n")
    assert split_reductions(module) is module


def test_a_sum_of_everything_is_divided_among_threads() -> None:
    x = np.random.default_rng(0).standard_normal((512, 4096)).astype(np.float32)
    f = jitc.jit(lambda x: (x.sum(), x.max()), num_threads=2)
    assert "jitc_parallel_for" in f.lower(x).compile().as_text()
    total, largest = f(x)
    np.testing.assert_allclose(total, x.astype(np.float64).sum(), rtol=1e-5, atol=1e-2)
    assert largest == x.max()
