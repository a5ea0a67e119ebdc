"""Integer scalars of a trace as affine forms `sum(coefficient * atom) + constant`.

`x[t:t + L]` and `x[i * L:(i + 1) * L]` have a length known at trace time although both
bounds are traced: the difference of the bounds' affine forms has no atoms left.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jitc.ir import ops
from jitc.ir.core import Value
from jitc.tracing.tracer import Tracer

Form = tuple[dict[Value, int], int]

_MAX_DEPTH = 32


def static_difference(stop: Any, start: Any) -> int | None:
    """`stop - start` when it does not depend on traced values, else None."""
    high, low = _form_of(stop), _form_of(start)
    if high is None or low is None:
        return None
    atoms = dict(high[0])
    for atom, coefficient in low[0].items():
        atoms[atom] = atoms.get(atom, 0) - coefficient
    if any(atoms.values()):
        return None
    return high[1] - low[1]


def _form_of(x: Any) -> Form | None:
    if isinstance(x, Tracer):
        if x.ndim != 0 or x.dtype.kind not in "iu":
            return None
        return _form(x.value, 0)
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return {}, int(x)
    return None


def _form(value: Value, depth: int) -> Form:
    instruction = value.producer
    op = instruction.op
    args = instruction.operands
    if depth < _MAX_DEPTH and value.type.rank == 0:
        if op is ops.CONSTANT:
            return {}, int(instruction.attrs["value"].array)
        if op in (ops.CONVERT, ops.RESHAPE, ops.BROADCAST_IN_DIM) and \
                args[0].type.rank == 0 and args[0].type.dtype.is_int:
            return _form(args[0], depth + 1)
        if op is ops.NEG:
            return _scaled(_form(args[0], depth + 1), -1)
        if op in (ops.ADD, ops.SUB) and all(a.type.rank == 0 for a in args):
            sign = 1 if op is ops.ADD else -1
            return _sum(_form(args[0], depth + 1), _scaled(_form(args[1], depth + 1), sign))
        if op is ops.MUL and all(a.type.rank == 0 for a in args):
            left, right = _form(args[0], depth + 1), _form(args[1], depth + 1)
            if not left[0]:
                return _scaled(right, left[1])
            if not right[0]:
                return _scaled(left, right[1])
    return {value: 1}, 0


def _scaled(form: Form, factor: int) -> Form:
    return {atom: c * factor for atom, c in form[0].items()}, form[1] * factor


def _sum(a: Form, b: Form) -> Form:
    atoms = dict(a[0])
    for atom, coefficient in b[0].items():
        atoms[atom] = atoms.get(atom, 0) + coefficient
    return atoms, a[1] + b[1]
