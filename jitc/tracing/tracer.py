"""Tracer: the stand-in for an array while a function is traced.

Tracers speak numpy's dispatch protocols, so unmodified numpy code reaches jitc:
`np.tanh(t)` arrives in `__array_ufunc__`, `np.sum(t)` in `__array_function__`, and operators
and methods go the same way. Every path ends in `jitc.tracing.state.emit`.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from jitc.ir import symbolic
from jitc.ir.core import Value
from jitc.ir.types import TensorType
from jitc.tracing import effects
from jitc.tracing.errors import (
    ConcretizationError,
    SpecializeArgument,
    located,
    user_location,
    where,
)
from jitc.tracing.state import TraceState, with_extents


def _numpy():
    # jitc.numpy imports this module; bind it lazily to break the cycle.
    import jitc.numpy as jnp
    return jnp


class Tracer:
    """A traced array value. `weak` marks a Python scalar argument (NEP 50 weak typing).

    A Tracer stands for an ndarray (`_array`: writes change it in place, as numpy's do) or for
    a numpy or Python scalar (0-d results of operations: `s += 1` rebinds `s`). `_view` links a
    view to the root array whose storage it shares (jitc.tracing.effects); `_version` counts
    the writes into a root. `_symbolic_alias`: a copy standing for what numpy may return as a
    view (a reshape of an array with symbolic dimensions; writes into it are refused);
    `_symbolic_views`: an array such a copy was taken of (writes into it are refused too).
    `_readonly`: an array standing for a read-only view that no view step records (a copy
    standing for sliding_window_view's windows, broadcast_to of a scalar): the numpy function
    that made it, or "".
    """

    __slots__ = ("_array", "_known", "_readonly", "_shadow", "_symbolic_alias",
                 "_symbolic_views", "_value", "_version", "_view", "trace", "weak")
    __array_priority__ = 1000

    def __init__(self, trace: TraceState, value: Value, weak: bool = False) -> None:
        self.trace = trace
        self._value = value
        self.weak = weak
        self._view: effects.View | None = None
        self._version = 0
        self._array = value.type.rank > 0
        self._shadow = None
        self._symbolic_alias = False
        self._symbolic_views = False
        self._readonly = ""  # numpy's writeable=False where no view step says so
        # The numpy value of an integer or boolean array made from constants and not written
        # since: indexing with it is static (bounds-checked, masks with known shapes).
        self._known: np.ndarray | None = None

    @property
    def value(self) -> Value:
        """The IR value this array has now (a view is recomputed after its root changed)."""
        view = self._view
        if view is not None and view.version != view.root._version:
            effects.refresh(self)
        return self._value

    def copy_tracer(self) -> Tracer:
        """A new array with this one's current value (numpy's copy)."""
        copy = Tracer(self.trace, self.value, self.weak)
        copy._array = self._array
        return copy

    # -- static properties -----------------------------------------------------------------
    @property
    def aval(self) -> TensorType:
        return self.value.type

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.value.type.dtype.numpy

    @property
    def ndim(self) -> int:
        return self.value.type.rank

    @property
    def size(self) -> int:
        return self.value.type.size

    @property
    def itemsize(self) -> int:
        return self.value.type.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.value.type.nbytes

    def __len__(self) -> int:
        if not self.shape:
            self.int_argument_needed()
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            # numpy asks a shape for __index__ first, and on a TypeError (which the int
            # argument's SpecializeArgument is) for a sequence: np.zeros(n) lands here.
            self.int_argument_needed()
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        return f"Tracer<{self.aval.short()}>"

    # -- numpy protocols -------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any):
        inputs = with_extents(inputs, self.trace)
        return _numpy().apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _numpy().apply_function(func, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        self.int_argument_needed()  # np.pad(x, ((p, 1), (0, 0))), np.arange(p): p is an extent
        raise ConcretizationError(located(
            f"a traced array ({self.aval.short()}) was converted to a numpy array, but its "
            "value is only known when the compiled function runs.\nUse numpy functions and "
            "array methods on it instead of np.asarray/np.array: x.astype(dtype) converts "
            "dtypes, np.stack joins a list of traced arrays. Or pass the value as a static "
            "argument (static_argnums).\nIndexing a numpy array with a traced index "
            "(table[idx], np.take(table, idx)) converts the index too: write "
            "jitc.numpy.take(table, idx, axis=0), pass the table as an argument so that it is "
            "traced, or compare instead (idx[..., None] == np.arange(n) is a one-hot "
            "encoding)."))

    def int_argument_needed(self) -> None:
        """Where a Python int is needed: SpecializeArgument when this value is computed from
        Python int arguments alone, so that jit compiles for their values (or makes them
        extents) instead of failing."""
        name = self.trace.argument_source(self.value)
        if name is not None:
            raise SpecializeArgument(name)

    def _concrete(self, what: str, fallback: Any = 0) -> Any:
        """The value a Python construct needs now; an error, or in `explain` mode a note and
        `fallback` so that tracing goes on to the next obstacle."""
        self.int_argument_needed()
        loc = user_location()
        fn = loc.function if loc else "the traced function"
        error = ConcretizationError(
            f"{where(loc).rstrip()}\n{what} of a traced array ({self.aval.short()}) in {fn}(): "
            "its value is only known when the compiled function runs, so Python control flow "
            "(if/while/and/or) and Python scalars cannot depend on it.\nUse np.where(cond, a, "
            "b) to select values elementwise; jitc.lax.cond(pred, true_fun, false_fun, "
            "*operands) to run one of two functions, jitc.lax.while_loop / fori_loop for a "
            "loop whose trip count is traced; or make the argument static with "
            "jitc.jit(..., static_argnums=...) / static_argnames=...")
        return self.trace.obstacle(error, fallback)

    def __bool__(self) -> bool:
        return self._concrete("the truth value", False)

    def __int__(self) -> int:
        return self._concrete("int()")

    def __float__(self) -> float:
        return self._concrete("float()", 0.0)

    def __complex__(self) -> complex:
        return self._concrete("complex()", 0j)

    def __index__(self) -> int:
        return self._concrete("using as an index")

    def item(self, *args: Any):
        return self._concrete(".item()")

    def tolist(self):
        return self._concrete(".tolist()", [])

    def __str__(self) -> str:
        # print(x) and f"{x}" in the user's code: numpy prints values at every call; a trace
        # has none. jitc's own messages may show a tracer.
        if sys._getframe(1).f_globals.get("__name__", "").startswith("jitc."):
            return repr(self)
        return self._printed()

    def __format__(self, spec: str) -> str:
        return self._printed()

    def _printed(self) -> str:
        error = ConcretizationError(located(
            f"printing a traced array ({self.aval.short()}): its values exist only when the "
            "compiled function runs, and the function body runs once, when traced.\nReturn the "
            "value (or store it on an object) and print it after the call; print(x.shape) and "
            "print(x.dtype) work."))
        return self.trace.obstacle(error, repr(self))

    # -- operators: all routed through the ufunc path so dtype rules are numpy's -------------
    def __neg__(self):
        return _numpy().apply_operator(np.negative, (self,))

    def __pos__(self):
        return self.copy_tracer()

    def __abs__(self):
        return _numpy().apply_operator(np.absolute, (self,))

    def __invert__(self):
        return _numpy().apply_operator(np.invert, (self,))

    def __getitem__(self, index: Any):
        index = _known_index(index)
        result = _numpy().getitem(self, index)
        if _is_basic_index(index):
            items = index if isinstance(index, tuple) else (index,)
            traced = any((isinstance(i, slice) and _traced_slice(i)) or isinstance(i, Tracer)
                         for i in items)
            stand_in = _numpy_indexing().static_stand_in(self.shape, index) if traced else index
            return effects.derive(self, result, effects.Index(index, stand_in))
        return result if result is not self else self.copy_tracer()

    def __setitem__(self, index: Any, update: Any) -> None:
        # numpy writes in place: the functional update becomes this array's value, and its
        # root's where it is a view (jitc.tracing.effects). A read-only view refuses before
        # the update is computed, as numpy refuses before looking at the index.
        effects.refuse_readonly_write(self)
        if _written_through_view(self, index, update):
            return  # `x[i] += v`: the in-place add wrote through the view x[i] already
        effects.assign(self, _numpy().setitem(self, _known_index(index), update))

    def __matmul__(self, other):
        return np.matmul(self, other)

    def __rmatmul__(self, other):
        return np.matmul(other, self)

    @property
    def T(self):
        return _numpy().transpose(self)

    @property
    def mT(self):
        return _numpy().matrix_transpose(self)

    @property
    def real(self):
        return _numpy().real(self)

    @property
    def imag(self):
        return _numpy().imag(self)

    def __hash__(self) -> int:
        return id(self)

    def __getattr__(self, name: str):
        # Reached only for names a Tracer lacks; an AttributeError keeps hasattr() working.
        if not name.startswith("_") and hasattr(np.ndarray, name):
            raise AttributeError(located(
                f"ndarray.{name} is not supported on traced arrays inside jitc.jit yet"))
        raise AttributeError(f"'Tracer' object has no attribute {name!r}")


def _known_index(index: Any) -> Any:
    """`index` with each traced array of known value (see Tracer._known) as that value."""
    if isinstance(index, Tracer):
        return index if index._known is None else index._known
    if isinstance(index, tuple) and any(isinstance(i, Tracer) for i in index):
        return tuple(_known_index(i) for i in index)
    return index


def _traced_slice(item: slice) -> bool:
    return any(isinstance(p, Tracer) for p in (item.start, item.stop, item.step))


def _numpy_indexing():
    import jitc.numpy.indexing as indexing
    return indexing


def _written_through_view(x: Tracer, index: Any, update: Any) -> bool:
    """Whether `update` is the up-to-date view `x[index]` itself, taken with this very index
    object: Python's `x[i] += v` reads x[i], adds in place (through the view, into x) and then
    assigns it back, which numpy does as a copy onto itself and jitc need not do at all (it
    would write the block twice, and the second time from the first write's result)."""
    view = update._view if isinstance(update, Tracer) else None
    if view is None or x._view is not None or view.root is not x or \
            view.version != x._version or len(view.steps) != 1:
        return False
    step = view.steps[0]
    return isinstance(step, effects.Index) and step.index is index


def _is_basic_index(index: Any) -> bool:
    """Whether numpy answers `x[index]` with a view: integers (a traced integer scalar too: a
    Python int argument), slices (a traced start with a static length is a view too), None
    and Ellipsis only."""
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if item is None or item is Ellipsis:
            continue
        if isinstance(item, slice):
            continue
        if isinstance(item, Tracer) and item.ndim == 0 and item.dtype.kind in "iu":
            continue  # `row = x[pos]; row *= 2` writes into x, as numpy's view does
        if isinstance(item, (int, np.integer, symbolic.Dim)) and \
                not isinstance(item, (bool, np.bool_)):
            continue  # a Dim: an int argument the symbolic compilation gives as an extent
        return False
    return True


def _inplace(ufunc: np.ufunc):
    def method(self, other):
        (other,) = with_extents((other,), self.trace)
        if not self._array:
            # A scalar (numpy's are immutable): `s += 1` rebinds s, as in numpy.
            return _numpy().apply_operator(ufunc, (self, other))
        result = _numpy().apply_ufunc(ufunc, "__call__", (self, other), {})
        return effects.write_result(self, result, f"in-place {ufunc.__name__}")
    return method


def _binary(ufunc: np.ufunc, reflected: bool = False):
    if reflected:
        def method(self, other):
            (other,) = with_extents((other,), self.trace)
            return _numpy().apply_operator(ufunc, (other, self))
    else:
        def method(self, other):
            (other,) = with_extents((other,), self.trace)
            return _numpy().apply_operator(ufunc, (self, other))
    return method


_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "and": np.bitwise_and,
    "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift,
    "rshift": np.right_shift,
}
for _name, _ufunc in _BINARY.items():
    setattr(Tracer, f"__{_name}__", _binary(_ufunc))
    setattr(Tracer, f"__r{_name}__", _binary(_ufunc, reflected=True))
    setattr(Tracer, f"__i{_name}__", _inplace(_ufunc))
Tracer.__imatmul__ = _inplace(np.matmul)  # type: ignore[attr-defined]
for _name, _ufunc in {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                      "gt": np.greater, "ge": np.greater_equal}.items():
    setattr(Tracer, f"__{_name}__", _binary(_ufunc))


def _method(name: str):
    def method(self, *args: Any, **kwargs: Any):
        return getattr(_numpy(), name)(self, *args, **kwargs)
    method.__name__ = name
    return method


# ndarray methods that take the array as their first argument, as the numpy function does.
for _name in ("sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin", "any",
              "all", "clip", "dot", "swapaxes", "squeeze", "ravel", "astype", "take",
              "repeat", "cumsum", "cumprod", "round", "nonzero", "flatten", "copy", "conj",
              "conjugate", "diagonal", "argsort", "argpartition", "searchsorted"):
    setattr(Tracer, _name, _method(_name))


def _reshape(self, *shape: Any, order: str = "C"):
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    return _numpy().reshape(self, shape, order=order)


def _transpose(self, *axes: Any):
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
        axes = axes[0]
    return _numpy().transpose(self, axes or None)


def _in_place(name: str):
    """ndarray.sort and ndarray.partition: the array itself reordered, None returned."""
    def method(self, *args: Any, **kwargs: Any) -> None:
        import jitc.numpy.sorting as sorting
        return getattr(sorting, f"{name}_in_place")(self, *args, **kwargs)
    method.__name__ = name
    return method


Tracer.sort = _in_place("sort")  # type: ignore[attr-defined]
Tracer.partition = _in_place("partition")  # type: ignore[attr-defined]
Tracer.reshape = _reshape  # type: ignore[attr-defined]
Tracer.transpose = _transpose  # type: ignore[attr-defined]
