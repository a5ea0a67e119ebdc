"""hoist_steps: what a loop computes from loop-invariant values alone is computed once before
the loop, and what it computes from its step's row of a loop-invariant array alone is computed
for every row at once, before the loop.

Loop-invariant code: an op whose operands the loop does not change (weights, constants, values
computed from them) gives the same value every step. Trees of such ops that do work move out
(`np.exp(w)`, `w.T @ w`); trees that only move or re-type data (reshapes, broadcasts,
conversions, slices) stay, where fusion makes them free.

An RNN step `tanh(xs[t] @ wx + h @ wh + b)` multiplies one row of the input by `wx` per
iteration: a small matrix product that the loop cannot batch. The product does not depend on
anything the loop carries, only on `xs[t]`, so `(xs @ wx)[t]` is the same value, and one large
product before the loop is far faster than a thousand small ones (the unrolled program had the
same property, which dot_merger exploited). What moves is a tree of ops over one row
`dynamic_slice(x, i, 0, ...)` of a loop-invariant `x` (reshapes, elementwise ops with
loop-invariant or equally indexed operands, and matrix products with a loop-invariant right
side); inside the loop, its value becomes the row `i` of the precomputed array. Only trees that
contain a matrix product move: that is where batching pays for the extra memory.

The precomputed array holds a row for every row of `x` (dynamic_slice clamps `i` the same way
into both), so the result is the loop's own whatever `i` is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jitc.ir import ops
from jitc.ir.core import Builder, Function, Instruction, Literal, Module, Value
from jitc.ir.opdef import Trait
from jitc.ir.types import TensorType
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import copy_instruction, rebuild_function, remapped


@dataclass
class _Row:
    """A body value computed from row `index` of loop-invariant parameters only."""

    index: Value
    has_product: bool
    rows: int  # of the array the row is taken from


def _is_zero(value: Value) -> bool:
    producer = value.producer
    return (producer.op is ops.CONSTANT and value.type.shape == ()
            and producer.attrs["value"].array == 0)


# Ops that only move or re-type data: a loop-invariant tree of these alone stays in the loop,
# where fusion makes it free, rather than becoming an array the loop reads.
_MOVES = frozenset({"reshape", "broadcast_in_dim", "convert", "bitcast_convert", "slice"})


class _Analysis:
    """Which values of a while's body are rows (see _Row) or loop-invariant computations, and
    which of them to hoist (`roots`, in body order)."""

    def __init__(self, body: Function) -> None:
        params = body.parameters
        self.invariant = {id(p): n for n, p in enumerate(params) if body.outputs[n] is p}
        # Loop-invariant computed values -> whether their tree does work (see _MOVES).
        self.computed: dict[int, bool] = {}
        self.rows: dict[int, _Row] = {}
        for inst in body.body:
            if inst.op is ops.PARAMETER or not inst.operands:
                continue
            if (len(inst.results) == 1 and not inst.op.has(Trait.REGIONS)
                    and all(self.is_invariant(v) for v in inst.operands)):
                self.computed[id(inst.result)] = inst.op.name not in _MOVES or any(
                    self.computed.get(id(v), False) for v in inst.operands)
                continue
            row = self.row(inst)
            if row is not None:
                self.rows[id(inst.result)] = row
        users_outside: set[int] = set()
        for inst in body.body:
            if len(inst.results) == 1 and (id(inst.result) in self.rows
                                           or id(inst.result) in self.computed):
                continue
            users_outside.update(id(v) for v in inst.operands)
        users_outside.update(id(v) for v in body.outputs)
        self.roots = [inst.result for inst in body.body
                      if len(inst.results) == 1 and id(inst.result) in users_outside
                      and (self.computed.get(id(inst.result), False)
                           or (id(inst.result) in self.rows
                               and self.rows[id(inst.result)].has_product))]

    def is_invariant(self, value: Value) -> bool:
        return id(value) in self.invariant or id(value) in self.computed or (
            not value.producer.operands and value.producer.op is not ops.PARAMETER)

    def row(self, inst: Instruction) -> _Row | None:
        if len(inst.results) != 1:
            return None
        op, operands = inst.op, inst.operands
        if op is ops.DYNAMIC_SLICE:
            source, sizes = operands[0], inst.attrs["sizes"]
            if (self.is_invariant(source) and source.type.rank >= 1 and sizes[0] == 1
                    and list(sizes[1:]) == list(source.type.shape[1:])
                    and all(_is_zero(v) for v in operands[2:])):
                return _Row(operands[1], False, source.type.shape[0])
            return None
        rows = [self.rows.get(id(v)) for v in operands]
        indexed = [r for r in rows if r is not None]
        if not indexed or len({id(r.index) for r in indexed}) != 1:
            return None
        others = [v for v, r in zip(operands, rows) if r is None]
        if not all(self.is_invariant(v) for v in others):
            return None
        product = any(r.has_product for r in indexed)
        rank = inst.result.type.rank
        if op is ops.RESHAPE:
            return _Row(indexed[0].index, product, indexed[0].rows)
        if op is ops.DOT_GENERAL:
            attrs = inst.attrs
            if (rows[0] is None or rows[1] is not None or attrs["lhs_batch"]
                    or attrs["rhs_batch"]):
                return None
            return _Row(indexed[0].index, True, indexed[0].rows)
        # Batched, a row operand gains a leading dimension: it must not broadcast against
        # another one, and loop-invariant operands must broadcast from the right.
        if op.has(Trait.ELEMENTWISE) and all(
                v.type.rank == rank if r is not None else v.type.rank <= rank
                for v, r in zip(operands, rows)):
            return _Row(indexed[0].index, product, indexed[0].rows)
        return None


def _batched(inst: Instruction, operands: Sequence[Value], builder: Builder,
             rows: int) -> Value:
    """`inst` over all rows at once: its operands' batched forms have a leading dimension."""
    result = inst.result.type
    batched = TensorType(result.dtype, (rows, *result.shape))
    if inst.op in (ops.DYNAMIC_SLICE, ops.RESHAPE):  # a row of x, batched, is x
        return builder.emit(ops.RESHAPE, [operands[0]], {}, batched)
    attrs = dict(inst.attrs)
    if inst.op is ops.DOT_GENERAL:
        attrs["lhs_contract"] = [d + 1 for d in attrs["lhs_contract"]]
    return builder.emit(inst.op, operands, attrs, batched)


def _hoist(fn: Function, functions: dict[str, Function]) -> Function | None:
    plans = {}
    for inst in fn.body:
        if inst.op is ops.WHILE:
            analysis = _Analysis(functions[inst.attrs["body"]])
            if analysis.roots:
                plans[id(inst)] = analysis
    if not plans:
        return None

    def transform(builder: Builder, inst: Instruction, operands: Sequence[Value]
                  ) -> Sequence[Value] | None:
        analysis = plans.get(id(inst))
        if analysis is None:
            return None
        body = functions[inst.attrs["body"]]
        batched: dict[int, Value] = {}

        def outside(value: Value) -> Value:
            """The value in `fn`, all rows at once for a row, else the loop-invariant one."""
            if id(value) in batched:
                return batched[id(value)]
            producer = value.producer
            if id(value) in analysis.invariant:
                out = operands[analysis.invariant[id(value)]]
            elif id(value) not in analysis.rows:  # a constant or a loop-invariant computation
                out = copy_instruction(builder, producer,
                                       [outside(v) for v in producer.operands])[value.index]
            else:  # a row value; a dynamic_slice's batched form reads its source alone
                reads = producer.operands[:1] if producer.op is ops.DYNAMIC_SLICE \
                    else producer.operands
                out = _batched(producer, [outside(v) for v in reads], builder,
                               analysis.rows[id(value)].rows)
            batched[id(value)] = out
            return out

        extra = [outside(root) for root in analysis.roots]
        cond = _with_parameters(functions[inst.attrs["cond"]], [v.type for v in extra])
        new_body = _body_reading_rows(body, analysis, [v.type for v in extra])
        functions[cond.name], functions[new_body.name] = cond, new_body
        results = builder.emit_multi(ops.WHILE, [*operands, *extra], inst.attrs,
                                     [*(v.type for v in inst.results), *(v.type for v in extra)])
        return results[:len(inst.results)]

    new, _ = rebuild_function(fn, transform)
    return new


def _with_parameters(fn: Function, types: Sequence[TensorType]) -> Function:
    """`fn` taking (and, for a body, returning unchanged) more parameters after its own."""
    first = len(fn.parameters)
    extra = [Instruction(ops.PARAMETER, [], {"index": first + n}, [t])
             for n, t in enumerate(types)]
    body = fn.body[:first] + extra + fn.body[first:]
    return Function(fn.name, body, list(fn.outputs))


def _body_reading_rows(body: Function, analysis: _Analysis,
                       types: Sequence[TensorType]) -> Function:
    """The body with each hoisted root replaced by its row of the precomputed array, which
    arrives as an extra parameter (returned unchanged)."""
    widened = _with_parameters(body, types)
    first = len(body.parameters)
    arrays = {id(root): widened.body[first + n].result for n, root in enumerate(analysis.roots)}
    builder = Builder(Function(body.name))
    mapping: dict[int, Value] = {}
    for inst in widened.body:
        root = inst.results[0] if inst.results else None
        if root is None or id(root) not in arrays:
            builder.function.body.append(inst)
            continue
        if id(root) in analysis.computed:
            mapping[id(root)] = arrays[id(root)]  # computed once before the loop
            continue
        index = analysis.rows[id(root)].index
        zero = builder.emit(ops.CONSTANT, [], {"value": _zero_like(index)})
        piece = builder.emit(ops.DYNAMIC_SLICE, [arrays[id(root)], index] + [zero] * root.type.rank,
                             {"sizes": [1, *root.type.shape]})
        mapping[id(root)] = builder.emit(ops.RESHAPE, [piece], {}, root.type)
    outputs = [*widened.outputs, *(widened.body[first + n].result for n in range(len(types)))]
    return Function(body.name, remapped(builder.function.body, mapping),
                    [mapping.get(id(v), v) for v in outputs])


def _zero_like(value: Value) -> Literal:
    return Literal(0, value.type.dtype)


@module_pass("hoist_steps")
def hoist_steps(module: Module) -> Module:
    functions = dict(module.functions)
    changed = False
    for name in list(functions):
        new = _hoist(functions[name], functions)
        if new is not None:
            functions[name] = new
            changed = True
    if not changed:
        return module
    return Module(functions.values(), module.entry_name)
