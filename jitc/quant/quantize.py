"""`jitc.quant.quantize`: post-training 8-bit quantization of a float numpy function."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from jitc.api import Jitted, jit
from jitc.options import Options
from jitc.quant.observers import DEFAULT_PERCENTILE, make_observer
from jitc.quant.products import INT8_MAX, UINT8_MAX, Plan, Product, Rewriter
from jitc.quant.report import Report, compare
from jitc.tracing import capture
from jitc.tracing.state import intercepting

ACTIVATIONS = ("static", "dynamic")


class Quantized(Jitted):
    """A `jitc.jit` function whose products with weights run on int8 (see `quantize`).

    Call it with the float function's arguments. `products` lists what was quantized and how;
    `report(inputs)` compares it with the float function; `float_function` is the original.
    `jitc.export(signature)(q)` exports it for `jitc aot`, int8 weights included."""

    def __init__(self, fun: Callable, plan: Plan, calibration: Sequence[tuple],
                 options: Options) -> None:
        self.float_function = fun
        self.plan = plan
        self._calibration = list(calibration)
        super().__init__(_rewriting(fun, plan), options, (), ())

    @property
    def products(self) -> list[Product]:
        """The quantized products, in the order the function first ran them."""
        return list(self.plan.products.values())

    def report(self, inputs: Iterable[Any] | None = None) -> Report:
        """Errors against the float function (run by numpy) on `inputs`, each a tuple of
        arguments or one array; by default the calibration inputs."""
        samples = self._calibration if inputs is None else [_arguments(a) for a in inputs]
        if not samples:
            raise ValueError("report() needs inputs: this function was quantized without "
                             "calibration inputs; pass report([(x1,), (x2,)])")
        return compare(self.products, self.float_function, self, samples)

    def header_notes(self) -> list[str]:
        """What a C header says about the quantized products (jitc aot)."""
        return [product.describe() for product in self.products]

    def __repr__(self) -> str:
        return f"<jitc.quant {self.name}: {len(self.plan.products)} int8 product(s)>"

    def __reduce__(self) -> str | tuple:
        raise TypeError("a jitc.quant function cannot be pickled; quantize again where it "
                        "is needed")


def _rewriting(fun: Callable, plan: Plan) -> Callable:
    @functools.wraps(fun)
    def quantized(*args: Any, **kwargs: Any) -> Any:
        with intercepting(Rewriter(plan)):
            return fun(*args, **kwargs)
    return quantized


def _observing(fun: Callable, plan: Plan) -> Callable:
    """`fun` with its products' activations as a second result, by product label."""
    @functools.wraps(fun)
    def observed(*args: Any, **kwargs: Any) -> Any:
        rewriter = Rewriter(plan, observe=True)
        with intercepting(rewriter):
            result = fun(*args, **kwargs)
        return result, {f"{name}#{use}": x for (name, use), x in rewriter.observed}
    return observed


def _arguments(sample: Any) -> tuple:
    return sample if isinstance(sample, tuple) else (sample,)


def _weights(fun: Callable, selection: Iterable[Any] | None) -> dict[int, tuple[str, np.ndarray]]:
    """id(array) -> (name, array) for the float arrays `fun` reads that may be quantized."""
    found = capture.walk(fun, capture.code_global_names(fun))
    readable = {id(a): (capture.path_name(p), a) for p, a in found.arrays
                if a.dtype.kind == "f" and a.ndim >= 1}
    if selection is None:
        return readable
    by_name = {name: key for key, (name, _) in readable.items()}
    chosen = {}
    for item in selection:
        key = by_name.get(item) if isinstance(item, str) else id(item)
        if key not in readable:
            what = repr(item) if isinstance(item, str) else \
                f"an array of shape {getattr(item, 'shape', '?')}"
            known = ", ".join(sorted(by_name)) or "none"
            raise ValueError(f"quantize: weights names {what}, which {fun.__name__} does not "
                             f"read as a float array (the float arrays it reads: {known})")
        chosen[key] = readable[key]
    return chosen


def quantize(fun: Callable, calibration: Iterable[Any] | None = None, *,
             weights: Iterable[Any] | None = None, observer: str = "minmax",
             percentile: float = DEFAULT_PERCENTILE, activations: str | None = None,
             backend: str | None = None, num_threads: int | None = None) -> Quantized:
    """Quantize the products of `fun` (a float numpy function) with its weights to int8.

    - `calibration`: sample arguments, each a tuple (or one array for one argument). They
      set the static activation scales and are the default inputs of `report()`.
    - `weights`: which float arrays `fun` reads (globals, closure variables, their
      attributes) are weights, by identity or by name (`"W1"`, `"params['w']"`); default:
      all of them. A product whose one operand is a weight is quantized, the weight
      symmetric int8 with one scale per output channel.
    - `activations`: "static" (the default with calibration: one scale per product from
      the calibration range, uint8 where every calibration value was >= 0) or "dynamic"
      (the default without: each row's scale is computed at run time).
    - `observer`: "minmax" or "percentile" (the `percentile`-th percentile of magnitudes).
    - `backend`, `num_threads`: as for `jitc.jit`.
    """
    if isinstance(fun, Jitted):
        fun = fun.fun
    if not isinstance(fun, types.FunctionType):
        raise TypeError(f"quantize: expected a Python function, got {type(fun).__name__}")
    samples = [_arguments(s) for s in calibration] if calibration is not None else []
    mode = activations or ("static" if samples else "dynamic")
    if mode not in ACTIVATIONS:
        raise ValueError(f"quantize: activations must be 'static' or 'dynamic', got {mode!r}")
    if mode == "static" and not samples:
        raise ValueError("quantize: static activation scales come from calibration inputs; "
                         "pass calibration=[(x1,), ...] or activations='dynamic'")
    make_observer(observer, percentile)  # a bad observer fails before any compile
    plan = Plan(_weights(fun, weights))
    options = {"backend": backend, "num_threads": num_threads}
    if samples:
        _calibrate(fun, plan, samples, observer, percentile, options)
        if not plan.products:
            raise ValueError(f"quantize: {fun.__name__} has no product with a weight on the "
                             "calibration inputs; jitc.quant quantizes x @ W (matmul, dot, "
                             "einsum, tensordot) where W is a float array the function reads")
        if mode == "static":
            for product in plan.products.values():
                _set_static_scale(product)
    jitted = jit(**{k: v for k, v in options.items() if v is not None})(fun)
    return Quantized(fun, plan, samples, jitted.options)


def _calibrate(fun: Callable, plan: Plan, samples: Sequence[tuple], observer: str,
               percentile: float, options: dict[str, Any]) -> None:
    observed = jit(**{k: v for k, v in options.items() if v is not None},
                   disk_cache=False)(_observing(fun, plan))
    for args in samples:
        _, activations = observed(*args)
        for label, values in activations.items():
            name, use = label.rsplit("#", 1)
            product = plan.products[(name, int(use))]
            if product.observer is None:
                product.observer = make_observer(observer, percentile)
            product.observer.update(values)


def _set_static_scale(product: Product) -> None:
    observed = product.observer
    assert observed is not None
    product.static = True
    unsigned = observed.non_negative
    product.activation_dtype = np.dtype(np.uint8 if unsigned else np.int8)
    bound = observed.bound()
    product.activation_scale = bound / (UINT8_MAX if unsigned else INT8_MAX) if bound > 0 \
        else 1.0
