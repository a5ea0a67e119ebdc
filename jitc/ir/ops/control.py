"""Structured control flow: `while` and `conditional`, whose regions are functions of the module.

    %i2, %h2 = while(%i, %h) cond=@cond_0 body=@body_0 : i64[], f32[32,128]{1,0}
    %r = conditional(%index, %x) branches=[@neg_0, @pos_0] : f32[8]

A `while` carries a tuple of values: `cond` takes the carry and returns a `bool[]`, `body` takes
the carry and returns the next one (same types), as XLA's While. A `conditional` runs
`branches[index]` on the remaining operands (an index out of range runs the last branch, as
XLA's Conditional); every branch takes those operands and returns the results.

Regions take no values from the enclosing function: whatever they read is an operand (the
tracer passes values a body reads from outside as extra carries that the body returns
unchanged). So every pass that works function by function is correct on regions as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from jitc.ir import dtypes
from jitc.ir.opdef import (
    ANY_COUNT,
    VARIADIC,
    Attr,
    AttrKind,
    CallFunction,
    ControlFlow,
    IRTypeError,
    OpDef,
    Trait,
    register,
)
from jitc.ir.ops.rules import tensor
from jitc.ir.types import TensorType

Signature = Callable[[str], tuple[Sequence[TensorType], Sequence[TensorType]]]
INDEX_DTYPE = dtypes.by_name("i32")
PREDICATE_DTYPE = dtypes.by_name("bool")


def _listed(types: Sequence[TensorType]) -> str:
    return "(" + ", ".join(t.short() for t in types) + ")"


def _same(a: Sequence[TensorType], b: Sequence[TensorType]) -> bool:
    return len(a) == len(b) and all(x.same_shape_and_dtype(y) for x, y in zip(a, b))


def _unreachable_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                           results: Sequence[TensorType]) -> list[np.ndarray]:
    raise RuntimeError("control flow runs its regions: see OpDef.control")


# -- while ------------------------------------------------------------------------------------
def _while_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                declared: Sequence[TensorType] | None) -> list[TensorType]:
    return [tensor(t.dtype, t.shape) for t in types]


def _while_evaluate(attrs: Mapping[str, object], operands: Sequence[np.ndarray],
                    call: CallFunction) -> list[np.ndarray]:
    carry = list(operands)
    while True:
        (go,) = call(attrs["cond"], carry)  # type: ignore[arg-type]
        if not go:
            return carry
        carry = call(attrs["body"], carry)  # type: ignore[arg-type]


def _while_check(attrs: Mapping[str, object], operand_types: Sequence[TensorType],
                 result_types: Sequence[TensorType], signature: Signature) -> str | None:
    cond, body = attrs["cond"], attrs["body"]
    params, outs = signature(cond)  # type: ignore[arg-type]
    if not _same(params, operand_types):
        return (f"the condition @{cond} takes {_listed(params)}, the carry is "
                f"{_listed(operand_types)}")
    if len(outs) != 1 or outs[0].dtype is not PREDICATE_DTYPE or outs[0].shape != ():
        return f"the condition @{cond} returns {_listed(outs)}, not (bool[])"
    return _signature_mismatch("body", body, signature, operand_types,  # type: ignore[arg-type]
                               "the carry is", operand_types, "the carry is")


def _signature_mismatch(role: str, name: str, signature: Signature,
                        takes: Sequence[TensorType], takes_what: str,
                        returns: Sequence[TensorType], returns_what: str) -> str | None:
    """Why region `name` does not take `takes` and return `returns`, or None."""
    params, outs = signature(name)
    if not _same(params, takes):
        return f"the {role} @{name} takes {_listed(params)}, {takes_what} {_listed(takes)}"
    if not _same(outs, returns):
        return f"the {role} @{name} returns {_listed(outs)}, {returns_what} {_listed(returns)}"
    return None


WHILE = register(OpDef(
    "while", VARIADIC, _while_rule, _unreachable_reference,
    "runs `body` on the carried values while `cond` of them is true; results are the last carry",
    (Attr("cond", AttrKind.FUNCTION), Attr("body", AttrKind.FUNCTION)),
    frozenset({Trait.REGIONS}), ControlFlow(_while_evaluate, _while_check)))


# -- conditional ------------------------------------------------------------------------------
def _conditional_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                      declared: Sequence[TensorType] | None) -> list[TensorType]:
    if not types or types[0].dtype is not INDEX_DTYPE or types[0].shape != ():
        first = types[0].short() if types else "nothing"
        raise IRTypeError(f"conditional: the branch index must be i32[], got {first}")
    if not attrs["branches"]:
        raise IRTypeError("conditional needs at least one branch")
    if declared is None:
        raise IRTypeError("conditional needs its result types to be given")
    return [tensor(t.dtype, t.shape) for t in declared]


def branch_index(index: int, count: int) -> int:
    """The branch a run-time index selects: out-of-range indices run the last branch."""
    return index if 0 <= index < count else count - 1


def _conditional_evaluate(attrs: Mapping[str, object], operands: Sequence[np.ndarray],
                          call: CallFunction) -> list[np.ndarray]:
    branches = attrs["branches"]
    chosen = branches[branch_index(int(operands[0]), len(branches))]  # type: ignore
    return call(chosen, list(operands[1:]))


def _conditional_check(attrs: Mapping[str, object], operand_types: Sequence[TensorType],
                       result_types: Sequence[TensorType], signature: Signature) -> str | None:
    for name in attrs["branches"]:  # type: ignore[attr-defined]
        problem = _signature_mismatch("branch", name, signature, operand_types[1:],
                                      "the operands are", result_types, "the results are")
        if problem:
            return problem
    return None


CONDITIONAL = register(OpDef(
    "conditional", ANY_COUNT, _conditional_rule, _unreachable_reference,
    "runs branches[index] (the last one when out of range) on the other operands",
    (Attr("branches", AttrKind.FUNCTIONS),),
    frozenset({Trait.REGIONS, Trait.TYPED_RESULT}),
    ControlFlow(_conditional_evaluate, _conditional_check)))
