"""What `jitc dump` and `jitc bench FILE:FUNCTION` share: a function named on the command line,
the argument signatures given as `--input 'f32[B,784]'`, and random arrays of them."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jitc.ir import dtypes

_SIGNATURE = re.compile(r"^\s*(\w+)\s*\[([^\]]*)\]\s*$")


class CommandError(Exception):
    """A mistake in the command line or the model file: one line for the user."""


@dataclass(frozen=True)
class InputSpec:
    """One argument: its dtype and its dimensions, each a size or a symbol (`B`)."""

    dtype: np.dtype
    dims: tuple[int | str, ...]

    @classmethod
    def parse(cls, text: str) -> InputSpec:
        """`f32[B,784]`, `i64[10]`, `f64[]` (a 0-d array)."""
        match = _SIGNATURE.match(text)
        if match is None:
            raise CommandError(f"--input {text!r}: expected a dtype and dimensions such as "
                               "'f32[B,784]'")
        try:
            dtype = np.dtype(dtypes.by_name(match.group(1)).numpy)
        except (KeyError, ValueError):
            names = ", ".join(d.name for d in dtypes.ALL)
            raise CommandError(f"--input {text!r}: unknown dtype {match.group(1)!r}; one of "
                               f"{names}") from None
        dims: list[int | str] = []
        for part in filter(None, (p.strip() for p in match.group(2).split(","))):
            if part.isdigit():
                dims.append(int(part))
            elif part.isidentifier():
                dims.append(part)
            else:
                raise CommandError(f"--input {text!r}: dimension {part!r} is neither a size "
                                   "nor a name")
        return cls(dtype, tuple(dims))

    def symbols(self) -> set[str]:
        return {d for d in self.dims if isinstance(d, str)}

    def shape(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        missing = sorted(self.symbols() - set(sizes))
        if missing:
            raise CommandError(f"no size for {', '.join(missing)}: give it as --size "
                               f"{missing[0]}=8 (jitc bench: --sweep {missing[0]}=1,8,64)")
        return tuple(sizes[d] if isinstance(d, str) else d for d in self.dims)

    def random(self, sizes: Mapping[str, int], rng: np.random.Generator) -> np.ndarray:
        shape = self.shape(sizes)
        if self.dtype.kind == "b":
            return rng.random(shape) < 0.5
        if self.dtype.kind in "iu":
            return rng.integers(0, 10, shape).astype(self.dtype)
        return rng.standard_normal(shape).astype(self.dtype)


def parse_sizes(items: Sequence[str]) -> dict[str, int]:
    """`["B=8"]` -> {"B": 8}."""
    sizes = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name.strip().isidentifier() or not value.strip().isdigit():
            raise CommandError(f"--size {item!r}: expected NAME=SIZE such as B=8")
        sizes[name.strip()] = int(value)
    return sizes


def load_function(target: str) -> tuple[Callable, Callable]:
    """`FILE.py:FUNCTION` -> (the jitted function, the plain numpy one). A function the file
    already decorates with `jitc.jit` keeps its options."""
    import jitc

    path_text, _, name = target.rpartition(":")
    if not path_text or not name:
        raise CommandError(f"{target!r}: expected FILE.py:FUNCTION")
    path = Path(path_text)
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))  # its own imports, as `python FILE` would
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    function = getattr(module, name, None)
    if function is None:
        raise CommandError(f"{path}: defines no {name!r}")
    if isinstance(function, jitc.Jitted):
        return function, function.fun
    if not callable(function):
        raise CommandError(f"{path}:{name} is a {type(function).__name__}, not a function")
    return jitc.jit(function), function


def random_inputs(specs: Sequence[InputSpec], sizes: Mapping[str, int],
                  seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [s.random(sizes, rng) for s in specs]
