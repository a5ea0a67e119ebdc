"""Contiguous slices are views on the CPU: pointers into their operand's buffer, never copies."""

from __future__ import annotations

import numpy as np
import pytest

import jitc
from jitc.backends.cpu.codegen import lower_module
from jitc.ir import ops
from jitc.ir.parser import parse_module
from jitc.ir.views import slice_view_offset

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("text,offset", [
    ("slice(%x) start=[2,0,0] limit=[3,4,5] : f32[1,4,5]", 40),        # one leading index
    ("slice(%x) start=[1,0,0] limit=[3,4,5] : f32[2,4,5]", 20),        # leading rows
    ("slice(%x) start=[3,2,0] limit=[4,4,5] : f32[1,2,5]", 70),        # rows of one matrix
    ("slice(%x) start=[3,2,1] limit=[4,3,4] : f32[1,1,3]", 71),        # part of one row
    ("slice(%x) start=[0,1,0] limit=[6,2,5] : f32[6,1,5]", None),      # one row of every matrix
    ("slice(%x) start=[0,0,0] limit=[6,4,5] stride=[2,1,1] : f32[3,4,5]", None),  # strided
    ("slice(%x) start=[1,0,1] limit=[2,4,3] : f32[1,4,2]", None),      # columns
])
def test_which_slices_are_views(text: str, offset: int | None) -> None:
    module = parse_module(f"func @f {{\n  %x = parameter() index=0 : f32[6,4,5]\n"
                          f"  %0 = {text}\n  return %0\n}}\n")
    inst = next(i for i in module.entry.body if i.op is ops.SLICE)
    assert slice_view_offset(inst) == offset


def blocks(x, w):
    t = x * 2.0                        # a temporary: its views point into the workspace
    a = x[3] @ w                       # a view of a parameter
    b = t[1:3].reshape(-1, 8) @ w      # a bitcast of a view of a temporary
    c = x[4, 1:3] + t[5, 2:4]          # views read by an elementwise kernel
    d = x[:, 1] @ w                    # not a view (one row of every matrix): copied
    return a, b, c, d, t[0]            # a view that is returned: a fresh array


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_views_compute_what_numpy_does(dtype) -> None:
    x = (RNG.standard_normal((6, 4, 8)) * 4).astype(dtype)
    w = (RNG.standard_normal((8, 3)) * 4).astype(dtype)
    got = jitc.jit(blocks)(x, w)
    for g, want in zip(got, blocks(x, w), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-5)
    assert got[4].flags.owndata and not np.shares_memory(got[4], x)


def test_views_take_no_kernel_and_no_workspace() -> None:
    x = RNG.standard_normal((8, 32, 64)).astype(np.float32)
    w = RNG.standard_normal((8, 64, 16)).astype(np.float32)

    def steps(x, w):
        return [x[t] @ w[t] for t in range(8)]
    compiled = jitc.jit(steps).lower(x, w).compile()
    lowering = lower_module(compiled.optimized_module)
    assert len(lowering.plan.views) == 14  # x[0] and w[0] sit at offset 0: no slot needed
    assert lowering.plan.workspace_bytes == 0
    assert not any("slice" in k.name or "loop" in k.name for k in lowering.kernels)
    for got, want in zip(compiled(x, w), steps(x, w), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def read_after_overwrite(p):
    s = p[4:8]           # a view of p, read after p * 2 could have been written over p
    y = p * 2.0
    return y, s * 3.0 + 1.0


@pytest.mark.parametrize("fn", [
    read_after_overwrite,
    lambda p: p * p[0:1],                   # the producer reads a view of p besides p
    lambda p: p * p[7:8],                   # ... at an offset, from several threads
    lambda p: (p * 2.0, p.T.sum(axis=0)),   # a bitcast of p read after p's last direct use
], ids=["view-read-later", "view-in-producer", "view-at-offset", "bitcast-read-later"])
def test_a_donated_argument_is_not_overwritten_while_a_view_of_it_is_read(fn) -> None:
    x = np.arange(1.0, 1.0 + 8 * 4096).reshape(8, 4096)
    want = fn(x.copy())
    got = jitc.jit(fn, donate_argnums=0, num_threads=2)(x.copy())
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        np.testing.assert_array_equal(g, w)
