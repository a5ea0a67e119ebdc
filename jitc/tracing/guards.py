"""A compiled check that a jitted function's captured state still has the traced structure.

`capture.walk` finds the state a function reads (see jitc.tracing.capture) by following its
globals, cells and `self` through containers, objects and helper functions: general, and
10-30 µs per call on a model object. A repeated call only needs to know that the walk would
find the same thing again: the same arrays (by path; their shapes and dtypes the C dispatcher
checks), the same scalar values, the same containers with the same sizes, the same sharing.

`compile_reader` walks the state once, by the walk's own rules, and writes that knowledge down
as straight-line Python: one type check, one length check or one lookup per object visited,
then the arrays in the walk's order. It returns None the moment anything differs (the caller
then walks and compiles the general way), so it can only ever say "the same as traced".

Why generated code: the checks are the walk unrolled over one known structure, so every
decision that depends only on the structure (which path, which rule, which constant) is taken
once, here, instead of on every call. A model of a few dozen objects checks in a few µs.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from jitc.tracing import capture

_STATE_ERRORS = (KeyError, IndexError, AttributeError, TypeError, ValueError)
GUARD_IS, GUARD_TYPE, GUARD_ARRAY = 0, 1, 2  # the modes of runtime/pymodule.c's Guarded


def loaded_globals(fun: Callable) -> frozenset[str]:
    """The names `fun`'s code (and code nested in it) loads, stores or deletes as globals:
    those whose absence the trace depended on (not attribute names, also in `co_names`)."""
    names: set[str] = set()
    stack = [getattr(fun, "__code__", None)]
    while stack:
        code = stack.pop()
        if code is None:
            continue
        names.update(i.argval for i in dis.get_instructions(code)
                     if i.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL"))
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return frozenset(names)


class CheckWriter:
    """Straight-line Python checks, written line by line and made a function by `build`:
    variables for the values looked at, constants the checks compare with, and an early
    return of `miss` at the first check that fails."""

    def __init__(self, variable_prefix: str, miss: str) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, object] = {}
        self.prefix, self.miss = variable_prefix, miss
        self.count = 0

    def new(self, expression: str) -> str:
        name = f"{self.prefix}{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {expression}")
        return name

    def constant(self, value: object) -> str:
        name = f"k{len(self.constants)}"
        self.constants[name] = value
        return name

    def fail_unless(self, condition: str) -> None:
        self.lines.append(f"if not ({condition}): return {self.miss}")

    def build(self, source: str, name: str, filename: str, scope: dict[str, Any]) -> Callable:
        """Function `name` defined by `source`, run with `scope` and the constants."""
        namespace = {**scope, **self.constants}
        exec(compile(source, filename, "exec"), namespace)
        return namespace[name]


class _Writer(CheckWriter):
    """Emits the checks of one walk; mirrors `capture._walk` rule for rule."""

    def __init__(self, extent_paths: frozenset[capture.Path] = frozenset()) -> None:
        super().__init__("v", "None")
        self.extent_paths = extent_paths  # captured ints carried as extents
        self.arrays: list[tuple[capture.Path, str]] = []
        self.first_seen: dict[int, str] = {}      # id(object) -> the variable that holds it
        self.array_vars: dict[int, str] = {}      # id(captured array) -> its variable
        # The same checks as data, while every check is one the C runtime can make itself
        # (runtime/pymodule.c, Guarded): a value found in a dict or a cell is an object, has
        # a type, or is an array to pass on. None once a check is not of that kind.
        self.sources: dict[str, tuple[object, object]] = {}  # variable -> (container, key)
        self.c_guards: list[tuple] | None = []

    def sourced(self, container: object, key: object, expression: str) -> str:
        """A new variable for `expression`, which is `container[key]` (a dict; a cell's
        contents when key is None)."""
        var = self.new(expression)
        self.sources[var] = (container, key)
        return var

    def guard(self, var: str, expected: object, mode: int) -> None:
        """Record the check just written on `var`: GUARD_IS `expected`, its type GUARD_TYPE
        `expected`, or GUARD_ARRAY (an array, read)."""
        if self.c_guards is None:
            return
        source = self.sources.get(var)
        if source is None:
            self.c_guards = None
        else:
            self.c_guards.append((*source, expected, mode))

    def opaque(self) -> None:
        """The checks written include one the C runtime cannot make."""
        self.c_guards = None

    def node(self, var: str, value: object, path: capture.Path, depth: int,
             in_list: bool = False) -> None:
        if not in_list and capture.is_carried(value, path, self.extent_paths):
            self.opaque()
            self.fail_unless(f"type({var}) is int and {var} >= 0")
            self.arrays.append((path, self.new(f"extent_carrier({var})")))
            return
        if type(value) is np.ndarray:
            self.fail_unless(f"type({var}) is ndarray")
            if capture.is_static_array(value) or id(value) in self.array_vars:
                self.opaque()  # compared by value, or one array by two paths
            else:
                self.guard(var, None, GUARD_ARRAY)
            if capture.is_static_array(value):
                self.fail_unless(f"{var}.dtype.str == {value.dtype.str!r} and "
                                 f"{var}.shape == {value.shape!r} and "
                                 f"{var}.tobytes() == {self.constant(value.tobytes())}")
            elif id(value) in self.array_vars:
                self.fail_unless(f"{var} is {self.array_vars[id(value)]}")
            else:
                self.array_vars[id(value)] = var
                self.arrays.append((path, var))
            return
        if isinstance(value, capture.SCALARS):
            self.opaque()
            if in_list:  # not a guard: it only has to stay a scalar
                self.fail_unless(f"isinstance({var}, SCALARS)")
            elif value != value:  # NaN
                self.fail_unless(f"type({var}) is {self.constant(type(value))} and "
                                 f"{var} != {var}")
            else:
                self.fail_unless(f"type({var}) is {self.constant(type(value))} and "
                                 f"{var} == {self.constant(value)}")
            return
        if depth >= capture._MAX_DEPTH:
            self.fail_unless(f"type({var}) is {self.constant(type(value))}")
            self.guard(var, type(value), GUARD_TYPE)
            return
        if id(value) in self.first_seen:
            # The walk visits an object once: the same sharing keeps the same walk.
            self.fail_unless(f"{var} is {self.first_seen[id(value)]}")
            self.guard(var, value, GUARD_IS)
            return
        if isinstance(value, types.FunctionType):
            self.fail_unless(f"{var} is {self.constant(value)}")
            self.guard(var, value, GUARD_IS)
            if capture._user_module(value.__module__ or "builtins"):
                self.first_seen[id(value)] = var
                found: dict[tuple, tuple[str, object]] = {}  # first step -> (variable, value)
                for steps, child in capture._function_children(value):
                    if len(steps) == 1:
                        child_var = self.step_variable(value, steps[0])
                        found[steps[0]] = child_var, child
                    else:  # a module's attribute: (the global or cell holding it, its name)
                        child_var = self.module_attribute(*found[steps[0]], steps[1][1])
                    self.node(child_var, child, path + steps, depth + 1)
            return
        if capture._user_class(value):
            self.opaque()
            self.fail_unless(f"{var} is {self.constant(value)}")
            self.first_seen[id(value)] = var
            for klass in capture.user_classes(value):  # type: ignore[arg-type]
                self.fail_unless(f"len({self.constant(klass)}.__dict__) == {len(vars(klass))}")
            for step, child in capture._children(value):
                self.node(self.new(f"getattr({var}, {step[1]!r})"), child, path + (step,),
                          depth + 1)
            return
        if isinstance(value, (dict, list, tuple)) or capture._plain_object(value):
            self.opaque()
            self.first_seen[id(value)] = var
            self.fail_unless(f"type({var}) is {self.constant(type(value))}")
            if isinstance(value, (dict, list, tuple)):
                self.fail_unless(f"len({var}) == {len(value)}")
                lookup = f"{var}[{{!r}}]"
            else:
                own = self.new(f"{var}.__dict__")
                self.fail_unless(f"len({own}) == {len(vars(value))}")
                for klass in capture.user_classes(type(value)):
                    self.fail_unless(f"len({self.constant(klass)}.__dict__) == "
                                     f"{len(vars(klass))}")
                lookup = f"{own}.get({{!r}}, MISSING)"
            for step, child in capture._children(value):
                key = step[1]
                expression = lookup.format(key)
                if not isinstance(value, (dict, list, tuple)) and key not in vars(value):
                    expression = f"getattr({var}, {key!r})"  # a class attribute
                self.node(self.new(expression), child, path + (step,), depth + 1,
                          in_list or isinstance(value, list))
            return
        # Everything else the trace used as it is (capture._walk): the same object only.
        self.fail_unless(f"{var} is {self.constant(value)}")
        self.guard(var, value, GUARD_IS)

    def module_attribute(self, module_var: str, module: object, name: str) -> str:
        """A variable for `module.name` (the module already checked to be `module`)."""
        var = self.sourced(vars(module), name, f"{module_var}.{name}")
        if name not in vars(module):  # found by the module's __getattr__: no dict to look in
            self.opaque()
        return var

    def step_variable(self, fun: types.FunctionType, step: tuple) -> str:
        kind, key = step
        if kind == "fglobal":
            return self.sourced(fun.__globals__, key,
                                f"{self.constant(fun.__globals__)}[{key!r}]")
        cell = fun.__closure__[key]  # type: ignore[index]
        return self.sourced(cell, None, f"{self.constant(cell)}.cell_contents")


def compile_reader(fun: Callable, names: tuple[str, ...], captured: capture.Captured,
                   instance: object = capture._MISSING
                   ) -> Callable[[object], tuple | None] | None:
    """`read(instance)`: the captured arrays, in `captured`'s order, while the state still has
    the structure and the guarded values it had when `captured` was walked; else None.

    None instead of a reader when the state found now differs from `captured` (it changed
    since): the caller keeps to the general path.
    """
    writer = _Writer(captured.extent_paths)
    namespace = getattr(fun, "__globals__", {})
    loaded = loaded_globals(fun)
    space = writer.constant(namespace)
    for name in names:
        value = namespace.get(name, capture._MISSING)
        if value is capture._MISSING:
            if name in loaded:
                writer.opaque()
                writer.fail_unless(f"{name!r} not in {space}")
            continue
        var = writer.sourced(namespace, name, f"{space}[{name!r}]")
        writer.node(var, value, (("global", name),), 0)
        if isinstance(value, types.ModuleType):
            for step, child in capture._module_children(value, names):
                writer.node(writer.module_attribute(var, value, step[1]), child,
                            (("global", name), step), 0)
    for i, cell in enumerate(getattr(fun, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell stays empty, or the reader fails on it
            writer.opaque()
            writer.fail_unless(f"not _filled({writer.constant(cell)})")
            continue
        var = writer.sourced(cell, None, f"{writer.constant(cell)}.cell_contents")
        root = capture._cell_root(fun, i)
        writer.node(var, value, (root,), 0)
        if isinstance(value, types.ModuleType):
            for step, child in capture._module_children(value, names):
                writer.node(writer.module_attribute(var, value, step[1]), child,
                            (root, step), 0)
    if instance is not capture._MISSING:
        writer.opaque()
        writer.node("instance", instance, (("self",),), 0)
    if [p for p, _ in writer.arrays] != [p for p, _ in captured.arrays]:
        return None
    body = "\n        ".join(writer.lines) or "pass"
    result = ", ".join(v for _, v in writer.arrays)
    source = (f"def read(instance):\n    try:\n        {body}\n"
              f"    except STATE_ERRORS:\n        return None\n"
              f"    return ({result}{',' if writer.arrays else ''})\n")
    read = writer.build(source, "read", f"<jitc state reader of {getattr(fun, '__name__', '?')}>",
                        {"ndarray": np.ndarray, "SCALARS": capture.SCALARS,
                         "MISSING": capture._MISSING, "STATE_ERRORS": _STATE_ERRORS,
                         "extent_carrier": capture.extent_carrier,
                         "_filled": _filled})
    # The same checks as data, when the C runtime can make them all itself
    # (dispatch.positional_path).
    guards = writer.c_guards
    read.c_guards = None if guards is None else tuple(guards)
    return read


def _filled(cell: types.CellType) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


__all__ = ["CheckWriter", "compile_reader", "loaded_globals"]
