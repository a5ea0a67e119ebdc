"""How far a quantized function's results are from its float function's."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from jitc.quant.products import Product
from jitc.tracing import pytree


@dataclass
class Report:
    """The products quantized and the error against the float function on some inputs.

    Errors are over every element of every float result; `top1_agreement` is the fraction of
    rows (all but the last axis, of the results with at least two entries on it) whose largest
    entry is at the same place in both: the class a classifier predicts."""

    products: list[Product]
    samples: int
    max_abs_error: float
    mean_abs_error: float
    max_relative_error: float   # max_abs_error / the largest magnitude of the float results
    top1_agreement: float | None
    float_bytes: int            # the quantized weights, as the float function holds them
    int8_bytes: int             # the same as int8, with their scales
    left_float: list[str] = field(default_factory=list)  # weights kept float, and why
    rows: int = 0               # the rows top1_agreement counts

    def __str__(self) -> str:
        lines = [f"jitc.quant: {len(self.products)} product(s) in int8; weights "
                 f"{self.float_bytes / 2**20:.2f} MiB -> {self.int8_bytes / 2**20:.2f} MiB"]
        lines += [f"  {p.describe()}" for p in self.products]
        lines += [f"  {note}" for note in self.left_float]
        top1 = "n/a" if self.top1_agreement is None else f"{100 * self.top1_agreement:.2f}%"
        if self.rows:
            top1 += f" of {self.rows} rows"
        lines.append(f"against the float function on {self.samples} input(s): max abs error "
                     f"{self.max_abs_error:.4g}, mean abs error {self.mean_abs_error:.4g}, "
                     f"max relative error {self.max_relative_error:.4g}, top-1 agreement {top1}")
        return "\n".join(lines)


def _float_leaves(result: object) -> list[np.ndarray]:
    leaves, _ = pytree.flatten(result, lambda x: not isinstance(x, (tuple, list, dict)))
    return [np.asarray(leaf) for leaf in leaves
            if np.asarray(leaf).dtype.kind in "fc"]


def compare(products: Sequence[Product], reference: Callable, quantized: Callable,
            inputs: Iterable[tuple]) -> Report:
    peak = worst = total = 0.0
    count = agree = rows = samples = 0
    for args in inputs:
        samples += 1
        want, got = _float_leaves(reference(*args)), _float_leaves(quantized(*args))
        for w, g in zip(want, got):
            w64, g64 = np.asarray(w, np.float64), np.asarray(g, np.float64)
            error = np.abs(w64 - g64)
            if error.size:
                worst = max(worst, float(error.max()))
                total += float(error.sum())
                count += error.size
                peak = max(peak, float(np.abs(w64).max()))
            if w.ndim >= 1 and w.shape[-1] >= 2 and w.size:
                agree += int(np.sum(np.argmax(w64, axis=-1) == np.argmax(g64, axis=-1)))
                rows += w.size // w.shape[-1]
    float_bytes = sum(p.weight_dtype.itemsize * int(np.prod(p.weight_shape))
                      for p in products)
    int8_bytes = sum(p.quantized.values.nbytes + p.quantized.scales.nbytes
                     for p in products if p.quantized is not None)
    return Report(list(products), samples, worst, total / count if count else 0.0,
                  worst / peak if peak else 0.0, agree / rows if rows else None,
                  float_bytes, int8_bytes, rows=rows)
