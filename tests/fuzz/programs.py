"""Random well-typed IR programs over every op of the table, with their arguments.

`Program(data).build()` draws parameters and 3 to 8 instructions from a hypothesis `data`
object: any dtype the op takes, shapes of rank 0 to 3 with sizes 0, 1 and more, broadcasting
operands, and attributes valid by the op's rule (a draw the rule rejects adds nothing).

Each value is exact or approximate. Exact values come from ops every backend must compute
bit for bit like the reference: integer and bool ops, and the correctly rounded float ops
(add, sub, mul, div, sqrt, rem, floor, ...). Approximate values come from float reductions,
contractions and transcendental functions, whose rounding depends on the order of the
arithmetic or the polynomial used. An approximate value only flows through ops that do not
magnify an error (moves, neg, abs, max, min, select, clamp, float conversions): never into a
comparison, a rounding or an integer conversion, where one ulp could flip the result, nor into
another approximate op. The comparison (test_fuzz_backends.py) then needs one tolerance per op.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Function, Literal, Module, Value
from jitc.ir.dtypes import DType
from jitc.ir.opdef import IRTypeError, OpDef, Trait
from jitc.ir.types import TensorType
from jitc.ir.verifier import verify

SIZES = [0, 1, 1, 2, 3, 4]
INTEGERS = list(dtypes.INTS)
NUMERIC = [*dtypes.INTS, *dtypes.FLOATS]
# Float ops whose results a backend may round differently from the reference.
APPROXIMATE = {ops.EXP, ops.EXPM1, ops.LOG, ops.LOG1P, ops.RSQRT, ops.TANH, ops.LOGISTIC,
               ops.SIN, ops.COS, ops.POW, ops.ATAN2}
# Ops an approximate operand may flow through: they move or pick values, or scale nothing.
PASSES_ERRORS = {ops.NEG, ops.ABS, ops.MAX, ops.MIN, ops.SELECT, ops.CLAMP, ops.CONVERT,
                 ops.BROADCAST_IN_DIM, ops.RESHAPE, ops.TRANSPOSE, ops.SLICE, ops.PAD,
                 ops.CONCATENATE, ops.REVERSE, ops.DYNAMIC_SLICE, ops.DYNAMIC_UPDATE_SLICE,
                 ops.GATHER}
# Ops the generator never emits itself: parameters are drawn as needed, fusions are made by
# the backends' pipelines from the rest; control flow (regions) has its own differential
# tests (tests/test_lax_control.py).
# real, imag and complex never reach a code generator: complex values are split into float
# pairs first (jitc/passes/complex_split.py), which tests/ops and tests/numpy check.
# `extent` has a static value in a static program: the fold pass makes it a constant.
NOT_DRAWN = {"parameter", "fusion", "while", "conditional", "real", "imag", "complex",
             "extent"}
# The dtypes programs compute in: those a code generator sees (no complex, as above).
DTYPES = [d for d in dtypes.ALL if not d.is_complex]


def float_values(dtype: np.dtype, rng: np.random.Generator, shape: tuple[int, ...]
                 ) -> np.ndarray:
    """Mostly multiples of 1/4 in [-10, 10] (exact in every float dtype), some edge values."""
    tiny = float(np.finfo(dtype).smallest_subnormal)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, 1000.0, -0.5])
    nice = rng.integers(-40, 41, shape) / 4
    pick = rng.random(shape) < 0.15
    return np.where(pick, rng.choice(edges, shape), nice).astype(dtype)


def int_values(dtype: np.dtype, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Small values, with the dtype's extremes and random full-range values among them."""
    info = np.iinfo(dtype)
    edges = np.array([int(info.min), int(info.max), 0, 1, -1 if info.min else 2, 7],
                     dtype=object)
    small = rng.integers(max(int(info.min), -9), 10, shape)
    wide = rng.integers(int(info.min), int(info.max), shape, endpoint=True, dtype=dtype)
    kind = rng.random(shape)
    values = np.where(kind < 0.1, rng.choice(edges, shape), np.where(kind < 0.25, wide, small))
    return values.astype(dtype)


def random_values(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator
                  ) -> np.ndarray:
    if dtype.is_bool:
        return rng.random(shape) < 0.5
    if dtype.is_int:
        return int_values(dtype.numpy, rng, shape)
    return float_values(dtype.numpy, rng, shape)


@dataclass
class Program:
    """A function being drawn, its arguments, and which of its values are approximate."""

    data: st.DataObject
    fn: Function = field(default_factory=lambda: Function("fuzzed"))
    values: list[Value] = field(default_factory=list)
    arguments: list[np.ndarray] = field(default_factory=list)
    approximate: set[int] = field(default_factory=set)  # ids of approximate values
    used: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.b = Builder(self.fn)
        self.rng = np.random.default_rng(self.draw(st.integers(0, 2**32 - 1)))

    def draw(self, strategy: st.SearchStrategy):
        return self.data.draw(strategy)

    def is_approximate(self, value: Value) -> bool:
        return id(value) in self.approximate

    # --- operands --------------------------------------------------------------------------

    def shape(self, rank: int | None = None) -> tuple[int, ...]:
        rank = self.draw(st.integers(0, 3)) if rank is None else rank
        return tuple(self.draw(st.sampled_from(SIZES)) for _ in range(rank))

    def parameter(self, dtype: DType, shape: tuple[int, ...],
                  values: np.ndarray | None = None) -> Value:
        index = len(self.arguments)
        value = self.b.emit(ops.PARAMETER, [], {"index": index}, TensorType(dtype, shape))
        self.arguments.append(random_values(dtype, shape, self.rng) if values is None
                              else values.astype(dtype.numpy))
        self.values.append(value)
        return value

    def operand(self, kinds: list[DType], exact: bool = True, shape: tuple | None = None
                ) -> Value:
        """A value of one of `kinds` (and `shape`, when given): mostly one computed already,
        so that ops chain; else a new parameter. `exact`: no approximate value."""
        pool = [v for v in self.values if v.type.dtype in kinds
                and (shape is None or v.type.shape == shape)
                and not (exact and self.is_approximate(v))]
        if pool and self.draw(st.integers(0, 3)):
            return pool[-1] if self.draw(st.booleans()) else self.draw(st.sampled_from(pool))
        dtype = self.draw(st.sampled_from(kinds))
        return self.parameter(dtype, self.shape() if shape is None else shape)

    def broadcast_partner(self, x: Value, dtype: DType | None = None, exact: bool = True
                          ) -> Value:
        """A value that broadcasts with `x`: the same shape, a suffix of it with some
        sizes 1, or a shape `x` broadcasts to."""
        dtype = dtype or x.type.dtype
        shape = x.type.shape
        choice = self.draw(st.integers(0, 3))
        if choice == 0:
            rank = self.draw(st.integers(0, len(shape)))
            shape = tuple(self.draw(st.sampled_from([d, 1])) for d in shape[len(shape) - rank:])
        elif choice == 1:
            shape = self.shape(self.draw(st.integers(0, 1))) + \
                tuple(d if d != 1 else self.draw(st.sampled_from(SIZES)) for d in shape)
        return self.operand([dtype], exact=exact, shape=shape)

    def index_scalar(self) -> Value:
        dtype = self.draw(st.sampled_from([dtypes.int32, dtypes.int64, dtypes.uint8]))
        start = self.draw(st.integers(-2 if dtype.kind.value == "signed" else 0, 6))
        return self.parameter(dtype, (), np.array(start))

    # --- emitting --------------------------------------------------------------------------

    def emit(self, op: OpDef, operands: list[Value], attrs: dict | None = None,
             result: TensorType | None = None) -> list[Value]:
        """Emit `op`; a draw its rule rejects adds nothing."""
        try:
            if op is ops.REDUCE:
                results = list(self.b.emit_multi(op, operands, attrs or {}))
            else:
                results = [self.b.emit(op, operands, attrs or {}, result)]
        except IRTypeError:
            return []
        inexact = any(self.is_approximate(v) for v in operands)
        if inexact or op in APPROXIMATE or self.rounds_in_order(op, attrs):
            # A variadic reduce reduces each operand on its own: its integer results are exact.
            self.approximate.update(id(r) for r in results if r.type.dtype.is_float)
        self.values.extend(results)
        self.used.add(op.name)
        return results

    @staticmethod
    def rounds_in_order(op: OpDef, attrs: dict | None) -> bool:
        """Float sums, products and contractions round by the order of their additions."""
        if op is ops.REDUCE:
            return attrs["kind"] in ("sum", "prod")  # type: ignore[index]
        return op in (ops.DOT_GENERAL, ops.CONVOLUTION)

    def step(self, op: OpDef) -> None:
        MAKERS[op.name](self, op)

    def build(self, first: str | None = None) -> Module:
        if first is not None:
            self.step(ops.lookup(first))
        names = sorted(MAKERS)
        for _ in range(self.draw(st.integers(3, 8))):
            self.step(ops.lookup(self.draw(st.sampled_from(names))))
        if not self.values:
            self.parameter(dtypes.float32, (2,))
        outputs = [self.values[-1], *self.draw(st.lists(st.sampled_from(self.values),
                                                        max_size=2))]
        self.fn.outputs = outputs
        return verify(Module([self.fn]))


# --- one maker per op ---------------------------------------------------------------------

Maker = Callable[[Program, OpDef], None]
MAKERS: dict[str, Maker] = {}


def _kinds(op: OpDef) -> list[DType]:
    """The dtypes an elementwise op accepts, asked of its own rule."""
    accepted = []
    for dtype in DTYPES:
        with contextlib.suppress(IRTypeError):
            op.result_types([TensorType(dtype, ())] * op.num_operands, _default_attrs(op),
                            None if not op.has(Trait.TYPED_RESULT) else
                            [TensorType(dtype, ())])
            accepted.append(dtype)
    return accepted


def _default_attrs(op: OpDef) -> dict[str, object]:
    return {"direction": "lt"} if op is ops.COMPARE else {}


def _elementwise(p: Program, op: OpDef) -> None:
    x = p.operand(_kinds(op))
    operands = [x] + [p.broadcast_partner(x) for _ in range(op.num_operands - 1)]
    operands = p.draw(st.permutations(operands)) if op.num_operands > 1 else operands
    attrs = {"direction": p.draw(st.sampled_from(sorted(ops.COMPARE_FUNCTIONS)))} \
        if op is ops.COMPARE else {}
    p.emit(op, operands, attrs)


def _passing(p: Program, op: OpDef) -> None:
    """neg, abs, max, min: an approximate operand is fine."""
    kinds = _kinds(op)
    x = p.operand(kinds, exact=False)
    operands = [x] + [p.broadcast_partner(x, exact=False) for _ in range(op.num_operands - 1)]
    p.emit(op, p.draw(st.permutations(operands)) if len(operands) > 1 else operands)


def _select(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    pred = p.broadcast_partner(x, dtypes.bool_)
    p.emit(op, [pred, x, p.broadcast_partner(x, exact=False)])


def _clamp(p: Program, op: OpDef) -> None:
    x = p.operand(NUMERIC, exact=False)
    p.emit(op, [p.broadcast_partner(x, exact=False), x, p.broadcast_partner(x, exact=False)])


def _convert(p: Program, op: OpDef) -> None:
    target = p.draw(st.sampled_from(DTYPES))
    # Only a float result may come from an approximate value (a rounding boundary moves an
    # integer result by one).
    x = p.operand(list(DTYPES), exact=not target.is_float)
    if p.is_approximate(x) and not target.is_float:
        return
    p.emit(op, [x], {}, TensorType(target, x.type.shape))


def _bitcast(p: Program, op: OpDef) -> None:
    x = p.operand([d for d in DTYPES if not d.is_bool])
    same_width = [d for d in DTYPES if d.bits == x.type.dtype.bits and not d.is_bool]
    p.emit(op, [x], {}, TensorType(p.draw(st.sampled_from(same_width)), x.type.shape))


def _constant(p: Program, op: OpDef) -> None:
    dtype = p.draw(st.sampled_from(DTYPES))
    shape = p.shape(p.draw(st.integers(0, 2)))
    p.emit(op, [], {"value": Literal(random_values(dtype, shape, p.rng), dtype)})


def _iota(p: Program, op: OpDef) -> None:
    shape = p.shape(p.draw(st.integers(1, 3)))
    dimension = p.draw(st.integers(0, len(shape) - 1))
    p.emit(op, [], {"dimension": dimension},
           TensorType(p.draw(st.sampled_from(NUMERIC)), shape))


def _broadcast_in_dim(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    extra = p.draw(st.integers(0, 2))
    positions = sorted(p.draw(st.permutations(range(x.type.rank + extra)))[:x.type.rank])
    shape = [p.draw(st.sampled_from(SIZES)) for _ in range(x.type.rank + extra)]
    for axis, dim in enumerate(positions):
        size = x.type.shape[axis]
        shape[dim] = p.draw(st.sampled_from([size, 3])) if size == 1 else size
    p.emit(op, [x], {"dims": positions}, TensorType(x.type.dtype, tuple(shape)))


def _reshape(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    shape, size = x.type.shape, x.type.size
    choices = [(size,), (1, *shape), shape[::-1], (*shape, 1), ()]
    if size and size % 2 == 0:
        choices.append((2, size // 2))
    p.emit(op, [x], {}, TensorType(x.type.dtype, p.draw(st.sampled_from(choices))))


def _transpose(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    p.emit(op, [x], {"permutation": p.draw(st.permutations(range(x.type.rank)))})


def _slice(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    start = [p.draw(st.integers(0, d)) for d in x.type.shape]
    limit = [p.draw(st.integers(s, d)) for s, d in zip(start, x.type.shape)]
    stride = [p.draw(st.integers(1, 3)) for _ in x.type.shape]
    p.emit(op, [x], {"start": start, "limit": limit, "stride": stride})


def _pad(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    value = p.operand([x.type.dtype], exact=False, shape=())
    rank = x.type.rank
    p.emit(op, [x, value], {"low": [p.draw(st.integers(-1, 2)) for _ in range(rank)],
                            "high": [p.draw(st.integers(-1, 2)) for _ in range(rank)],
                            "interior": [p.draw(st.integers(0, 2)) for _ in range(rank)]})


def _concatenate(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    if x.type.rank == 0:
        return
    axis = p.draw(st.integers(0, x.type.rank - 1))
    others = []
    for _ in range(p.draw(st.integers(0, 2))):
        shape = list(x.type.shape)
        shape[axis] = p.draw(st.sampled_from(SIZES))
        others.append(p.operand([x.type.dtype], exact=False, shape=tuple(shape)))
    p.emit(op, [x, *others], {"dimension": axis})


def _reverse(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    dims = sorted(p.draw(st.sets(st.sampled_from(range(x.type.rank)))) if x.type.rank else [])
    p.emit(op, [x], {"dims": dims})


def _dynamic_slice(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    sizes = [p.draw(st.integers(0, d)) for d in x.type.shape]
    starts = [p.index_scalar() for _ in x.type.shape]
    p.emit(op, [x, *starts], {"sizes": sizes})


def _dynamic_update_slice(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    shape = tuple(p.draw(st.integers(0, d)) for d in x.type.shape)
    update = p.operand([x.type.dtype], exact=False, shape=shape)
    p.emit(op, [x, update, *(p.index_scalar() for _ in x.type.shape)])


def _gather(p: Program, op: OpDef) -> None:
    x = p.operand(list(DTYPES), exact=False)
    if x.type.rank == 0:
        return
    axis = p.draw(st.integers(0, x.type.rank - 1))
    dtype = p.draw(st.sampled_from([dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.int8]))
    shape = p.shape(p.draw(st.integers(0, 2)))
    low = -2 if dtype.kind.value == "signed" else 0
    indices = p.rng.integers(low, max(x.type.shape[axis], 1) + 2, shape)
    p.emit(op, [x, p.parameter(dtype, shape, indices)], {"axis": axis})


def _reduce(p: Program, op: OpDef) -> None:
    kind = p.draw(st.sampled_from(sorted(ops.reduce.REDUCE_KINDS)))
    kinds = [d for d in DTYPES if d.kind in ops.reduce.REDUCE_KINDS[kind]]
    x = p.operand(kinds)
    operands = [x] + [p.operand(kinds, shape=x.type.shape)
                      for _ in range(p.draw(st.integers(0, 1)))]
    dims = sorted(p.draw(st.sets(st.sampled_from(range(x.type.rank)))) if x.type.rank else [])
    p.emit(op, operands, {"dims": dims, "kind": kind})


def _arg(p: Program, op: OpDef) -> None:
    x = p.operand([d for d in DTYPES])
    if x.type.rank == 0 or 0 in x.type.shape:
        return
    p.emit(op, [x], {"axis": p.draw(st.integers(0, x.type.rank - 1)),
                     "index_dtype": p.draw(st.sampled_from(["i32", "i64"]))})


def _sort(p: Program, op: OpDef) -> None:
    x = p.operand(DTYPES)
    if x.type.rank == 0:
        return
    # Positions follow the exact order of the values: from approximate floats (rounded
    # differently by each backend) they could differ anywhere, the sorted values only a bit.
    outputs = ["values"] if p.is_approximate(x) else ["values", "indices"]
    p.emit(op, [x], {"axis": p.draw(st.integers(0, x.type.rank - 1)),
                     "output": p.draw(st.sampled_from(outputs))})


def _dot_general(p: Program, op: OpDef) -> None:
    dtype = p.draw(st.sampled_from(NUMERIC))
    batch = p.shape(p.draw(st.integers(0, 1)))
    contract = p.shape(p.draw(st.integers(0, 2)))
    lhs_free, rhs_free = p.shape(p.draw(st.integers(0, 1))), p.shape(p.draw(st.integers(0, 1)))
    lhs = p.operand([dtype], shape=batch + lhs_free + contract)
    rhs = p.operand([dtype], shape=batch + contract + rhs_free)
    nb, nc, nl = len(batch), len(contract), len(lhs_free)
    p.emit(op, [lhs, rhs], {"lhs_batch": list(range(nb)), "rhs_batch": list(range(nb)),
                            "lhs_contract": list(range(nb + nl, nb + nl + nc)),
                            "rhs_contract": list(range(nb, nb + nc))})


def _convolution(p: Program, op: OpDef) -> None:
    dtype = p.draw(st.sampled_from(NUMERIC))
    groups = p.draw(st.integers(1, 2))
    batch, in_per_group = p.draw(st.integers(0, 2)), p.draw(st.integers(1, 2))
    out_features = groups * p.draw(st.integers(1, 2))
    spatial, window = p.draw(st.integers(1, 5)), p.draw(st.integers(1, 3))
    layout = p.draw(st.sampled_from(["bf0_oi0->bf0", "b0f_0io->b0f"]))
    lhs_shape = (batch, groups * in_per_group, spatial) if layout.startswith("bf") else \
        (batch, spatial, groups * in_per_group)
    rhs_shape = (out_features, in_per_group, window) if layout.startswith("bf") else \
        (window, in_per_group, out_features)
    lhs = p.operand([dtype], shape=lhs_shape)
    rhs = p.operand([dtype], shape=rhs_shape)
    p.emit(op, [lhs, rhs], {"dim_labels": layout, "strides": [p.draw(st.integers(1, 2))],
                            "padding": [(p.draw(st.integers(-1, 2)), p.draw(st.integers(0, 2)))],
                            "lhs_dilation": [p.draw(st.integers(1, 2))],
                            "rhs_dilation": [p.draw(st.integers(1, 2))],
                            "feature_group_count": groups})


def _register_makers() -> None:
    special = {
        "select": _select, "clamp": _clamp, "convert": _convert,
        "bitcast_convert": _bitcast, "constant": _constant, "iota": _iota,
        "broadcast_in_dim": _broadcast_in_dim, "reshape": _reshape, "transpose": _transpose,
        "slice": _slice, "pad": _pad, "concatenate": _concatenate, "reverse": _reverse,
        "dynamic_slice": _dynamic_slice, "dynamic_update_slice": _dynamic_update_slice,
        "gather": _gather, "reduce": _reduce, "argmax": _arg, "argmin": _arg,
        "sort": _sort, "dot_general": _dot_general, "convolution": _convolution,
    }
    for name, op in ops.OPS.items():
        if name in NOT_DRAWN:
            continue
        if name in special:
            MAKERS[name] = special[name]
        elif op.has(Trait.ELEMENTWISE):
            MAKERS[name] = _passing if op in PASSES_ERRORS else _elementwise


_register_makers()
