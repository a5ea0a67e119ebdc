"""Broadcasting legalization: make numpy's implicit broadcasting explicit.

After this pass every operand of an elementwise op has exactly the result's shape: rank
promotion and size-1 expansion become `broadcast_in_dim`, scalars included, as in XLA.
"""

from __future__ import annotations

from collections.abc import Sequence

from jitc.ir import ops
from jitc.ir.core import Builder, Instruction, Module, Value
from jitc.ir.opdef import Trait
from jitc.ir.types import TensorType
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import rebuild_module


def broadcast_to(builder: Builder, value: Value, shape: tuple[int, ...]) -> Value:
    """`value` broadcast numpy-style (aligned at the trailing dimensions) to `shape`."""
    if value.type.shape == shape:
        return value
    offset = len(shape) - value.type.rank
    dims = list(range(offset, len(shape)))
    return builder.emit(ops.BROADCAST_IN_DIM, [value], {"dims": dims},
                        TensorType(value.type.dtype, shape))


def _legalize(builder: Builder, inst: Instruction,
              operands: Sequence[Value]) -> Sequence[Value] | None:
    if not inst.op.has(Trait.BROADCASTS):
        return None
    shape = inst.results[0].type.shape
    if all(v.type.shape == shape for v in operands):
        return None
    expanded = [broadcast_to(builder, v, shape) for v in operands]
    return builder.emit_multi(inst.op, expanded, inst.attrs, [v.type for v in inst.results],
                              name_hints=[v.name_hint for v in inst.results])


@module_pass("legalize_broadcast")
def legalize_broadcast(module: Module) -> Module:
    return rebuild_module(module, _legalize)
