"""Complex values as pairs of floats, so that code generators never see a complex dtype.

`split_complex` rewrites a module with complex values into one without: each complex value
becomes its real and imaginary parts, each op on complex values the real ops of numpy's formula
(jitc/passes/complex_math.py). A complex parameter or result of the entry function of shape S
becomes a float array of shape S + [2]: the interleaved (real, imaginary) pairs, which is how
numpy lays out a complex array in memory, so a C-contiguous complex array is passed as it is
(`ComplexBoundary` makes the views).

An op the rewrite does not know on complex values is refused with the user's file and line; it
is never computed on one part only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Function, Instruction, Module, Value, reachable_functions
from jitc.ir.opdef import Trait
from jitc.ir.types import TensorType
from jitc.passes import complex_math as cm
from jitc.passes.legalize_broadcast import broadcast_to
from jitc.passes.rewrite import copy_instruction
from jitc.tracing.errors import TraceError, located

Pair = cm.Pair
# The ops no code generator sees: this pass takes them out with every complex value.
SPLIT_AWAY = frozenset({ops.REAL, ops.IMAG, ops.COMPLEX})

# Ops that act on the real and imaginary parts separately: data movement, and the linear ops.
PER_PART = frozenset({
    ops.BROADCAST_IN_DIM, ops.RESHAPE, ops.TRANSPOSE, ops.SLICE, ops.PAD, ops.CONCATENATE,
    ops.REVERSE, ops.DYNAMIC_SLICE, ops.DYNAMIC_UPDATE_SLICE, ops.GATHER, ops.SELECT, ops.ADD,
    ops.SUB, ops.NEG})


@dataclass(frozen=True)
class ComplexBoundary:
    """Which parameters and results of the split entry function are complex pairs, and of
    which complex dtype."""

    params: dict[int, np.dtype]
    outputs: dict[int, np.dtype]

    def arguments(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Complex arguments as float arrays of pairs (a view when C-contiguous)."""
        out = list(args)
        for index, dtype in self.params.items():
            # (np.ascontiguousarray would make a 0-d array 1-d)
            value = np.asarray(args[index], dtype=dtype, order="C")
            flat = value.reshape(-1)  # a 0-d array cannot change its itemsize in a view
            out[index] = flat.view(value.real.dtype).reshape(value.shape + (2,))
        return out

    def results(self, results: Sequence[np.ndarray]) -> list[np.ndarray]:
        out = list(results)
        for index, dtype in self.outputs.items():
            pairs = np.asarray(results[index], order="C")
            out[index] = pairs.reshape(-1).view(dtype).reshape(pairs.shape[:-1])
        return out


def has_complex(module: Module) -> bool:
    return any(v.type.dtype.is_complex for fn in module.functions.values()
               for inst in fn.body for v in (*inst.operands, *inst.results))


def split_complex(module: Module) -> tuple[Module, ComplexBoundary]:
    """The module with every complex value as a pair of floats, and its new signature."""
    splitter = _Splitter(module.entry)
    entry = splitter.run()  # refuses control flow carrying complex values
    for name, fn in module.functions.items():
        if name != module.entry_name and _mentions_complex(fn):
            raise _refuse(_caller(module, name), "complex values inside control flow")
    functions = [entry if name == module.entry_name else fn
                 for name, fn in module.functions.items()]
    return Module(functions, module.entry_name), splitter.boundary


def _refuse(inst: Instruction, what: str) -> TraceError:
    return TraceError(located(
        f"{what} is not compiled for complex values yet; the interpreter backend runs it "
        "(jitc.jit(..., backend='interpreter')), or compute with the real and imaginary parts "
        "(docs/dtypes.md lists what is supported)", inst.loc))


def _mentions_complex(fn: Function) -> bool:
    return any(v.type.dtype.is_complex for inst in fn.body
               for v in (*inst.operands, *inst.results))


def _caller(module: Module, name: str) -> Instruction:
    """The instruction of the entry function that runs function `name`, through any number
    of nested regions: its location is the user's line."""
    for inst in module.entry.body:
        for callee in inst.op.called_functions(inst.attrs):
            if name in reachable_functions(module.functions, callee):
                return inst
    raise AssertionError(f"no caller of @{name}")


def _real(t: TensorType) -> TensorType:
    return t.with_dtype(dtypes.real_part(t.dtype))


class _Splitter:
    def __init__(self, fn: Function) -> None:
        self.fn = fn
        self.new = Function(fn.name)
        self.builder = Builder(self.new)
        self.r = cm.RealOps(self.builder)
        self.values: dict[int, Value] = {}
        self.pairs: dict[int, Pair] = {}
        self.boundary = ComplexBoundary({}, {})

    def run(self) -> Function:
        for inst in self.fn.body:
            self.builder.loc = inst.loc
            if not any(v.type.dtype.is_complex for v in (*inst.operands, *inst.results)):
                copies = copy_instruction(self.builder, inst,
                                          [self.values[id(v)] for v in inst.operands])
                self.values.update((id(old), new) for old, new in zip(inst.results, copies))
                continue
            rule = _RULES.get(inst.op, _per_part if inst.op in PER_PART else None)
            if rule is None:
                raise _refuse(inst, f"{inst.op.name}")
            results = rule(self, inst)
            for old, new in zip(inst.results, results, strict=True):
                if old.type.dtype.is_complex:
                    assert isinstance(new, tuple)
                    self.pairs[id(old)] = new
                else:
                    assert isinstance(new, Value)
                    self.values[id(old)] = new
        self.new.outputs = [self._output(n, v) for n, v in enumerate(self.fn.outputs)]
        return self.new

    def pair(self, v: Value) -> Pair:
        return self.pairs[id(v)]

    def value(self, v: Value) -> Value:
        return self.values[id(v)]

    def part(self, v: Value, k: int) -> Value:
        return self.pairs[id(v)][k] if v.type.dtype.is_complex else self.values[id(v)]

    def _output(self, n: int, v: Value) -> Value:
        if not v.type.dtype.is_complex:
            return self.values[id(v)]
        self.builder.loc = v.producer.loc
        shape = v.type.shape
        column = _real(v.type).with_shape(shape + (1,))
        parts = [self.builder.emit(ops.RESHAPE, [p], {}, TensorType(column.dtype, column.shape))
                 for p in self.pair(v)]
        self.boundary.outputs[n] = v.type.dtype.numpy
        return self.builder.emit(ops.CONCATENATE, parts, {"dimension": len(shape)})


Rule = Callable[[_Splitter, Instruction], Sequence[object]]


def _per_part(s: _Splitter, inst: Instruction) -> list[object]:
    typed = inst.op.has(Trait.TYPED_RESULT)
    halves = []
    for k in (0, 1):
        operands = [s.part(v, k) for v in inst.operands]
        declared = [_real(v.type) for v in inst.results] if typed else None
        halves.append(s.builder.emit_multi(inst.op, operands, inst.attrs, declared))
    return [(halves[0][n], halves[1][n]) if v.type.dtype.is_complex else halves[0][n]
            for n, v in enumerate(inst.results)]


def _parameter(s: _Splitter, inst: Instruction) -> list[object]:
    t = inst.result.type
    shape = t.shape
    pairs = s.builder.emit(ops.PARAMETER, [], inst.attrs,
                           TensorType(dtypes.real_part(t.dtype), shape + (2,)),
                           name_hint=inst.result.name_hint)
    s.boundary.params[inst.attrs["index"]] = t.dtype.numpy  # type: ignore[index]
    halves = []
    for k in (0, 1):
        column = s.builder.emit(ops.SLICE, [pairs], {"start": [0] * len(shape) + [k],
                                                     "limit": list(shape) + [k + 1]})
        halves.append(s.builder.emit(ops.RESHAPE, [column], {}, _real(t)))
    return [(halves[0], halves[1])]


def _constant(s: _Splitter, inst: Instruction) -> list[object]:
    array = inst.attrs["value"].array  # type: ignore[union-attr]
    return [tuple(s.builder.emit(ops.CONSTANT, [], {"value": np.array(part, order="C")})
                  for part in (array.real, array.imag))]


def _real_op(s: _Splitter, inst: Instruction) -> list[object]:
    return [s.pair(inst.operands[0])[0]]


def _imag_op(s: _Splitter, inst: Instruction) -> list[object]:
    return [s.pair(inst.operands[0])[1]]


def _complex_op(s: _Splitter, inst: Instruction) -> list[object]:
    shape = inst.result.type.shape
    return [tuple(broadcast_to(s.builder, s.value(v), shape) for v in inst.operands)]


def _convert(s: _Splitter, inst: Instruction) -> list[object]:
    (x,), target = inst.operands, inst.result.type
    r = s.r
    if x.type.dtype.is_complex and target.dtype.is_complex:
        return [tuple(s.builder.emit(ops.CONVERT, [p], {}, _real(target)) for p in s.pair(x))]
    if target.dtype.is_complex:
        re = s.builder.emit(ops.CONVERT, [s.value(x)], {}, _real(target))
        return [(re, r.full(0.0, re))]
    re, im = s.pair(x)
    if target.dtype.is_bool:
        zero = r.const(0.0, re)
        return [r.either(r.cmp(re, zero, "ne"), r.cmp(im, zero, "ne"))]
    return [s.builder.emit(ops.CONVERT, [re], {}, target)]


def _binary(formula: Callable[[cm.RealOps, Pair, Pair], Pair]) -> Rule:
    def rule(s: _Splitter, inst: Instruction) -> list[object]:
        x, y = (s.pair(v) for v in inst.operands)
        return [formula(s.r, x, y)]
    return rule


def _unary(formula: Callable[[cm.RealOps, Pair], Pair]) -> Rule:
    def rule(s: _Splitter, inst: Instruction) -> list[object]:
        return [formula(s.r, s.pair(inst.operands[0]))]
    return rule


def _abs(s: _Splitter, inst: Instruction) -> list[object]:
    return [cm.hypot(s.r, *s.pair(inst.operands[0]))]


def _compare(s: _Splitter, inst: Instruction) -> list[object]:
    direction = inst.attrs["direction"]
    (a, b), (c, d) = (s.pair(v) for v in inst.operands)
    r = s.r
    if direction == "eq":
        return [r.both(r.cmp(a, c, "eq"), r.cmp(b, d, "eq"))]
    if direction == "ne":
        return [r.either(r.cmp(a, c, "ne"), r.cmp(b, d, "ne"))]
    raise _refuse(inst, f"compare direction={direction}")


def _dot(s: _Splitter, inst: Instruction) -> list[object]:
    (a, b), (c, d) = (s.pair(v) for v in inst.operands)

    def dot(x: Value, y: Value) -> Value:
        return s.builder.emit(ops.DOT_GENERAL, [x, y], inst.attrs)
    r = s.r
    return [(r.sub(dot(a, c), dot(b, d)), r.add(dot(a, d), dot(b, c)))]


def _reduce(s: _Splitter, inst: Instruction) -> list[object]:
    """A complex product as a tree of complex multiplies over the reduced dimensions, moved
    last and flattened: log2(n) elementwise steps."""
    if inst.attrs["kind"] == "sum":
        return _per_part(s, inst)
    if inst.attrs["kind"] != "prod" or len(inst.operands) != 1:
        raise _refuse(inst, f"reduce kind={inst.attrs['kind']}")
    (x,), dims = inst.operands, list(inst.attrs["dims"])  # type: ignore[arg-type]
    t = x.type
    keep = [a for a in range(t.rank) if a not in dims]
    out_shape = tuple(t.shape[a] for a in keep)
    n = int(np.prod([t.shape[a] for a in dims], dtype=np.int64))
    b, r = s.builder, s.r
    flat = _real(t).with_shape(out_shape + (n,))
    parts = []
    for p in s.pair(x):
        moved = b.emit(ops.TRANSPOSE, [p], {"permutation": keep + dims})
        parts.append(b.emit(ops.RESHAPE, [moved], {}, TensorType(flat.dtype, flat.shape)))
    if n == 0:
        zeros = _real(t).with_shape(out_shape)
        one = b.emit(ops.BROADCAST_IN_DIM, [r.const(1.0, parts[0])], {"dims": []},
                     TensorType(zeros.dtype, zeros.shape))
        return [(one, r.full(0.0, one))]
    pair = (parts[0], parts[1])
    rank = len(out_shape)

    def cut(v: Value, start: int, stop: int) -> Value:
        return b.emit(ops.SLICE, [v], {"start": [0] * rank + [start],
                                       "limit": list(out_shape) + [stop]})
    while n > 1:
        half = n // 2
        low = (cut(pair[0], 0, half), cut(pair[1], 0, half))
        high = (cut(pair[0], half, 2 * half), cut(pair[1], half, 2 * half))
        product = cm.multiply(r, low, high)
        if n % 2:
            product = tuple(b.emit(ops.CONCATENATE, [p, cut(q, 2 * half, n)],
                                   {"dimension": rank}) for p, q in zip(product, pair))
        pair, n = product, half + n % 2
    result = _real(t).with_shape(out_shape)
    return [tuple(b.emit(ops.RESHAPE, [p], {}, TensorType(result.dtype, result.shape))
                  for p in pair)]


_RULES: dict[object, Rule] = {
    ops.PARAMETER: _parameter, ops.CONSTANT: _constant, ops.REAL: _real_op,
    ops.IMAG: _imag_op, ops.COMPLEX: _complex_op, ops.CONVERT: _convert,
    ops.MUL: _binary(cm.multiply), ops.DIV: _binary(cm.divide), ops.ABS: _abs,
    ops.COMPARE: _compare, ops.DOT_GENERAL: _dot, ops.REDUCE: _reduce,
    **{op: _unary(formula) for op, formula in cm.UNARY.items()},
}
