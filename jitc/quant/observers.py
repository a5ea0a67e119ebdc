"""Observers: what calibration remembers of the values that reach one quantized product.

A static activation scale is read from the range an observer saw: `MinMax` keeps the extremes,
`Percentile` drops the rarest values (one outlier in a million otherwise spends most of the 8
bits on a range nothing else uses), `MeanSquared` picks the range whose rounding and clipping
together lose the least (the mean squared error over the values seen).
"""

from __future__ import annotations

import numpy as np

from jitc.quant.rounding import INT8_MAX, UINT8_MAX

# Values a percentile observer keeps per product, drawn evenly from each batch it sees.
PERCENTILE_SAMPLES = 1 << 20
DEFAULT_PERCENTILE = 99.99
MSE_GRID = 24  # candidate ranges per step of MeanSquared's search
MSE_SAMPLES = 1 << 18  # of the values kept, how many it measures each candidate on


class Observer:
    """The extremes of everything seen; `bound(signed)` is the largest magnitude to represent."""

    def __init__(self) -> None:
        self.low = np.inf
        self.high = -np.inf
        self.batches = 0

    def update(self, values: np.ndarray) -> None:
        values = np.asarray(values)
        if values.size == 0:
            return
        self.low = min(self.low, float(values.min()))
        self.high = max(self.high, float(values.max()))
        self.batches += 1

    @property
    def non_negative(self) -> bool:
        """Whether every value seen was >= 0 (after a ReLU): then uint8 holds twice the
        resolution of int8."""
        return self.low >= 0

    def bound(self) -> float:
        return max(abs(self.low), abs(self.high))


class MinMax(Observer):
    """The range is the extremes seen."""


class Sampling(Observer):
    """An observer that keeps up to PERCENTILE_SAMPLES magnitudes, evenly drawn."""

    def __init__(self) -> None:
        super().__init__()
        self._samples: list[np.ndarray] = []
        self._kept = 0

    def update(self, values: np.ndarray) -> None:
        super().update(values)
        flat = np.abs(np.asarray(values, np.float64).reshape(-1))
        room = PERCENTILE_SAMPLES - self._kept
        if room <= 0 or flat.size == 0:
            return
        if flat.size > room:  # an even stride keeps the draw deterministic
            flat = flat[::-(-flat.size // room)]
        self._samples.append(flat)
        self._kept += flat.size


class Percentile(Sampling):
    """The range is the `percentile`-th percentile of the magnitudes seen."""

    def __init__(self, percentile: float = DEFAULT_PERCENTILE) -> None:
        super().__init__()
        if not 50 < percentile <= 100:
            raise ValueError(f"percentile must be in (50, 100], got {percentile}")
        self.percentile = percentile

    def bound(self) -> float:
        if not self._samples:
            return super().bound()
        return float(np.percentile(np.concatenate(self._samples), self.percentile))


class MeanSquared(Sampling):
    """The range, among fractions of the largest magnitude, with the least mean squared error
    of the values seen once rounded to its levels (127 for int8, 255 for uint8: the
    quantizer is symmetric, so a magnitude's error is its value's) and clipped to it."""

    def bound(self) -> float:
        peak = Observer.bound(self)
        if not self._samples or not peak > 0:
            return peak
        magnitudes = np.concatenate(self._samples)
        magnitudes = magnitudes[::-(-magnitudes.size // MSE_SAMPLES)]
        levels = UINT8_MAX if self.non_negative else INT8_MAX

        def error(bound: float) -> float:
            step = bound / levels
            rounded = np.minimum(np.rint(magnitudes / step), levels) * step
            return float(np.mean((rounded - magnitudes) ** 2))

        # A coarse grid over (0, 1] of the peak, then a finer one around its best point.
        coarse = np.linspace(1 / MSE_GRID, 1.0, MSE_GRID)
        best = min(coarse, key=lambda f: error(f * peak))
        fine = np.linspace(max(best - 1 / MSE_GRID, 1 / MSE_GRID ** 2),
                           min(best + 1 / MSE_GRID, 1.0), MSE_GRID)
        return float(min(fine, key=lambda f: error(f * peak)) * peak)


def make_observer(kind: str, percentile: float) -> Observer:
    if kind == "minmax":
        return MinMax()
    if kind == "percentile":
        return Percentile(percentile)
    if kind == "mse":
        return MeanSquared()
    raise ValueError(f"observer must be 'minmax', 'percentile' or 'mse', got {kind!r}")
