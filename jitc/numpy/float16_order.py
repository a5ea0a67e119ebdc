"""numpy's order of float16 sums and products, which its rounding makes visible.

numpy computes each float16 addition or multiplication in float32 and rounds the result to
float16 where it stores it. A reduction's inner loop runs along the innermost memory axis: when
that axis is reduced, the loop combines the row in float32 (pairwise for sums) and rounds once;
every other reduced axis is an outer loop whose steps each round to float16. So
`x.sum(axis=0)` of a C-ordered (n, m) float16 array is n float16 additions, row after row, and
a running sum (`np.cumsum`, `np.add.accumulate`) rounds after every element. Accumulating in
float32 and rounding once, as jitc's `reduce` op does, gives other bits in most elements.

This module gives numpy's bits for C-ordered operands (jitc's arguments, and numpy's results
of elementwise functions of them): the inner rows with the `reduce` op in float32, the outer
steps as float16 operations, unrolled when few and a loop otherwise. numpy's order for a
transposed view differs (its inner loop then runs along another axis); jitc keeps the C order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jitc.ir import ops
from jitc.ir.symbolic import is_static
from jitc.numpy._core import convert, lift
from jitc.numpy.shapes import broadcast_to, concatenate, reshape, slice_axis, transpose
from jitc.tracing.state import emit
from jitc.tracing.tracer import Tracer

# Outer steps up to this many are unrolled; longer ones run as a loop (the unrolled code, and
# its compile time, grow with the length).
UNROLLED_STEPS = 16

_COMBINE: dict[str, Callable[[Tracer, Tracer], Tracer]] = {
    "sum": lambda x, y: emit(ops.ADD, [x, y]), "prod": lambda x, y: emit(ops.MUL, [x, y])}
_IDENTITY = {"sum": 0, "prod": 1}


def applies(x: Tracer, kind: str) -> bool:
    """Whether x's sum or product (`kind`) follows numpy's float16 order here (static
    shapes)."""
    return x.dtype == np.float16 and kind in _COMBINE and all(is_static(d) for d in x.shape)


def _rounded(kind: str, acc: Tracer, value: Tracer) -> Tracer:
    """One numpy float16 step: the float16 `acc` combined with a float32 value, rounded."""
    return convert(_COMBINE[kind](convert(acc, np.float32), value), np.float16)


def reduce_in_numpys_order(x: Tracer, axes: tuple[int, ...], kind: str,
                           initial: object = None) -> Tracer:
    """The float16 sum or product of x over the sorted `axes` (dropped), as numpy rounds it:
    the trailing reduced axes (size-1 axes aside) in float32, the other reduced axes step by
    step in float16, starting from `initial` (or the identity)."""
    inner = _trailing_reduced(x.shape, axes)
    outer = [a for a in axes if a not in inner]
    start = lift(np.float16(_IDENTITY[kind] if initial is None else initial))
    partial = convert(x, np.float32)
    if inner:
        partial = emit(ops.REDUCE, [partial], {"dims": tuple(inner), "kind": kind})
    if not outer:
        return _rounded(kind, start, partial)
    # The inner axes were the last ones: partial keeps x's other axes in their places.
    kept = [a for a in range(partial.ndim) if a not in outer]
    kept_shape = tuple(partial.shape[a] for a in kept)
    steps = int(np.prod([x.shape[a] for a in outer], dtype=np.int64))
    rows = reshape(transpose(partial, outer + kept), (steps,) + kept_shape)
    acc = broadcast_to(start, kept_shape)
    if steps <= UNROLLED_STEPS:
        for i in range(steps):
            acc = _rounded(kind, acc, _at(rows, i))
        return acc
    from jitc import lax  # jitc.lax imports jitc.numpy
    return lax.fori_loop(0, steps, lambda i, acc: _rounded(kind, acc, _dynamic_at(rows, i)),
                         acc)


def _trailing_reduced(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[int]:
    """The reduced axes numpy's inner loop runs along: the last ones, over axes of size 1."""
    inner: list[int] = []
    for a in reversed(range(len(shape))):
        if a in axes:
            inner.insert(0, a)
        elif shape[a] != 1:
            break
    return inner


def _at(rows: Tracer, i: int) -> Tracer:
    return reshape(slice_axis(rows, 0, i, i + 1), rows.shape[1:])


def _dynamic_at(rows: Tracer, i: Tracer) -> Tracer:
    from jitc import lax
    start = [i] + [np.int64(0)] * (rows.ndim - 1)
    return reshape(lax.dynamic_slice(rows, start, [1, *rows.shape[1:]]), rows.shape[1:])


def accumulate_in_numpys_order(x: Tracer, axis: int, kind: str) -> Tracer:
    """numpy's float16 running sum or product along `axis`: each element combined with the
    previous result in float32 and rounded to float16."""
    n = x.shape[axis]
    if n <= 1:
        return x.copy_tracer()
    order = [axis] + [a for a in range(x.ndim) if a != axis]
    moved = transpose(x, order)
    first = _at(moved, 0)
    if n <= UNROLLED_STEPS:
        results = [first]
        for i in range(1, n):
            results.append(_rounded(kind, results[-1], convert(_at(moved, i), np.float32)))
        out = concatenate([reshape(r, (1,) + r.shape) for r in results], 0)
    else:
        from jitc import lax

        def step(acc: Tracer, item: Tracer) -> tuple[Tracer, Tracer]:
            total = _rounded(kind, acc, convert(item, np.float32))
            return total, total
        _, rest = lax.scan(step, first, slice_axis(moved, 0, 1, n))
        out = concatenate([reshape(first, (1,) + first.shape), rest], 0)
    return transpose(out, np.argsort(order).tolist())
