"""What limits jitc.quant's top-1 agreement on bench/quant_speed.py's random MLP: the same
quantization simulated in float64 numpy, one source of error at a time.

Run: ``python -m bench.quant_accuracy``. The model, calibration batches (4 x 256) and test
batches (8 x 256) are quant_speed's (the same generator, drawn in the same order), so the
"static" line of each weight set equals what quant_speed measures for the jitc.quant function.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

INT8_MAX, UINT8_MAX = 127, 255


def _normal(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def rounded(w: np.ndarray) -> np.ndarray:
    """Symmetric int8 per output channel (a column), back in float."""
    scale = np.abs(w).max(axis=0, keepdims=True) / INT8_MAX
    return np.clip(np.rint(w / scale), -INT8_MAX, INT8_MAX) * scale


def to_bytes(x: np.ndarray, bound: np.ndarray | float, unsigned: bool) -> np.ndarray:
    top, low = (UINT8_MAX, 0) if unsigned else (INT8_MAX, -INT8_MAX)
    scale = bound / top
    return np.clip(np.rint(x / scale), low, top) * scale


def static_activations(bounds: list[tuple[float, bool]], quantized: int) -> Callable:
    """The inputs of the first `quantized` products to bytes with calibrated bounds."""
    def activation(i: int, x: np.ndarray) -> np.ndarray:
        return to_bytes(x, *bounds[i]) if i < quantized else x
    return activation


def dynamic_activations(extremes: list[tuple[float, bool]], quantized: int) -> Callable:
    """Each row to bytes with its own largest magnitude (uint8 where calibration saw no
    negative value)."""
    def activation(i: int, x: np.ndarray) -> np.ndarray:
        if i >= quantized:
            return x
        return to_bytes(x, np.abs(x).max(axis=1, keepdims=True), extremes[i][1])
    return activation


def forward(x: np.ndarray, layers: list, activation: Callable | None = None) -> np.ndarray:
    for i, (w, b) in enumerate(layers):
        if activation is not None:
            x = activation(i, x)
        x = x @ w + b
        if i < len(layers) - 1:
            x = np.maximum(x, 0)
    return x


def main() -> int:
    rng = np.random.default_rng(0)
    layers = [(_normal(rng, 784, 1024, scale=0.05), _normal(rng, 1024, scale=0.1)),
              (_normal(rng, 1024, 1024, scale=0.03), _normal(rng, 1024, scale=0.1)),
              (_normal(rng, 1024, 10, scale=0.1), _normal(rng, 10, scale=0.1))]
    calibration = np.concatenate([_normal(rng, 256, 784) for _ in range(4)])
    test = np.concatenate([_normal(rng, 256, 784) for _ in range(8)])
    want = forward(test, layers)
    seen: list[np.ndarray] = []
    forward(calibration, layers, lambda i, x: seen.append(x) or x)
    extremes = [(float(np.abs(x).max()), bool(x.min() >= 0)) for x in seen]
    percentiles = [(float(np.percentile(np.abs(x), 99.99)), bool(x.min() >= 0)) for x in seen]

    for label, quantized in (("logits layer float32 (the default)", 2),
                             ("every product (min_channels=1)", 3)):
        weights = [(rounded(w) if i < quantized else w, b) for i, (w, b) in enumerate(layers)]

        def static(bounds: list, quantized: int = quantized) -> Callable:
            return static_activations(bounds, quantized)

        dynamic = dynamic_activations(extremes, quantized)
        print(f"MLP 784-1024-1024-10, {label}: top-1 agreement with float32")
        for case, got in (("weights int8, activations float32", forward(test, weights)),
                          ("weights float32, activations static int8",
                           forward(test, layers, static(extremes))),
                          ("static, minmax (jitc.quant's default)",
                           forward(test, weights, static(extremes))),
                          ("static, 99.99th percentile", forward(test, weights,
                                                                 static(percentiles))),
                          ("dynamic per row (uint8 after a ReLU)",
                           forward(test, weights, dynamic))):
            agree = np.mean(np.argmax(got, 1) == np.argmax(want, 1))
            print(f"  {case:45} {100 * agree:6.2f}%")
    ordered = np.sort(want, axis=1)
    margin = ordered[:, -1] - ordered[:, -2]
    print(f"median top-2 margin of the float32 logits: {np.median(margin):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
