"""The trace being recorded: its function, builder, constants and the `emit` entry point.

Every traced operation in jitc ends in `emit`, which asks the op table for the result type and
records the user's source line; shape errors come back with that line attached.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from jitc.ir import dtypes, ops, symbolic
from jitc.ir.core import Builder, Function, Literal, Value
from jitc.ir.opdef import IRTypeError, OpDef, Trait
from jitc.ir.types import TensorType
from jitc.tracing.errors import JitcError, ShapeError, TraceError, located, user_location

if TYPE_CHECKING:
    from jitc.tracing.tracer import Tracer


class TraceState:
    def __init__(self, name: str, user_function_name: str) -> None:
        self.function = Function(name)
        self.builder = Builder(self.function)
        self.user_function_name = user_function_name
        self._constants: dict[object, Tracer] = {}
        self._keep_alive: list[object] = []
        # id(array) -> its Tracer, for the captured arrays (jitc.tracing.capture): however the
        # function reaches one (a helper's globals), it reads the implicit argument.
        self.captured: dict[int, Tracer] = {}
        # id(parameter value) -> argument name, for Python int arguments: used as a Python
        # int (a shape, range(n), a slice bound), such an argument, or a value computed from
        # such arguments alone (pos + 1), is made static (errors.SpecializeArgument).
        self.specializable: dict[int, str] = {}
        # explain mode (Jitted.explain): obstacles are noted here and tracing goes on.
        self.obstacles: list[JitcError] | None = None
        # The traced function first, then the regions of control flow ops
        # (jitc.tracing.regions), shared by the nested traces of one trace; empty until the
        # first region.
        self.regions: list[Function] = []

    def obstacle(self, error: JitcError, fallback: object) -> Any:
        """Raise `error`; in explain mode note it and go on with `fallback` instead."""
        if self.obstacles is None:
            raise error
        self.obstacles.append(error)
        return fallback

    def constant(self, value: object, dtype: dtypes.DType | None = None,
                 weak: bool = False) -> Tracer:
        """A traced constant for a numpy array or scalar, created once per trace."""
        from jitc.tracing.tracer import Tracer
        if isinstance(value, np.ndarray):
            key: object = ("array", id(value), dtype)
            self._keep_alive.append(value)
        else:
            key = ("scalar", type(value), value, dtype, _zero_signs(value))
        if isinstance(value, symbolic.Dim) and dtype is None:
            return extent_value(value, self)
        cached = self._constants.get(key)
        if cached is None:
            refuse_symbolic_value(value)
            array = np.asarray(value, dtype=None if dtype is None else dtype.numpy)
            try:
                literal = Literal(array)
            except TypeError as exc:
                raise TraceError(located(f"{exc}")) from None
            value_ = self.builder.emit(ops.CONSTANT, [], {"value": literal},
                                       loc=user_location())
            cached = Tracer(self, value_, weak)
            self._constants[key] = cached
        return cached

    def argument_source(self, value: Value) -> str | None:
        """The name of a Python int argument that `value` is computed from, when it is computed
        from such arguments and constants alone (`pos`, `pos + 1`, `n // 2`); else None (it
        depends on array data or on a loop's variables, which no static value fixes)."""
        pending, seen, names = [value], set(), []
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            if len(seen) > _SOURCE_WALK_LIMIT:
                return None
            producer = current.producer
            if producer.op is ops.PARAMETER:
                name = self.specializable.get(id(current))
                if name is None:
                    return None
                names.append(name)
            else:
                pending.extend(producer.operands)
        return names[0] if names else None

    def constant_source(self, value: Value) -> int | None:
        """id() of the numpy array whose constant `value` is, if it is one of this trace."""
        for key, tracer in self._constants.items():
            if key[0] == "array" and tracer.value is value:
                return key[1]  # type: ignore[return-value]
        return None


# How many values `argument_source` looks through: a scalar index is a short expression, and
# the walk runs only where a traced value must be a Python int (about to raise otherwise).
_SOURCE_WALK_LIMIT = 256


def _zero_signs(value: object) -> object:
    """What tells 0.0 from -0.0 (which compare equal) in a constant's cache key."""
    if isinstance(value, float):
        return np.signbit(value)
    if isinstance(value, complex):
        return np.signbit(value.real), np.signbit(value.imag)
    return None


def refuse_symbolic_value(value: object) -> None:
    """A symbolic dimension inside a container used as an array value (`np.asarray(x.shape)`):
    a bare one becomes an `extent` op (`with_extents`), a list of them is not traced yet."""
    if isinstance(value, symbolic.Dim):
        found = value
    elif isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray)
                                               and value.dtype == object):
        items = value.flat if isinstance(value, np.ndarray) else value
        found = next((v for v in items if isinstance(v, symbolic.Dim)), None)
    else:
        return
    if found is not None:
        raise symbolic.UnknownDimensionError(
            f"the symbolic dimension {found} is used as an array value inside a sequence; "
            "tracing gives a value to a single extent (x / x.shape[0]), not to a list or "
            "array of them (use the extents one by one)")


def extent_value(dim: symbolic.Dim, state: TraceState | None = None) -> Tracer:
    """A symbolic extent used as a number (`x / x.shape[0]`, the count of a mean): an `extent`
    op, weakly typed like the Python int numpy would see there."""
    from jitc.tracing.tracer import Tracer
    state = current_trace() or state
    if state is None:
        raise TraceError("a symbolic extent is used as a value outside a trace")
    value = state.builder.emit(ops.EXTENT, [], {"size": [dim]}, loc=user_location())
    return Tracer(state, value, weak=True)


def _traced_extent(dim: symbolic.Dim) -> Tracer:
    if current_trace() is None:
        raise symbolic.UnknownDimensionError(f"the symbolic dimension {dim} has no value "
                                             "outside a trace")
    return extent_value(dim)


# `n / 2`, `n * 0.5`, `np.sqrt(n)` of an extent of the trace: the call's value.
symbolic.value_of = _traced_extent


def with_extents(values: Sequence[object], state: TraceState | None = None) -> tuple:
    """`values` (operands of a traced op) with each symbolic extent as its `extent` value;
    symbolic extents inside containers are refused."""
    if not any(isinstance(v, _MAY_HOLD_EXTENTS) for v in values):
        return tuple(values)  # the common case, on every traced operator: nothing to do
    out = tuple(extent_value(v, state) if isinstance(v, symbolic.Dim) else v for v in values)
    for v in out:
        refuse_symbolic_value(v)
    return out


_MAY_HOLD_EXTENTS = (symbolic.Dim, tuple, list, np.ndarray)


_local = threading.local()


def trace_stack() -> list[TraceState]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def current_trace() -> TraceState | None:
    stack = trace_stack()
    return stack[-1] if stack else None


# An interceptor sees each op before it is emitted and may emit something else in its place:
# `interceptor(op, operands, attrs)` returns the results, or None to let the op through.
# jitc.quant rewrites products with weights this way, however the user spelled them.
Interceptor = Callable[[OpDef, Sequence["Tracer"], Mapping[str, object]],
                       "tuple[Tracer, ...] | None"]


@contextlib.contextmanager
def intercepting(interceptor: Interceptor) -> Iterator[None]:
    """Run `interceptor` on every op emitted in this thread until the block ends (innermost
    first; the ops it emits itself go only to the interceptors outside it)."""
    stack = _interceptors()
    stack.append(interceptor)
    try:
        yield
    finally:
        stack.remove(interceptor)


def _interceptors() -> list[Interceptor]:
    stack = getattr(_local, "interceptors", None)
    if stack is None:
        stack = _local.interceptors = []
    return stack


def _intercepted(op: OpDef, operands: Sequence[Tracer], attrs: Mapping[str, object] | None
                 ) -> tuple[Tracer, ...] | None:
    stack = _local.interceptors
    interceptor = stack[-1]
    _local.interceptors = stack[:-1]
    try:
        return interceptor(op, operands, attrs or {})
    finally:
        _local.interceptors = stack


def emit_multi(op: OpDef, operands: Sequence[Tracer], attrs: Mapping[str, object] | None = None,
               result_types: Sequence[TensorType] | None = None,
               trace: TraceState | None = None) -> tuple[Tracer, ...]:
    from jitc.tracing.tracer import Tracer
    if result_types is None and getattr(_local, "interceptors", None):
        replaced = _intercepted(op, operands, attrs)
        if replaced is not None:
            return replaced
    # The innermost trace: inside a jitc.lax region, ops on values of enclosing traces belong
    # to the region too (it reads those values as extra operands).
    state = trace or current_trace() or (operands[0].trace if operands else None)
    if state is None:
        raise TraceError("jitc operations need a trace; call them inside a jitc.jit function")
    loc = user_location()
    try:
        values = state.builder.emit_multi(op, [t.value for t in operands], attrs, result_types,
                                          loc=loc)
    except IRTypeError as exc:
        message = _explain(op, [t.value.type for t in operands], exc)
        raise ShapeError(located(f"{op.name}: {message}", loc)) from None
    return tuple(Tracer(state, v) for v in values)


def _explain(op: OpDef, types: Sequence[TensorType], exc: IRTypeError) -> str:
    """The op table's complaint, in the user's terms where we can say more."""
    if op.has(Trait.BROADCASTS):
        try:
            np.broadcast_shapes(*(t.shape for t in types))
        except ValueError:
            listed = " with ".join(t.short() for t in types)
            return (f"cannot broadcast {listed}\nBroadcasting matches shapes from the last "
                    "dimension, where each pair of sizes must be equal or 1; add axes "
                    "(x[:, None]), reshape or transpose an operand so that they line up.")
    message = str(exc)
    if types and "[" not in message:
        message += f" (operands: {', '.join(t.short() for t in types)})"
    return message


def emit(op: OpDef, operands: Sequence[Tracer], attrs: Mapping[str, object] | None = None,
         result_type: TensorType | None = None, trace: TraceState | None = None) -> Tracer:
    declared = None if result_type is None else (result_type,)
    (result,) = emit_multi(op, operands, attrs, declared, trace)
    return result
