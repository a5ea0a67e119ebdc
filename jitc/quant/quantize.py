"""`jitc.quant.quantize`: post-training 8-bit quantization of a float numpy function."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from jitc.api import Jitted, jit
from jitc.options import Options
from jitc.quant.observers import DEFAULT_PERCENTILE, make_observer
from jitc.quant.products import Plan, Product, Rewriter
from jitc.quant.report import Report, compare
from jitc.quant.rounding import INT8_MAX, UINT8_MAX
from jitc.quant.selection import Selection, select
from jitc.tracing import capture
from jitc.tracing.state import intercepting

ACTIVATIONS = ("static", "dynamic")
ROUNDINGS = ("nearest", "compensated")
# Output channels below which a product stays float: the column panel of the byte kernels
# (jitc/backends/cpu/gemm_bytes.py), which pad narrower weights.
MIN_CHANNELS = 32


class Quantized(Jitted):
    """A `jitc.jit` function whose products with weights run on int8 (see `quantize`).

    Call it with the float function's arguments. `products` lists what was quantized and how;
    `report(inputs)` compares it with the float function; `float_function` is the original;
    `selection` is what quantize's `agreement` chose (None without it).
    `jitc.export(signature)(q)` exports it for `jitc aot`, int8 weights included."""

    selection: Selection | None = None

    def __init__(self, fun: Callable, plan: Plan, calibration: Sequence[tuple],
                 options: Options, argument_weights: dict[str, np.ndarray] | None = None
                 ) -> None:
        self.float_function = fun
        self.plan = plan
        self._calibration = list(calibration)
        # Weights the function takes as arguments, by parameter name: calls must pass these
        # very arrays (WithArgumentWeights checks), whose int8 copies the trace bakes in.
        self.argument_weights = dict(argument_weights or {})
        super().__init__(_rewriting(fun, plan, self.argument_weights), options, (), ())

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
        report = compare(self.products, self.float_function, self, samples)
        report.left_float = self.plan.float_notes()
        return report

    def header_notes(self) -> list[str]:
        """What a C header says about the quantized products (jitc aot)."""
        return [product.describe() for product in self.products] + self.plan.float_notes()

    def __repr__(self) -> str:
        return f"<jitc.quant {self.name}: {len(self.plan.products)} int8 product(s)>"

    def __reduce__(self) -> str | tuple:
        raise TypeError("a jitc.quant function cannot be pickled; quantize again where it "
                        "is needed")


class WithArgumentWeights(Quantized):
    """A quantized function some of whose weights are arguments: each call must pass the
    arrays it was calibrated with (their int8 copies are part of the compiled code)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        bound = self.signature.sig.bind(*args, **kwargs)  # type: ignore[union-attr]
        for name, array in self.argument_weights.items():
            given = bound.arguments.get(name)
            if given is not array:
                raise ValueError(
                    f"{self.name}: argument {name!r} must be the array it was quantized with "
                    f"(got {_kind(given)}); its int8 copy is part of the quantized function. "
                    "Quantize again for other weights, or close over the weights to call it "
                    "from a traced function")
        return super().__call__(*args, **kwargs)


def _kind(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"another array, {value.dtype}{list(value.shape)}"
    return "a traced value" if type(value).__name__ == "Tracer" else type(value).__name__


def _substituted(fun: Callable, weights: dict[str, np.ndarray], args: tuple,
                 kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """The arguments with the weight parameters' calibrated arrays in place of what the trace
    passes (tracers): the products then read constants the rewriter knows."""
    if not weights:
        return args, kwargs
    bound = inspect.signature(fun).bind(*args, **kwargs)
    bound.arguments.update(weights)
    return bound.args, bound.kwargs


def _rewriting(fun: Callable, plan: Plan, weights: dict[str, np.ndarray]) -> Callable:
    @functools.wraps(fun)
    def quantized(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _substituted(fun, weights, args, kwargs)
        with intercepting(Rewriter(plan)):
            return fun(*args, **kwargs)
    return quantized


def _observing(fun: Callable, plan: Plan, weights: dict[str, np.ndarray]) -> Callable:
    """`fun` with its products' activations as a second result, by product label."""
    @functools.wraps(fun)
    def observed(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = _substituted(fun, weights, args, kwargs)
        rewriter = Rewriter(plan, observe=True)
        with intercepting(rewriter):
            result = fun(*args, **kwargs)
        return result, {f"{name}#{use}": x for (name, use), x in rewriter.observed}
    return observed


def _arguments(sample: Any) -> tuple:
    return sample if isinstance(sample, tuple) else (sample,)


def _argument_weights(fun: Callable, names: Sequence[str], samples: Sequence[tuple]
                      ) -> dict[str, np.ndarray]:
    """The arrays the calibration samples pass for the weight parameters `names`."""
    if not names:
        return {}
    if not samples:
        raise ValueError(f"quantize: the weights {', '.join(names)} are arguments of "
                         f"{fun.__name__}; pass calibration samples that hold them")
    signature = inspect.signature(fun)
    found: dict[str, np.ndarray] = {}
    for sample in samples:
        arguments = signature.bind(*sample).arguments
        for name in names:
            array = arguments.get(name)
            if not isinstance(array, np.ndarray) or array.dtype.kind != "f":
                raise ValueError(f"quantize: argument {name!r} of {fun.__name__} is a weight "
                                 "but a calibration sample passes no float array for it")
            if found.setdefault(name, array) is not array:
                raise ValueError(f"quantize: every calibration sample must pass the same "
                                 f"array for the weight argument {name!r}")
    return found


def _weights(fun: Callable, selection: Iterable[Any] | None, arguments: dict[str, np.ndarray]
             ) -> dict[int, tuple[str, np.ndarray]]:
    """id(array) -> (name, array) for the float arrays `fun` reads that may be quantized."""
    if isinstance(fun, types.MethodType):  # `model.forward`: self's arrays are weights too
        found = capture.walk(fun.__func__, capture.code_global_names(fun.__func__),
                             fun.__self__)
    else:
        found = capture.walk(fun, capture.code_global_names(fun))
    readable = {id(a): (capture.path_name(p), a) for p, a in found.arrays
                if a.dtype.kind == "f" and a.ndim >= 1}
    if selection is None:
        return readable
    by_name = {name: key for key, (name, _) in readable.items()}
    chosen = {id(a): (name, a) for name, a in arguments.items()}
    for item in selection:
        if isinstance(item, str) and item in arguments:
            continue
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
             min_channels: int = MIN_CHANNELS, rounding: str | None = None,
             agreement: float | None = None, backend: str | None = None,
             num_threads: int | None = None) -> Quantized:
    """Quantize the products of `fun` (a float numpy function) with its weights to int8.

    - `calibration`: sample arguments, each a tuple (or one array for one argument). They
      set the static activation scales and are the default inputs of `report()`.
    - `weights`: which float arrays `fun` reads (globals, closure variables, their
      attributes) are weights, by identity or by name (`"W1"`, `"params['w']"`); default:
      all of them. A parameter's name makes that argument a weight: the calibration samples
      pass it, and calls must pass the same array. A product whose one operand is a weight
      is quantized, the weight symmetric int8 with one scale per output channel; so is
      a convolution whose kernel is a weight (one scale per output feature, rounded to
      nearest; dynamic activation scales are one per batch entry), but for a grouped one
      with under 8 output features per group (depthwise), which stays float.
    - `activations`: "static" (the default with calibration: one scale per product from
      the calibration range, uint8 where every calibration value was >= 0) or "dynamic"
      (the default without: each row's scale is computed at run time).
    - `observer`: "minmax", "percentile" (the `percentile`-th percentile of magnitudes) or
      "mse" (the range whose rounding and clipping of the calibration values lose the least).
    - `min_channels`: a product whose weight has fewer output channels stays float (by
      default under 32, the byte kernels' column panel: a classifier's logits layer, where
      int8 saves little time and costs the most top-1 agreement); 1 quantizes them all.
    - `rounding`: how weights become int8 levels. "compensated" (the default with
      calibration) rounds the rows of each weight in turn and moves each row's error onto
      the rows not yet rounded, weighted by the product's calibration inputs, so that the
      product's error rather than each weight's is small (jitc/quant/rounding.py);
      "nearest" (the default without calibration) rounds each weight to its nearest level.
    - `agreement`: a top-1 agreement with the float function (e.g. 0.99) to reach: each half
      of the calibration samples is quantized on the other half and compared with the float
      function, and products are kept float32, most sensitive first, until the agreement on
      the held-out rows reaches it (jitc/quant/selection.py). The report names the products
      kept and the agreements measured; the function is then calibrated on every sample.
    - `backend`, `num_threads`: as for `jitc.jit`.
    """
    if isinstance(fun, Jitted):
        fun = fun.fun
    if not isinstance(fun, (types.FunctionType, types.MethodType)):
        raise TypeError(f"quantize: expected a Python function or method, got "
                        f"{type(fun).__name__}")
    samples = [_arguments(s) for s in calibration] if calibration is not None else []
    mode = activations or ("static" if samples else "dynamic")
    if mode not in ACTIVATIONS:
        raise ValueError(f"quantize: activations must be 'static' or 'dynamic', got {mode!r}")
    if mode == "static" and not samples:
        raise ValueError("quantize: static activation scales come from calibration inputs; "
                         "pass calibration=[(x1,), ...] or activations='dynamic'")
    rounding = rounding or ("compensated" if samples else "nearest")
    if rounding not in ROUNDINGS:
        raise ValueError(f"quantize: rounding must be 'nearest' or 'compensated', got "
                         f"{rounding!r}")
    if rounding == "compensated" and not samples:
        raise ValueError("quantize: compensated rounding weighs each weight's error by the "
                         "calibration inputs; pass calibration=[(x1,), ...] or "
                         "rounding='nearest'")
    make_observer(observer, percentile)  # a bad observer fails before any compile
    if agreement is not None and not (0 < agreement <= 1 and len(samples) >= 2):
        raise ValueError(f"quantize: agreement={agreement!r} needs a fraction in (0, 1] and at "
                         f"least 2 calibration samples (got {len(samples)}): each half of them "
                         "measures the agreement of the other half's quantization")
    weights = None if weights is None else list(weights)
    parameters = set(inspect.signature(fun).parameters)
    named = [w for w in weights or () if isinstance(w, str) and w in parameters]
    arguments = _argument_weights(fun, named, samples)
    chosen = _weights(fun, weights, arguments)
    options = {"backend": backend, "num_threads": num_threads}
    jitted = jit(**{k: v for k, v in options.items() if v is not None})(fun)
    kind = WithArgumentWeights if arguments else Quantized

    def calibrated(inputs: Sequence[tuple], kept: Mapping[tuple[str, int], str]) -> Plan:
        plan = Plan(chosen, min_channels)
        plan.kept_float = dict(kept)
        _calibrate(fun, plan, inputs, observer, percentile, options, arguments,
                   rounding == "compensated")
        if mode == "static":
            for product in plan.products.values():
                if product.observer is not None:  # else inside a jitc.lax region: dynamic
                    _set_static_scale(product)
        return plan

    selection = None
    if samples:
        if agreement is not None:
            selection = select(fun, samples, agreement, calibrated,
                               lambda plan, inputs: kind(fun, plan, inputs, jitted.options,
                                                         arguments))
        plan = calibrated(samples, selection.notes if selection else {})
        if not plan.products and not plan.kept_float:
            raise ValueError(f"quantize: {fun.__name__} has no product with a weight on the "
                             "calibration inputs; jitc.quant quantizes x @ W (matmul, dot, "
                             "einsum, tensordot) and convolutions of x with a kernel "
                             "W (jitc.lax.conv_general_dilated), where W is a float array "
                             "the function reads")
    else:
        plan = Plan(chosen, min_channels)
    result = kind(fun, plan, samples, jitted.options, arguments)
    result.selection = selection
    return result


def _calibrate(fun: Callable, plan: Plan, samples: Sequence[tuple], observer: str,
               percentile: float, options: dict[str, Any], arguments: dict[str, np.ndarray],
               compensate: bool) -> None:
    observed = jit(**{k: v for k, v in options.items() if v is not None},
                   disk_cache=False)(_observing(fun, plan, arguments))
    for args in samples:
        _, activations = observed(*args)
        for label, values in activations.items():
            name, use = label.rsplit("#", 1)
            product = plan.products[(name, int(use))]
            if product.observer is None:
                product.observer = make_observer(observer, percentile)
            product.observer.update(values)
            if compensate:
                product.observe_inputs(values)
    if compensate:
        plan.calibrated()


def _set_static_scale(product: Product) -> None:
    observed = product.observer
    assert observed is not None
    product.static = True
    unsigned = observed.non_negative
    product.activation_dtype = np.dtype(np.uint8 if unsigned else np.int8)
    bound = observed.bound()
    product.activation_scale = bound / (UINT8_MAX if unsigned else INT8_MAX) if bound > 0 \
        else 1.0
