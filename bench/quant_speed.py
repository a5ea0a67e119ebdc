"""jitc.quant against jitc's float32 and numpy, measured side by side in one process.

Run: ``python -m bench.quant_speed`` (``--seconds S`` per implementation and model, ``--rows N``
the batch of the MLP). Rows:

- MLP 784-1024-1024-10 (ReLU, bias, logits), batch 256: as quantized by default (the logits
  layer, 10 output channels, stays float32), with `agreement=0.99` (`--agreement`: products
  kept float32 until the held-out calibration rows agree that often; the same calibration and
  test batches) and with every product quantized (min_channels=1);
- a GPT-2 block (bench/workloads.py's, d=768, 12 heads, 64 tokens);
- the int8 matmul 1024 in numpy's idiom (`a.astype(np.int32) @ b.astype(np.int32)`) beside
  jitc's float32 matmul 1024;
- a small CNN (convolutions 3->32, 32->64 stride 2, 64->64, all 3x3, NCHW, ReLU, then a
  global mean and 64->10 logits), batch 32 of 3x32x32 images; its numpy float32 column is
  jitc.lax run eagerly (the op table's numpy reference);
- the int8 convolution 32x64x32x32 by 64x64x3x3 (padding 1) in numpy's idiom
  (`conv_general_dilated(x.astype(np.int32), w.astype(np.int32), ...)`) beside jitc's float32
  convolution; numpy float32 is the same convolution as patches and a matmul (numpy has no
  2-d convolution).

The models close over their float32 weights; `jitc.quant.quantize` calibrates on 4 random
batches (static activation scales) and the accuracy is measured on 8 other random batches.
Timings are interleaved rounds, each call timed: the best round's median and the fastest call
(on a shared machine the median also measures the other processes).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import jitc
import jitc.quant
from bench.runner import _quiet
from bench.workloads import gpt2_block

ROUNDS = 5


def _normal(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def mlp_model(rng: np.random.Generator) -> Callable:
    return mlp_from(_normal(rng, 784, 1024, scale=0.05), _normal(rng, 1024, scale=0.1),
                    _normal(rng, 1024, 1024, scale=0.03), _normal(rng, 1024, scale=0.1),
                    _normal(rng, 1024, 10, scale=0.1), _normal(rng, 10, scale=0.1))


def mlp_from(w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, w3: np.ndarray,
             b3: np.ndarray) -> Callable:
    def mlp(x):
        h = np.maximum(x @ w1 + b1, 0)
        h = np.maximum(h @ w2 + b2, 0)
        return h @ w3 + b3
    return mlp


def cnn_model(rng: np.random.Generator) -> Callable:
    def kernel(*shape: int) -> np.ndarray:
        return _normal(rng, *shape, scale=float(np.sqrt(2 / np.prod(shape[1:]))))
    k1, k2, k3 = kernel(32, 3, 3, 3), kernel(64, 32, 3, 3), kernel(64, 64, 3, 3)
    b1, b2, b3 = (_normal(rng, n, 1, 1, scale=0.1) for n in (32, 64, 64))
    w4 = _normal(rng, 64, 10, scale=0.2)
    same = [(1, 1), (1, 1)]

    def cnn(x):
        h = np.maximum(jitc.lax.conv_general_dilated(x, k1, (1, 1), same) + b1, 0)
        h = np.maximum(jitc.lax.conv_general_dilated(h, k2, (2, 2), same) + b2, 0)
        h = np.maximum(jitc.lax.conv_general_dilated(h, k3, (1, 1), same) + b3, 0)
        return h.mean(axis=(2, 3)) @ w4
    return cnn


def block_model(rng: np.random.Generator) -> Callable:
    d = 768
    weights = (1 + _normal(rng, d, scale=0.1), _normal(rng, d, scale=0.1),
               _normal(rng, d, 3 * d, scale=0.02), _normal(rng, 3 * d, scale=0.02),
               _normal(rng, d, d, scale=0.02), _normal(rng, d, scale=0.02),
               1 + _normal(rng, d, scale=0.1), _normal(rng, d, scale=0.1),
               _normal(rng, d, 4 * d, scale=0.02), _normal(rng, 4 * d, scale=0.02),
               _normal(rng, 4 * d, d, scale=0.02), _normal(rng, d, scale=0.02))

    def block(x):
        return gpt2_block(np, x, *weights)
    return block


def _interleaved(calls: dict[str, Callable], args: tuple, seconds: float
                 ) -> dict[str, tuple[float, float]]:
    """Per implementation (the best round's median, the fastest call) over ROUNDS rounds in
    turn. On a machine other processes keep busy the median measures them too; the fastest
    call is the one they disturbed least."""
    best = {name: (float("inf"), float("inf")) for name in calls}
    for r in range(ROUNDS):
        names = list(calls)
        for name in names[r % len(names):] + names[:r % len(names)]:
            _quiet()
            calls[name](*args)
            samples: list[float] = []
            while sum(samples) < seconds / ROUNDS or len(samples) < 3:
                start = time.perf_counter()
                calls[name](*args)
                samples.append(time.perf_counter() - start)
            median, fastest = best[name]
            best[name] = (min(median, statistics.median(samples)), min(fastest, min(samples)))
    return best


def _agreement(model: Callable, quantized: Callable, inputs: list[np.ndarray]
               ) -> tuple[float, float, float]:
    """(top-1 agreement over rows, max abs error / max abs float result, RMS error / the
    float results' standard deviation: less noisy than top-1, which counts rows)."""
    agree = rows = 0
    worst = peak = 0.0
    wants, errors = [], []
    for x in inputs:
        want, got = model(x), quantized(x)
        agree += int(np.sum(np.argmax(want, -1) == np.argmax(got, -1)))
        rows += want.size // want.shape[-1]
        worst = max(worst, float(np.abs(want - got).max()))
        peak = max(peak, float(np.abs(want).max()))
        wants.append(np.asarray(want, np.float64).ravel())
        errors.append(np.asarray(got, np.float64).ravel() - wants[-1])
    rms = float(np.sqrt(np.mean(np.concatenate(errors) ** 2)) / np.std(np.concatenate(wants)))
    return agree / rows, worst / peak, rms


def model_row(name: str, model: Callable, shape: tuple[int, ...], seconds: float,
              rng: np.random.Generator, min_channels: int | None = None,
              observer: str = "minmax", activations: str = "static",
              rounding: str = "compensated", agreement: float | None = None) -> list[dict]:
    """The model's row and, with `agreement`, a second row quantized with that target from
    the same calibration batches, measured on the same test batches."""
    calibration = [(_normal(rng, *shape),) for _ in range(4)]
    options: dict = {"observer": observer, "activations": activations, "rounding": rounding}
    if min_channels is not None:
        options["min_channels"] = min_channels
    variants = {"jitc.quant int8": options}
    if agreement is not None:
        variants[f"agreement={agreement:g}"] = {**options, "agreement": agreement}
    functions, quantize_seconds = {}, {}
    for label, chosen in variants.items():
        start = time.perf_counter()
        functions[label] = jitc.quant.quantize(model, calibration, **chosen)
        quantize_seconds[label] = time.perf_counter() - start
    tests = [_normal(rng, *shape) for _ in range(8)]
    times = _interleaved({"numpy float32": model, "jitc float32": jitc.jit(model),
                          **functions}, (tests[0],), seconds)
    rows = []
    for label, function in functions.items():
        top1, relative, rms = _agreement(model, function, tests)
        kept = function.selection.kept if function.selection is not None else None
        rows.append({"name": name if not rows else f"  the same, {label}", "top1": top1,
                     "times": {"jitc float32": times["jitc float32"],
                               "jitc.quant int8": times[label]},
                     "relative_error": relative, "rms_error": rms, "kept_float": kept,
                     "quantize_seconds": quantize_seconds[label]})
    rows[0]["times"]["numpy float32"] = times["numpy float32"]
    row, quantized = rows[0], functions["jitc.quant int8"]
    if model.__name__ == "mlp" and min_channels == 1:
        # What 8-bit weights alone cost: the float model (numpy) with each weight replaced
        # by its int8 values times their scales, the activations left in float32.
        cells = dict(zip(model.__code__.co_freevars, (c.cell_contents
                                                      for c in model.__closure__)))
        rounded = {p.weight: (p.quantized.values * p.quantized.scales).astype(np.float32)
                   for p in quantized.products}
        weights_only = mlp_from(*(rounded.get(n, cells[n])
                                  for n in ("w1", "b1", "w2", "b2", "w3", "b3")))
        row["weights_only_top1"] = _agreement(model, weights_only, tests)[0]
    return rows


def matmul_row(seconds: float, rng: np.random.Generator) -> dict:
    a8, b8 = (rng.integers(-128, 128, (1024, 1024)).astype(np.int8) for _ in range(2))
    a, b = _normal(rng, 1024, 1024), _normal(rng, 1024, 1024)

    def int8_matmul(a, b):
        return a.astype(np.int32) @ b.astype(np.int32)

    def matmul(a, b):
        return a @ b

    int8_jit, float_jit = jitc.jit(int8_matmul), jitc.jit(matmul)
    exact = np.array_equal(int8_jit(a8, b8), int8_matmul(a8, b8))
    times = _interleaved({"jitc float32": lambda: float_jit(a, b),
                          "jitc.quant int8": lambda: int8_jit(a8, b8)}, (), seconds)
    return {"name": "matmul 1024 (int8: numpy idiom)", "times": times, "exact": exact}


def _conv_as_matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A 3x3 convolution with padding 1, NCHW by OIHW, as numpy spells it: patches, then a
    matmul."""
    n, c, h, width = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    patches = np.concatenate([padded[:, :, i:i + h, j:j + width] for i in range(3)
                              for j in range(3)], axis=1)          # (n, 9c, h, w), tap-major
    kernel = w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)       # (o, 9c), tap-major
    out = kernel @ patches.reshape(n, 9 * c, h * width)
    return out.reshape(n, w.shape[0], h, width)


def conv_row(seconds: float, rng: np.random.Generator) -> dict:
    x8 = rng.integers(-128, 128, (32, 64, 32, 32)).astype(np.int8)
    w8 = rng.integers(-128, 128, (64, 64, 3, 3)).astype(np.int8)
    x, w = x8.astype(np.float32), w8.astype(np.float32)

    def int8_conv(x, w):
        return jitc.lax.conv_general_dilated(x.astype(np.int32), w.astype(np.int32), (1, 1),
                                             [(1, 1), (1, 1)])

    def conv(x, w):
        return jitc.lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)])

    int8_jit, float_jit = jitc.jit(int8_conv), jitc.jit(conv)
    got = int8_jit(x8, w8)
    exact = np.array_equal(got, _conv_as_matmul(x8.astype(np.int64), w8.astype(np.int64)))
    times = _interleaved({"numpy float32": lambda: _conv_as_matmul(x, w),
                          "jitc float32": lambda: float_jit(x, w),
                          "jitc.quant int8": lambda: int8_jit(x8, w8)}, (), seconds)
    return {"name": "conv 32x64x32x32 3x3 (int8: idiom)", "times": times, "exact": exact}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quant_speed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rows", type=int, default=256, help="the MLP's batch")
    parser.add_argument("--observer", default="minmax", choices=["minmax", "percentile", "mse"])
    parser.add_argument("--activations", default="static", choices=["static", "dynamic"])
    parser.add_argument("--rounding", default="compensated", choices=["compensated", "nearest"])
    parser.add_argument("--agreement", type=float, default=0.99,
                        help="the MLP's extra row: quantize(..., agreement=A); 0 leaves it out")
    parser.add_argument("--block-agreement", type=float, default=0,
                        help="the same for the GPT-2 block (its quantize takes 3x as long)")
    args = parser.parse_args(argv)
    args.agreement = args.agreement or None
    args.block_agreement = args.block_agreement or None
    quant = {"observer": args.observer, "activations": args.activations,
             "rounding": args.rounding}
    rng = np.random.default_rng(0)
    mlp = mlp_model(rng)
    rows = [*model_row(f"MLP 784-1024-1024-10, batch {args.rows}", mlp, (args.rows, 784),
                       args.seconds, rng, agreement=args.agreement, **quant),
            *model_row("  the same, min_channels=1", mlp, (args.rows, 784), args.seconds, rng,
                       min_channels=1, **quant),
            *model_row("GPT-2 block (d=768, 64 tokens)", block_model(rng), (64, 768),
                       args.seconds, rng, agreement=args.block_agreement, **quant),
            matmul_row(args.seconds, rng),
            *model_row("CNN 3 conv + logits, batch 32", cnn_model(rng), (32, 3, 32, 32),
                       args.seconds, rng, **quant),
            conv_row(args.seconds, rng)]
    print(f"{'workload':36} {'numpy f32':>9} {'jitc f32':>9} {'jitc int8':>9} {'f32/int8':>8} "
          f"{'fastest':>15} {'f32/int8':>8}  accuracy")
    for row in rows:
        t = row["times"]
        numpy_ms = f"{1e3 * t['numpy float32'][0]:.2f}" if "numpy float32" in t else "-"
        (f32, f32_fast), (int8, int8_fast) = t["jitc float32"], t["jitc.quant int8"]
        if "top1" in row:
            accuracy = (f"top-1 {100 * row['top1']:.2f}%, max rel. error "
                        f"{row['relative_error']:.3g}, RMS/std {row['rms_error']:.4f}")
        else:
            accuracy = "exact" if row["exact"] else "NOT EXACT"
        fastest = f"{1e3 * f32_fast:.2f}/{1e3 * int8_fast:.2f}"
        print(f"{row['name']:36} {numpy_ms:>9} {1e3 * f32:>9.2f} {1e3 * int8:>9.2f} "
              f"{f32 / int8:>7.2f}x {fastest:>15} {f32_fast / int8_fast:>7.2f}x  {accuracy}")
    print(f"(milliseconds per call: the best of {ROUNDS} interleaved rounds' medians, then the "
          "fastest calls of jitc f32 / int8)")
    quantize_times = ", ".join(f"{row['name'].strip()} {row['quantize_seconds']:.2f} s"
                               for row in rows if "quantize_seconds" in row)
    print(f"jitc.quant.quantize ({args.rounding} rounding, calibration included): "
          f"{quantize_times}")
    for row in rows:
        if row.get("kept_float"):
            kept = ", ".join(f"{name} (use {use})" for name, use in row["kept_float"])
            print(f"{row['name'].strip()}: kept float32 {kept}")
    for row in rows:
        if "weights_only_top1" in row:
            print(f"MLP with all three weights int8 ({args.rounding} rounding), activations "
                  f"float32 (numpy): top-1 {100 * row['weights_only_top1']:.2f}%, what 8-bit "
                  "weights alone cost on this model")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
