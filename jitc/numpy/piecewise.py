"""Functions defined piece by piece: select (the first true condition picks the choice) and
sinc (sin(pi x) / (pi x), with numpy's stand-in at zero)."""

from __future__ import annotations

import numpy as np

from jitc.numpy._core import implements, is_python_scalar, lift, result_type
from jitc.numpy.shapes import broadcast_to
from jitc.tracing.errors import located


@implements(np.select)
def select(condlist, choicelist, default=0):
    if len(condlist) != len(choicelist):
        raise ValueError(located("list of cases must be same length as list of conditions"))
    if len(condlist) == 0:
        raise ValueError(located("select with an empty condition list is not possible"))
    # Python int and float choices stay weak in the promotion, as numpy keeps them.
    choices = [c if is_python_scalar(c) and not isinstance(c, bool) else lift(c)
               for c in list(choicelist) + [default]]
    try:
        dtype = result_type(*choices)
    except TypeError as exc:
        raise TypeError(located(f"Choicelist and default value do not have a common dtype: "
                                f"{exc}")) from None
    conditions = [lift(c) for c in condlist]
    for i, condition in enumerate(conditions):
        if condition.dtype != np.bool_:
            raise TypeError(located(f"invalid entry {i} in condlist: should be boolean "
                                    "ndarray"))
    shape = np.broadcast_shapes(*[np.shape(c) for c in conditions + choices])
    result = broadcast_to(lift(choices[-1], dtype), shape)
    # The first true condition wins: apply them from the last to the first.
    for condition, choice in zip(conditions[::-1], choices[-2::-1], strict=True):
        result = np.where(condition, lift(choice, dtype), result)
    return result


@implements(np.sinc)
def sinc(x):
    t = lift(x)
    y = np.multiply(np.pi, np.where(np.equal(t, 0), 1.0e-20, t))
    return np.true_divide(np.sin(y), y)


__all__ = ["select", "sinc"]
