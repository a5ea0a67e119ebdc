"""Split a large reduction to a scalar into rows first, then the row results.

A kernel is divided among threads along its output's outermost dimension, and a reduction to a
scalar has none: `x.sum()` of a (8192, 8192) array ran on one thread at half the machine's
memory bandwidth. Reducing every dimension but the first, then the first, gives a row kernel
the threads divide and a small second kernel. The split depends only on the shape, never on
the thread count, so the result is the same bits on any machine size.
"""

from __future__ import annotations

from collections.abc import Sequence

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Instruction, Module, Value
from jitc.ir.symbolic import at_most, is_static
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import rebuild_module

# Below this many elements one thread finishes a reduction about as fast as two.
MIN_ELEMENTS = 1 << 20
# The first dimension must give the threads rows enough to share.
MIN_ROWS = 64


def _split(builder: Builder, inst: Instruction, operands: Sequence[Value]
           ) -> Sequence[Value] | None:
    if inst.op is not ops.REDUCE:
        return None
    t = inst.operands[0].type
    dims = sorted(inst.attrs["dims"])  # type: ignore[arg-type]
    # A symbolic extent keeps the one reduction: the split pays only for sizes known large.
    if t.rank < 2 or dims != list(range(t.rank)) or not is_static(t.size) or \
            at_most(t.size, MIN_ELEMENTS - 1) or at_most(t.shape[0], MIN_ROWS - 1) or \
            any(v.type.dtype is dtypes.float16 for v in operands):
        return None  # float16 row results would be rounded: kernels accumulate it in float32
    kind = inst.attrs["kind"]
    rows = builder.emit_multi(ops.REDUCE, operands,
                              {"dims": list(range(1, t.rank)), "kind": kind})
    return builder.emit_multi(ops.REDUCE, rows, {"dims": [0], "kind": kind},
                              [v.type for v in inst.results])


@module_pass("split_reductions")
def split_reductions(module: Module) -> Module:
    return rebuild_module(module, _split)


__all__ = ["split_reductions"]
