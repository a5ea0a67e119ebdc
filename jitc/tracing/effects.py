"""In-place writes while tracing: views, and functional updates of the arrays they share.

The IR stays pure SSA: a write `x[1:] += 1` records a functional update of `x`'s current value
and rebinds the Tracer `x` to the result (its version goes up). What makes it numpy is views:
a Tracer made by basic indexing, a reshape that numpy performs without copying, or a transpose
shares its storage with the array it came from (its *root*). A view remembers the steps from
its root; reading a view whose root has changed since recomputes it from the root, and writing
to a view writes the update back through each step into the root. Whether numpy returns a view
or a copy is decided by numpy itself, on a stand-in array with the root's strides that owns no
memory (`shadow`), so `a.T.reshape(-1)` is a copy here exactly when it is one in numpy.

At the end of a trace, a parameter or captured array whose root has a version above zero was
written: its final value becomes an extra output that the call copies back into the caller's
array (see `jitc.tracing.capture` and `jitc.api`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from jitc.ir import symbolic
from jitc.ir.opdef import IRTypeError
from jitc.ir.ops.rules import require_equal
from jitc.tracing.errors import TraceError, located
from jitc.tracing.state import current_trace, trace_stack

if TYPE_CHECKING:
    from jitc.tracing.tracer import Tracer


def _numpy():
    import jitc.numpy as jnp
    return jnp


def c_shadow(shape: Sequence[int], strides: Sequence[int] | None = None) -> np.ndarray:
    """A stand-in with `shape` and `strides` (in elements; C order by default) over a one-byte
    buffer: numpy computes views of it from strides alone and never reads it."""
    return _shadow(tuple(int(n) for n in shape), None if strides is None else tuple(strides))


@functools.lru_cache(maxsize=4096)
def _shadow(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> np.ndarray:
    # Read-only, so one stand-in serves every tracer of its shape (a loop's rows share one).
    if strides is None:
        strides_, step = [], 1
        for n in reversed(shape):
            strides_.insert(0, step)
            step *= max(n, 1)
        strides = tuple(strides_)
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), shape, strides,
                                           writeable=False)


class Step:
    """One view-making operation: how a child is computed from its parent, and how an update
    of the child becomes an update of the parent. `static`: the same view can be taken of a
    real array (`on_numpy`). `readonly`: the numpy function whose view refuses writes (its
    name, for the error), or "" where the view is writeable."""

    static = True
    readonly = ""

    def apply(self, parent: Tracer) -> Tracer:
        raise NotImplementedError

    def unapply(self, parent: Tracer, child: Tracer) -> Tracer:
        raise NotImplementedError

    def on_numpy(self, array: np.ndarray, env: Mapping[str, int] | None = None) -> Any:
        raise NotImplementedError


class Index(Step):
    """Basic indexing: integers, slices (static, or traced with a static length), None and
    Ellipsis. `stand_in` is the index with traced slices as static ones of the same length:
    numpy's view of it has the same shape and strides."""

    def __init__(self, index: Any, stand_in: Any) -> None:
        self.index = index
        self.stand_in = stand_in
        self.static = stand_in is index
        # Symbolic bounds (`x[:pos + 1]`, pos an int argument given as an extent) are the
        # call's values: `on_numpy` takes them from `env`.
        self.symbolic = _holds_symbols(stand_in)

    def apply(self, parent: Tracer) -> Tracer:
        return _numpy().getitem(parent, self.index)

    def unapply(self, parent: Tracer, child: Tracer) -> Tracer:
        return _numpy().setitem(parent, self.index, child)

    def on_numpy(self, array: np.ndarray, env: Mapping[str, int] | None = None) -> Any:
        return array[_bound(self.stand_in, env) if self.symbolic else self.stand_in]


def _holds_symbols(index: Any) -> bool:
    if isinstance(index, tuple):
        return any(map(_holds_symbols, index))
    if isinstance(index, slice):
        return any(map(_holds_symbols, (index.start, index.stop, index.step)))
    return isinstance(index, symbolic.Dim)


def _bound(index: Any, env: Mapping[str, int] | None) -> Any:
    """`index` with each symbolic extent as its value in `env` (the call's symbols)."""
    if isinstance(index, tuple):
        return tuple(_bound(item, env) for item in index)
    if isinstance(index, slice):
        return slice(*(_bound(part, env) for part in (index.start, index.stop, index.step)))
    if isinstance(index, symbolic.Dim):
        if env is None:
            raise AssertionError(f"a view at symbolic position {index} taken without values")
        return symbolic.evaluate(index, env)
    return index


class Reshape(Step):
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def apply(self, parent: Tracer) -> Tracer:
        return _numpy().reshape(parent, self.shape)

    def unapply(self, parent: Tracer, child: Tracer) -> Tracer:
        return _numpy().reshape(child, parent.shape)

    def on_numpy(self, array: np.ndarray, env: Mapping[str, int] | None = None) -> Any:
        return np.reshape(array, self.shape, copy=False)  # ValueError where numpy copies


class Transpose(Step):
    def __init__(self, permutation: Sequence[int]) -> None:
        self.permutation = tuple(permutation)

    def apply(self, parent: Tracer) -> Tracer:
        return _numpy().transpose(parent, self.permutation)

    def unapply(self, parent: Tracer, child: Tracer) -> Tracer:
        return _numpy().transpose(child, tuple(np.argsort(self.permutation)))

    def on_numpy(self, array: np.ndarray, env: Mapping[str, int] | None = None) -> Any:
        return np.transpose(array, self.permutation)


class Window(Step):
    """sliding_window_view: overlapping windows of the parent, numpy's read-only view unless
    `writeable`. Writes through it never reach the parent (`assign` refuses them first)."""

    def __init__(self, window: tuple[int, ...], axes: tuple[int, ...], writeable: bool) -> None:
        self.window = window
        self.axes = axes
        self.writeable = writeable
        self.readonly = "" if writeable else WINDOWS

    def apply(self, parent: Tracer) -> Tracer:
        from jitc.numpy.windows import windows
        return windows(parent, self.window, self.axes)

    def unapply(self, parent: Tracer, child: Tracer) -> Tracer:
        raise AssertionError("assign refuses writes through windows before unapplying them")

    def on_numpy(self, array: np.ndarray, env: Mapping[str, int] | None = None) -> Any:
        return np.lib.stride_tricks.sliding_window_view(array, self.window, self.axes,
                                                        writeable=self.writeable)


class Broadcast(Step):
    """np.broadcast_to: numpy's read-only view, whose stretched axes repeat one element of
    the parent (writes into it are refused by `assign`)."""

    readonly = "np.broadcast_to"

    def __init__(self, shape: tuple[Any, ...]) -> None:
        self.shape = shape
        # A symbolic shape has no numpy counterpart: a returned broadcast is then its values.
        self.static = all(isinstance(d, (int, np.integer)) for d in shape)

    def apply(self, parent: Tracer) -> Tracer:
        from jitc.numpy.shapes import broadcast_to
        return broadcast_to(parent, self.shape)

    def unapply(self, parent: Tracer, child: Tracer) -> Tracer:
        raise AssertionError("assign refuses writes through broadcasts before unapplying them")

    def on_numpy(self, array: np.ndarray, env: Mapping[str, int] | None = None) -> Any:
        return np.broadcast_to(array, self.shape)


WINDOWS = "np.lib.stride_tricks.sliding_window_view"


def refuse_readonly_write(target: Tracer,
                          message: str = "assignment destination is read-only") -> None:
    """numpy's read-only views (broadcast_to's, and sliding_window_view's unless the caller
    asked for writeable ones) refuse writes with a ValueError (numpy's `message` for the
    kind of write); writeable windows overlap, so a write lands on elements several windows
    share, in an order numpy leaves to its strides: refused rather than guessed."""
    view = target._view
    steps = () if view is None else view.steps
    readonly = [s.readonly for s in steps if s.readonly]
    if target._readonly:
        readonly.append(target._readonly)
    if view is not None and view.root._readonly:
        readonly.append(view.root._readonly)
    if readonly:
        raise ValueError(located(f"{message} (a view taken with {readonly[0]}, as in "
                                 "numpy). Write into a copy (.copy()) or into the array it "
                                 "views."))
    if any(isinstance(s, Window) for s in steps):
        raise TraceError(located(
            "writing through sliding_window_view(..., writeable=True): the windows overlap, so "
            "one element of the array is written from several windows; jitc does not trace "
            "that. Compute the new array instead (np.where, np.concatenate, or a write into "
            "the array itself) and take its windows afterwards."))


class View:
    """A Tracer's link to the root array whose storage it shares."""

    __slots__ = ("root", "shadow", "steps", "version")

    def __init__(self, root: Tracer, steps: tuple[Step, ...], shadow: np.ndarray | None,
                 version: int) -> None:
        self.root = root
        self.steps = steps
        self.shadow = shadow
        self.version = version


def shadow_of(x: Tracer) -> np.ndarray:
    view = x._view
    if view is not None:
        return view.shadow
    if x._shadow is None:
        x._shadow = c_shadow(x.shape)
    return x._shadow


def derive(parent: Tracer, child: Tracer, step: Step) -> Tracer:
    """`child`, computed from `parent` by `step`, as numpy returns it: a view sharing the
    parent's storage where numpy would return a view, else an array of its own."""
    from jitc.tracing.tracer import Tracer
    if not parent._array:
        return _own(child, parent)
    pview = parent._view
    root = parent if pview is None else pview.root
    shadow: np.ndarray | None = None
    # A position given by a symbol (`kc[pos]`, pos an int argument given as an extent) has no
    # stand-in to view on a shadow, even where the shapes are static.
    symbolic_position = isinstance(step, Index) and step.symbolic
    if not (parent.aval.is_static and child.aval.is_static and root.aval.is_static) or \
            parent._symbolic_alias or symbolic_position:
        scalar = isinstance(step, Index) and _scalar_index(step.index, parent.ndim)
        if scalar and symbolic_position and parent.aval.is_static:
            scalar_child = _own(child, parent)  # v[pos]: numpy's scalar, as for an int
            scalar_child._array = False
            return scalar_child
        # A reshape to the same shape views whatever the strides (x[:] makes one on the way).
        same_shape = isinstance(step, Reshape) and tuple(step.shape) == tuple(parent.shape)
        # Basic indexing views whatever the strides, traced positions included (their
        # stand-in only serves the shadow, which a symbolic shape does not have).
        strides_free = isinstance(step, Index) or (isinstance(step, Transpose) and
                                                  step.static) or \
            isinstance(step, Broadcast) or same_shape
        if not strides_free or \
                scalar or parent._symbolic_alias:
            # Whether numpy views or copies (a reshape) depends on strides that symbolic
            # dimensions leave open; the result is computed as a copy, and writes through it,
            # or into the array it was taken of, are refused (assign): either would leave the
            # other stale.
            root._symbolic_views = True
            child = _own(child, parent)
            child._symbolic_alias = True
            if scalar:
                child._array = False  # x[-1] of a vector: numpy's scalar, as for static shapes
            return child
        # Basic indexing and transposes view whatever the strides: tracked as for static
        # shapes, with no stand-in to take the next view of.
    else:
        try:
            shadow = step.on_numpy(shadow_of(parent))
        except ValueError:  # numpy would copy
            return _own(child, parent)
        if not isinstance(shadow, np.ndarray):  # x[i, j] of a full index: a scalar
            scalar_child = _own(child, parent)
            scalar_child._array = False
            return scalar_child
    steps = (step,) if pview is None else pview.steps + (step,)
    if child is parent or child is root:
        child = Tracer(child.trace, child.value, child.weak)
    child._view = View(root, steps, shadow, root._version)
    child._array = True
    child._symbolic_alias = False  # the copies a symbolic getitem makes on the way
    return child


def _scalar_index(index: Any, ndim: int) -> bool:
    """Whether numpy's basic `x[index]` is a scalar: one integer per axis, nothing else."""
    items = index if isinstance(index, tuple) else (index,)
    return len(items) == ndim and all(
        isinstance(i, (int, np.integer, symbolic.Dim)) and not isinstance(i, (bool, np.bool_))
        for i in items)


def _own(child: Tracer, parent: Tracer) -> Tracer:
    """`child` as an array of its own (numpy's copy): a new Tracer if it is `parent`, and no
    link to a temporary the computation viewed on the way."""
    if child is parent:
        return parent.copy_tracer()
    child._view = None
    return child


def refresh(x: Tracer) -> None:
    """Recompute a view from its root after the root was written."""
    view = x._view
    value = view.root
    # The view belongs to its root's trace, even when first read inside a jitc.lax region.
    stack = trace_stack()
    stack.append(view.root.trace)
    try:
        for step in view.steps:
            value = step.apply(value)
        x._value = value.value
    finally:
        stack.pop()
    view.version = view.root._version


def refuse_symbolic_write(target: Tracer, owner: Tracer) -> None:
    """Writes that symbolic dimensions leave unsafe: into an array standing for a view of
    one with symbolic dimensions, or into such an array after something was taken of it
    (those copies stand for numpy's views, which would see the write). Writing into an array
    that nothing aliases (`x += 1` on an argument) is exact."""
    if not (target._symbolic_alias or owner._symbolic_views):
        return
    raise TraceError(located(
        f"writing into an array of shape {target.aval.short()} that has symbolic dimensions "
        "and is a view of another array, or has views taken of it (x.T, x[1:], "
        "x.reshape(...)): jitc computes those views as copies, so the write could not reach "
        "them. Write into the array before taking views of it, compute the new array "
        "instead (np.where, np.concatenate), or trace with static shapes."))


def assign(target: Tracer, new: Tracer) -> None:
    """numpy's in-place write: `target` takes the value `new` (already of its type), and so
    does the part of its root that it views."""
    # The new value first: `new` may itself be a view of the root (np.copyto(x, x[::-1])),
    # which the write below would make stale.
    value = new.value
    view = target._view
    owner = target if view is None else view.root
    if owner.trace is not current_trace():
        raise TraceError(located(
            "writing into an array defined outside a jitc.lax loop or branch: the function "
            "traces it once, into a separate function, so the write cannot reach the array.\n"
            "Carry the array instead: pass it in the loop's carry (or as an operand of the "
            "branch), write into the carried value and return it."))
    refuse_readonly_write(target)
    refuse_symbolic_write(target, owner)
    target._known = None
    if view is None:
        target._value = value
        target._version += 1
        return
    root = view.root
    parents = [root]
    for step in view.steps[:-1]:
        parents.append(step.apply(parents[-1]))
    updated = new
    for step, parent in zip(reversed(view.steps), reversed(parents)):
        updated = step.unapply(parent, updated)
    root._value = updated.value
    root._version += 1
    root._known = None
    target._value = value
    view.version = root._version


def broadcasts_into(shape: tuple, target: tuple) -> bool:
    """numpy's rule for an `out=` operand: `shape` broadcasts to `target` exactly. Two
    extents of which one is symbolic are required equal (a constraint of the call)."""
    if len(shape) > len(target):
        return False
    try:
        for size, into in zip(reversed(shape), reversed(target)):
            if size != 1 and size != into:
                require_equal(size, into, f"writing {list(shape)} into {list(target)}")
    except IRTypeError:
        return False
    return True


def write_result(target: Tracer, result: Any, what: str,
                 readonly: str = "output array is read-only") -> Tracer:
    """`target` <- `result` as numpy's `out=` does (casting="same_kind"), e.g. for `x += y`,
    `np.add(a, b, out=x)` and `np.copyto(x, y)`; `readonly` is numpy's message where the
    target is a read-only view."""
    from jitc.numpy._core import lift
    jnp = _numpy()
    view = target._view
    refuse_readonly_write(target, readonly)
    refuse_symbolic_write(target, target if view is None else view.root)
    value = lift(result)
    if not np.can_cast(value.dtype, target.dtype, "same_kind"):
        raise TypeError(located(f"{what}: cannot cast the result from dtype('{value.dtype}') to "
                                f"dtype('{target.dtype}') with casting rule 'same_kind' (as "
                                "numpy). Convert explicitly with .astype(...) first."))
    if not broadcasts_into(value.shape, target.shape):
        raise ValueError(located(f"{what}: non-broadcastable output operand with shape "
                                 f"{target.shape} doesn't match the broadcast shape "
                                 f"{value.shape}"))
    assign(target, jnp.setitem(target, Ellipsis, value))
    return target


def numpy_view(array: np.ndarray, steps: Sequence[Step],
               env: Mapping[str, int] | None = None) -> np.ndarray:
    """The same view of a real array (the caller's argument) as the traced steps took; `env`:
    the call's values of the symbols (a symbolic compilation's)."""
    for step in steps:
        array = step.on_numpy(array, env)
    return array
