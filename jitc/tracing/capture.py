"""State a jitted function reads without receiving it: globals, closure variables, `self`.

numpy reads such state when it runs, so a jitted function must too. Before each call, `walk`
follows the function's globals (the names its code uses), its closure cells and, for a method,
`self`, through lists, tuples, dicts, the attributes of plain objects, the helper functions it
names (their globals and cells in turn) and the attributes of the user's modules it names.
What it finds:

- arrays become implicit arguments: read at call time, so a change in place or a rebinding
  between calls is seen by the next call; their shapes and dtypes join the cache key;
- Python scalars (int, float, bool, str, None) are guards: the trace uses their values as
  constants, and a new value traces anew (the cache key holds them);
- except an int that has changed between calls (`self.pos`, a step counter) under jit's
  automatic dynamic policy: from then on it is an *extent*, carried as the first extent of a
  zero-size array (`extent_carrier`), so that it can be a symbolic dimension.

While tracing, the function runs on a *shadow* of that state: a copy of its globals and cells
and of every container, object, helper function and module on the way, with a Tracer in place
of each array. What the
function did to the shadow is then replayed on the real state after each call (`WriteBack`):
writes into an array are copied into it in place, and a rebinding (`self.pos += 1`,
`self.cache = np.concatenate(...)`, `global step; step += 1`) assigns the new value.
"""

from __future__ import annotations

import functools
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jitc.ir.symbolic import Dim
from jitc.tracing.errors import TraceError

# A path: its root, ("global", name) | ("cell", i, name) | ("self",), then steps,
# ("attr", name) | ("item", key).
Path = tuple
SCALARS = (bool, int, float, complex, str, bytes, type(None))
_MAX_DEPTH = 6
_MISSING = object()


def code_global_names(fun: Callable) -> tuple[str, ...]:
    """The global names `fun`'s code (and the code nested in it) may load."""
    names: list[str] = []
    stack = [getattr(fun, "__code__", None)]
    while stack:
        code = stack.pop()
        if code is None:
            continue
        names.extend(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return tuple(dict.fromkeys(names))


def _plain_object(value: object) -> bool:
    """An instance of a user's class, whose attributes are its state: not a module, function
    or class, and not an object of the standard library or an installed package (a logger's
    counters are no model state)."""
    return (hasattr(value, "__dict__")
            and not isinstance(value, (type, types.ModuleType, types.FunctionType,
                                       types.MethodType, types.BuiltinFunctionType))
            and _user_module(getattr(type(value), "__module__", None) or "builtins"))


_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib",
                                                           "platlib")})


@functools.cache
def _user_module(name: str) -> bool:
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or top in ("jitc", "numpy"):
        return False
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return file is None or not file.startswith(_LIBRARY_DIRS)


# Small integer and boolean arrays are read as values, like scalars: they are index arrays and
# masks, which decide shapes (`x[mask]`) and are bounds-checked as numpy does.
STATIC_ARRAY_ELEMENTS = 4096


def is_static_array(array: np.ndarray) -> bool:
    return array.dtype.kind in "biu" and array.size <= STATIC_ARRAY_ELEMENTS


@dataclass
class Captured:
    """What one walk found: arrays (implicit arguments) and scalar guards, by path; small
    integer and boolean arrays are guards too (their bytes are part of the key)."""

    arrays: list[tuple[Path, np.ndarray]]
    scalars: list[tuple[Path, object]]
    containers: list[tuple[Path, object]] = field(default_factory=list)  # lists and dicts
    # Further paths to an array already in `arrays` (by index): one array, one parameter.
    aliases: list[tuple[Path, int]] = field(default_factory=list)
    array_index: dict[int, int] = field(default_factory=dict)  # id(array) -> index
    structured: bool = False  # a list, tuple, dict or object lies on the way
    # The user's functions it may call and the classes of the objects it reads, by identity:
    # rebinding a helper, or an object of another class in an object's place, traces anew.
    identities: list[tuple[Path, object]] = field(default_factory=list)
    # Paths of ints to carry as extents (asked for), and those carried (among `arrays`).
    extent_paths: frozenset[Path] = frozenset()
    carried: set[Path] = field(default_factory=set)

    def key(self) -> tuple:
        """What a compilation must match exactly. The arrays' shapes are not in it: they are
        specs of the call like the arguments' (jit's dynamic policy may make them symbolic:
        a KV cache that grows by a row per call)."""
        return (tuple((p, a.ndim, a.dtype.str, p in self.carried) for p, a in self.arrays),
                tuple((p, type(v), _guard_value(v)) for p, v in self.scalars),
                tuple(self.aliases), tuple(self.identities))

    def __bool__(self) -> bool:
        return bool(self.arrays or self.scalars or self.identities)

    def prefixes(self) -> set[Path]:
        """Every container on the way to something captured (those the trace copies)."""
        return {path[:n] for path, _ in self.arrays + self.scalars
                for n in range(1, len(path))}


def _guard_value(value: object) -> object:
    if isinstance(value, np.ndarray):
        return (value.shape, value.dtype.str, value.tobytes())
    return value if value == value else "nan"


def roots(fun: Callable, names: tuple[str, ...], instance: object = _MISSING
          ) -> Iterator[tuple[Path, object]]:
    """(path, value) for what the jitted function reads: the globals it names (through the
    user's modules among them), its cells, and `self`."""
    yield from _reads(fun, names, lambda name: ("global", name), lambda i: _cell_root(fun, i))
    if instance is not _MISSING:
        yield (("self",),), instance


def _reads(fun: Callable, names: tuple[str, ...], global_step: Callable[[str], tuple],
           cell_step: Callable[[int], tuple]) -> Iterator[tuple[Path, object]]:
    """(steps, value) for the globals `names` of `fun` and for its closure cells (a module
    among them: also its attributes that `names` name), each first step made by `global_step`
    or `cell_step`."""
    namespace = getattr(fun, "__globals__", {})
    for name in names:
        value = namespace.get(name, _MISSING)
        if value is _MISSING:
            continue
        yield (global_step(name),), value
        if isinstance(value, types.ModuleType):
            for step, child in _module_children(value, names):
                yield (global_step(name), step), child
    for i, cell in enumerate(getattr(fun, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: a name bound later
            continue
        yield (cell_step(i),), value
        if isinstance(value, types.ModuleType):  # `import layers` inside the enclosing def
            for step, child in _module_children(value, names):
                yield (cell_step(i), step), child


def _cell_root(fun: Callable, i: int) -> tuple:
    return ("cell", i, fun.__code__.co_freevars[i])


@functools.lru_cache(maxsize=1024)
def extent_carrier(value: int) -> np.ndarray:
    """The zero-size array that carries the Python int `value` (>= 0) as its first extent; never
    written, so one per value serves every call."""
    return np.empty((value, 0), np.int8)


def is_carried(value: object, path: Path, extent_paths: frozenset[Path]) -> bool:
    """Whether the captured `value` at `path` is carried as an extent (a non-negative int at a
    path made an extent; a negative one stays a guard: no extent is negative)."""
    return type(value) is int and value >= 0 and path in extent_paths


def walk(fun: Callable, names: tuple[str, ...], instance: object = _MISSING,
         extent_paths: frozenset[Path] = frozenset()) -> Captured:
    """What `fun` (bound to `instance`) reads; the ints at `extent_paths` carried as
    extents."""
    found = Captured([], [], extent_paths=extent_paths)
    seen: set[int] = set()
    for path, value in roots(fun, names, instance):
        _walk(value, path, found, seen, 0)
    return found


def _module_children(module: types.ModuleType, names: tuple[str, ...]
                     ) -> Iterator[tuple[tuple, object]]:
    """The attributes of a user's module that code naming it may read (`layers.W`,
    `layers.attention(x)`): those whose names the code uses."""
    if not _user_module(module.__name__):
        return
    for name in names:
        value = getattr(module, name, _MISSING)
        if value is not _MISSING and not isinstance(value, types.ModuleType):
            yield ("mattr", name), value


def _function_children(fun: types.FunctionType) -> Iterator[tuple[Path, object]]:
    """(steps, value) for what a helper function reads: its globals and its closure cells."""
    return _reads(fun, code_global_names(fun), lambda name: ("fglobal", name),
                  lambda i: ("fcell", i))


def _step(value: object, kind: str, key: object) -> Any:
    if kind in ("attr", "mattr"):
        return getattr(value, key)  # type: ignore[arg-type]
    if kind == "fglobal":
        return value.__globals__[key]  # type: ignore[attr-defined]
    if kind == "fcell":
        return value.__closure__[key].cell_contents  # type: ignore[attr-defined,index]
    return value[key]  # type: ignore[index]


def _children(value: object) -> Iterator[tuple[tuple, object]]:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, (str, int)):
                yield ("item", k), v
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield ("item", i), v
    elif _user_class(value):
        for k, v in class_attributes(value):  # type: ignore[arg-type]
            yield ("attr", k), v
    elif _plain_object(value):
        own = vars(value)
        for k, v in own.items():
            yield ("attr", k), v
        for k, v in class_attributes(type(value)):
            if k not in own:
                yield ("attr", k), v


def _user_class(value: object) -> bool:
    return isinstance(value, type) and _user_module(value.__module__ or "builtins")


def class_attributes(cls: type) -> Iterator[tuple[str, object]]:
    """The arrays and scalars a user's class (and its user base classes) holds for its
    instances (`W = np.ones(...)`, `heads = 12` in the class body): `self.W` reads them."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if klass is object or not _user_module(klass.__module__ or "builtins"):
            continue
        for k, v in vars(klass).items():
            if k.startswith("__") or k in seen:
                continue
            seen.add(k)
            if type(v) is np.ndarray or isinstance(v, SCALARS):
                yield k, v


def user_classes(cls: type) -> list[type]:
    """The classes of `cls`'s method resolution order that `class_attributes` reads."""
    return [k for k in cls.__mro__
            if k is not object and _user_module(k.__module__ or "builtins")]


def _walk(value: object, path: Path, found: Captured, seen: set[int], depth: int,
          in_list: bool = False) -> None:
    if type(value) is np.ndarray:
        if is_static_array(value):
            found.scalars.append((path, value))
        elif id(value) in found.array_index:
            found.aliases.append((path, found.array_index[id(value)]))
        else:
            found.array_index[id(value)] = len(found.arrays)
            found.arrays.append((path, value))
        return
    if not in_list and is_carried(value, path, found.extent_paths):
        found.carried.add(path)
        found.arrays.append((path, extent_carrier(value)))  # type: ignore[arg-type]
        return
    if isinstance(value, SCALARS):
        # Scalars in lists are not guards: lists of Python values are logs and counters that
        # grow (`calls.append(...)`), which would retrace every call.
        if not in_list:
            found.scalars.append((path, value))
        return
    if in_list and isinstance(value, Dim):
        # A symbolic extent a trace logged (`shapes.append(x.shape)`): a log, like the
        # scalars beside it; held by identity it would make every later call trace anew.
        return
    if depth >= _MAX_DEPTH or id(value) in seen:
        return
    if isinstance(value, types.FunctionType):
        # A helper the function calls reads its own globals and cells when it runs: their
        # arrays are captured too (by identity, see `TraceState.captured`) and their scalars
        # guard the trace.
        found.identities.append((path, Same(value)))
        if id(value) in seen or not _user_module(value.__module__ or "builtins"):
            return
        seen.add(id(value))
        for steps, child in _function_children(value):
            _walk(child, path + steps, found, seen, depth + 1)
        return
    if _user_class(value):
        # `Config.W`: a class's arrays are read at call time like any other state. The
        # trace reads them through the class itself and finds their tracers by identity.
        seen.add(id(value))
        found.structured = True
        found.identities.append((path, value))
        for step, child in _children(value):
            _walk(child, path + (step,), found, seen, depth + 1)
        return
    if isinstance(value, (dict, list, tuple)) or _plain_object(value):
        found.structured = True
        seen.add(id(value))
        if not isinstance(value, (dict, list, tuple)):
            found.identities.append((path, type(value)))
        if isinstance(value, (dict, list)):
            found.containers.append((path, value))
        for step, child in _children(value):
            _walk(child, path + (step,), found, seen, depth + 1,
                  in_list or isinstance(value, list))
        return
    # Anything else the trace may have used as it was: a module, a numpy function or ufunc, a
    # builtin, a library's class, an enum member, a dtype. Another object in its place (`act =
    # np.sin` after `np.tanh`) may compute something else: it traces anew.
    found.identities.append((path, Same(value)))


class Same:
    """An object in a cache key by identity (any object: unhashable ones, and ones whose `==`
    is elementwise or lenient, included); holding it keeps its id from being reused."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.value is self.value

    def __repr__(self) -> str:
        return f"Same({self.value!r})"


# -- the shadow world the trace runs in ---------------------------------------------------------


class Shadow:
    """Copies of the captured state with tracers for arrays; maps each path to its copy."""

    def __init__(self, tracers: dict[Path, Any], prefixes: set[Path] | None = None) -> None:
        self.tracers = tracers           # path of each captured array -> its Tracer
        self.prefixes = prefixes or set()  # containers on the way to captured values
        self.copies: dict[int, object] = {}  # id(original container) -> its shadow
        self.originals: dict[Path, object] = {}  # path -> original container or object
        self.shadows: dict[Path, object] = {}
        # The jitted function's copied globals and cells (set by `shadow_function`).
        self.namespace: dict[str, Any] = {}
        self.cells: tuple[types.CellType, ...] = ()

    def substitute(self, value: object, path: Path) -> object:
        """What the shadowed code sees in place of `value` (found at `path`): numpy with
        traced creation functions, shadows of what leads to captured state, else `value`."""
        from jitc.numpy.creation import TRACED_CREATION, TracingNumpy
        if value is np:
            return TracingNumpy(np)
        if _is_hashable(value) and value in TRACED_CREATION:
            return TRACED_CREATION[value]
        if path in self.prefixes and isinstance(value, types.ModuleType):
            return _ModuleShadow(self, value, path)
        return self.make(value, path)

    def make(self, value: object, path: Path, depth: int = 0) -> object:
        if path in self.tracers:
            return self.tracers[path]
        if isinstance(value, types.FunctionType):
            if path not in self.prefixes or not _user_module(value.__module__ or "builtins"):
                return value
            if id(value) not in self.copies:
                self.copies[id(value)] = _shadow_code(
                    value, self, lambda name: path + (("fglobal", name),),
                    lambda i: path + (("fcell", i),))
            return self.copies[id(value)]
        # Objects are always copied (an attribute the trace sets must not reach the real one
        # as a Tracer); containers only on the way to something captured.
        if depth >= _MAX_DEPTH or not (_plain_object(value) or (
                path in self.prefixes and (isinstance(value, (dict, list, tuple))
                                           or _user_class(value)))):
            return value  # holds nothing captured: the trace sees the object itself
        if id(value) in self.copies:
            return self.copies[id(value)]
        if path in self.prefixes and _user_class(value):
            copy = self.copies[id(value)] = _ClassShadow(self, value, path)  # type: ignore
            return copy
        if isinstance(value, dict):
            copy: Any = {}
            self.copies[id(value)] = copy
            for step, child in _children(value):
                copy[step[1]] = self.make(child, path + (step,), depth + 1)
            for k, v in value.items():
                copy.setdefault(k, v)
        elif isinstance(value, list):
            copy = []
            self.copies[id(value)] = copy
            copy.extend(self.make(v, path + (("item", i),), depth + 1)
                        for i, v in enumerate(value))
        elif isinstance(value, tuple):
            copy = tuple(self.make(v, path + (("item", i),), depth + 1)
                         for i, v in enumerate(value))
            self.copies[id(value)] = copy
        else:
            copy = object.__new__(type(value))
            self.copies[id(value)] = copy
            # Class attributes too, as instance attributes of the copy: there the trace
            # reads them as tracers (`_rebindings` tells them from ones the trace adds).
            state = {step[1]: self.make(v, path + (step,), depth + 1)
                     for step, v in _children(value)}
            vars(copy).update(state)
        self.originals[path] = value
        self.shadows[path] = copy
        return copy


def _is_hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def shadow_function(fun: Callable, names: tuple[str, ...], shadow: Shadow) -> Callable:
    """`fun` with its globals and closure cells replaced by their shadows."""
    copy = _shadow_code(fun, shadow, lambda name: (("global", name),),
                        lambda i: (_cell_root(fun, i),))
    shadow.namespace = copy.__globals__
    shadow.cells = copy.__closure__ or ()
    return copy


def _shadow_code(fun: types.FunctionType, shadow: Shadow, global_path: Callable[[str], Path],
                 cell_path: Callable[[int], Path]) -> types.FunctionType:
    """A copy of `fun` whose globals (those its code names) and cells are shadows: the trace
    runs the copy, so what it reads and writes there goes through tracers."""
    namespace = dict(fun.__globals__)
    for name in code_global_names(fun):
        if name in namespace:
            namespace[name] = shadow.substitute(namespace[name], global_path(name))
    cells = None
    if fun.__closure__:
        cells = []
        for i, cell in enumerate(fun.__closure__):
            try:
                cells.append(types.CellType(shadow.substitute(cell.cell_contents, cell_path(i))))
            except ValueError:  # an empty cell
                cells.append(cell)
        cells = tuple(cells)
    copy = types.FunctionType(fun.__code__, namespace, fun.__name__, fun.__defaults__, cells)
    copy.__kwdefaults__ = fun.__kwdefaults__
    copy.__dict__.update(fun.__dict__)
    return copy


class _ModuleShadow:
    """A user's module as a shadowed function sees it: attributes on the way to captured
    state are shadows (`layers.W`, `layers.attention`), the others the module's own."""

    def __init__(self, shadow: Shadow, module: types.ModuleType, path: Path) -> None:
        vars(self)["_jitc"] = (shadow, module, path, {})

    def __getattr__(self, name: str) -> Any:
        shadow, module, path, made = vars(self)["_jitc"]
        if name not in made:
            made[name] = shadow.substitute(getattr(module, name), path + (("mattr", name),))
        return made[name]

    def __setattr__(self, name: str, value: Any) -> None:
        vars(self)["_jitc"][3][name] = value


class _ClassShadow:
    """A user's class as a shadowed function sees it (`Config.W`): its captured attributes
    are tracers, everything else (construction, isinstance, methods) is the class's own."""

    def __init__(self, shadow: Shadow, cls: type, path: Path) -> None:
        vars(self)["_jitc"] = (shadow, cls, path, {})

    def __getattr__(self, name: str) -> Any:
        shadow, cls, path, made = vars(self)["_jitc"]
        if name not in made:
            value = getattr(cls, name)
            step = path + (("attr", name),)
            made[name] = shadow.make(value, step) if step in shadow.tracers or \
                step in shadow.prefixes else value
        return made[name]

    def __setattr__(self, name: str, value: Any) -> None:
        vars(self)["_jitc"][3][name] = value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return vars(self)["_jitc"][1](*args, **kwargs)

    def __instancecheck__(self, instance: object) -> bool:
        return isinstance(instance, vars(self)["_jitc"][1])

    def __subclasscheck__(self, subclass: type) -> bool:
        return issubclass(subclass, vars(self)["_jitc"][1])

    def __repr__(self) -> str:
        return repr(vars(self)["_jitc"][1])


# -- replaying the trace's effects on the real state ------------------------------------------


@dataclass(frozen=True)
class WriteBack:
    """After a call, `path` is bound to output number `output` (as a numpy scalar where
    `scalar`), or to `constant` when `output` is -1."""

    path: Path
    output: int = -1
    scalar: bool = False
    constant: object = None
    integer: bool = False  # a Python int (an extent the symbolic trace rebound: pos + 1)

    def apply(self, outputs: list, fun: Callable, instance: object) -> None:
        if self.output < 0:
            value = self.constant
            value = value.copy() if isinstance(value, np.ndarray) else value
        else:
            value = outputs[self.output]
            value = int(value) if self.integer else value[()] if self.scalar else value
        assign(self.path, value, fun, instance)


def resolve(path: Path, fun: Callable, instance: object) -> Any:
    value = _root(path[0], fun, instance)
    for kind, key in path[1:]:
        value = _step(value, kind, key)
    return value


def _root(step: tuple, fun: Callable, instance: object) -> Any:
    if step[0] == "global":
        return fun.__globals__[step[1]]
    if step[0] == "cell":
        return fun.__closure__[step[1]].cell_contents
    return instance


def assign(path: Path, value: object, fun: Callable, instance: object) -> None:
    if len(path) == 1:
        step = path[0]
        if step[0] == "global":
            fun.__globals__[step[1]] = value
        elif step[0] == "cell":
            fun.__closure__[step[1]].cell_contents = value
        else:
            raise TraceError("a jitted method rebound `self`")
        return
    parent = resolve(path[:-1], fun, instance)
    kind, key = path[-1]
    if kind in ("attr", "mattr"):
        setattr(parent, key, value)
    elif kind == "fglobal":
        parent.__globals__[key] = value
    elif kind == "fcell":
        parent.__closure__[key].cell_contents = value
    else:
        parent[key] = value


def shadow_value(path: Path, shadow: Shadow, instance_shadow: object) -> Any:
    """The value at `path` in the shadow world after the trace."""
    step = path[0]
    if step[0] == "global":
        value = shadow.namespace.get(step[1], _MISSING)
    elif step[0] == "cell":
        value = shadow.cells[step[1]].cell_contents
    else:
        value = instance_shadow
    for kind, key in path[1:]:
        if value is _MISSING:
            return value
        try:
            value = _step(value, kind, key)
        except (AttributeError, KeyError, IndexError, TypeError, ValueError):
            return _MISSING
    return value


def path_name(path: Path) -> str:
    """`W`, `self.cache_k`, `params['w1']`, `layers[0].w`: a path as the user wrote it."""
    root = path[0]
    text = "self" if root[0] == "self" else root[-1]
    for kind, key in path[1:]:
        if kind == "fglobal":
            text = key
        elif kind == "fcell":
            text += f".<closure {key}>"
        else:
            text += f".{key}" if kind in ("attr", "mattr") else f"[{key!r}]"
    return text
