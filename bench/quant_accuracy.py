"""What limits jitc.quant's top-1 agreement on bench/quant_speed.py's random MLP: the same
quantization simulated in float64 numpy, one source of error at a time, and with each way of
rounding the weights (jitc/quant/rounding.py's code).

Run: ``python -m bench.quant_accuracy``. The model, calibration batches (4 x 256) and test
batches (8 x 256) are quant_speed's (the same generator, drawn in the same order), so the
"static, minmax" lines of each weight set equal what quant_speed measures for the jitc.quant
function (`--rounding nearest` and the default). A second table does the same for an MLP of
the same shape trained here (numpy, a few seconds) on a synthetic task, ten Gaussian clusters,
with inputs drawn from that task: random weights are the worst case for logit margins.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from jitc.quant.observers import MeanSquared
from jitc.quant.rounding import InputStatistics, compensated_values

INT8_MAX, UINT8_MAX = 127, 255
DAMPING = 0.01  # of the mean diagonal, for the sample second moment without shrinkage


def _normal(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _scales(w: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(w, np.float64)).max(axis=0, keepdims=True) / INT8_MAX


def rounded(w: np.ndarray) -> np.ndarray:
    """Symmetric int8 per output channel (a column), back in float."""
    scale = _scales(w)
    return np.clip(np.rint(w / scale), -INT8_MAX, INT8_MAX) * scale


def compensated(w: np.ndarray, x: np.ndarray, shrink: bool = True) -> np.ndarray:
    """Rounded with errors compensated over the calibration inputs `x` of the product:
    jitc.quant's default (the second moment's covariance shrunk) or with the sample second
    moment, damped by 1% of its mean diagonal."""
    scale = _scales(w)
    if shrink:
        statistics = InputStatistics(x.shape[1])
        statistics.update(x)
        hessian = statistics.hessian()
    else:
        hessian = x.T @ x / len(x)
        hessian[np.diag_indices_from(hessian)] += DAMPING * np.mean(np.diag(hessian))
    return compensated_values(w, scale[0], hessian) * scale


def bias_corrected(layers: list, weights: list, seen: list[np.ndarray]) -> list:
    """Each quantized layer's bias shifted by -E[x] (Wq - W) (E over the calibration inputs):
    the mean of its output error removed (Nagel et al. 2019)."""
    return [(wq, b - seen[i].mean(axis=0) @ (wq - w)) if wq is not w else (w, b)
            for i, ((w, b), (wq, _)) in enumerate(zip(layers, weights))]


def to_bytes(x: np.ndarray, bound: np.ndarray | float, unsigned: bool, bits: int = 8
             ) -> np.ndarray:
    top = (1 << bits) - 1 if unsigned else (1 << (bits - 1)) - 1
    low = 0 if unsigned else -top
    scale = bound / top
    return np.clip(np.rint(x / scale), low, top) * scale


def static_activations(bounds: list[tuple[float, bool]], quantized: int, first: int = 0,
                       bits: int = 8) -> Callable:
    """The inputs of products `first` to `quantized - 1` to `bits`-bit integers with
    calibrated bounds."""
    def activation(i: int, x: np.ndarray) -> np.ndarray:
        return to_bytes(x, *bounds[i], bits=bits) if first <= i < quantized else x
    return activation


def smoothed(layers: list, seen: list[np.ndarray], quantized: int, alpha: float
             ) -> tuple[list, Callable]:
    """SmoothQuant (Xiao et al. 2022): each input channel k of a product divided by
    s_k = max|x_k|^alpha / max|W_k|^(1 - alpha) and its weight row multiplied by it, then
    both quantized as usual (the weight compensated for the scaled inputs). Returned as the
    effective float weights and the activation rounding, which multiplies s back."""
    weights, factors, bounds = [], [], []
    for i, ((w, b), x) in enumerate(zip(layers, seen)):
        if i >= quantized:
            weights.append((w, b))
            continue
        s = np.abs(x).max(axis=0) ** alpha / np.abs(w).max(axis=1) ** (1 - alpha)
        s = np.where(s > 0, s, 1.0)
        scaled = x / s
        factors.append(s)
        bounds.append((float(np.abs(scaled).max()), bool(scaled.min() >= 0)))
        weights.append((compensated(w * s[:, None], scaled) / s[:, None], b))

    def activation(i: int, x: np.ndarray) -> np.ndarray:
        return to_bytes(x / factors[i], *bounds[i]) * factors[i] if i < quantized else x
    return weights, activation


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


def _mean_squared_bound(x: np.ndarray) -> float:
    observer = MeanSquared()
    for batch in np.array_split(x, 4):  # as calibration sees it: 4 batches
        observer.update(batch)
    return observer.bound()


def report(title: str, layers: list, calibration: np.ndarray, test: np.ndarray) -> None:
    want = forward(test, layers)
    seen: list[np.ndarray] = []
    forward(calibration, layers, lambda i, x: seen.append(np.asarray(x, np.float64)) or x)
    extremes = [(float(np.abs(x).max()), bool(x.min() >= 0)) for x in seen]
    percentiles = [(float(np.percentile(np.abs(x), 99.99)), bool(x.min() >= 0)) for x in seen]
    least_squares = [(_mean_squared_bound(x), bool(x.min() >= 0)) for x in seen]

    spread = float(np.std(want))
    print(f"{title}; top-1 agreement, RMS error / logits' std")
    roundings = {"nearest": [rounded(w) for w, _ in layers],
                 "shrunk": [compensated(w, x) for (w, _), x in zip(layers, seen)],
                 "sample": [compensated(w, x, shrink=False) for (w, _), x in zip(layers, seen)]}
    for label, quantized in (("logits layer float32 (the default)", 2),
                             ("every product (min_channels=1)", 3)):
        nearest, shrunk, sample = ([(rounding[i] if i < quantized else w, b)
                                    for i, (w, b) in enumerate(layers)]
                                   for rounding in roundings.values())
        static = static_activations(extremes, quantized)
        first_float = [layers[0], *shrunk[1:]]
        dynamic = dynamic_activations(extremes, quantized)
        print(f"{title}, {label}:")
        for case, got in (
                ("weights int8, activations float32", forward(test, nearest)),
                ("  weights compensated", forward(test, shrunk)),
                ("weights float32, activations static int8",
                 forward(test, layers, static)),
                ("static, minmax (rounding='nearest')", forward(test, nearest, static)),
                ("  nearest + bias correction",
                 forward(test, bias_corrected(layers, nearest, seen), static)),
                ("  compensated, sample E[xx^T] (not shrunk)", forward(test, sample, static)),
                ("  compensated (jitc.quant's default)", forward(test, shrunk, static)),
                ("  compensated + bias correction",
                 forward(test, bias_corrected(layers, shrunk, seen), static)),
                ("static, 99.99th percentile", forward(test, nearest,
                                                        static_activations(percentiles,
                                                                           quantized))),
                ("  compensated", forward(test, shrunk,
                                          static_activations(percentiles, quantized))),
                ("static, observer='mse'", forward(test, nearest,
                                                    static_activations(least_squares,
                                                                       quantized))),
                ("  compensated", forward(test, shrunk,
                                          static_activations(least_squares, quantized))),
                ("dynamic per row (uint8 after a ReLU)", forward(test, nearest, dynamic)),
                ("  compensated", forward(test, shrunk, dynamic)),
                ("SmoothQuant alpha 0.5, compensated",
                 forward(test, *smoothed(layers, seen, quantized, 0.5))),
                ("activations 16-bit (W8A16), compensated",
                 forward(test, shrunk, static_activations(extremes, quantized, bits=16))),
                ("first product float32, the rest compensated",
                 forward(test, first_float, static_activations(extremes, quantized, 1))),
                ("  and activations 16-bit", forward(test, first_float,
                                                               static_activations(
                                                                   extremes, quantized, 1,
                                                                   bits=16)))):
            agree = np.mean(np.argmax(got, 1) == np.argmax(want, 1))
            error = float(np.sqrt(np.mean((got - want) ** 2))) / spread
            print(f"  {case:45} {100 * agree:6.2f}%  {error:.4f}")
    ordered = np.sort(want, axis=1)
    margin = ordered[:, -1] - ordered[:, -2]
    print(f"median top-2 margin of the float32 logits: {np.median(margin):.3f}")


def cluster_task(rng: np.random.Generator, classes: int = 10, width: int = 784,
                 spread: float = 0.12) -> Callable:
    """Ten Gaussian clusters: a class's inputs are its centre plus unit normal noise; centres
    close enough that a trained MLP gets about 80% of the classes right."""
    centres = _normal(rng, classes, width, scale=spread)

    def draw(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, classes, rows)
        return centres[labels] + _normal(rng, rows, width), labels
    return draw


def trained_mlp(rng: np.random.Generator, draw: Callable, steps: int = 120, batch: int = 64,
                rate: float = 0.05, momentum: float = 0.9) -> list:
    """784-1024-1024-10 with ReLUs, trained by SGD with momentum on softmax cross-entropy."""
    sizes = (784, 1024, 1024, 10)
    layers = [(_normal(rng, a, b, scale=np.sqrt(2 / a)), np.zeros(b, np.float32))
              for a, b in itertools.pairwise(sizes)]
    velocity = [(np.zeros_like(w), np.zeros_like(b)) for w, b in layers]
    for _ in range(steps):
        x, labels = draw(rng, batch)
        inputs: list[np.ndarray] = []
        logits = forward(x, layers, lambda i, a, kept=inputs: kept.append(a) or a)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        grad = p / p.sum(axis=1, keepdims=True)
        grad[np.arange(batch), labels] -= 1
        grad /= batch
        for i in reversed(range(len(layers))):
            w, b = layers[i]
            grad_w, grad_b = inputs[i].T @ grad, grad.sum(axis=0)
            if i:
                grad = (grad @ w.T) * (inputs[i] > 0)
            vw, vb = velocity[i]
            vw *= momentum
            vw -= rate * grad_w
            vb *= momentum
            vb -= rate * grad_b
            layers[i] = (w + vw, b + vb)
    return layers


def main() -> int:
    rng = np.random.default_rng(0)
    layers = [(_normal(rng, 784, 1024, scale=0.05), _normal(rng, 1024, scale=0.1)),
              (_normal(rng, 1024, 1024, scale=0.03), _normal(rng, 1024, scale=0.1)),
              (_normal(rng, 1024, 10, scale=0.1), _normal(rng, 10, scale=0.1))]
    calibration = np.concatenate([_normal(rng, 256, 784) for _ in range(4)])
    test = np.concatenate([_normal(rng, 256, 784) for _ in range(8)])
    report("MLP 784-1024-1024-10 (random weights)", layers, calibration, test)

    rng = np.random.default_rng(1)
    draw = cluster_task(rng)
    trained = trained_mlp(rng, draw)
    calibration, test = draw(rng, 4 * 256)[0], draw(rng, 8 * 256)
    correct = np.mean(np.argmax(forward(test[0], trained), 1) == test[1])
    print()
    print(f"MLP TRAINED on 10 Gaussian clusters: {100 * correct:.1f}% of the test classes right")
    report("MLP 784-1024-1024-10 TRAINED, inputs from its task", trained, calibration, test[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
