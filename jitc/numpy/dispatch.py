"""Tracer.__array_function__: numpy functions called with a tracer land here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jitc.numpy._core import HANDLED, implements, lift, unsupported
from jitc.tracing import pytree
from jitc.tracing.state import current_trace
from jitc.tracing.tracer import Tracer


def apply_function(func: Callable, args: tuple, kwargs: dict[str, Any]) -> Any:
    impl = HANDLED.get(func)
    if impl is None:
        return unsupported_call(func, public_name(func), args, kwargs)
    return impl(*args, **kwargs)


def unsupported_call(func: Callable, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
    """The error for a numpy function jitc cannot trace; in explain mode (Jitted.explain) a
    note, and tracing goes on with numpy's result on zeros of the same shapes."""
    error = unsupported(name)
    state = current_trace()
    if state is None or state.obstacles is None:
        raise error

    def zeros(x: object) -> object:
        return np.zeros(x.shape, x.dtype) if isinstance(x, Tracer) else x

    leaves, tree = pytree.flatten((args, kwargs), lambda x: isinstance(x, Tracer))
    try:
        dummy_args, dummy_kwargs = pytree.unflatten(tree, [zeros(x) for x in leaves])
        result = func(*dummy_args, **dummy_kwargs)
    except Exception:
        raise error from None  # not even its shape is known: the explanation ends here
    state.obstacle(error, None)
    results, out_tree = pytree.flatten(result, lambda x: isinstance(x, np.ndarray))
    return pytree.unflatten(out_tree, [lift(np.asarray(r)).copy_tracer()
                                       if isinstance(r, np.ndarray) else r for r in results])


def public_name(func: Callable) -> str:
    """`numpy.cumsum`, `numpy.linalg.inv`, `numpy.fft.fft`: where users find the function
    (numpy defines many in private modules such as `numpy._core.fromnumeric`)."""
    module = getattr(func, "__module__", None) or "numpy"
    parts = module.split(".")
    public = [p for p in parts[:2] if not p.startswith("_")] if parts[0] == "numpy" else parts
    return ".".join(public + [func.__name__])


@implements(np.round, np.around)
def round(a, decimals=0, out=None):
    if out is not None:
        raise unsupported("numpy.round(..., out=...)")
    x = lift(a)
    if x.dtype.kind != "f":
        return x
    if decimals == 0:
        return np.rint(x)
    scale = np.asarray(10.0 ** decimals, dtype=x.dtype)
    return np.true_divide(np.rint(np.multiply(x, scale)), scale)


def conj(a):
    return lift(a)


def _not_yet(name: str, hint: str = "") -> Callable:
    numpy_fn = getattr(np, name)

    def fn(*args: Any, **kwargs: Any) -> Any:
        raise unsupported(f"numpy.{name}", hint)
    fn.__name__ = name
    return implements(numpy_fn)(fn)


nonzero = _not_yet("nonzero", "Its result shape depends on the data; use np.where(c, x, y).")
sort = _not_yet("sort")
argsort = _not_yet("argsort")
