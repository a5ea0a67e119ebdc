"""Observers: what calibration remembers of the values that reach one quantized product.

A static activation scale is read from the range an observer saw: `MinMax` keeps the extremes,
`Percentile` drops the rarest values (one outlier in a million otherwise spends most of the 8
bits on a range nothing else uses).
"""

from __future__ import annotations

import numpy as np

# Values a percentile observer keeps per product, drawn evenly from each batch it sees.
PERCENTILE_SAMPLES = 1 << 20
DEFAULT_PERCENTILE = 99.99


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


class Percentile(Observer):
    """The range is the `percentile`-th percentile of the magnitudes seen."""

    def __init__(self, percentile: float = DEFAULT_PERCENTILE) -> None:
        super().__init__()
        if not 50 < percentile <= 100:
            raise ValueError(f"percentile must be in (50, 100], got {percentile}")
        self.percentile = percentile
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

    def bound(self) -> float:
        if not self._samples:
            return super().bound()
        return float(np.percentile(np.concatenate(self._samples), self.percentile))


def make_observer(kind: str, percentile: float) -> Observer:
    if kind == "minmax":
        return MinMax()
    if kind == "percentile":
        return Percentile(percentile)
    raise ValueError(f"observer must be 'minmax' or 'percentile', got {kind!r}")
