"""Which products stay float32 so that top-1 agreement reaches a target (quantize's
`agreement`).

The agreement of a choice is measured on calibration inputs the quantized function was not
calibrated on: the samples are split in two halves (even and odd positions), a plan is
calibrated on each half and its quantized function is compared with the float function on the
other half, so that every calibration row counts once, held out. Top-1 agreement on a thousand
rows moves by a few tenths of a point from one draw of inputs to the next; holding out one
batch of 256 rows instead left the decision to chance on bench/quant_speed.py's MLP, whose
agreement with every product in int8 is 98.6%.

Products are kept float32 most sensitive first: a product's sensitivity is the mean absolute
error of the function with that product alone in int8 (smoother than its top-1 count).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from jitc.quant.products import Plan
from jitc.quant.report import compare

Key = tuple[str, int]
# Calibrates a plan on some samples with the given products kept float32 (key -> why).
Build = Callable[[Sequence[tuple], Mapping[Key, str]], Plan]
# The quantized function of a plan calibrated on some samples.
Make = Callable[[Plan, Sequence[tuple]], Callable]


@dataclass
class Selection:
    """What quantize's `agreement` chose: the products kept float32, in the order they were
    kept, and the held-out agreement after each step (the first with every product int8)."""

    target: float
    rows: int                                        # held-out rows each agreement counts
    kept: list[Key] = field(default_factory=list)
    agreements: list[float] = field(default_factory=list)
    notes: dict[Key, str] = field(default_factory=dict)  # what the report says of each kept

    @property
    def agreement(self) -> float:
        """The held-out top-1 agreement of the chosen products."""
        return self.agreements[-1]


def select(fun: Callable, samples: Sequence[tuple], target: float, build: Build, make: Make
           ) -> Selection:
    """Keep products float32, most sensitive first, until the held-out top-1 agreement of
    `fun`'s quantized function reaches `target` (every product float32 reaches it)."""
    folds = [(samples[0::2], samples[1::2]), (samples[1::2], samples[0::2])]
    plans = [build(calibrate, {}) for calibrate, _ in folds]
    keys = list(dict.fromkeys(key for plan in plans for key in plan.products))
    measured: dict[frozenset[Key], tuple[float, float, int]] = {}
    results: dict[tuple[int, ...], object] = {}

    def reference(*args: object) -> object:
        """`fun`'s float results, computed once per held-out sample."""
        key = tuple(map(id, args))
        if key not in results:
            results[key] = fun(*args)
        return results[key]

    def measure(kept: frozenset[Key]) -> tuple[float, float, int]:
        """(top-1 agreement, mean abs error, rows) on the held-out halves."""
        if kept not in measured:
            agree = error = 0.0
            rows = 0
            for plan, (calibrate, held_out) in zip(plans, folds):
                plan.kept_float = {key: "" for key in kept}
                quantized = make(plan, calibrate)
                report = compare(list(plan.products.values()), reference, quantized, held_out)
                if report.top1_agreement is None:
                    raise ValueError(
                        f"quantize: agreement= compares the top-1 (argmax over the last axis) "
                        f"of {getattr(fun, '__name__', 'the function')}'s results, which have "
                        "no axis of two or more entries; leave agreement out")
                agree += report.top1_agreement * report.rows
                error += report.mean_abs_error * report.rows
                rows += report.rows
            measured[kept] = (agree / rows, error / rows, rows)
        return measured[kept]

    agreement, _, rows = measure(frozenset())
    selection = Selection(target, rows, [], [agreement])
    if agreement >= target:
        return selection
    shapes = {key: plan.products[key].weight_shape for plan in plans for key in plan.products}
    alone = {key: measure(frozenset(keys) - {key})[1] for key in keys} if len(keys) > 1 \
        else {key: 0.0 for key in keys}
    for key in sorted(keys, key=lambda k: -alone[k]):
        selection.kept.append(key)
        selection.agreements.append(measure(frozenset(selection.kept))[0])
        selection.notes[key] = _note(selection, key, shapes[key])
        if selection.agreement >= target:
            break
    return selection


def _note(selection: Selection, key: Key, shape: tuple[int, ...]) -> str:
    """What the report says of the product `key` the selection has just kept float32."""
    before, after = selection.agreements[-2:]
    return (f"{key[0]}[{'x'.join(map(str, shape))}] (use {key[1]}): kept float32 for "
            f"agreement={selection.target:g} (held-out top-1 {100 * before:.2f}% -> "
            f"{100 * after:.2f}% of {selection.rows} rows)")
