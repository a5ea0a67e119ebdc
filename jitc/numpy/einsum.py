"""np.einsum with any subscripts, lowered to diagonals, sums, broadcasts and dot_general.

Each operand first loses its repeated indices (`ii->i` takes a diagonal) and the indices no
other operand and not the output names (summed at once); then operands are contracted two at a
time, the pair whose product is smallest first (a greedy order: numpy's default loops over all
operands at once, which costs the product of every index's size). Indices of size 1 broadcast
against the other operands' sizes, as numpy's do.
"""

from __future__ import annotations

import string
from collections import Counter, defaultdict

import numpy as np

from jitc.ir import symbolic
from jitc.ir.symbolic import DimLike, is_static
from jitc.numpy._core import implements, lift_all, unsupported
from jitc.numpy.linalg import dot_general
from jitc.numpy.reductions import reduce
from jitc.numpy.shapes import broadcast_to, transpose
from jitc.tracing.errors import located
from jitc.tracing.tracer import Tracer

LETTERS = string.ascii_uppercase + string.ascii_lowercase  # numpy's sublist integers 0..51


def _from_sublists(args: tuple) -> tuple[str, list]:
    """The interleaved form einsum(x, [0, 1], y, [1, 2], [0, 2]) as subscripts and operands."""
    operands, terms = list(args[0::2]), []
    output = None
    if len(args) % 2 == 1:
        output = args[-1]
        operands = list(args[0:-1:2])

    def letters(sublist) -> str:
        text = ""
        for s in sublist:
            if s is Ellipsis:
                text += "..."
            elif isinstance(s, (int, np.integer)) and 0 <= s < len(LETTERS):
                text += LETTERS[s]
            else:
                raise ValueError(located(f"einsum: subscript {s!r} is not an integer in "
                                         f"[0, {len(LETTERS)}) or Ellipsis"))
        return text

    terms = [letters(s) for s in args[1::2][:len(operands)]]
    spec = ",".join(terms) + ("" if output is None else "->" + letters(output))
    return spec, operands


def _parse(spec: str, operands: list[Tracer]) -> tuple[list[str], str]:
    """(one term per operand, the output), with ellipses spelled out as letters no term uses."""
    spec = spec.replace(" ", "")
    inputs_text, arrow, output = spec.partition("->")
    if any(c in inputs_text + output for c in "->"):
        raise ValueError(located(f"einsum: {spec!r}: '->' must appear once at most, and '-' "
                                 "or '>' nowhere else"))
    inputs = inputs_text.split(",")
    if len(inputs) != len(operands):
        raise ValueError(located(f"einsum: {spec!r} names {len(inputs)} operands, "
                                 f"{len(operands)} were given"))
    for c in spec.replace("...", ""):
        if c not in LETTERS and c not in ",->":
            raise ValueError(located(f"einsum: invalid subscript {c!r} in {spec!r}: "
                                     "subscripts are letters"))
    unused = iter(c for c in reversed(LETTERS) if c not in spec)
    ellipsis = ""
    terms = []
    for term, x in zip(inputs, operands):
        named = len(term.replace("...", ""))
        if "..." in term:
            dims = x.ndim - named
            if dims < 0:
                raise ValueError(located(f"einsum: {term!r} names {named} axes for an operand "
                                         f"of shape {x.aval.short()}"))
            while len(ellipsis) < dims:
                ellipsis = next(unused) + ellipsis
            term = term.replace("...", ellipsis[len(ellipsis) - dims:])
        elif named != x.ndim:
            raise ValueError(located(f"einsum: {term!r} has {named} subscripts for an operand "
                                     f"of shape {x.aval.short()}; add '...' to broadcast the "
                                     "others"))
        terms.append(term)
    if not arrow:
        counts = Counter("".join(terms))
        return terms, ellipsis + "".join(sorted(c for c, n in counts.items()
                                                if n == 1 and c not in ellipsis))
    if "..." not in output and ellipsis:
        raise ValueError(located(f"einsum: {spec!r}: the output has no '...' for the "
                                 f"{len(ellipsis)} axes the inputs' '...' stand for"))
    output = output.replace("...", ellipsis)
    for c in output:
        if output.count(c) > 1:
            raise ValueError(located(f"einsum: output subscript {c!r} appears more than once"))
        if not any(c in t for t in terms):
            raise ValueError(located(f"einsum: output subscript {c!r} is in no input"))
    return terms, output


def _diagonals(x: Tracer, term: str) -> tuple[Tracer, str]:
    """x with each repeated index reduced to its diagonal (moved to the end)."""
    for c in dict.fromkeys(term):
        while term.count(c) > 1:
            first = term.index(c)
            second = term.index(c, first + 1)
            if x.shape[first] != x.shape[second]:
                raise ValueError(located(f"einsum: index {c!r} repeats in one operand with sizes "
                                         f"{x.shape[first]} and {x.shape[second]}"))
            x = np.diagonal(x, axis1=first, axis2=second)
            term = "".join(t for i, t in enumerate(term) if i not in (first, second)) + c
    return x, term


def _sizes(xs: list[Tracer], terms: list[str]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for x, term in zip(xs, terms):
        for c, n in zip(term, x.shape):
            if sizes.get(c, 1) != 1 and n != 1 and n != sizes[c]:
                if not (is_static(n) and is_static(sizes[c])):
                    continue  # the broadcast and dot rules record their equality
                raise ValueError(located(f"einsum: index {c!r} has size {sizes[c]} in one "
                                         f"operand and {n} in another: they do not broadcast"))
            sizes[c] = n if sizes.get(c, 1) == 1 else sizes[c]
    return sizes


def _sum_unneeded(x: Tracer, term: str, needed: set[str]) -> tuple[Tracer, str]:
    axes = tuple(i for i, c in enumerate(term) if c not in needed)
    if not axes:
        return x, term
    return reduce(x, axes, "sum"), "".join(c for c in term if c in needed)


def _contract(x: Tracer, xs: str, y: Tracer, ys: str, keep: set[str]) -> tuple[Tracer, str]:
    if not xs or not ys:  # a scalar operand: a plain product
        return np.multiply(x, y), xs + ys
    batch = [c for c in xs if c in ys and c in keep]
    summed = [c for c in xs if c in ys and c not in keep]
    result = dot_general(x, y, ([xs.index(c) for c in summed], [ys.index(c) for c in summed]),
                         ([xs.index(c) for c in batch], [ys.index(c) for c in batch]))
    free_x = [c for c in xs if c not in ys]
    free_y = [c for c in ys if c not in xs]
    return result, "".join(batch + free_x + free_y)


# What a symbol counts as when contraction orders are compared: symbols are "large".
_SYMBOL_ESTIMATE = 1024


def _result_size(a: str, b: str, keep: set[str], sizes: dict[str, DimLike]) -> int:
    size: DimLike = 1
    for c in set(a) ^ set(b) | (set(a) & set(b) & keep):
        size *= sizes[c]
    return symbolic.evaluate(size, defaultdict(lambda: _SYMBOL_ESTIMATE))


def einsum_traced(spec: str, xs: list[Tracer]) -> Tracer:
    terms, output = _parse(spec, xs)
    pairs = [_diagonals(x, t) for x, t in zip(xs, terms)]
    xs, terms = [p[0] for p in pairs], [p[1] for p in pairs]
    sizes = _sizes(xs, terms)
    xs = [broadcast_to(x, tuple(sizes[c] for c in t)) if x.shape != tuple(sizes[c] for c in t)
          else x for x, t in zip(xs, terms)]
    while True:
        # Sum what only one operand (and not the output) names; then, while operands remain
        # to join, contract the pair whose result is smallest.
        for i in range(len(xs)):
            others = set(output).union(*(t for j, t in enumerate(terms) if j != i))
            xs[i], terms[i] = _sum_unneeded(xs[i], terms[i], others)
        if len(xs) == 1:
            break
        best = None
        for i in range(len(xs)):
            for j in range(i + 1, len(xs)):
                keep = set(output).union(*(t for k, t in enumerate(terms) if k not in (i, j)))
                cost = _result_size(terms[i], terms[j], keep, sizes)
                if best is None or cost < best[0]:
                    best = (cost, i, j, keep)
        _, i, j, keep = best
        joined, term = _contract(xs[i], terms[i], xs[j], terms[j], keep)
        xs = [x for k, x in enumerate(xs) if k not in (i, j)] + [joined]
        terms = [t for k, t in enumerate(terms) if k not in (i, j)] + [term]
    result, term = xs[0], terms[0]
    if term != output:
        result = transpose(result, [term.index(c) for c in output])
    return result


@implements(np.einsum)
def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    if out is not None:
        raise unsupported("numpy.einsum(..., out=...)")
    if not operands:
        raise ValueError(located("einsum: no subscripts given"))
    if isinstance(operands[0], str):
        spec, arrays = operands[0], list(operands[1:])
    else:
        spec, arrays = _from_sublists(operands)
    xs = lift_all(arrays, dtype)
    if any(x.dtype == np.bool_ for x in xs):
        raise unsupported("einsum of bool arrays", "Convert them with .astype(int) first.")
    return einsum_traced(spec, xs)
