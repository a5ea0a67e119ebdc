"""What a call's argument values must satisfy beyond their signature.

A signature fixes shapes and dtypes; some of numpy's rules depend on values as well. A Python
int argument is traced as a weakly typed int64 and converted to the dtype of the array it
meets (NEP 50), where numpy raises OverflowError when the value does not fit: a call checks
each such argument against the narrowest integer dtype the function converts it to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jitc.ir import ops
from jitc.ir.core import Location, Module
from jitc.tracing.errors import where

_INT64 = np.iinfo(np.int64)

# ndarray subclasses that behave as plain arrays under every numpy operation (a memmap only
# says where the data lives); any other subclass may redefine operators or ufuncs.
PLAIN_ARRAY_TYPES = (np.ndarray, np.memmap)

_SUBCLASS_FIXES = {
    np.ma.MaskedArray: "pass x.filled(value) (or np.asarray(x) to ignore the mask) and carry "
                       "the mask as an array of its own",
    np.matrix: "pass np.asarray(x) and write matrix products with @",
}


@dataclass(frozen=True)
class IntBound:
    """A Python int parameter converted to a narrower integer dtype at `loc`."""

    index: int
    name: str
    dtype: np.dtype
    loc: Location | None


def python_int_bounds(module: Module, weak_ints: Sequence[int]) -> tuple[IntBound, ...]:
    """The integer dtypes the traced `module` converts its Python int parameters (`weak_ints`,
    by index) to, where they are narrower than int64."""
    fn = module.entry
    params = {id(fn.parameters[i]): i for i in weak_ints if i < len(fn.parameters)}
    bounds = []
    for inst in fn.body:
        if inst.op is not ops.CONVERT or id(inst.operands[0]) not in params:
            continue
        dtype = np.dtype(inst.results[0].type.dtype.numpy)
        if dtype.kind in "iu" and dtype != np.int64:
            index = params[id(inst.operands[0])]
            name = fn.parameters[index].name_hint or f"argument {index}"
            bounds.append(IntBound(index, name, dtype, inst.loc))
    return tuple(bounds)


def check_python_ints(function: str, leaves: Sequence[object],
                      bounds: Sequence[IntBound]) -> None:
    """numpy's OverflowError for a Python int argument out of bounds of the dtype it meets."""
    for bound in bounds:
        value = leaves[bound.index]
        info = np.iinfo(bound.dtype)
        if isinstance(value, int) and not info.min <= value <= info.max:
            raise OverflowError(
                f"{function}: argument {bound.name}: Python integer {value} out of bounds for "
                f"{bound.dtype}\n{where(bound.loc).rstrip()}\nThere it meets an array of "
                f"{bound.dtype} and takes that dtype (NEP 50), as in numpy. Convert the array "
                "to a dtype that holds the value (e.g. x.astype(np.int64)).")


def check_plain_array(value: np.ndarray, argument: str) -> None:
    """Refuse an ndarray subclass whose operations differ from a plain array's: jitc would
    compute as on its plain data (a masked array would lose its mask)."""
    kind = type(value)
    if kind in PLAIN_ARRAY_TYPES:
        return
    fix = next((text for base, text in _SUBCLASS_FIXES.items() if issubclass(kind, base)),
               "pass np.asarray(x), if the plain array's semantics are what you want")
    raise TypeError(f"{argument}: {kind.__module__}.{kind.__qualname__} is a subclass of "
                    "numpy.ndarray whose operations differ from a plain array's; jitc computes "
                    f"only with plain arrays: {fix}.")


def check_int64(value: int, argument: str) -> None:
    """A Python int argument is traced as an int64: one beyond it cannot be passed."""
    if not _INT64.min <= value <= _INT64.max:
        raise OverflowError(
            f"{argument}: Python integer {value} out of bounds for int64, the dtype jitc gives "
            "a Python int argument. Pass it as a float (float(value)), or make the argument "
            "static with static_argnums/static_argnames.")
