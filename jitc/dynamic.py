"""The policy of `jit(dynamic=...)`: which dimensions a compilation makes symbolic, and
whether a symbolic compilation serves a call (docs/dynamic-shapes.md, "Automatic policy").

- `None` (the default): the first call compiles for its exact shapes; a call that differs from
  an earlier exact signature only in some extents, each of them at least 2 in the new call,
  compiles once with those dimensions symbolic (guarded `>= 2`), and that compilation serves
  every later call its constraints accept. Extents 0 and 1 keep exact compilations: they are
  where numpy's broadcasting and empty-axis rules change meaning.
- `True`: every dimension of every array argument symbolic from the first call.
- `False`: one compilation per signature.
- `{"x": {0: "batch"}, "y": {0: "batch"}}`: the named dimensions symbolic from the first call;
  one name on several dimensions states that they are equal.

The rest of a signature (argument names, dtypes, ranks, static arguments, captured arrays)
must match exactly; only extents become symbols.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from jitc.ir import symbolic
from jitc.ir.symbolic import Constraint
from jitc.tracing.function import ArgSpec

Policy = bool | dict[str, dict[int, str]] | None
GUARD = 2  # the automatic policy's symbols are at least this (docs/dynamic-shapes.md)


def normalize(dynamic: object) -> Policy:
    """The policy as `jit` keeps it; TypeError or ValueError naming what is wrong."""
    if dynamic is None or isinstance(dynamic, bool):
        return dynamic
    if not isinstance(dynamic, Mapping):
        raise TypeError("jit(dynamic=...) takes None, True, False or a dict such as "
                        f"{{'x': {{0: 'batch'}}}}, not {type(dynamic).__name__}")
    policy: dict[str, dict[int, str]] = {}
    for argument, axes in dynamic.items():
        if not isinstance(argument, str) or not isinstance(axes, Mapping):
            raise TypeError(f"jit(dynamic=...): {argument!r}: expected an argument name "
                            "mapped to {axis: symbol name}")
        for axis, name in axes.items():
            if not isinstance(axis, int) or isinstance(axis, bool):
                raise TypeError(f"jit(dynamic=...): axis {axis!r} of {argument!r} is not an int")
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_]\w*", name):
                raise ValueError(f"jit(dynamic=...): the symbol for axis {axis} of "
                                 f"{argument!r} must be an identifier, not {name!r}")
        policy[argument] = dict(axes)
    return policy


@dataclass(frozen=True)
class Plan:
    """A symbolic compilation to try: argument specs with symbols, the guards to add to the
    traced module's constraints, why (`reason`, for `compile_stats`) and what asked for it
    (`cause`, which an exact compilation names when the symbolic one is refused)."""

    specs: tuple[ArgSpec, ...]
    guards: tuple[Constraint, ...]
    reason: str
    cause: str

    def refused(self, why: str) -> str:
        return f"{self.cause}; the symbolic compilation is refused ({why}): exact compilation"


def _symbol_name(leaf: str, axis: int) -> str:
    name = re.sub(r"\W+", "_", leaf).strip("_")  # st['buf'] -> st_buf
    return f"{name}_{axis}" if name[:1].isalpha() or name[:1] == "_" else f"a_{name}_{axis}"


def _alike(a: ArgSpec, b: ArgSpec) -> bool:
    return (a.weak, a.array, a.extent, a.type.dtype, a.type.rank) == \
        (b.weak, b.array, b.extent, b.type.dtype, b.type.rank)


def _with_symbols(specs: Sequence[ArgSpec], symbols: Mapping[tuple[int, int], str]
                  ) -> tuple[ArgSpec, ...]:
    out = []
    for index, spec in enumerate(specs):
        shape = tuple(symbolic.symbol(symbols[index, axis]) if (index, axis) in symbols else d
                      for axis, d in enumerate(spec.type.shape))
        out.append(replace(spec, type=spec.type.with_shape(shape)) if shape != spec.type.shape
                   else spec)
    return tuple(out)


def _explicit(policy: dict[str, dict[int, str]], leaves: Sequence[str],
              specs: Sequence[ArgSpec]) -> Plan | None:
    symbols: dict[tuple[int, int], str] = {}
    for argument, axes in policy.items():
        if argument not in leaves:
            raise ValueError(f"jit(dynamic=...) names argument {argument!r}, but the call's "
                             f"array arguments are {', '.join(leaves) or 'none'}")
        index = leaves.index(argument)
        rank = specs[index].type.rank
        for axis, name in axes.items():
            if not -rank <= axis < rank:
                raise ValueError(f"jit(dynamic=...): {argument!r} has {rank} dimensions; "
                                 f"there is no axis {axis}")
            symbols[index, axis % rank] = name
    if not symbols:
        return None
    named = ", ".join(f"dimension {axis} of {leaves[index]} is {name}"
                      for (index, axis), name in symbols.items())
    return Plan(_with_symbols(specs, symbols), (), f"first call: {named} (dynamic=...)",
                "dynamic=... names symbolic dimensions")


def _every_dimension(leaves: Sequence[str], specs: Sequence[ArgSpec], arguments: int
                     ) -> Plan | None:
    symbols = {(index, axis): _symbol_name(leaves[index], axis)
               for index, spec in enumerate(specs) if spec.array and index < arguments
               for axis in range(spec.type.rank)}
    if not symbols:
        return None
    return Plan(_with_symbols(specs, symbols), (),
                "first call: every dimension symbolic (dynamic=True)", "dynamic=True")


def _changed(leaves: Sequence[str], specs: Sequence[ArgSpec],
             earlier: Sequence[tuple[ArgSpec, ...]]) -> tuple[Plan | None, str]:
    """The automatic policy: a plan from the most recent earlier exact signature that differs
    from `specs` only in extents of at least GUARD, else None and why the call compiles
    exactly."""
    why = "first call" if not earlier else "a new signature"
    for previous in reversed(earlier):
        if len(previous) != len(specs) or not all(map(_alike, previous, specs)):
            continue
        changed = [(index, axis, old, new)
                   for index, (p, s) in enumerate(zip(previous, specs))
                   for axis, (old, new) in enumerate(zip(p.type.shape, s.type.shape))
                   if old != new]
        if not changed or any(index >= len(leaves) for index, *_ in changed):
            continue  # an unnamed spec changed: nothing to name
        # Only the new extent must be past the guard: the earlier size keeps its own exact
        # compilation, so a sweep 1, 2, 3, ... compiles twice (1 exactly, then n >= 2).
        small = [(index, axis, old, new) for index, axis, old, new in changed
                 if new < GUARD]
        if small:
            index, axis, old, new = small[0]
            if why.startswith("dimension"):
                continue  # the most recent signature's reason stands
            why = (f"dimension {axis} of {leaves[index]} changed ({old} -> {new}); sizes 0 "
                   "and 1 get exact compilations")
            continue
        # Dimensions that changed the same way share one symbol (the batch of x and of y).
        names: dict[tuple[int, int], str] = {}
        symbols: dict[tuple[int, int], str] = {}
        for index, axis, old, new in changed:
            symbols[index, axis] = names.setdefault((old, new), _symbol_name(leaves[index],
                                                                             axis))
        guards = tuple(symbolic.at_least(symbolic.symbol(name), GUARD)
                       for name in dict.fromkeys(names.values()))
        said = ", ".join(f"dimension {axis} of {leaves[index]} changed ({old} -> {new})"
                         for index, axis, old, new in changed)
        return Plan(_with_symbols(specs, symbols), guards, f"{said}: now symbolic", said), ""
    return None, why


def plan(policy: Policy, leaves: Sequence[str], specs: Sequence[ArgSpec],
         earlier: Sequence[tuple[ArgSpec, ...]], arguments: int | None = None
         ) -> tuple[Plan | None, str]:
    """The symbolic compilation to try for a call with `specs` (None: compile exactly), and
    the reason an exact compilation gives. `leaves` names the specs: the first `arguments`
    (default: all) are the argument leaves, the rest captured arrays, whose changed extents
    the automatic policy makes symbolic too (`dynamic=True` leaves them static); `earlier`
    holds this structure's exact signatures, oldest first."""
    if policy is False:
        return None, "first call" if not earlier else "a new signature (dynamic=False)"
    if policy is True:
        count = len(leaves) if arguments is None else arguments
        return _every_dimension(leaves, specs, count), "no array argument"
    if isinstance(policy, dict):
        return _explicit(policy, leaves, specs), "no dimension named by dynamic=..."
    return _changed(leaves, specs, earlier)


def served(symbolic_specs: Sequence[ArgSpec], specs: Sequence[ArgSpec],
           constraints: Sequence[Constraint]) -> tuple[bool, str]:
    """Whether a compilation for `symbolic_specs` (bare symbols or static extents) serves a
    call with `specs`; when not, the reason (a failed constraint, or a different signature)."""
    if len(symbolic_specs) != len(specs) or not all(map(_alike, symbolic_specs, specs)):
        return False, "a different signature"
    env: dict[str, int] = {}
    for compiled, actual in zip(symbolic_specs, specs):
        for dim, size in zip(compiled.type.shape, actual.type.shape):
            name = symbolic.symbol_name(dim)
            if name is None:
                if dim != size:
                    return False, "a different signature"
            elif env.setdefault(name, size) != size:
                return False, f"{name} is both {env[name]} and {size}"
    for constraint in constraints:
        if not constraint.holds(env):
            values = ", ".join(f"{s}={env[s]}" for s in sorted(constraint.symbols))
            return False, f"constraint {constraint} failed ({values})"
    return True, ""


__all__ = ["GUARD", "Plan", "Policy", "normalize", "plan", "served"]
