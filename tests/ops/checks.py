"""Run a traced function on a backend and compare it with numpy and with the interpreter."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

import jitc
from jitc.ir.core import Module

Tolerance = Mapping[np.dtype, tuple[float, float]]
# (rtol, atol) for results computed with rounding; a dtype missing from a tolerance compares
# exactly (nan positions included).
APPROX: Tolerance = MappingProxyType({
    np.dtype(np.float16): (2e-3, 2e-3), np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-12, 1e-13),
    # Complex results are formulas of several rounded steps (numpy's own formulas).
    np.dtype(np.complex64): (1e-5, 1e-6), np.dtype(np.complex128): (1e-12, 1e-13)})
EXACT: Tolerance = MappingProxyType({})


def leaves(result: object) -> list[object]:
    """The arrays of a result (nested tuples and lists flattened, in order)."""
    if isinstance(result, (tuple, list)):
        return [leaf for item in result for leaf in leaves(item)]
    return [result]


def ops_in(module: Module) -> set[str]:
    return {inst.op.name for fn in module.functions.values() for inst in fn.body}


def eager(fn: Callable, args: Sequence[object]) -> list[np.ndarray]:
    """`fn` run on numpy arrays (copies of `args`), with numpy's warnings silenced: the cases
    choose their inputs so the results are defined, and inf or nan is a result like any other."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return [np.asarray(x) for x in leaves(fn(*copy.deepcopy(list(args))))]


def assert_matches(got: object, want: np.ndarray, tol: Tolerance, *, signed_zeros: bool = False,
                   bitwise: bool = False, what: str = "") -> None:
    """Same shape and dtype; values within `tol` (exact for dtypes it does not list), nan
    where nan is expected; with `signed_zeros` zeros of the expected sign, with `bitwise` the
    expected bit patterns."""
    # A 0-d result may be a numpy scalar, as numpy's own (`x.sum()`, `x[()]`).
    if isinstance(got, np.generic) and want.ndim == 0:
        got = np.asarray(got)
    assert isinstance(got, np.ndarray), f"{what}: got a {type(got).__name__}, not an ndarray"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != expected {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != expected {want.dtype}"
    if bitwise and want.dtype.kind == "f":
        unsigned = np.dtype(f"u{want.dtype.itemsize}")
        np.testing.assert_array_equal(got.view(unsigned), want.view(unsigned),
                                      err_msg=f"{what}: bit patterns differ")
    elif want.dtype in tol:
        rtol, atol = tol[want.dtype]
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what, strict=True)
    if signed_zeros and want.dtype.kind == "f":
        zeros = (got == 0) & (want == 0)
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                      err_msg=f"{what}: zeros of the wrong sign")


def assert_all_match(got: Sequence[object], want: Sequence[np.ndarray], tol: Tolerance,
                     what: str, **options: bool) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, tol, what=f"{what}, output {i}", **options)


def interpret_optimized(lowered: jitc.api.Lowered, args: Sequence[object]) -> list[np.ndarray]:
    """The interpreter on the module after the backend's pipeline, given and giving complex
    values where that module has them as float pairs."""
    boundary = lowered.complex_boundary
    if boundary is None:
        return jitc.interpret(lowered.optimize(), args)
    return boundary.results(jitc.interpret(lowered.optimize(), boundary.arguments(args)))


def check(fn: Callable, args: Sequence[object], backend: str, *,
          expected: Callable | None = None, tol: Tolerance = EXACT, ops: Sequence[str] = (),
          signed_zeros: bool = False, bitwise: bool = False) -> None:
    """`jitc.jit(fn, backend=backend)` on `args` must equal
    (a) `expected` (default `fn`) run on numpy arrays,
    (b) the reference interpreter on the traced module, and
    (c) the reference interpreter on the module after the backend's pipeline;
    a second call with fresh copies of the arguments must hit the cache and give the same
    result, and the arguments must come back unchanged. The traced module must contain `ops`.
    """
    options = {"signed_zeros": signed_zeros, "bitwise": bitwise}
    want = eager(expected or fn, args)
    originals = copy.deepcopy(list(args))
    jitted = jitc.jit(fn, backend=backend, verify=True)
    lowered = jitted.lower(*args)
    missing = set(ops) - ops_in(lowered.module)
    assert not missing, (f"the traced module lacks {sorted(missing)}:\n"
                         f"{lowered.as_text()}")

    got = leaves(jitted(*args))
    assert_all_match(got, want, tol, f"{backend} vs numpy", **options)
    traced = jitc.interpret(lowered.module, args)
    assert_all_match(got, traced, tol, f"{backend} vs the interpreter on the traced module",
                     **options)
    optimized = interpret_optimized(lowered, args)
    assert_all_match(optimized, traced, tol, "the interpreter after the pipeline vs before",
                     **options)

    again = leaves(jitted(*copy.deepcopy(list(args))))
    assert jitted.cache_size == 1, "a second call with the same signature compiled again"
    # Not bitwise: numpy's own loops may round differently for another memory layout.
    assert_all_match(again, got, tol, f"{backend}, second call vs first", **options)
    for i, (arg, original) in enumerate(zip(args, originals)):
        np.testing.assert_array_equal(arg, original, err_msg=f"argument {i} was modified",
                                      strict=True)
