"""jitc.lax: direct access to IR ops that numpy has no spelling for (as in jax.lax).

Each function emits one op of the table; arguments are traced arrays (or values that become
constants). Outside a trace they evaluate with the reference semantics, so they can be tried
eagerly on numpy arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.opdef import OpDef
from jitc.ir.types import TensorType
from jitc.numpy._core import lift, lift_all, tracers_in
from jitc.tracing import pytree, regions
from jitc.tracing.errors import TraceError, located, user_location
from jitc.tracing.state import current_trace, emit, emit_multi, extent_value, trace_stack
from jitc.tracing.tracer import Tracer


def _eager(op: OpDef, operands: Sequence[Any], attrs: dict[str, Any],
           result_types: Sequence[TensorType] | None = None) -> list[np.ndarray]:
    """Evaluate one op on concrete arrays with its reference semantics."""
    arrays = [np.asarray(a) for a in operands]
    types = [TensorType(dtypes.from_numpy(a.dtype), a.shape) for a in arrays]
    attrs = op.normalize_attrs(attrs)
    results = op.result_types(types, attrs, result_types)
    with np.errstate(all="ignore"):
        return [np.asarray(r) for r in op.reference(arrays, attrs, results)]


def _apply(op: OpDef, operands: Sequence[Any], attrs: dict[str, Any] | None = None,
           result_type: TensorType | None = None, same_dtype: bool = True) -> Any:
    attrs = attrs or {}
    declared = None if result_type is None else (result_type,)
    if not tracers_in(operands):
        arrays = [np.asarray(a) for a in operands]
        if same_dtype and arrays:
            common = np.result_type(*operands)
            arrays = [a.astype(common) for a in arrays]
        return _eager(op, arrays, attrs, declared)[0]
    xs = lift_all(list(operands)) if same_dtype else [lift(x) for x in operands]
    return emit(op, xs, attrs, result_type)


def logistic(x: Any) -> Any:
    return _apply(ops.LOGISTIC, [x])


def rsqrt(x: Any) -> Any:
    return _apply(ops.RSQRT, [x])


def clamp(lo: Any, x: Any, hi: Any) -> Any:
    return _apply(ops.CLAMP, [lo, x, hi])


def rem(x: Any, y: Any) -> Any:
    return _apply(ops.REM, [x, y])


def div(x: Any, y: Any) -> Any:
    """Division with the IR's semantics (integers truncate toward zero)."""
    return _apply(ops.DIV, [x, y])


def shift_left(x: Any, y: Any) -> Any:
    return _apply(ops.SHIFT_LEFT, [x, y])


def shift_right_arithmetic(x: Any, y: Any) -> Any:
    return _apply(ops.SHIFT_RIGHT_ARITHMETIC, [x, y])


def shift_right_logical(x: Any, y: Any) -> Any:
    return _apply(ops.SHIFT_RIGHT_LOGICAL, [x, y])


def convert_element_type(x: Any, dtype: Any) -> Any:
    """Conversion with defined results everywhere (saturating float to int, nan to 0)."""
    target = dtypes.from_numpy(dtype)
    shape = np.shape(x) if not isinstance(x, Tracer) else x.shape
    return _apply(ops.CONVERT, [x], {}, TensorType(target, shape))


def bitcast_convert_type(x: Any, dtype: Any) -> Any:
    target = dtypes.from_numpy(dtype)
    shape = np.shape(x) if not isinstance(x, Tracer) else x.shape
    return _apply(ops.BITCAST_CONVERT, [x], {}, TensorType(target, shape))


def iota(dtype: Any, shape: Sequence[int], dimension: int = 0) -> Any:
    result = TensorType(dtypes.from_numpy(dtype), tuple(shape))
    if current_trace() is None:
        return _eager(ops.IOTA, [], {"dimension": dimension}, (result,))[0]
    return emit(ops.IOTA, [], {"dimension": dimension}, result)


def broadcast_in_dim(x: Any, shape: Sequence[int], dims: Sequence[int]) -> Any:
    dtype = dtypes.from_numpy(x.dtype if isinstance(x, Tracer) else np.asarray(x).dtype)
    return _apply(ops.BROADCAST_IN_DIM, [x], {"dims": list(dims)},
                  TensorType(dtype, tuple(shape)))


def slice(x: Any, start: Sequence[int], limit: Sequence[int],
          stride: Sequence[int] | None = None) -> Any:
    return _apply(ops.SLICE, [x], {"start": start, "limit": limit, "stride": stride or ()})


def pad(x: Any, value: Any, low: Sequence[int], high: Sequence[int],
        interior: Sequence[int] | None = None) -> Any:
    return _apply(ops.PAD, [x, value], {"low": low, "high": high, "interior": interior or ()})


def dynamic_slice(x: Any, starts: Sequence[Any], sizes: Sequence[int]) -> Any:
    """A `sizes` block at run-time start indices (clamped so the block fits)."""
    return _apply(ops.DYNAMIC_SLICE, [x, *starts], {"sizes": sizes}, same_dtype=False)


def dynamic_update_slice(x: Any, update: Any, starts: Sequence[Any]) -> Any:
    if not tracers_in([x, update, *starts]):
        return _eager(ops.DYNAMIC_UPDATE_SLICE, [x, update, *starts], {})[0]
    base, upd = lift_all([x, update])
    return emit(ops.DYNAMIC_UPDATE_SLICE, [base, upd, *[lift(s) for s in starts]])


def gather(x: Any, indices: Any, axis: int = 0) -> Any:
    """np.take with indices clamped into range."""
    return _apply(ops.GATHER, [x, indices], {"axis": axis}, same_dtype=False)


def reduce(operands: Sequence[Any], dims: Sequence[int], kind: str) -> tuple[Any, ...]:
    """One multi-operand reduce: every operand reduced over `dims`, one result each."""
    attrs = {"dims": list(dims), "kind": kind}
    if not tracers_in(list(operands)):
        return tuple(_eager(ops.REDUCE, operands, attrs))
    return emit_multi(ops.REDUCE, [lift(x) for x in operands], attrs)


def dot_general(lhs: Any, rhs: Any, contract: tuple[Sequence[int], Sequence[int]],
                batch: tuple[Sequence[int], Sequence[int]] = ((), ())) -> Any:
    attrs = {"lhs_contract": list(contract[0]), "rhs_contract": list(contract[1]),
             "lhs_batch": list(batch[0]), "rhs_batch": list(batch[1])}
    return _apply(ops.DOT_GENERAL, [lhs, rhs], attrs)


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int] = (),
                         padding: str | Sequence[tuple[int, int]] = (),
                         lhs_dilation: Sequence[int] = (), rhs_dilation: Sequence[int] = (),
                         dimension_numbers: str | Sequence[str] | None = None,
                         feature_group_count: int = 1) -> Any:
    """N-d convolution (cross-correlation), spelled as in JAX's lax.

    `dimension_numbers`: the IR's dim_labels (`bf01_oi01->bf01` is NCHW/OIHW, the default;
    `b01f_01io->b01f` is NHWC/HWIO), or JAX's three layout strings such as
    `("NHWC", "HWIO", "NHWC")` (N batch, C feature, O and I the kernel's output and input
    features; the spatial letters are ordered as the kernel's string orders them).
    `padding`: (low, high) pairs, or "VALID", "SAME" or "SAME_LOWER" (the output has
    ceil(input / stride) positions; an odd total puts the extra one high, or low)."""
    labels = _conv_labels(dimension_numbers, np.ndim(lhs))
    if isinstance(padding, str):
        padding = _named_padding(padding, labels, np.shape(lhs), np.shape(rhs),
                                 window_strides, lhs_dilation, rhs_dilation)
    attrs = {"dim_labels": labels, "strides": list(window_strides),
             "padding": [tuple(p) for p in padding], "lhs_dilation": list(lhs_dilation),
             "rhs_dilation": list(rhs_dilation), "feature_group_count": feature_group_count}
    return _apply(ops.CONVOLUTION, [lhs, rhs], attrs)


def _conv_labels(dimension_numbers: str | Sequence[str] | None, rank: int) -> str:
    """The IR's dim_labels for a convolution's `dimension_numbers` (see
    conv_general_dilated); ValueError naming the expected form otherwise."""
    if dimension_numbers is None:
        spatial = "".join(str(i) for i in range(max(rank - 2, 0)))
        return f"bf{spatial}_oi{spatial}->bf{spatial}"
    if isinstance(dimension_numbers, str):
        return dimension_numbers
    specs = tuple(dimension_numbers)
    if len(specs) != 3 or not all(isinstance(x, str) and len(x) == len(specs[0])
                                  for x in specs):
        raise ValueError(f"conv_general_dilated: dimension_numbers={dimension_numbers!r}: "
                         "expected dim_labels such as 'bf01_oi01->bf01' or three layout "
                         "strings of one length such as ('NHWC', 'HWIO', 'NHWC')")
    lhs_spec, rhs_spec, out_spec = specs
    spatial = [c for c in rhs_spec if c not in "OI"]
    if sorted(rhs_spec) != sorted("OI" + "".join(spatial)) or \
            sorted(lhs_spec) != sorted("NC" + "".join(spatial)) or \
            sorted(out_spec) != sorted(lhs_spec):
        raise ValueError(f"conv_general_dilated: dimension_numbers={dimension_numbers!r}: the "
                         "input and output need N, C and the kernel's spatial letters; the "
                         "kernel O, I and the same spatial letters, each once")
    digits = {c: str(i) for i, c in enumerate(spatial)}

    def relabel(spec: str, names: dict[str, str]) -> str:
        return "".join(names.get(c) or digits[c] for c in spec)

    activations = {"N": "b", "C": "f"}
    return (f"{relabel(lhs_spec, activations)}_{relabel(rhs_spec, {'O': 'o', 'I': 'i'})}->"
            f"{relabel(out_spec, activations)}")


def _named_padding(padding: str, labels: str, lhs_shape: Sequence[int],
                   rhs_shape: Sequence[int], strides: Sequence[int],
                   lhs_dilation: Sequence[int], rhs_dilation: Sequence[int]
                   ) -> list[tuple[int, int]]:
    """JAX's padding names as (low, high) pairs per spatial dimension."""
    dims = ops.linalg.parse_dim_labels(labels)
    spatial = len(dims.lhs_spatial)
    strides, lhs_dilation, rhs_dilation = (tuple(v) or (1,) * spatial for v in
                                           (strides, lhs_dilation, rhs_dilation))
    name = padding.upper()
    if any(d != 1 for d in lhs_dilation):
        # Which output a "SAME" transposed convolution has is a convention of its own.
        raise ValueError(f"conv_general_dilated: padding={padding!r} with lhs_dilation "
                         f"{tuple(lhs_dilation)}: give (low, high) pairs")
    if name == "VALID":
        return [(0, 0)] * spatial
    if name not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"conv_general_dilated: padding={padding!r}: expected 'VALID', "
                         "'SAME', 'SAME_LOWER' or (low, high) pairs")
    pads = []
    for s in range(spatial):
        size = lhs_shape[dims.lhs_spatial[s]]
        window = (rhs_shape[dims.rhs_spatial[s]] - 1) * rhs_dilation[s] + 1
        if not all(isinstance(d, (int, np.integer)) for d in (size, window)):
            raise ValueError("conv_general_dilated: padding='SAME' needs static spatial "
                             "extents; pass (low, high) pairs")
        out = -(-size // strides[s])
        total = max((out - 1) * strides[s] + window - size, 0)
        low = total // 2 if name == "SAME" else total - total // 2
        pads.append((low, total - low))
    return pads


def argmax(x: Any, axis: int, index_dtype: Any = np.int64) -> Any:
    return _apply(ops.ARGMAX, [x], {"axis": axis,
                                    "index_dtype": dtypes.from_numpy(index_dtype).name})


def argmin(x: Any, axis: int, index_dtype: Any = np.int64) -> Any:
    return _apply(ops.ARGMIN, [x], {"axis": axis,
                                    "index_dtype": dtypes.from_numpy(index_dtype).name})


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    if not tracers_in([pred, on_true, on_false]):
        return np.where(pred, on_true, on_false)
    a, b = lift_all([on_true, on_false])
    return emit(ops.SELECT, [lift(pred), a, b])


# -- control flow -----------------------------------------------------------------------------
# Each function traces its Python callables once, into regions of one `while` or `conditional`
# op (jitc.tracing.regions), so compile time does not grow with the trip count. Outside a trace
# they run eagerly in Python, with JAX's semantics.

def _tracing() -> bool:
    return current_trace() is not None


def _carry_types(leaves: Sequence[Any]) -> list[TensorType]:
    return [regions.leaf_type(leaf) for leaf in leaves]


def _check_outputs(region: regions.Region, tree: pytree.TreeDef, types: Sequence[TensorType],
                   what: str) -> None:
    """A body or branch returns exactly the structure and types it must (constants are
    converted to the type)."""
    if region.tree != tree:
        raise TraceError(located(f"{what} must return the same structure as its carry "
                                 f"({tree.num_leaves} leaves), it returned "
                                 f"{region.tree.num_leaves}"))
    for n, (leaf, want) in enumerate(zip(region.leaves, types)):
        if isinstance(leaf, Tracer) and not leaf.value.type.same_shape_and_dtype(want):
            raise TraceError(located(
                f"{what} returned {leaf.value.type.short()} for carried value {n}, which is "
                f"{want.short()}: a carried value keeps its shape and dtype across steps.\n"
                f"Convert it (x.astype(np.{want.dtype.numpy})) or start the carry with the "
                "dtype the body produces."))


def _traced_while(cond_fun: Callable, body_fun: Callable, leaves: list[Any],
                  tree: pytree.TreeDef) -> list[Any]:
    state = current_trace()
    types = _carry_types(leaves)
    cond = regions.trace_region("cond", lambda *c: cond_fun(pytree.unflatten(tree, list(c))),
                                types, pytree.TreeDef("tuple", (pytree.LEAF,) * len(types)),
                                "the while_loop condition")
    if len(cond.leaves) != 1 or regions.leaf_type(cond.leaves[0]).shape != ():
        raise TraceError(located("the while_loop condition must return one scalar, got "
                                 f"{len(cond.leaves)} value(s) of shapes "
                                 f"{[regions.leaf_type(x).shape for x in cond.leaves]}"))
    predicate = cond.leaves[0]
    if not (isinstance(predicate, Tracer) and predicate.dtype == np.bool_):
        stack = trace_stack()
        stack.append(cond.state)
        try:
            cond.leaves = [lift(predicate) != 0]
        finally:
            stack.pop()
    body = regions.trace_region("body", lambda *c: body_fun(pytree.unflatten(tree, list(c))),
                                types, pytree.TreeDef("tuple", (pytree.LEAF,) * len(types)),
                                "the while_loop body")
    _check_outputs(body, tree, types, "the while_loop body")
    regions.set_outputs(cond)
    regions.set_outputs(body, types)
    free = regions.union_of_free([cond, body])
    regions.close_over(cond, free)
    regions.close_over(body, free, pass_through=True)
    operands = [regions.as_value(state, leaf, t) for leaf, t in zip(leaves, types)] + free
    results = state.builder.emit_multi(
        ops.WHILE, operands, {"cond": cond.state.function.name, "body": body.state.function.name},
        loc=user_location())
    return [Tracer(state, v) for v in results[:len(leaves)]]


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any],
               init_val: Any) -> Any:
    """`while cond_fun(val): val = body_fun(val)`; `val` is a pytree of arrays whose shapes and
    dtypes stay the same across steps (jax.lax.while_loop)."""
    if not _tracing():
        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val
    leaves, tree = pytree.flatten(init_val, regions.is_leaf)
    return pytree.unflatten(tree, _traced_while(cond_fun, body_fun, leaves, tree))


def _counter_dtype(lower: Any, upper: Any) -> np.dtype:
    kinds = [np.asarray(x).dtype if not isinstance(x, Tracer) else x.dtype
             for x in (lower, upper)]
    return np.result_type(*kinds)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any],
              init_val: Any) -> Any:
    """`for i in range(lower, upper): val = body_fun(i, val)` (jax.lax.fori_loop); the bounds
    may be traced."""
    if not _tracing():
        val = init_val
        for i in range(int(lower), int(upper)):
            val = body_fun(i, val)
        return val
    counter = _counter_dtype(lower, upper)
    start = lift(lower).astype(counter) if isinstance(lower, Tracer) else counter.type(lower)
    stop = lift(upper).astype(counter) if isinstance(upper, Tracer) else counter.type(upper)

    def cond(carry: tuple) -> Any:
        return carry[0] < stop

    def body(carry: tuple) -> tuple:
        i, val = carry
        return i + counter.type(1), body_fun(i, val)

    return while_loop(cond, body, (start, init_val))[1]


def _step_slice(x: Any, t: Any) -> Any:
    """x[t] for a traced index t, as one dynamic_slice (zeros of a row's shape when x has no
    rows: a scan of no steps traces its body for the types only, and never runs it)."""
    if x.shape[0] == 0:
        return broadcast_in_dim(lift(np.zeros((), x.dtype)), x.shape[1:], [])
    zeros = [np.int64(0)] * (x.ndim - 1)
    block = dynamic_slice(x, [t, *zeros], [1, *x.shape[1:]])
    return block.reshape(x.shape[1:])


def scan(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None,
         length: int | None = None, reverse: bool = False) -> tuple[Any, Any]:
    """jax.lax.scan: `carry, y = f(carry, x)` for each x along the leading axis of `xs` (in
    reverse order with `reverse`); returns the last carry and the ys stacked along a new
    leading axis."""
    x_leaves, x_tree = pytree.flatten(xs, regions.is_leaf)
    lengths = {np.shape(x)[0] if not isinstance(x, Tracer) else x.shape[0] for x in x_leaves}
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        problem = f"the leading axes of xs and length disagree: {sorted(lengths)}" \
            if lengths else "give xs or length"
        raise ValueError(located(f"scan: {problem}"))
    (n,) = lengths
    if not _tracing():
        carry, ys = init, []
        for i in (reversed(range(n)) if reverse else range(n)):
            x = pytree.unflatten(x_tree, [leaf[i] for leaf in x_leaves])
            carry, y = f(carry, x)
            ys.append(y)
        if reverse:
            ys.reverse()
        return carry, _stack_trees(ys)
    x_leaves = [lift(x) for x in x_leaves]

    def steps() -> Any:
        """The step count; a symbolic length (xs of f32[T, ...]) is the call's value of T,
        read where it is used (an extent op needs no operand a region would capture)."""
        return np.int64(n) if isinstance(n, (int, np.integer)) else \
            lift(extent_value(n), np.int64)
    carry_leaves, carry_tree = pytree.flatten(init, regions.is_leaf)
    carry_types = _carry_types(carry_leaves)

    def step(i: Any, carry: Any) -> tuple[Any, Any]:
        t = (steps() - 1 - i) if reverse else i
        x = pytree.unflatten(x_tree, [_step_slice(leaf, t) for leaf in x_leaves])
        return f(carry, x)

    # One trace to learn the types of y; the loop body is traced afresh below.
    probe = regions.trace_region(
        "probe", lambda i, *c: step(i, pytree.unflatten(carry_tree, list(c))),
        [TensorType(dtypes.from_numpy(np.int64), ()), *carry_types],
        pytree.TreeDef("tuple", (pytree.LEAF,) * (1 + len(carry_types))), "the scan function")
    regions.discard(probe)
    if probe.tree.kind not in ("tuple", "list") or len(probe.tree.children) != 2:
        raise TraceError(located("the scan function must return a pair (carry, y)"))
    y_tree = probe.tree.children[1]
    y_types = _carry_types(probe.leaves[carry_tree.num_leaves:])
    # Zeros broadcast from a scalar: a literal of n steps' zeros would be copied and hashed.
    buffers = [broadcast_in_dim(lift(np.zeros((), t.dtype.numpy)), (n, *t.shape), [])
               for t in y_types]
    if isinstance(n, (int, np.integer)) and n == 0:  # no step: the carry as it came in
        carry = [lift(leaf, t.dtype.numpy) for leaf, t in zip(carry_leaves, carry_types)]
        return pytree.unflatten(carry_tree, carry), pytree.unflatten(y_tree, buffers)

    def body(state: tuple) -> tuple:
        i, carry, ys = state
        t = (steps() - 1 - i) if reverse else i
        new_carry, y = step(i, carry)
        y_leaves = pytree.flatten(y, regions.is_leaf)[0]
        ys = [dynamic_update_slice(buf, lift(leaf, buf.dtype)[None],
                                   [t, *([np.int64(0)] * (buf.ndim - 1))])
              for buf, leaf in zip(ys, y_leaves)]
        return i + np.int64(1), new_carry, ys

    def cond(state: tuple) -> Any:
        return state[0] < steps()

    _, carry, ys = while_loop(cond, body, (np.int64(0), init, buffers))
    return carry, pytree.unflatten(y_tree, list(ys))


def _stack_trees(ys: list[Any]) -> Any:
    if not ys:
        raise ValueError("scan with length 0 outside a trace cannot tell the shape of ys")
    leaves = [pytree.flatten(y, regions.is_leaf) for y in ys]
    tree = leaves[0][1]
    columns = zip(*(ls for ls, _ in leaves))
    return pytree.unflatten(tree, [np.stack([np.asarray(v) for v in col]) for col in columns])


def _traced_branches(index: Any, branches: Sequence[Callable], operands: tuple) -> Any:
    state = current_trace()
    leaves, tree = pytree.flatten(operands, regions.is_leaf)
    types = _carry_types(leaves)
    traced = [regions.trace_region("branch", lambda *a, b=b: b(*pytree.unflatten(tree, list(a))),
                                   types, tree, "a branch of cond/switch") for b in branches]
    first = traced[0]
    out_types: list[TensorType] = []
    for n in range(len(first.leaves)):
        kinds = [regions.leaf_type(r.leaves[n]) for r in traced if n < len(r.leaves)
                 and isinstance(r.leaves[n], Tracer)]
        out_types.append(kinds[0] if kinds else regions.leaf_type(first.leaves[n]))
    for k, region in enumerate(traced):
        _check_outputs(region, first.tree, out_types, f"branch {k} of cond/switch")
        regions.set_outputs(region, out_types)
    free = regions.union_of_free(traced)
    for region in traced:
        regions.close_over(region, free)
    operand_values = [regions.as_value(state, leaf, t) for leaf, t in zip(leaves, types)]
    results = state.builder.emit_multi(
        ops.CONDITIONAL, [lift(index).value, *operand_values, *free],
        {"branches": [r.state.function.name for r in traced]}, out_types, loc=user_location())
    return pytree.unflatten(first.tree, [Tracer(state, v) for v in results])


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """`branches[index](*operands)`, the index clamped into range (jax.lax.switch); every
    branch is traced once and returns the same structure, shapes and dtypes."""
    count = len(branches)
    if count == 0:
        raise ValueError("switch needs at least one branch")
    if not isinstance(index, Tracer):
        chosen = min(max(int(np.asarray(index)), 0), count - 1)
        return branches[chosen](*operands)
    if index.shape != () or index.dtype.kind not in "biu":
        raise TypeError(located(f"switch: the index must be an integer scalar, got "
                                f"{index.aval.short()}"))
    wide = index.astype(np.int64)
    clamped = clamp(np.int64(0), wide, np.int64(count - 1)).astype(np.int32)
    return _traced_branches(clamped, branches, operands)


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any) -> Any:
    """`true_fun(*operands) if pred else false_fun(*operands)` (jax.lax.cond), with a traced
    scalar `pred`: both functions are traced, one runs."""
    if not isinstance(pred, Tracer):
        return true_fun(*operands) if pred else false_fun(*operands)
    if pred.shape != ():
        raise TypeError(located(f"cond: the predicate must be a scalar, got "
                                f"{pred.aval.short()}; np.where selects elementwise"))
    index = (pred != 0).astype(np.int32)
    return _traced_branches(index, [false_fun, true_fun], operands)
