"""dot_merger: independent products by one matrix become one product of stacked rows."""

from __future__ import annotations

import importlib
import textwrap

import numpy as np

import jitc
from jitc.ir import ops
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.passes.dot_merger import dot_merger
from jitc.passes.pipeline import run_passes


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# Two steps of a recurrence: x[t] @ w and h @ w are independent of each other, the second
# step's a @ w needs the first step's result.
BEFORE = ir("""
    func @f {
      %xs = parameter() index=0 : f32[3,2,4]{2,1,0}
      %w = parameter() index=1 : f32[4,4]{1,0}
      %h = parameter() index=2 : f32[2,4]{1,0}
      %0 = slice(%xs) start=[0,0,0] limit=[1,2,4] : f32[1,2,4]{2,1,0}
      %x0 = reshape(%0) : f32[2,4]{1,0}
      %1 = dot_general(%x0, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,4]{1,0}
      %2 = dot_general(%h, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,4]{1,0}
      %h1 = tanh(%2) : f32[2,4]{1,0}
      %a = add(%1, %h1) : f32[2,4]{1,0}
      %3 = slice(%xs) start=[1,0,0] limit=[2,2,4] : f32[1,2,4]{2,1,0}
      %x1 = reshape(%3) : f32[2,4]{1,0}
      %4 = dot_general(%x1, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,4]{1,0}
      %5 = dot_general(%a, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,4]{1,0}
      %b = add(%4, %5) : f32[2,4]{1,0}
      return %b
    }
    """)
AFTER = ir("""
    func @f {
      %xs = parameter() index=0 : f32[3,2,4]{2,1,0}
      %w = parameter() index=1 : f32[4,4]{1,0}
      %h = parameter() index=2 : f32[2,4]{1,0}
      %0 = slice(%xs) start=[0,0,0] limit=[1,2,4] : f32[1,2,4]{2,1,0}
      %x0 = reshape(%0) : f32[2,4]{1,0}
      %1 = slice(%xs) start=[1,0,0] limit=[2,2,4] : f32[1,2,4]{2,1,0}
      %x1 = reshape(%1) : f32[2,4]{1,0}
      %2 = concatenate(%x0, %h, %x1) dimension=0 : f32[6,4]{1,0}
      %3 = dot_general(%2, %w) lhs_contract=[1] rhs_contract=[0] : f32[6,4]{1,0}
      %4 = slice(%3) start=[0,0] limit=[2,4] : f32[2,4]{1,0}
      %5 = slice(%3) start=[2,0] limit=[4,4] : f32[2,4]{1,0}
      %6 = slice(%3) start=[4,0] limit=[6,4] : f32[2,4]{1,0}
      %h1 = tanh(%5) : f32[2,4]{1,0}
      %a = add(%4, %h1) : f32[2,4]{1,0}
      %7 = dot_general(%a, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,4]{1,0}
      %b = add(%6, %7) : f32[2,4]{1,0}
      return %b
    }
    """)


def test_independent_products_merge_and_dependent_ones_stay(assert_same_results) -> None:
    before = parse_module(BEFORE)
    after = run_passes(before, [dot_merger])
    assert print_module(after) == AFTER
    assert_same_results(before, after)
    assert dot_merger(after) is after


def test_nothing_to_merge_keeps_the_module() -> None:
    kept = [
        # different right-hand sides
        """
        func @f {
          %x = parameter() index=0 : f32[2,4]
          %v = parameter() index=1 : f32[4,4]
          %w = parameter() index=2 : f32[4,4]
          %0 = dot_general(%x, %v) lhs_contract=[1] rhs_contract=[0] : f32[2,4]
          %1 = dot_general(%x, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,4]
          %2 = add(%0, %1) : f32[2,4]
          return %2
        }
        """,
        # a chain: each product needs the one before
        """
        func @f {
          %x = parameter() index=0 : f32[2,4]
          %w = parameter() index=1 : f32[4,4]
          %0 = dot_general(%x, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,4]
          %1 = dot_general(%0, %w) lhs_contract=[1] rhs_contract=[0] : f32[2,4]
          return %1
        }
        """,
        # batched products are left alone
        """
        func @f {
          %x = parameter() index=0 : f32[3,2,4]
          %y = parameter() index=1 : f32[3,2,4]
          %w = parameter() index=2 : f32[3,4,4]
          %0 = dot_general(%x, %w) lhs_batch=[0] rhs_batch=[0] lhs_contract=[2] """
        """rhs_contract=[1] : f32[3,2,4]
          %1 = dot_general(%y, %w) lhs_batch=[0] rhs_batch=[0] lhs_contract=[2] """
        """rhs_contract=[1] : f32[3,2,4]
          return %0, %1
        }
        """,
    ]
    for text in kept:
        module = parse_module(ir(text))
        assert dot_merger(module) is module


def rnn(xs, h, wx, wh, b):
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh + b)
    return h


def test_an_unrolled_rnn_makes_one_input_product_and_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((7, 5, 6)), rng.standard_normal((5, 8)),
            rng.standard_normal((6, 8)) * 0.3, rng.standard_normal((8, 8)) * 0.3,
            rng.standard_normal(8))
    for dtype, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        typed = [a.astype(dtype) for a in args]
        f = jitc.jit(rnn)
        module = f.lower(*typed).compile().optimized_module
        top = [i for i in module.entry.body if i.op is ops.DOT_GENERAL]
        assert len(top) == 1 and top[0].results[0].type.shape == (35, 8)
        # x[0], ..., x[6] stacked is x itself: a reshape, not a copy.
        assert top[0].operands[0].producer.op is ops.RESHAPE
        np.testing.assert_allclose(f(*typed), rnn(*typed), rtol=tol, atol=tol)


def _random(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def crossing(x1, y1, y2, wa, wb):
    """Two groups, one reading a member of the other."""
    a1 = x1 @ wa
    b1 = y1 @ wb
    b2 = y2 @ wb
    a2 = np.tanh(b2) @ wa
    return a1, b1, a2


def interlocked(x1, y2, wa, wb):
    """Each group needs a member of the other: at most one of them can merge."""
    a1 = x1 @ wa
    b2 = y2 @ wb
    b1 = np.tanh(a1) @ wb
    a2 = np.tanh(b2) @ wa
    return a1, b1, b2, a2


def three_dimensional_rhs(a, b, w):
    return np.tensordot(a, w, 1), np.tensordot(b, w, 1)


def test_groups_that_depend_on_each_other_and_other_ranks_compile_and_match() -> None:
    cases = [(crossing, (_random(4, 8), _random(4, 8), _random(4, 8), _random(8, 8),
                         _random(8, 8))),
             (interlocked, (_random(4, 8), _random(4, 8), _random(8, 8), _random(8, 8))),
             (three_dimensional_rhs, (_random(4, 8), _random(4, 8), _random(8, 3, 2)))]
    for fn, args in cases:
        for got, want in zip(jitc.jit(fn)(*args), fn(*args), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def sample(h, wxh, whh, why, steps):
    """min-char-rnn's sampler with argmax: each step's `whh @ h` and `why @ h` share their rhs
    h and are independent, one small group per step."""
    x = np.zeros((wxh.shape[1], 1), np.float32)
    x[0] = 1
    chosen = []
    for _ in range(steps.shape[0]):
        h = np.tanh(np.dot(wxh, x) + np.dot(whh, h))
        ix = np.argmax(np.dot(why, h))
        x = np.zeros((wxh.shape[1], 1), np.float32)
        x[ix] = 1
        chosen.append(ix)
    return np.stack(chosen)


def test_one_group_per_unrolled_step_merges_in_one_rebuild(monkeypatch) -> None:
    """A rebuild of the whole function per group made a 300-step sampler take minutes."""
    dot_merger_module = importlib.import_module("jitc.passes.dot_merger")
    rebuilds = []
    merge = dot_merger_module._merge
    monkeypatch.setattr(dot_merger_module, "_merge",
                        lambda module, groups: rebuilds.append(1) or merge(module, groups))
    steps = 40
    args = (np.zeros((16, 1), np.float32), _random(16, 11), _random(16, 16) * 0.3,
            _random(11, 16), np.zeros(steps))
    f = jitc.jit(sample, disabled_passes={"reroll"})  # the unrolled steps are the subject
    module = f.lower(*args).compile().optimized_module
    products = [i for i in module.entry.body if i.op is ops.DOT_GENERAL]
    # h of every step but the last feeds two products: the next step's and the draw.
    assert sum(i.results[0].type.shape == (27, 1) for i in products) == steps - 1
    assert len(rebuilds) == 1
    np.testing.assert_array_equal(f(*args), sample(*args))
