"""The C dispatcher's view of a symbolic signature (runtime/dispatcher.c, `Dispatcher`), shared
by the backends whose symbolic calls it dispatches (cpu and c).

Each argument dimension is either its fixed extent or a key slot, written -1 - slot: a symbol
standing alone has one slot wherever it stands (the dispatcher binds it from its first
occurrence and checks the others equal), any other expression (`n-1`) a slot of its own. The
slots' values decide the call's shapes; the backend's binder turns a key it has not seen into a
`Binding`, or None when the constraints refuse those shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jitc.ir import symbolic
from jitc.ir.types import TensorType

# A binding as the C dispatcher takes it: symbol values, result shapes, workspace bytes.
Binding = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], int]


def key_specs(types: Sequence[TensorType]) -> tuple[list[tuple[int, tuple[int, ...]]], int]:
    """The C dispatcher's argument specs of a symbolic signature, and its number of key slots:
    a fixed extent stays, a symbolic one is -1 - its slot."""
    slots: dict[str, int] = {}
    count = 0
    specs = []
    for type_ in types:
        dims = []
        for dim in type_.shape:
            if symbolic.is_static(dim):
                dims.append(int(dim))
                continue
            name = symbolic.symbol_name(dim)
            if name is None or name not in slots:
                slot = count
                count += 1
                if name is not None:
                    slots[name] = slot
            else:
                slot = slots[name]
            dims.append(-1 - slot)
        specs.append((np.dtype(type_.dtype.numpy).num, tuple(dims)))
    return specs, count


