"""jitc's float32 convolutions, as products over patches (the convolution_products pass) and
as the direct loop (the pass disabled), beside numpy's patches and a matmul.

Run: ``python -m bench.conv_speed`` (``--seconds S`` per implementation and row). Rows:

- the CNN layer 32x64x32x32 by 64x64x3x3, NCHW, "valid" over the input padded once by hand
  (34x34: what `padding=1` computes, with no padding under a tap) and with `padding=1`, which
  stays direct (a zero of the padding times an infinite tap would be nan in patches);
- 16 output features of that layer, and 4 (below the pass's 8: direct);
- the padded rows also on the C backend, and a smaller padded layer, 8x32x18x18 by 32x32x3x3;
- np.convolve 100000 by 31, float64, "valid" (one output feature: direct).

Timings are quant_speed's interleaved rounds: the best round's median and the fastest call.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

import jitc
from bench.quant_speed import _interleaved


def patches_matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A valid NCHW by OIHW convolution as numpy spells it: windows, then one matmul."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    cols = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    oh, ow = cols.shape[2:4]
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    return (cols @ w.reshape(o, -1).T).reshape(n, oh, ow, o).transpose(0, 3, 1, 2)


def _valid(x, w):
    return jitc.lax.conv_general_dilated(x, w, (1, 1), ())


def _padded(x, w):
    return jitc.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))


def _conv_rows(seconds: float, rng: np.random.Generator) -> list[tuple[str, dict]]:
    x = rng.standard_normal((32, 64, 32, 32), np.float32)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    rows = []
    for features in (64, 16, 4):
        w = rng.standard_normal((features, 64, 3, 3), np.float32)
        calls: dict[str, Callable] = {
            "numpy patches+matmul": patches_matmul,
            "jitc": jitc.jit(_valid),
            "jitc without the pass": jitc.jit(_valid,
                                              disabled_passes=["convolution_products"])}
        expected = patches_matmul(padded, w)
        for name in ("jitc", "jitc without the pass"):
            np.testing.assert_allclose(calls[name](padded, w), expected, rtol=1e-3, atol=1e-3)
        rows.append((f"conv 32x64x34x34 by {features}x64x3x3 valid",
                     _interleaved(calls, (padded, w), seconds)))
        if features == 64:
            rows.append(_padded_row("conv 32x64x32x32 by 64x64x3x3 padding 1", x, w, seconds))
    x = rng.standard_normal((8, 32, 18, 18), np.float32)
    w = rng.standard_normal((32, 32, 3, 3), np.float32)
    rows.append(_padded_row("conv 8x32x18x18 by 32x32x3x3 padding 1", x, w, seconds))
    return rows


def _padded_row(name: str, x: np.ndarray, w: np.ndarray, seconds: float) -> tuple[str, dict]:
    """A padded convolution (direct on both backends) beside numpy's patches of the input
    padded by hand."""
    def numpy_padded(x, w):
        return patches_matmul(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), w)
    calls: dict[str, Callable] = {"numpy patches+matmul": numpy_padded,
                                  "jitc": jitc.jit(_padded),
                                  "jitc c backend": jitc.jit(_padded, backend="c")}
    expected = numpy_padded(x, w)
    for impl in ("jitc", "jitc c backend"):
        np.testing.assert_allclose(calls[impl](x, w), expected, rtol=1e-3, atol=1e-3)
    return name, _interleaved(calls, (x, w), seconds)


def _convolve_row(seconds: float, rng: np.random.Generator) -> tuple[str, dict]:
    a, v = rng.standard_normal(100_000), rng.standard_normal(31)

    def convolve(a, v):
        return np.convolve(a, v, "valid")
    return "np.convolve 100000 by 31 valid f64", _interleaved(
        {"numpy": convolve, "jitc": jitc.jit(convolve)}, (a, v), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for name, times in [*_conv_rows(args.seconds, rng), _convolve_row(args.seconds, rng)]:
        cells = ", ".join(f"{impl} {median * 1e3:.1f} ms (fastest {fastest * 1e3:.1f})"
                          for impl, (median, fastest) in times.items())
        print(f"{name}: {cells}")


if __name__ == "__main__":
    main()
