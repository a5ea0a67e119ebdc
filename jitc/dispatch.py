"""Fast calls: a compiled signature called again without the general path's work.

The general path of a call (jitc.api) binds the arguments to the signature, flattens the
pytrees, abstracts every leaf, walks the captured state and looks the key up: 15-100 µs.
A repeated call of the same form needs none of that. Two fast paths skip it:

- positional: a plain function called with positional arrays goes straight to the C
  dispatcher, which checks each array's type, dtype, shape and layout (about 0.3 µs);
- call forms: any other form (keyword arguments, defaults, static arguments, `*args`,
  `**kwargs`, pytrees such as dicts of weights, Python and numpy scalars, a method's `self`)
  gets a small Python function generated for it, once per compiled signature and form: it
  picks the leaves out of `args` and `kwargs` where this form puts them, checks what C cannot
  (container types and sizes, dict keys, static values, Python scalar types and bounds) and
  hands the arrays to the C dispatcher.

Both read captured state through `guards.compile_reader`, which returns the arrays while the
state has the traced structure. Whatever does not match returns MISS, and the call takes the
general path, which traces or raises as numpy would: a fast path can only agree with it.

Why generated code rather than a generic binder: every decision that depends only on the call
form (which argument feeds which parameter, which leaf is which) is made once, and the code
left is the checks themselves: about 1 µs for a dict of four weights and a keyword argument.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from jitc.tracing import capture, effects, guards, pytree
from jitc.tracing.capture import extent_carrier
from jitc.tracing.function import symbol_values

if TYPE_CHECKING:
    from jitc.api import Compiled, Jitted

try:
    from jitc._runtime import (
        NO_RESULT,
        RESULT_NONE,
        RESULT_SINGLE,
        RESULT_TUPLE,
        Dispatcher,
        Guarded,
    )
except ImportError:  # the extension is not built: no fast paths
    NO_RESULT = RESULT_NONE = RESULT_SINGLE = RESULT_TUPLE = Dispatcher = Guarded = None

MISS = object()  # a fast path's answer when the call is not its form: take the general path
_NO_SELF = capture._MISSING
_WEAK_PYTHON_TYPES = {"bool": bool, "i64": int, "f64": float, "c128": complex}


def _result_kind(out: pytree.TreeDef) -> int:
    if out == pytree.LEAF:
        return RESULT_SINGLE
    if out.kind == "none":
        return RESULT_NONE
    return RESULT_TUPLE


def _dispatcher(compiled: Compiled, result_kind: int) -> Callable | None:
    make = getattr(compiled.executable, "dispatcher", None)
    if make is None or RESULT_TUPLE is None:
        return None
    return make(result_kind, list(compiled.lowered.side_effects.written) or None)


def state_reader(jitted: Jitted, compiled: Compiled, captured: capture.Captured,
                 instance: object) -> Callable[[object], tuple | None] | None:
    """The captured arrays read at call time while the state has its traced structure (see
    guards.compile_reader); None when the function's effects on that state need the general
    path (rebinding a name replays in Python)."""
    if compiled.lowered.side_effects.rebound:
        return None
    return guards.compile_reader(jitted.fun, jitted._global_names, captured, instance)


def positional_path(jitted: Jitted, compiled: Compiled, captured: capture.Captured
                    ) -> Callable[[tuple], Any] | None:
    """`fast(args)` for a plain function called with positional arrays only: C checks them;
    the captured arrays, when there are any, are read and appended. Returns None (a miss)."""
    low = compiled.lowered
    effects_ = low.side_effects
    arguments = len(low.specs) - len(effects_.captured)
    flat = pytree.TreeDef("tuple", (pytree.LEAF,) * arguments)
    out = low.out_tree
    simple_out = out == pytree.LEAF or out.kind == "none" or (
        out.kind == "tuple" and all(c == pytree.LEAF for c in out.children))
    if not jitted.signature.simple or low.in_tree != flat or not simple_out or \
            any(s.weak or s.extent or not s.array for s in low.specs[:arguments]) or \
            effects_.returned \
            or effects_.scalars not in ((), (0,)) or (effects_.scalars and out != pytree.LEAF):
        return None
    dispatch = _dispatcher(compiled, _result_kind(out))
    if dispatch is not None and effects_.scalars:  # `x.sum()`: a numpy scalar, as numpy's
        array_result = dispatch

        def dispatch(args: tuple) -> Any:
            result = array_result(args)
            return None if result is None else result[()]
    if dispatch is None or not captured:
        return dispatch
    read = state_reader(jitted, compiled, captured, _NO_SELF)
    if read is None:
        return None
    if read.c_guards is not None and type(dispatch) is Dispatcher:
        # Only dict and cell reads to check (the helpers and modules it reaches, the global
        # arrays it reads): C makes them, and the call never enters Python.
        return Guarded(dispatch, read.c_guards)

    def fast(args: tuple) -> Any:
        state = read(_NO_SELF)
        return None if state is None else dispatch(args + state)
    return fast


class _Slot:
    """Where a call of this form holds one argument: `args[1]`, `kwargs['w']`, `instance`."""

    def __init__(self, expression: str) -> None:
        self.expression = expression


class _FormWriter(guards.CheckWriter):
    def __init__(self) -> None:
        super().__init__("a", "MISS")
        self.leaves: list[str] = []

    def tree(self, expression: str, tree: pytree.TreeDef, leaves: Sequence[object],
             low: Any) -> None:
        """Check `expression` has the structure `tree` and collect its leaves."""
        if tree.kind == "leaf":
            self.leaf(self.new(expression), leaves, low)
            return
        if tree.kind == "none":
            self.fail_unless(f"{expression} is None")
            return
        var = self.new(expression)
        kind = {"tuple": tuple, "list": list, "dict": dict}.get(tree.kind, tree.meta)
        self.fail_unless(f"type({var}) is {self.constant(kind)} and "
                         f"len({var}) == {len(tree.children)}")
        keys = tree.meta if tree.kind == "dict" else range(len(tree.children))
        for key, child in zip(keys, tree.children):
            self.tree(f"{var}[{self.constant(key)}]", child, leaves, low)

    def leaf(self, var: str, leaves: Sequence[object], low: Any) -> None:
        index = len(self.leaves)
        spec = low.specs[index]
        if spec.weak:
            kind = _WEAK_PYTHON_TYPES[spec.type.dtype.name]
            self.fail_unless(f"type({var}) is {kind.__name__}")
            if kind is int:
                info = np.iinfo(np.int64)
                low_, high = int(info.min), int(info.max)
                for bound in low.int_bounds:
                    if bound.index == index:
                        narrow = np.iinfo(bound.dtype)
                        low_, high = max(low_, int(narrow.min)), min(high, int(narrow.max))
                self.fail_unless(f"{low_} <= {var} <= {high}")
            self.lines.append(f"{var} = asarray({var}, {self.constant(spec.type.dtype.numpy)})")
        elif spec.extent:  # a Python int carried as an extent (tracing/function.py)
            self.fail_unless(f"type({var}) is int and {var} >= 0")
            self.lines.append(f"{var} = extent_carrier({var})")
        elif not spec.array:  # a numpy scalar: the same scalar type, as a 0-d array
            self.fail_unless(f"type({var}) is {self.constant(type(leaves[index]))}")
            self.lines.append(f"{var} = asarray({var})")
        self.leaves.append(var)


def form_path(jitted: Jitted, compiled: Compiled, captured: capture.Captured,
              args: tuple, kwargs: dict[str, Any], leaves: Sequence[object],
              instance: object) -> Callable[[tuple, dict, object], Any] | None:
    """`fast(args, kwargs, instance)` for calls of the form of this one (as many positional
    arguments, the same keyword names in the same order, bound to an instance or not); None
    when this call's signature has no fast path."""
    low = compiled.lowered
    effects_ = low.side_effects
    sig = jitted.signature.sig
    if sig is None or effects_.rebound:
        return None
    kind = _result_kind(low.out_tree)
    dispatch = _dispatcher(compiled, kind)
    if dispatch is None:
        return None
    read = None
    if captured:
        read = state_reader(jitted, compiled, captured, instance)
        if read is None:
            return None
    slots = [_Slot(f"args[{i}]") for i in range(len(args))]
    if instance is not _NO_SELF:
        slots.insert(0, _Slot("instance"))
    try:
        bound = sig.bind(*slots, **{k: _Slot(f"kwargs[{k!r}]") for k in kwargs})
    except TypeError:
        return None
    writer = _FormWriter()
    static = dict(low.static)
    dynamic: list[str] = []
    for name, value in bound.arguments.items():
        if instance is not _NO_SELF and name == jitted._self_name:
            continue
        if name in static:
            var = writer.new(value.expression)
            fixed = static[name]
            writer.fail_unless(f"type({var}) is {writer.constant(type(fixed))} and "
                               f"{var} == {writer.constant(fixed)}")
            continue
        dynamic.append(name)
        tree = low.in_tree.children[len(dynamic) - 1] \
            if len(dynamic) <= len(low.in_tree.children) else None
        if tree is None:
            return None
        if isinstance(value, _Slot):
            writer.tree(value.expression, tree, leaves, low)
        elif isinstance(value, tuple) and tree.kind == "tuple" and \
                len(tree.children) == len(value):  # *args
            for slot, child in zip(value, tree.children):
                writer.tree(slot.expression, child, leaves, low)
        elif isinstance(value, dict) and tree.kind == "dict" and \
                tuple(sorted(value)) == tree.meta:  # **kwargs
            for key, child in zip(tree.meta, tree.children):
                writer.tree(value[key].expression, child, leaves, low)
        else:
            return None
    if tuple(dynamic) != low.arg_names or \
            len(writer.leaves) != len(low.specs) - len(effects_.captured):
        return None
    flat = "(" + "".join(f"{leaf}, " for leaf in writer.leaves) + ")"
    if read is not None:
        writer.lines.append("state = read(instance)")
        writer.fail_unless("state is not None")
        flat = f"{flat} + state"
    writer.lines.append(f"result = dispatch({flat})")
    writer.fail_unless("result is not None")
    if kind == RESULT_NONE:
        writer.lines.append("return None")
    elif kind == RESULT_SINGLE and not effects_.returned:
        # `x.sum()`: numpy's scalar, as numpy returns it.
        writer.lines.append("return result[()]" if effects_.scalars else "return result")
    else:
        # The captured state's leaves follow the arguments': a returned global is one too.
        writer.lines.append(f"return finish(result, {flat})")
    body = "\n    ".join(writer.lines)
    source = f"def fast(args, kwargs, instance):\n    {body}\n"
    return writer.build(source, "fast", f"<jitc call form of {jitted.name}>",
                        {"MISS": MISS, "asarray": np.asarray, "dispatch": dispatch,
                         "extent_carrier": extent_carrier,
                         "read": read, "finish": _finisher(low)})


def _finisher(low: Any) -> Callable[[Any, tuple], Any]:
    """The results as the function returns them: its pytree, with each argument it returned
    (or a view of one) as that very array, as in numpy."""
    out, returned = low.out_tree, low.side_effects.returned
    scalars = low.side_effects.scalars

    symbolic = any(not spec.type.is_static for spec in low.specs)

    def finish(result: Any, leaves: tuple) -> Any:
        outputs = [result] if out == pytree.LEAF else list(result)
        env = symbol_values(low.specs, leaves) if symbolic and returned else None
        for position, index, steps in returned:
            with contextlib.suppress(ValueError):
                outputs[position] = effects.numpy_view(leaves[index], steps, env)
        for position in scalars:
            outputs[position] = outputs[position][()]
        return pytree.unflatten(out, outputs)
    return finish


__all__ = ["MISS", "NO_RESULT", "form_path", "positional_path", "state_reader"]
