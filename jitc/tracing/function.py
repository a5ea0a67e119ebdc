"""A Python function call traced into a Module: its arguments' abstract values, captured state,
and the side effects the call must replay.

`trace_function` runs the user's function on tracers, the arguments' array leaves as the
module's first parameters and the captured arrays (jitc.tracing.capture) after them; writes
into arguments and rebinding of captured state come back as `SideEffects`.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jitc.arguments import check_int64, check_plain_array
from jitc.ir import dtypes, ops, symbolic
from jitc.ir.core import Module
from jitc.ir.parser import ParseError, parse_type
from jitc.ir.types import TensorType
from jitc.tracing import capture, effects, pytree
from jitc.tracing.errors import (
    ConcretizationError,
    JitcError,
    TraceError,
    located,
    numpy_function_in,
    user_location_in,
)
from jitc.tracing.state import TraceState, extent_value, trace_stack
from jitc.tracing.tracer import Tracer


@dataclass(frozen=True)
class ArgSpec:
    """The abstract value of one array argument: its type, and whether it was a Python scalar
    (weakly typed under NEP 50)."""

    type: TensorType
    weak: bool = False
    array: bool = True  # an ndarray (writable in place), not a Python or numpy scalar
    # A Python int argument the function uses as an extent (a slice bound, a size), or a
    # captured int that changes between calls: carried as the length of a zero-size array
    # (capture.extent_carrier) so that it can be a symbolic dimension like an array's; the
    # function is given that length.
    extent: bool = False

    def __str__(self) -> str:
        if self.extent:
            return f"int {self.type.shape[0]} (an extent)"
        return self.type.short() + (" (Python scalar)" if self.weak else "")


def symbol_values(specs: Sequence[ArgSpec], leaves: Sequence[object]) -> dict[str, int]:
    """The values a call binds to the symbols of `specs` (a symbolic compilation's) from its
    flat `leaves`: each symbolic extent is the extent of the leaf there."""
    env: dict[str, int] = {}
    for spec, leaf in zip(specs, leaves):
        for dim, size in zip(spec.type.shape, np.shape(leaf)):
            name = symbolic.symbol_name(dim)
            if name is not None:
                env[name] = size
    return env


class AbstractArray:
    """An argument for `lower` given by its type alone, whose dimensions may be symbols:
    `AbstractArray("f32[B,784]")` or `AbstractArray(("B", 784), np.float32)`. The traced
    module keeps `B` symbolic; each call binds it (docs/dynamic-shapes.md)."""

    __slots__ = ("type",)

    def __init__(self, spec: str | Sequence[int | str | symbolic.Dim],
                 dtype: object = None) -> None:
        if isinstance(spec, str):
            if dtype is not None:
                raise TypeError("AbstractArray takes a type string or a shape and a dtype")
            try:
                self.type = parse_type(spec)
            except ParseError as exc:
                raise ValueError(str(exc).removeprefix("line 1: ")) from None
            if "{" in spec:
                raise ValueError("an argument's layout is row-major; drop the {layout}")
            return
        if dtype is None:
            raise TypeError("AbstractArray(shape, dtype) needs a dtype")
        shape = tuple(symbolic.symbol(d) if isinstance(d, str) else d for d in spec)
        self.type = TensorType(dtypes.from_numpy(dtype), shape)

    def __array__(self, *args: object, **kwargs: object) -> np.ndarray:
        raise TypeError(f"AbstractArray({self.type.short()}) only describes an argument for "
                        "lower(); call the function with an array")

    def __repr__(self) -> str:
        return f"AbstractArray({self.type.short()!r})"


_NO_SELF = capture._MISSING  # no bound instance: a plain function call
_WEAK_TYPES = {bool: dtypes.bool_, int: dtypes.int64, float: dtypes.float64,
               complex: dtypes.complex128}


def abstractify(leaf: object, where: str) -> ArgSpec:
    if isinstance(leaf, AbstractArray):
        return ArgSpec(leaf.type)
    # `__jitc_array__`: an array held elsewhere (a GPU device array) that has shape and dtype.
    if isinstance(leaf, np.ndarray) or getattr(type(leaf), "__jitc_array__", False):
        if isinstance(leaf, np.ndarray):
            check_plain_array(leaf, where)
        try:
            return array_spec(leaf.dtype, leaf.shape)
        except TypeError as exc:
            raise TypeError(f"{where}: {exc}") from None
    kind = type(leaf)
    if kind in _WEAK_TYPES:
        if kind is int:
            check_int64(leaf, where)  # type: ignore[arg-type]
        return ArgSpec(TensorType(_WEAK_TYPES[kind], ()), weak=True, array=False)
    if isinstance(leaf, np.generic):
        spec = abstractify(np.asarray(leaf), where)
        return ArgSpec(spec.type, array=False)
    raise TypeError(f"{where}: jitc.jit arguments must be numpy arrays, Python or numpy "
                    f"scalars, or tuples/lists/dicts of them; got {kind.__name__}. Mark "
                    "non-array arguments static with static_argnums/static_argnames.")


def _ir_name(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"f_{cleaned}"


class _Signature:
    """Splits a call's arguments into static values and dynamic pytrees, once per function."""

    def __init__(self, fun: Callable, static_argnums: Iterable[int],
                 static_argnames: Iterable[str]) -> None:
        self.fun = fun
        try:
            self.sig: inspect.Signature | None = inspect.signature(fun)
        except (TypeError, ValueError):
            self.sig = None
        params = list(self.sig.parameters.values()) if self.sig else []
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = set(static_argnames)
        for n in static_argnums:
            if not -len(positional) <= n < len(positional):
                raise ValueError(f"static_argnums={n} is out of range for "
                                 f"{fun.__name__}{self.sig}")
            names.add(positional[n])
        unknown = names - {p.name for p in params}
        if unknown and self.sig is not None:
            raise ValueError(f"static_argnames {sorted(unknown)} are not parameters of "
                             f"{fun.__name__}{self.sig}")
        self.static_names = frozenset(names)
        self.simple = self.sig is not None and not names and all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            for p in params)
        self.num_positional = len(params)

    def split(self, args: tuple, kwargs: dict[str, Any]) -> tuple[dict[str, Any], tuple]:
        """(dynamic arguments by name in order, static arguments as a hashable tuple)."""
        if self.sig is None:
            if kwargs:
                raise TypeError("keyword arguments need a function with a signature")
            return {f"arg{i}": a for i, a in enumerate(args)}, ()
        bound = self.sig.bind(*args, **kwargs)
        given = dict(bound.arguments)
        # Defaults of static parameters join the cache key; defaults of the others are left
        # to Python, so `def f(x, axis=-1)` keeps a plain int axis instead of tracing it.
        bound.apply_defaults()
        dynamic, static = {}, []
        for name, value in bound.arguments.items():
            if name not in self.static_names and name not in given:
                continue
            if name in self.static_names:
                try:
                    hash(value)
                except TypeError:
                    raise TypeError(f"static argument {name!r} of {self.fun.__name__} must be "
                                    f"hashable, got {type(value).__name__}") from None
                static.append((name, value))
            else:
                dynamic[name] = value
        return dynamic, tuple(static)

    def rebuild(self, dynamic: dict[str, Any], static: tuple) -> tuple[tuple, dict[str, Any]]:
        values = dict(dynamic)
        values.update(static)
        if self.sig is None:
            return tuple(values.values()), {}
        bound = inspect.BoundArguments(self.sig, values)  # type: ignore[arg-type]
        return bound.args, bound.kwargs


def _leaf_names(dynamic: dict[str, Any]) -> list[str]:
    """A readable name per array leaf, in flattening order: `x`, `params_w1`, `xs_0`."""
    return [path for name, value in dynamic.items()
            for path in pytree.leaf_paths(value, name)]


def _flatten_arguments(dynamic: dict[str, Any]) -> tuple[list[Any], pytree.TreeDef]:
    """The array leaves of the dynamic arguments, in parameter order."""
    return pytree.flatten(tuple(dynamic.values()), _is_leaf)


def _is_leaf(x: object) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic)) or \
        getattr(type(x), "__jitc_array__", False)


@dataclass(frozen=True)
class SideEffects:
    """What a traced call does to its arguments beyond returning values.

    `written`: flat indices of the array arguments the function writes; their final values
    are the module's last outputs, copied back into the caller's arrays after each call.
    `returned`: output position -> (argument index, view steps) for outputs that are an
    argument itself or a view of it, returned as numpy would: that very array, or a view of it.
    """

    written: tuple[int, ...] = ()
    returned: tuple[tuple[int, int, tuple[effects.Step, ...]], ...] = ()
    rebound: tuple[capture.WriteBack, ...] = ()  # captured state the function rebinds
    captured: tuple[capture.Path, ...] = ()  # paths of the implicit (captured) array arguments
    # Output positions numpy returns as numpy scalars (`x.sum()`), not 0-d arrays.
    scalars: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.written or self.returned or self.rebound or self.captured or
                    self.scalars)


def captured_specs(captured: capture.Captured) -> list[ArgSpec]:
    """The specs of the captured arrays: parameters after the arguments' leaves."""
    return [array_spec(a.dtype, a.shape, p in captured.carried) for p, a in captured.arrays]


@functools.lru_cache(maxsize=4096)
def array_spec(dtype: np.dtype, shape: tuple[int, ...], extent: bool = False) -> ArgSpec:
    """The spec of an array of `dtype` and `shape` (immutable, so one per signature serves
    every call: a decode step's sixteen captured weights and caches took 35 us to describe
    anew at each call)."""
    return ArgSpec(TensorType(dtypes.from_numpy(dtype), shape), extent=extent)


def trace_function(fun: Callable, signature: _Signature, dynamic: dict[str, Any], static: tuple,
                   specs: Sequence[ArgSpec], treedef: pytree.TreeDef,
                   captured: capture.Captured | None = None, instance: object = _NO_SELF,
                   self_name: str = "self", obstacles: list[JitcError] | None = None,
                   captured_types: Sequence[ArgSpec] | None = None
                   ) -> tuple[Module, pytree.TreeDef, SideEffects]:
    """Run `fun` on tracers and record what it does as a Module.

    With `captured` (see jitc.tracing.capture), `fun` runs on a shadow of the state it reads
    (globals, closure cells, `self`): the captured arrays are parameters after the arguments'
    leaves, and what the function writes or rebinds there becomes extra outputs; their
    specs are `captured_types` when given (symbolic extents), else the arrays' own."""
    name = getattr(fun, "__name__", "function")
    state = TraceState(_ir_name(name), name)
    state.obstacles = obstacles
    captured = capture.Captured([], []) if captured is None else captured
    paths = _leaf_names(dynamic) + [re.sub(r"\W+", "_", capture.path_name(p)).strip("_")
                                    for p, _ in captured.arrays]
    specs = list(specs) + list(captured_specs(captured) if captured_types is None
                               else captured_types)
    tracers = []
    for i, spec in enumerate(specs):
        hint = _ir_name(paths[i]) if i < len(paths) else None
        value = state.builder.emit(ops.PARAMETER, [], {"index": i}, spec.type, name_hint=hint)
        tracer = Tracer(state, value, spec.weak)
        tracer._array = spec.array
        tracers.append(tracer)
    argument_count = len(specs) - len(captured.arrays)
    traced_values = pytree.unflatten(treedef, tracers[:argument_count])
    for name, value in zip(dynamic, traced_values):
        if type(dynamic[name]) is int:
            state.specializable[id(value.value)] = name
    carriers = {id(t) for t, spec in zip(tracers, specs) if spec.extent}
    call_args = {name: value.shape[0] if id(value) in carriers else value
                 for name, value in zip(dynamic, traced_values)}
    # A carried int reads as its extent: the value, or the symbol.
    shadow = capture.Shadow({p: t.shape[0] if p in captured.carried else t
                             for (p, _), t in zip(captured.arrays, tracers[argument_count:])},
                            captured.prefixes())
    state.captured = {id(a): t for (p, a), t in zip(captured.arrays, tracers[argument_count:])
                      if p not in captured.carried}
    shadow_self = _NO_SELF
    if instance is not _NO_SELF:
        shadow_self = call_args[self_name] = shadow.make(instance, (("self",),))
    runnable = capture.shadow_function(fun, capture.code_global_names(fun), shadow) \
        if isinstance(fun, types.FunctionType) else fun
    args, kwargs = signature.rebuild(call_args, static)
    stack = trace_stack()
    stack.append(state)
    try:
        # Shape rules over symbolic dimensions record what they assume (the module's
        # constraints); a static trace records nothing.
        with symbolic.recording() as assumptions:
            out = runnable(*args, **kwargs)
    except symbolic.UnknownDimensionError as exc:
        raise ConcretizationError(located(
            f"{exc}{_numpy_hint(numpy_function_in(exc.__traceback__))}. Code that needs it as "
            "a Python value (a branch, len(), range(), a numpy function that counts elements) "
            "runs while tracing, before any call: keep such decisions off symbolic dimensions, "
            "or trace with static shapes.",
            user_location_in(exc.__traceback__))) from None
    finally:
        stack.pop()
    _check_no_leaks(captured, shadow)
    leaves, out_tree = pytree.flatten(out, _is_leaf)
    outputs = []
    returned = []
    for i, leaf in enumerate(leaves):
        source = _argument_view(leaf, tracers)
        if source is not None:
            returned.append((i, *source))
        if isinstance(leaf, Tracer):
            if leaf.trace is not state:
                raise TraceError(f"{name} returned a traced value from another trace (a tracer "
                                 "leaked out of an inner function)")
            outputs.append(leaf.value)
        elif isinstance(leaf, (np.ndarray, np.generic, bool, int, float)):
            outputs.append(state.constant(np.asarray(leaf)).value)
        elif isinstance(leaf, symbolic.Dim):  # an int argument's extent, or one computed
            outputs.append(extent_value(leaf, state).value)
        else:
            raise TraceError(f"{name} returned a {type(leaf).__name__} (output {i}); jitc "
                             "functions return arrays, scalars, or tuples/lists/dicts of them")
    scalars = tuple(i for i, leaf in enumerate(leaves)
                    if isinstance(leaf, Tracer) and leaf.value.type.rank == 0 and not leaf._array)
    written = tuple(i for i, t in enumerate(tracers) if t._version > 0)
    # The results, then the values of rebound state, then the written arrays: last, where the
    # buffer planners look for the results they may compute in an argument's own buffer.
    rebound = []
    for path, value in _rebindings(captured, shadow, shadow_self):
        if isinstance(value, Tracer):
            rebound.append(capture.WriteBack(path, output=len(outputs),
                                             scalar=not value._array))
            outputs.append(value.value)
        elif isinstance(value, symbolic.Dim):  # `self.pos += 1` on a carried int
            rebound.append(capture.WriteBack(path, output=len(outputs), integer=True))
            outputs.append(extent_value(value, state).value)
        else:
            rebound.append(capture.WriteBack(path, constant=value))
    outputs += [tracers[i].value for i in written]
    state.function.outputs = outputs
    module = Module([state.function, *state.regions[1:]], constraints=assumptions.constraints)
    return module, out_tree, SideEffects(
        written, tuple(returned), tuple(rebound), tuple(p for p, _ in captured.arrays),
        scalars)


# numpy functions called with sizes alone, which never see a tracer: jitc.numpy's versions
# (or numpy's with like=x, NEP 35) take symbolic sizes.
_SIZED_CREATION = frozenset({"arange", "eye", "identity", "tri", "zeros", "ones", "empty",
                             "full"})


def _numpy_hint(function: str | None) -> str:
    if function is None:
        return ""
    if function in _SIZED_CREATION:
        return (f" (numpy.{function} was given it as a size; numpy cannot hold a symbolic one: "
                f"call jitc.numpy.{function}, or numpy.{function}(..., like=x) with x an array "
                "of the traced function, which hands the call to jitc)")
    return f" (inside numpy.{function})"


def _check_no_leaks(captured: capture.Captured, shadow: capture.Shadow) -> None:
    """A traced value stored into a real list or dict the trace did not copy would outlive the
    trace: take it out again and say what to do instead."""
    for path, container in captured.containers:
        if id(container) in shadow.copies:
            continue
        items = list(container.items()) if isinstance(container, dict) else \
            list(enumerate(container))
        leaked = [key for key, value in items if isinstance(value, Tracer)]
        if not leaked:
            continue
        if isinstance(container, dict):
            for key in leaked:
                del container[key]
        else:
            container[:] = [v for v in container if not isinstance(v, Tracer)]
        raise TraceError(located(
            f"the jitted function stored a traced array into {capture.path_name(path)}; jitc "
            "replays writes into captured arrays and rebinding of names, not list appends or "
            "new dict entries. Return the value instead (or pass the container as an "
            "argument and return the new one)."))


def _rebindings(captured: capture.Captured, shadow: capture.Shadow, shadow_self: object
                ) -> Iterator[tuple[capture.Path, object]]:
    """(path, new value) for each captured array or scalar that the trace rebound."""
    real = dict(captured.arrays)
    for path, tracer in shadow.tracers.items():
        now = capture.shadow_value(path, shadow, shadow_self)
        # Read through something not shadowed (a class attribute), the path still leads to
        # the real array: no rebinding.
        if now is not tracer and now is not real.get(path):
            yield path, _checked_rebinding(path, now)
    for path, original in captured.scalars:
        now = capture.shadow_value(path, shadow, shadow_self)
        if isinstance(original, np.ndarray):
            continue  # a static array: the trace read it as a value
        if now is not original and not (type(now) is type(original) and now == original):
            yield path, _checked_rebinding(path, now)
    for path, copy in shadow.shadows.items():
        original = shadow.originals[path]
        if isinstance(copy, list) and len(copy) != len(original):
            raise TraceError(located(
                f"the jitted function changed the length of the list "
                f"{capture.path_name(path)}; jitc replays writes into captured arrays and "
                "rebinding of names, not list appends. Pass the list as an argument and "
                "return the new list instead."))
        if isinstance(copy, dict) or capture._plain_object(original):
            new = copy if isinstance(copy, dict) else vars(copy)
            old = original if isinstance(original, dict) else \
                {step[1] for step, _ in capture._children(original)}
            kind = "item" if isinstance(copy, dict) else "attr"
            for key, value in new.items():
                if key not in old:
                    yield path + ((kind, key),), _checked_rebinding(path, value)


def _checked_rebinding(path: capture.Path, value: object) -> object:
    if value is capture._MISSING:
        raise TraceError(located(f"the jitted function deleted {capture.path_name(path)}; "
                                 "jitc cannot replay deletions of captured state"))
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (Tracer, symbolic.Dim, *capture.SCALARS)):
        return value
    raise TraceError(located(
        f"the jitted function bound {capture.path_name(path)} to a "
        f"{type(value).__name__}; jitc replays rebinding of captured state to arrays and "
        "scalars only. Return the value instead."))


def _argument_view(leaf: object, parameters: Sequence[Tracer]
                   ) -> tuple[int, tuple[effects.Step, ...]] | None:
    """(argument index, view steps) when `leaf` is an array argument or a current view of one."""
    if not isinstance(leaf, Tracer):
        return None
    view = leaf._view
    root, steps = (leaf, ()) if view is None else (view.root, view.steps)
    if not all(step.static for step in steps):
        return None  # a traced slice: the caller gets the values, not a view
    for i, parameter in enumerate(parameters):
        if parameter is root and parameter._array:
            return i, steps
    return None
