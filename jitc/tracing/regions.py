"""Tracing a Python function once into a region: a function of the module that a control flow op
(`while`, `conditional`) runs.

A region is traced in a trace of its own, pushed on the trace stack, so that every op the
function emits lands in the region; its parameters are tracers for the carried values. Values of
the enclosing traces that the function reads (weights, captured arrays, loop bounds) are not
defined in the region: `close_over` turns each into an extra parameter, and the control flow op
passes them in as extra operands. A region nested in a region reads values two levels up the
same way: the inner op's operands are free in the middle region, which closes over them in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.core import Function, Instruction, Value
from jitc.ir.types import TensorType
from jitc.tracing import pytree
from jitc.tracing.errors import TraceError, located
from jitc.tracing.state import TraceState, current_trace, trace_stack
from jitc.tracing.tracer import Tracer


def is_leaf(x: object) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float))


def leaf_type(leaf: object) -> TensorType:
    """The type a carried leaf has: a tracer's own, numpy's default for Python scalars."""
    if isinstance(leaf, Tracer):
        return leaf.value.type
    array = np.asarray(leaf)
    try:
        return TensorType(dtypes.from_numpy(array.dtype), array.shape)
    except (TypeError, ValueError):
        raise TraceError(located(f"a {type(leaf).__name__} cannot be carried through "
                                 "jitc.lax control flow; carry arrays and scalars")) from None


def as_value(state: TraceState, leaf: object, type_: TensorType | None = None) -> Value:
    """A leaf as a value of `state`'s function (a constant unless it is a tracer)."""
    if isinstance(leaf, Tracer):
        return leaf.value
    dtype = None if type_ is None else type_.dtype.numpy
    array = np.asarray(leaf, dtype=dtype)
    return state.constant(array, dtypes.from_numpy(array.dtype)).value


@dataclass
class Region:
    """A traced function: its trace, the raw leaves it returned and their structure."""

    state: TraceState
    num_parameters: int
    leaves: list[Any]
    tree: pytree.TreeDef
    free: list[Value] = field(default_factory=list)


def trace_region(kind: str, fun: Callable[..., Any], arg_types: Sequence[TensorType],
                 arg_tree: pytree.TreeDef, what: str) -> Region:
    """Run `fun` once on tracers of `arg_types` (unflattened by `arg_tree` into positional
    arguments) in a fresh trace; its function joins the trace's regions, named after `kind`."""
    parent = current_trace()
    assert parent is not None
    root = parent.regions[0].name if parent.regions else parent.function.name
    state = TraceState(f"{root}.{kind}{len(parent.regions)}", parent.user_function_name)
    if not parent.regions:
        parent.regions.append(parent.function)  # the root function holds the count's origin
    state.regions = parent.regions
    state.regions.append(state.function)
    state.captured = parent.captured
    state.specializable = parent.specializable
    state.obstacles = parent.obstacles
    params = []
    for index, type_ in enumerate(arg_types):
        value = state.builder.emit(ops.PARAMETER, [], {"index": index}, type_)
        params.append(Tracer(state, value))
    args = pytree.unflatten(arg_tree, params)
    stack = trace_stack()
    stack.append(state)
    try:
        out = fun(*args)
    finally:
        stack.pop()
    leaves, tree = pytree.flatten(out, is_leaf)
    for leaf in leaves:
        if not is_leaf(leaf) or isinstance(leaf, (str, bytes)):
            raise TraceError(located(f"{what} returned a {type(leaf).__name__}; it must return "
                                     "arrays and scalars (in tuples, lists or dicts)"))
    return Region(state, len(arg_types), leaves, tree)


def discard(region: Region) -> None:
    """Drop a region traced only to learn its output types."""
    region.state.regions.remove(region.state.function)


def set_outputs(region: Region, types: Sequence[TensorType] | None = None) -> None:
    """Make the region's leaves its outputs (converted to `types` where they are constants) and
    note the values it reads from enclosing traces."""
    fn = region.state.function
    fn.outputs = [as_value(region.state, leaf, None if types is None else types[n])
                  for n, leaf in enumerate(region.leaves)]
    defined = {id(v) for inst in fn.body for v in inst.results}
    seen: set[int] = set()
    for value in [v for inst in fn.body for v in inst.operands] + fn.outputs:
        if id(value) not in defined and id(value) not in seen:
            seen.add(id(value))
            region.free.append(value)


def union_of_free(regions: Sequence[Region]) -> list[Value]:
    seen: set[int] = set()
    union = []
    for region in regions:
        for value in region.free:
            if id(value) not in seen:
                seen.add(id(value))
                union.append(value)
    return union


def close_over(region: Region, free: Sequence[Value], pass_through: bool = False) -> Function:
    """The region's function with a parameter for each of `free` after its own (used in place
    of those outer values); with `pass_through` it also returns them unchanged, as a loop body
    returns values carried only to be read."""
    fn = region.state.function
    replacement: dict[int, Value] = {}
    new_params: list[Instruction] = []
    for k, value in enumerate(free):
        inst = Instruction(ops.PARAMETER, [], {"index": region.num_parameters + k},
                           [value.type], name_hints=[value.name_hint])
        new_params.append(inst)
        replacement[id(value)] = inst.result
    for inst in fn.body:
        if any(id(v) in replacement for v in inst.operands):
            inst.operands = tuple(replacement.get(id(v), v) for v in inst.operands)
    fn.outputs = [replacement.get(id(v), v) for v in fn.outputs]
    fn.body[region.num_parameters:region.num_parameters] = new_params
    if pass_through:
        fn.outputs += [inst.result for inst in new_params]
    return fn
