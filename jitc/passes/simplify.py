"""Algebraic simplification: local rewrites that keep every result bit for bit.

Each rule is a small function registered for the ops it applies to (`RULES`, keyed by OpDef); an
op without rules is copied unchanged. A rule sees the builder of the new function, the old
instruction and its operands in the new function. It returns the values that replace the
instruction's results, or None. Its replacement is kept only when it has exactly the old result
types (layouts included): otherwise, as when an identity's operand is smaller than the result in
IR whose broadcasting is still implicit, the rule does not fire. So the pass is correct before and
after broadcasting legalization. Floating-point rules are exact: `x * 0` is not `0` (nan, inf,
-0.0), and `x + 0.0` is not `x` (-0.0 + 0.0 is +0.0), while `x + -0.0` is. The one rule that can
change a bit is `pow(x, 2) -> x * x`, towards the correctly rounded square, where numpy's pow (the
reference) is not correctly rounded. docs/passes.md lists the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Function, Instruction, Module, Value
from jitc.ir.dtypes import DType, Kind
from jitc.ir.opdef import IRTypeError, OpDef
from jitc.ir.symbolic import at_most
from jitc.passes.fold import (
    TINY,
    constant_array,
    is_splat_of,
    make_constant,
    make_splat,
    splat_value,
)
from jitc.passes.pipeline import module_pass
from jitc.passes.rewrite import rebuild_function
from jitc.passes.update_chains import UpdateChains, constant_starts

Replacement = Value | Sequence[Value] | None
Rule = Callable[[Builder, Instruction, Sequence[Value]], Replacement]

RULES: dict[OpDef, list[Rule]] = {}
NO_RULES: list[Rule] = []


def rule(*op_defs: OpDef) -> Callable[[Rule], Rule]:
    """Decorator: register a rule for the given ops, tried in the order of registration."""
    def register(fn: Rule) -> Rule:
        for op in op_defs:
            RULES.setdefault(op, []).append(fn)
        return fn
    return register


def _producer(value: Value, op: OpDef) -> Instruction | None:
    """The instruction that defines `value` when it is an `op`, else None."""
    return value.producer if value.producer.op is op else None


def _is_zero(value: Value, sign: int) -> bool:
    """A splat of zero; for floats only the zero of `sign` (-1 or +1) counts."""
    scalar = splat_value(value)
    if scalar is None or scalar != 0:
        return False
    return scalar.dtype.kind != "f" or bool(np.signbit(scalar)) == (sign < 0)


# --- arithmetic identities ---------------------------------------------------------------------

@rule(ops.ADD)
def add_zero(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x, y = operands
    if _is_zero(y, -1):
        return x
    return y if _is_zero(x, -1) else None


@rule(ops.SUB)
def sub_zero(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x, y = operands
    return x if _is_zero(y, +1) else None


@rule(ops.MUL)
def mul_one(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x, y = operands
    if is_splat_of(y, 1):
        return x
    return y if is_splat_of(x, 1) else None


@rule(ops.MUL)
def mul_zero_int(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    result = inst.result
    if not result.type.dtype.is_int or not any(is_splat_of(v, 0) for v in operands):
        return None
    return make_splat(b, np.zeros((), result.type.dtype.numpy), result.type, result.name_hint)


@rule(ops.DIV)
def div_one(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x, y = operands
    return x if is_splat_of(y, 1) else None


def exact_reciprocal(scalar: np.ndarray) -> np.ndarray | None:
    """1/c when c is a power of two whose reciprocal the dtype holds exactly, else None: then
    x / c and x * (1/c) round the same exact value, so they agree for every x."""
    mantissa, exponent = np.frexp(np.float64(scalar))
    if abs(mantissa) != 0.5:  # zero, inf and nan have another mantissa
        return None
    with np.errstate(over="ignore", under="ignore"):
        wanted = np.ldexp(np.copysign(1.0, mantissa), 1 - int(exponent))
        reciprocal = np.asarray(wanted).astype(scalar.dtype)
    if not np.isfinite(reciprocal) or reciprocal == 0 or np.float64(reciprocal) != wanted:
        return None
    return reciprocal


@rule(ops.DIV)
def div_by_power_of_two(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x, y = operands
    scalar = splat_value(y)
    if scalar is None or scalar.dtype.kind != "f":
        return None
    reciprocal = exact_reciprocal(scalar)
    if reciprocal is None:
        return None
    return b.emit(ops.MUL, [x, make_splat(b, reciprocal, y.type)], {}, inst.result.type,
                  name_hint=inst.result.name_hint)


@rule(ops.POW)
def pow_small(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x, y = operands
    if is_splat_of(y, 1):
        return x
    if is_splat_of(y, 2) and x.type == inst.result.type:
        return b.emit(ops.MUL, [x, x], {}, inst.result.type, name_hint=inst.result.name_hint)
    return None


@rule(ops.NEG, ops.NOT)
def involution(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    inner = _producer(operands[0], inst.op)
    return inner.operands[0] if inner is not None else None


@rule(ops.MAX, ops.MIN, ops.AND, ops.OR)
def idempotent(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x, y = operands
    return x if x is y else None


# --- select ------------------------------------------------------------------------------------

@rule(ops.SELECT)
def select_known(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    pred, on_true, on_false = operands
    if on_true is on_false:
        return on_true
    scalar = splat_value(pred)
    if scalar is None:
        return None
    return on_true if bool(scalar) else on_false


# --- conversions -------------------------------------------------------------------------------

def _value_bits(dtype: DType) -> int:
    """Bits of magnitude an integer dtype holds (without its sign)."""
    return dtype.bits - 1 if dtype.kind is Kind.SIGNED else dtype.bits


def exact_widening(source: DType, target: DType) -> bool:
    """Whether converting `source` to `target` keeps every value exactly (nan and -0.0 too)."""
    if source is target or source.is_bool:
        return True
    if target.is_bool:
        return False
    if source.is_complex or target.is_complex:  # part by part; complex to real is not exact
        return source.is_complex <= target.is_complex and \
            exact_widening(dtypes.real_part(source), dtypes.real_part(target))
    if source.is_float:
        return target.is_float and target.bits > source.bits
    if target.is_float:
        return _value_bits(source) <= np.finfo(target.numpy).nmant + 1
    if source.kind is Kind.SIGNED and target.kind is Kind.UNSIGNED:
        return False
    return _value_bits(source) <= _value_bits(target)


@rule(ops.CONVERT)
def convert_same_type(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    return operands[0]  # kept only when it already has the result type


@rule(ops.CONVERT)
def convert_after_widening(b: Builder, inst: Instruction,
                           operands: Sequence[Value]) -> Replacement:
    inner = _producer(operands[0], ops.CONVERT)
    if inner is None:
        return None
    x = inner.operands[0]
    if not exact_widening(x.type.dtype, operands[0].type.dtype):
        return None
    # Converting the widened copy gives what converting the original gives: the values agree.
    if x.type == inst.result.type:
        return x
    return b.emit(ops.CONVERT, [x], {}, inst.result.type, name_hint=inst.result.name_hint)


# --- shapes ------------------------------------------------------------------------------------

def _is_identity(permutation: Sequence[int]) -> bool:
    return list(permutation) == list(range(len(permutation)))


@rule(ops.TRANSPOSE)
def transpose_identity(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    return operands[0] if _is_identity(inst.attrs["permutation"]) else None


@rule(ops.TRANSPOSE)
def transpose_of_transpose(b: Builder, inst: Instruction,
                           operands: Sequence[Value]) -> Replacement:
    inner = _producer(operands[0], ops.TRANSPOSE)
    if inner is None:
        return None
    first, second = inner.attrs["permutation"], inst.attrs["permutation"]
    permutation = [first[p] for p in second]
    x = inner.operands[0]
    if _is_identity(permutation):
        return x
    return b.emit(ops.TRANSPOSE, [x], {"permutation": permutation}, inst.result.type,
                  name_hint=inst.result.name_hint)


@rule(ops.RESHAPE)
def reshape_same_shape(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    return operands[0]  # kept only when it already has the result type


@rule(ops.RESHAPE)
def reshape_of_reshape(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    inner = _producer(operands[0], ops.RESHAPE)
    if inner is None:
        return None
    if inner.operands[0].type == inst.result.type:
        return inner.operands[0]
    return b.emit(ops.RESHAPE, [inner.operands[0]], {}, inst.result.type,
                  name_hint=inst.result.name_hint)


@rule(ops.BROADCAST_IN_DIM)
def broadcast_identity(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    return operands[0] if _is_identity(inst.attrs["dims"]) else None


@rule(ops.BROADCAST_IN_DIM)
def broadcast_of_broadcast(b: Builder, inst: Instruction,
                           operands: Sequence[Value]) -> Replacement:
    inner = _producer(operands[0], ops.BROADCAST_IN_DIM)
    if inner is None:
        return None
    # Operand dimension i went to dims[i] of the middle value, which went to outer[dims[i]].
    outer = inst.attrs["dims"]
    dims = [outer[d] for d in inner.attrs["dims"]]
    x = inner.operands[0]
    if _is_identity(dims) and x.type == inst.result.type:
        return x
    return b.emit(ops.BROADCAST_IN_DIM, [x], {"dims": dims}, inst.result.type,
                  name_hint=inst.result.name_hint)


@rule(ops.BROADCAST_IN_DIM)
def broadcast_tiny_constant(b: Builder, inst: Instruction,
                            operands: Sequence[Value]) -> Replacement:
    result = inst.result
    if not at_most(result.type.size, TINY):
        return None
    array = constant_array(result)
    if array is None:
        return None
    return make_constant(b, array, result.type, result.name_hint)


@rule(ops.SLICE)
def slice_everything(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x = operands[0]
    starts, limits, strides = inst.attrs["start"], inst.attrs["limit"], inst.attrs["stride"]
    whole = (all(s == 0 for s in starts) and tuple(limits) == x.type.shape
             and all(s == 1 for s in strides))
    return x if whole else None


@rule(ops.PAD)
def pad_nothing(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    amounts = (*inst.attrs["low"], *inst.attrs["high"], *inst.attrs["interior"])
    return operands[0] if all(n == 0 for n in amounts) else None


@rule(ops.REVERSE)
def reverse_trivial_dims(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    x = operands[0]
    dims = inst.attrs["dims"]
    kept = [d for d in dims if not at_most(x.type.shape[d], 1)]
    if not kept:
        return x
    if len(kept) == len(dims):
        return None
    return b.emit(ops.REVERSE, [x], {"dims": kept}, inst.result.type,
                  name_hint=inst.result.name_hint)


@rule(ops.CONCATENATE)
def concatenate_one(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    return operands[0] if len(operands) == 1 else None


@rule(ops.REDUCE)
def reduce_no_dims(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    if inst.attrs["dims"]:
        return None
    # A sum starts from +0.0, so a float sum of one element -0.0 is +0.0, not the element.
    if inst.attrs["kind"] == "sum" and any(v.type.dtype.is_float for v in operands):
        return None
    return operands


# --- writes ------------------------------------------------------------------------------------
# Chains of dynamic_update_slice at constant starts (a row-by-row fill) are joined by
# jitc/passes/update_chains.py, which needs to see the whole function.


@rule(ops.DYNAMIC_UPDATE_SLICE)
def update_whole(b: Builder, inst: Instruction, operands: Sequence[Value]) -> Replacement:
    operand, update = operands[0], operands[1]
    starts = constant_starts(operands[2:])
    if starts is None or update.type.shape != operand.type.shape or any(starts):
        return None
    return update


# --- the pass ----------------------------------------------------------------------------------

def _simplify(builder: Builder, inst: Instruction,
              operands: Sequence[Value]) -> Sequence[Value] | None:
    body = builder.function.body
    for fn in RULES.get(inst.op, NO_RULES):
        mark = len(body)
        try:
            replacement = fn(builder, inst, operands)
        except IRTypeError:
            # A rewrite that the op table rejects, such as a shape that only implicit
            # broadcasting made valid: the rule does not apply here.
            replacement = None
        if replacement is not None:
            values = (replacement,) if isinstance(replacement, Value) else tuple(replacement)
            if [v.type for v in values] == [v.type for v in inst.results]:
                return values
        del body[mark:]  # what a rejected rule built is unused
    return None


def _simplify_function(fn: Function) -> tuple[Function, bool]:
    chains = UpdateChains(fn)

    def transform(builder: Builder, inst: Instruction,
                  operands: Sequence[Value]) -> Sequence[Value] | None:
        replacement = _simplify(builder, inst, operands)
        if replacement is None and inst.op is ops.DYNAMIC_UPDATE_SLICE:
            return chains.rewrite(builder, inst, operands)
        return replacement

    return rebuild_function(fn, transform)


@module_pass("simplify")
def simplify(module: Module) -> Module:
    functions, changed = [], False
    for fn in module.functions.values():
        new, fn_changed = _simplify_function(fn)
        functions.append(new if fn_changed else fn)
        changed |= fn_changed
    return Module(functions, module.entry_name) if changed else module
