"""Tracer.__array_function__: numpy functions called with a tracer land here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jitc.numpy._core import HANDLED, check_static_int, convert, implements, lift, unsupported
from jitc.tracing import pytree
from jitc.tracing.errors import TraceError, located
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
    error = unsupported(name, WHY_NOT.get(name, ""))
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


def _reasons(groups: list[tuple[str, str]]) -> dict[str, str]:
    return {f"numpy.{name}": reason for names, reason in groups for name in names.split()}


# Why a numpy function is not traced, where the answer is more than "not yet": the error says
# it, and docs/numpy_coverage.md lists it.
WHY_NOT: dict[str, str] = _reasons([
    ("argwhere compress flatnonzero extract intersect1d union1d setdiff1d setxor1d trim_zeros",
     "Its result's shape depends on the values, which are known only when the compiled code "
     "runs; keep the shape with np.where(mask, x, fill)."),
    ("unique unique_all unique_counts unique_inverse unique_values",
     "The number of distinct values, its result's length, is known only when the compiled code "
     "runs. Keep the length: s = np.sort(x) and first = s[1:] != s[:-1] mark the distinct "
     "values (np.cumsum(first) numbers them)."),
    ("fft.fft2 fft.ifft2 fft.fftn fft.ifftn fft.rfft2 fft.irfft2 fft.rfftn fft.irfftn "
     "fft.hfft fft.ihfft",
     "Of numpy.fft, the one-dimensional fft, ifft, rfft and irfft are traced (docs/dtypes.md); "
     "apply them along each axis in turn."),
    ("linalg.eig linalg.eigvals",
     "Its result's dtype depends on the values: numpy gives float64 eigenvalues and vectors "
     "when every eigenvalue is real and complex128 ones otherwise (the eigenvalues of a "
     "nonsymmetric matrix are complex in general), which compiled code cannot know before it "
     "runs. For a symmetric matrix use np.linalg.eigh or np.linalg.eigvalsh, whose results are "
     "real; otherwise call np.linalg.eig on the jitted function's result."),
    ("roots",
     "Its roots, complex in general, are the eigenvalues of a companion matrix "
     "(np.linalg.eigvals), which jitc does not trace. Call np.roots on the jitted function's "
     "result, or write the formula for a degree-2 polynomial."),
    ("real_if_close",
     "Its result's dtype depends on the values (complex, or real when every imaginary part is "
     "small); use np.real(x) where the values are known to be real."),
    ("save savez savez_compressed savetxt array2string array_repr array_str",
     "It writes or formats values, which exist only when the compiled code runs; call it on "
     "the jitted function's result."),
    ("datetime_as_string busday_count busday_offset is_busday isnat",
     "jitc has no datetime dtypes."),
    ("may_share_memory shares_memory",
     "jitc, not numpy, places traced arrays in memory; ask outside jitc.jit."),
    ("divmod",
     "A ufunc with two results is not traced yet; compute each (np.floor_divide and "
     "np.remainder for divmod)."),
])


def public_name(func: Callable) -> str:
    """`numpy.cumsum`, `numpy.linalg.inv`, `numpy.fft.fft`: where users find the function
    (numpy defines many in private modules such as `numpy._core.fromnumeric`)."""
    module = getattr(func, "__module__", None) or "numpy"
    parts = module.split(".")
    public = [p for p in parts[:2] if not p.startswith("_")] if parts[0] == "numpy" else parts
    if public == ["numpy", "lib"]:  # numpy.lib._stride_tricks_impl and the like
        public.append(parts[2].removeprefix("_").removesuffix("_impl"))
    return ".".join(public + [func.__name__])


@implements(np.round, np.around)
def round(a, decimals=0, out=None):
    if out is not None:
        raise unsupported("numpy.round(..., out=...)")
    x = lift(a)
    decimals = check_static_int(decimals, "numpy.round's decimals")
    if x.dtype.kind == "c":  # numpy rounds each part
        from jitc.numpy.complexes import make, parts
        return make(*(round(part, decimals) for part in parts(x)))
    if x.dtype.kind == "b":
        if decimals != 0:
            raise TraceError(located("numpy.round of a bool array with decimals != 0: numpy "
                                     "has no loop for it; convert it to a float dtype first"))
        return convert(x, np.float16)  # numpy's loop for bool is float16's
    if x.dtype.kind in "iu":
        if decimals >= 0:
            return x
        # numpy rounds integers through float64 (half to even) and casts back.
        scale = np.float64(10.0 ** -decimals)
        wide = np.true_divide(convert(x, np.float64), scale)
        return convert(np.multiply(np.rint(wide), scale), x.dtype)
    if decimals == 0:
        return np.rint(x)
    scale = np.asarray(10.0 ** decimals, dtype=x.dtype)
    return np.true_divide(np.rint(np.multiply(x, scale)), scale)


def _not_yet(name: str, hint: str = "") -> Callable:
    numpy_fn = getattr(np, name)
    if hint:
        WHY_NOT[f"numpy.{name}"] = hint

    def fn(*args: Any, **kwargs: Any) -> Any:
        raise unsupported(f"numpy.{name}", hint)
    fn.__name__ = name
    return implements(numpy_fn)(fn)


nonzero = _not_yet("nonzero", "Its result's shape depends on the values, which are known only "
                   "when the compiled code runs; keep the shape with np.where(mask, x, fill), "
                   "or count with np.count_nonzero(mask).")
