"""Where every IR value lives while a compiled function runs.

Slots of the frame a compiled entry function works on, in order: the caller's arguments, the
caller's result buffers, array constants (passed by pointer, never baked into code), and
temporaries carved out of one workspace arena whose size is known at compile time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jitc.ir.core import Function, Value

ALIGNMENT = 64


def _aligned(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


@dataclass
class BufferPlan:
    num_args: int
    num_outputs: int
    constants: list[np.ndarray] = field(default_factory=list)
    slots: dict[int, int] = field(default_factory=dict)          # id(Value) -> frame slot
    temp_offsets: dict[int, int] = field(default_factory=dict)   # frame slot -> arena offset
    workspace_bytes: int = 0
    copies: list[tuple[Value, int]] = field(default_factory=list)  # (source, output slot)

    @property
    def num_slots(self) -> int:
        return self.num_args + self.num_outputs + len(self.constants) + len(self.temp_offsets)

    def slot(self, value: Value) -> int | None:
        return self.slots.get(id(value))


def is_inline_constant(value: Value) -> bool:
    return value.producer.op.name == "constant" and value.type.size == 1


def plan_buffers(fn: Function) -> BufferPlan:
    """Materialise every value except scalar constants; outputs are written in place."""
    params = fn.parameters
    plan = BufferPlan(len(params), len(fn.outputs))
    for i, p in enumerate(params):
        plan.slots[id(p)] = i
    output_base = plan.num_args
    for n, value in enumerate(fn.outputs):
        slot = output_base + n
        producer = value.producer.op.name
        if id(value) in plan.slots or producer in ("parameter", "constant"):
            plan.copies.append((value, slot))
        else:
            plan.slots[id(value)] = slot
    next_slot = plan.num_args + plan.num_outputs
    for inst in fn.body:
        if inst.op.name == "constant" and not is_inline_constant(inst.result):
            plan.constants.append(inst.attrs["value"].array)  # type: ignore[attr-defined]
            plan.slots[id(inst.result)] = next_slot
            next_slot += 1
    offset = 0
    for inst in fn.body:
        if inst.op.name in ("parameter", "constant"):
            continue
        for value in inst.results:
            if id(value) in plan.slots:
                continue
            plan.slots[id(value)] = next_slot
            plan.temp_offsets[next_slot] = offset
            offset += _aligned(max(value.type.nbytes, 1))
            next_slot += 1
    plan.workspace_bytes = offset
    return plan
