"""Test arguments for the op table: value sets with edge values, shapes and memory layouts.

An `Arg` describes one argument (shape, values, layout, optionally a fixed dtype or a Python
scalar); `build` turns it into the array for a dtype. Edge values (signed zeros, infinities,
nan, subnormals, the integer extremes) are placed at random positions of every array that is
big enough; an axis of size -1 holds exactly the edge values, in order, so that a column of
them against a row of them covers every pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Filler = Callable[[np.dtype, np.random.Generator, int], np.ndarray]
Edges = Callable[[np.dtype], Sequence[object]]

INF, NAN = float("inf"), float("nan")


def bits(dtype: np.dtype) -> int:
    return np.dtype(dtype).itemsize * 8


def uniform(low: float, high: float, integral: bool = False) -> Filler:
    """Random values in [low, high], clipped to the dtype's range; bools are random."""
    def fill(dtype: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
        if dtype.kind == "b":
            return rng.random(n) < 0.5
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            lo, hi = max(int(low), int(info.min)), min(int(high), int(info.max))
            return rng.integers(lo, hi, n, endpoint=True)
        x = rng.uniform(low, high, n)
        return np.round(x) if integral else x
    return fill


def _float_edges(dtype: np.dtype, huge: bool = True) -> list[float]:
    info = np.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    edges = [0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, -3.75, 100.0, tiny, -tiny,
             float(info.smallest_normal), INF, -INF, NAN]
    return edges + ([float(info.max), -float(info.max)] if huge else [])


def _int_edges(dtype: np.dtype) -> list[int]:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    edges = [0, 1, 2, 7, hi, hi - 1]
    if lo < 0:
        edges += [-1, -2, -7, lo, lo + 1]
    else:
        edges += [(hi + 1) // 2]
    return edges


def _any_edges(dtype: np.dtype) -> list[object]:
    if dtype.kind == "b":
        return [False, True]
    return _int_edges(dtype) if dtype.kind in "iu" else _float_edges(dtype)


def _small(values: Sequence[int], specials: Sequence[float] = ()) -> Edges:
    """Small integers (non-negative ones for unsigned dtypes); floats also get -0.0 and
    `specials`."""
    def edges(dtype: np.dtype) -> list[object]:
        if dtype.kind == "b":
            return [False, True]
        kept = [v for v in values if v >= 0 or dtype.kind != "u"]
        return kept + ([-0.0, *specials] if dtype.kind == "f" else [])
    return edges


@dataclass(frozen=True)
class Values:
    """A named value set: edge values for a dtype, and a filler for the remaining elements.
    Filler values listed in `avoid` are replaced by `instead`."""

    name: str
    edges: Edges
    fill: Filler
    avoid: tuple[float, ...] = ()
    instead: float = 3

    def array(self, dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator
              ) -> np.ndarray:
        if dtype.kind == "c":
            # Each part drawn from the set for the float dtype of the parts: edge values
            # (inf, nan, signed zeros) meet each other in the two parts.
            part = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
            out = np.empty(tuple(len(self.edges(part)) if d == -1 else d for d in shape),
                           dtype)
            out.real = self.array(part, shape, rng)
            imag = self.array(part, shape, rng)
            out.imag = imag[::-1] if -1 in shape else imag
            return out
        edges = list(self.edges(dtype))
        if -1 in shape:
            sized = tuple(len(edges) if d == -1 else d for d in shape)
            return np.broadcast_to(np.array(edges, dtype).reshape(
                [len(edges) if d == -1 else 1 for d in shape]), sized).copy()
        n = math.prod(shape)
        flat = np.asarray(self.fill(dtype, rng, n))
        if self.avoid:
            flat = np.where(np.isin(flat, self.avoid), self.instead, flat)
        flat = flat.astype(dtype)
        count = min(n, len(edges))
        chosen = rng.permutation(len(edges))[:count]
        flat[rng.permutation(n)[:count]] = np.array([edges[i] for i in chosen], dtype)
        return flat.reshape(shape)

    def scalar(self, dtype: np.dtype, rng: np.random.Generator) -> object:
        """A Python scalar of the dtype's kind (weakly typed under NEP 50), from the filler."""
        if dtype.kind == "c":
            part = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
            return complex(self.scalar(part, rng), self.scalar(part, rng))
        value = np.asarray(self.fill(dtype, rng, 1))
        if self.avoid:
            value = np.where(np.isin(value, self.avoid), self.instead, value)
        return value.astype(dtype)[0].item()


# Everything: signed zeros, infinities, nan, subnormals, extremes of the dtype.
ANY = Values("any", _any_edges, uniform(-50, 50))
# As ANY without the largest floats (trigonometry of 1e308 is not what these cases test).
MODERATE = Values("moderate", lambda d: _float_edges(d, huge=False) if d.kind == "f"
                  else _any_edges(d), uniform(-10, 10))
# Finite values of moderate size (the parts of complex arguments of exp, log, sin...).
FINITE = Values("finite", _small([0, 1, -1, 2, -3], [0.5, -2.5, 1e-3]), uniform(-4, 4))
# Small integers (integral floats): sums and products are exact in every dtype and order.
SMALL = Values("small", _small([0, 1, -1, 2, -2, 3, -3]), uniform(-3, 3, integral=True))
SMALL_SPECIAL = Values("small_special", _small([0, 1, -1, 2, -3], [INF, -INF, NAN]),
                       uniform(-3, 3, integral=True))
# Factors whose products stay exact (powers of two) in every dtype.
FACTORS = Values("factors", _small([1, -1, 2, -2]), uniform(-2, 2, integral=True),
                 avoid=(0,), instead=1)
# Integer divisors where numpy's integer division is defined (no 0, no -1 against MIN).
NONZERO = Values("nonzero", lambda d: [v for v in _any_edges(d) if v not in (0, -1)],
                 uniform(-50, 50), avoid=(0, -1))
# Integer powers that cannot overflow int8: bases in [-3, 3], exponents in [0, 4].
POW_BASE = Values("pow_base", lambda d: _small([0, 1, -1, 2, -2, 3, -3])(d)
                  if d.kind in "iu" else _any_edges(d), uniform(-3, 3))
EXPONENT = Values("exponent", lambda d: [0, 1, 2, 3, 4] if d.kind in "iu" else _any_edges(d),
                  uniform(0, 4))
NEGATIVE_EXPONENT = Values("negative_exponent", lambda d: [-4, -3, -2, -1, 0, 1, 2],
                           uniform(-4, 2))
# Shift amounts below the bit width, and ones outside it (the IR defines those too).
SHIFT = Values("shift", lambda d: [0, 1, bits(d) - 1],
               lambda d, rng, n: rng.integers(0, bits(d), n))
ANY_SHIFT = Values("any_shift",
                   lambda d: [0, 1, bits(d) - 1, bits(d), bits(d) + 1, 100]
                   + ([-1, -3, int(np.iinfo(d).min)] if d.kind == "i" else []),
                   lambda d, rng, n: rng.integers(0 if d.kind == "u" else -3, bits(d) + 3, n,
                                                  endpoint=True))


def in_range_of(target: object) -> Values:
    """Floats whose conversion to the integer `target` is defined in numpy (and C): the
    truncated value is representable. Other dtypes get ANY."""
    info = np.iinfo(target)

    def bounds(dtype: np.dtype) -> tuple[float, float]:
        big = float(np.finfo(dtype).max)
        hi = np.nextafter(dtype.type(min(info.max + 1.0, big)), dtype.type(0))
        lo = np.nextafter(dtype.type(max(info.min - 1.0, -big)), dtype.type(0))
        return float(lo), float(hi)

    def edges(dtype: np.dtype) -> list[object]:
        if dtype.kind != "f":
            return _any_edges(dtype)
        lo, hi = bounds(dtype)
        return [0.0, -0.0, 0.5, -0.5, 1.0, 2.75, lo, hi, float(np.trunc(hi)),
                float(np.trunc(lo))] + ([-1.0, -2.75] if info.min < 0 else [])

    def fill(dtype: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
        if dtype.kind != "f":
            return ANY.fill(dtype, rng, n)
        lo, hi = bounds(dtype)
        return rng.uniform(max(lo, -1000.0), min(hi, 1000.0), n)

    return Values(f"in_range_of_{np.dtype(target)}", edges, fill)


def indices(n: int) -> Values:
    """Valid numpy indices into an axis of size n, negative ones included (not for unsigned
    dtypes)."""
    def edges(dtype: np.dtype) -> list[int]:
        return [0, n - 1] + ([-1, -n] if dtype.kind == "i" else [])
    return Values(f"indices_{n}", edges,
                  lambda d, rng, size: rng.integers(0 if d.kind == "u" else -n, n, size))


def integers(low: int, high: int) -> Values:
    """Integers in [low, high] with both ends as edge values (clipped for unsigned dtypes)."""
    def edges(dtype: np.dtype) -> list[int]:
        return [v for v in (low, high, 0) if v >= 0 or dtype.kind != "u"]
    return Values(f"integers_{low}_{high}", edges, uniform(low, high))


# -- arguments ---------------------------------------------------------------------------------

LAYOUTS = {
    "C": "row-major",
    "F": "column-major (np.asfortranarray)",
    "T": "a transposed view of a row-major array",
    "S": "a view taking every second element of each axis",
    "N": "a view with negative strides on every axis",
}


@dataclass(frozen=True)
class Arg:
    """One argument: shape (-1: the edge values along that axis), value set, memory layout
    (a key of LAYOUTS), a fixed dtype instead of the case's, or a Python scalar."""

    shape: tuple[int, ...] = ()
    values: Values = ANY
    layout: str = "C"
    dtype: str | None = None
    python: bool = False

    def build(self, dtype: np.dtype, rng: np.random.Generator) -> object:
        dt = np.dtype(self.dtype or dtype)
        if self.python:
            return self.values.scalar(dt, rng)
        return with_layout(self.values.array(dt, self.shape, rng), self.layout)


def with_layout(a: np.ndarray, layout: str) -> np.ndarray:
    """The same values as `a` in the memory layout `layout` (see LAYOUTS)."""
    if layout == "C" or a.ndim == 0:
        return a
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "T":
        return np.ascontiguousarray(a.T).T
    if layout == "S":
        big = np.zeros(tuple(2 * d for d in a.shape), a.dtype)
        view = big[(slice(None, None, 2),) * a.ndim]
        view[...] = a
        return view
    if layout == "N":
        flipped = (slice(None, None, -1),) * a.ndim
        return np.ascontiguousarray(a[flipped])[flipped]
    raise ValueError(f"unknown layout {layout!r}; expected one of {sorted(LAYOUTS)}")
