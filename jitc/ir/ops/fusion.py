"""The fusion op: a kernel made of several ops, whose body is a function of the module.

`%r = fusion(%a, %b) kind=loop calls=@fused_0 : f32[64,128]` runs `@fused_0` on its operands.
The body's parameters are the operands, in order; its outputs are the results. The kind tells
a backend which kernel template computes the body in one pass over memory:

- loop: elementwise-style roots of one shape, computed element by element;
- row: reductions over the trailing dimensions of one shape plus elementwise ops on the rows
  and on the reduced values, computed one row at a time (softmax, layernorm);
- reduce: one reduction (any dimensions) with its elementwise producers folded in;
- dot: a dot_general or convolution with an elementwise epilogue on its result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jitc.ir.opdef import ANY_COUNT, Attr, AttrKind, IRTypeError, OpDef, Trait, register
from jitc.ir.ops.rules import tensor
from jitc.ir.types import TensorType

FUSION_KINDS = ("loop", "row", "reduce", "dot")


def _fusion_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                 declared: Sequence[TensorType] | None) -> list[TensorType]:
    if not declared:
        raise IRTypeError("fusion needs its result types to be given")
    # The body decides the types; the verifier checks them against it.
    return [tensor(t.dtype, t.shape) for t in declared]


def _fusion_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                      results: Sequence[TensorType]) -> list[np.ndarray]:
    raise RuntimeError("a fusion is evaluated by running its body function")


FUSION = register(OpDef(
    "fusion", ANY_COUNT, _fusion_rule, _fusion_reference,
    "runs the body function `calls` on the operands as one kernel of the given kind",
    (Attr("kind", AttrKind.ENUM, choices=FUSION_KINDS), Attr("calls", AttrKind.FUNCTION)),
    frozenset({Trait.TYPED_RESULT, Trait.CALLS})))
