"""Small modules that use every op of the table, shared by the round-trip and interpreter tests.

`CASES` maps a readable id to a function that builds a verified Module.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Function, Literal, Location, Module, Value
from jitc.ir.dtypes import DType
from jitc.ir.opdef import OPS, IRTypeError, OpDef, Trait
from jitc.ir.types import TensorType
from jitc.ir.verifier import verify

f16, f32, f64 = dtypes.float16, dtypes.float32, dtypes.float64
i8, u8, i32, i64 = dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.int64
BOOL = dtypes.bool_
c64 = dtypes.complex64


def tt(dtype: DType, shape: tuple[int, ...], layout: tuple[int, ...] = ()) -> TensorType:
    return TensorType(dtype, shape, layout)


class FunctionBuilder:
    """A Builder that also numbers parameters and collects the function's outputs."""

    def __init__(self, name: str = "f") -> None:
        self.function = Function(name)
        self.builder = Builder(self.function)

    def param(self, type_: TensorType, hint: str | None = None) -> Value:
        index = len(self.function.parameters)
        return self.builder.emit(ops.PARAMETER, [], {"index": index}, type_, name_hint=hint)

    def const(self, value: object, dtype: DType | None = None) -> Value:
        return self.builder.emit(ops.CONSTANT, [], {"value": Literal(value, dtype)})

    def emit(self, op: OpDef, *operands: Value, result: TensorType | None = None,
             **attrs: object) -> Value:
        return self.builder.emit(op, operands, attrs, result)

    def emit_multi(self, op: OpDef, *operands: Value, **attrs: object) -> tuple[Value, ...]:
        return self.builder.emit_multi(op, operands, attrs)

    def done(self, *outputs: Value) -> Function:
        self.function.outputs = list(outputs)
        return self.function


def module(*functions: Function) -> Module:
    return verify(Module(functions))


def single_op(op: OpDef, operand_types: list[TensorType], attrs: dict[str, object] | None = None,
              result: TensorType | None = None) -> Module:
    """A function whose parameters feed one instruction of `op` and return all its results."""
    fb = FunctionBuilder()
    params = [fb.param(t) for t in operand_types]
    declared = None if result is None else [result]
    values = fb.builder.emit_multi(op, params, attrs or {}, declared)
    return module(fb.done(*values))


# --- the cases --------------------------------------------------------------------------------

def _elementwise_cases() -> dict[str, Callable[[], Module]]:
    """Every plain elementwise op, on the first dtype its rule accepts."""
    cases: dict[str, Callable[[], Module]] = {}
    for op in OPS.values():
        if not op.has(Trait.ELEMENTWISE) or op.has(Trait.TYPED_RESULT) or op.name in (
                "compare", "select", "clamp"):
            continue
        for dtype in (f32, i32, BOOL, c64):
            # Implicit broadcasting (a [3] operand against [2,3]) is part of every binary case.
            types = [tt(dtype, s) for s in [(2, 3), (3,), (2, 1)][:op.num_operands]]
            try:
                single_op(op, types)
            except IRTypeError:
                continue
            cases[f"{op.name}-{dtype.name}"] = functools.partial(single_op, op, types)
            break
        else:
            raise AssertionError(f"no dtype found for {op.name}")
    return cases


def compare_all_directions() -> Module:
    fb = FunctionBuilder()
    x, y = fb.param(tt(f32, (4,))), fb.param(tt(f32, ()))
    results = [fb.emit(ops.COMPARE, x, y, direction=d) for d in ops.COMPARE_FUNCTIONS]
    return module(fb.done(*results))


def select_and_clamp() -> Module:
    fb = FunctionBuilder()
    pred = fb.param(tt(BOOL, (2, 1)), "pred")
    x = fb.param(tt(i8, (1, 3)), "x")
    lo, hi = fb.const(np.int8(-5)), fb.const(np.int8(5))
    chosen = fb.emit(ops.SELECT, pred, x, lo)
    return module(fb.done(fb.emit(ops.CLAMP, lo, chosen, hi)))


def conversions() -> Module:
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (2, 3), (0, 1)), "x")
    as_int = fb.emit(ops.CONVERT, x, result=tt(i64, (2, 3), (0, 1)))
    as_bool = fb.emit(ops.CONVERT, as_int, result=tt(BOOL, (2, 3)))
    bits = fb.emit(ops.BITCAST_CONVERT, x, result=tt(i32, (2, 3)))
    half = fb.param(tt(f16, ()), "half")
    small = fb.emit(ops.CONVERT, half, result=tt(u8, ()))
    signed = fb.emit(ops.BITCAST_CONVERT, small, result=tt(i8, ()))
    return module(fb.done(as_bool, bits, signed))


def iota_and_layouts() -> Module:
    fb = FunctionBuilder()
    a = fb.emit(ops.IOTA, result=tt(i32, (3, 4), (0, 1)), dimension=1)
    b = fb.emit(ops.IOTA, result=tt(f64, (2, 3, 4), (1, 0, 2)), dimension=0)
    size = fb.emit(ops.EXTENT, size=[5])
    return module(fb.done(a, b, size))


def shape_ops() -> Module:
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (2, 3)), "x")
    y = fb.param(tt(f32, (4, 2, 3), (0, 2, 1)), "y")
    zero = fb.const(np.float32(0))
    wide = fb.emit(ops.BROADCAST_IN_DIM, x, result=tt(f32, (4, 2, 3)), dims=[1, 2])
    expanded = fb.emit(ops.BROADCAST_IN_DIM, zero, result=tt(f32, (2, 3), (0, 1)), dims=[])
    flat = fb.emit(ops.RESHAPE, y, result=tt(f32, (24,)))
    swapped = fb.emit(ops.TRANSPOSE, wide, permutation=[2, 0, 1])
    strided = fb.emit(ops.SLICE, flat, start=[1], limit=[20], stride=[3])
    plain = fb.emit(ops.SLICE, x, start=[0, 1], limit=[2, 3])
    padded = fb.emit(ops.PAD, x, zero, low=[-1, 2], high=[1, -1], interior=[1, 0])
    edges = fb.emit(ops.PAD, x, zero, low=[1, 0], high=[0, 1])
    joined = fb.emit(ops.CONCATENATE, x, expanded, plain, dimension=1)
    flipped = fb.emit(ops.REVERSE, y, dims=[0, 2])
    return module(fb.done(swapped, strided, padded, edges, joined, flipped))


def dynamic_ops() -> Module:
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (5, 6)), "x")
    update = fb.param(tt(f32, (2, 3)), "update")
    i = fb.param(tt(i8, ()), "i")
    j = fb.param(tt(u8, ()), "j")
    k = fb.const(np.int64(-7))
    block = fb.emit(ops.DYNAMIC_SLICE, x, i, j, sizes=[2, 4])
    written = fb.emit(ops.DYNAMIC_UPDATE_SLICE, x, update, k, j)
    indices = fb.param(tt(i32, (2, 2)), "indices")
    taken = fb.emit(ops.GATHER, x, indices, axis=1)
    return module(fb.done(block, written, taken))


def reductions() -> Module:
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (2, 3, 4), (0, 1, 2)), "x")
    y = fb.param(tt(i32, (2, 3, 4)), "y")
    mask = fb.param(tt(BOOL, (2, 3)), "mask")
    total, count = fb.emit_multi(ops.REDUCE, x, y, dims=[0, 2], kind="sum")
    largest = fb.emit(ops.REDUCE, x, dims=[1], kind="max")
    everything = fb.emit(ops.REDUCE, mask, dims=[0, 1], kind="and")
    nothing = fb.emit(ops.REDUCE, y, dims=[], kind="prod")
    first = fb.emit(ops.ARGMAX, x, axis=2, index_dtype="i32")
    low = fb.emit(ops.ARGMIN, y, axis=0)
    ordered = fb.emit(ops.SORT, x, axis=1)
    order = fb.emit(ops.SORT, y, axis=2, output="indices")
    return module(fb.done(total, count, largest, everything, nothing, first, low, ordered,
                          order))


def contractions() -> Module:
    fb = FunctionBuilder()
    lhs = fb.param(tt(f32, (2, 3, 4)), "lhs")
    rhs = fb.param(tt(f32, (2, 4, 5)), "rhs")
    product = fb.emit(ops.DOT_GENERAL, lhs, rhs, lhs_batch=[0], rhs_batch=[0],
                      lhs_contract=[2], rhs_contract=[1])
    matmul = fb.emit(ops.DOT_GENERAL, fb.param(tt(i32, (3, 4))), fb.param(tt(i32, (4,))),
                     lhs_contract=[1], rhs_contract=[0])
    image = fb.param(tt(f32, (1, 7, 7, 4)), "image")
    kernel = fb.param(tt(f32, (3, 3, 2, 6)), "kernel")
    conv = fb.emit(ops.CONVOLUTION, image, kernel, dim_labels="b01f_01io->bf01",
                   strides=[2, 1], padding=[[1, 1], [0, -1]], lhs_dilation=[1, 2],
                   rhs_dilation=[2, 1], feature_group_count=2)
    plain = fb.emit(ops.CONVOLUTION, fb.param(tt(f64, (2, 3, 5))), fb.param(tt(f64, (4, 3, 2))),
                    dim_labels="bf0_oi0->bf0")
    return module(fb.done(product, matmul, conv, plain))


def literals() -> Module:
    """Inline and pooled literals of every dtype, special floats and a reused pool entry."""
    fb = FunctionBuilder()
    values = []
    for dtype in dtypes.ALL:
        info = np.iinfo(dtype.numpy) if dtype.is_int else None
        small = [True, False, True] if dtype.is_bool else (
            [info.min, 0, info.max] if info is not None else [1.5, -0.0, 3.0])
        values.append(fb.const(small[0], dtype))
        values.append(fb.const(small, dtype))
        large = np.arange(40).reshape(4, 10) % (2 if dtype.is_bool else 100)
        values.append(fb.const(large, dtype))
    for dtype in dtypes.FLOATS:
        special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.1, np.finfo(dtype.numpy).tiny])
        values.append(fb.const(special, dtype))
        values.append(fb.const(np.finfo(dtype.numpy).max, dtype))
        values.append(fb.const(np.finfo(dtype.numpy).smallest_subnormal, dtype))
    # A nan with a payload cannot be written inline; it must survive through the pool.
    payload_nan = np.array([0x7FC00001], np.uint32).view(np.float32)
    values.append(fb.const(payload_nan, f32))
    values.append(fb.const(np.zeros((0, 3), np.float32)))
    values.append(fb.const(np.zeros((2, 0), np.int8)))
    repeated = np.linspace(0, 1, 20, dtype=np.float64)
    values.append(fb.const(repeated))
    values.append(fb.const(repeated))
    return module(fb.done(*values))


def names_and_locations() -> Module:
    fb = FunctionBuilder("named")
    x = fb.param(tt(f32, (3,)), "x")
    fb.builder.loc = Location("/home/user/model.py", 12, "forward")
    y = fb.builder.emit(ops.EXP, [x], name_hint="activations")
    fb.builder.loc = Location("script.py", 3)
    z = fb.builder.emit(ops.ADD, [y, y], name_hint="x")  # a taken hint falls back to a number
    fb.builder.loc = None
    w = fb.builder.emit(ops.NEG, [z], name_hint="not an identifier")
    return module(fb.done(w, y))


def two_functions() -> Module:
    first = FunctionBuilder("main")
    x = first.param(tt(f32, (2, 2)), "x")
    first.done(first.emit(ops.TANH, x))
    second = FunctionBuilder("helper")
    a, b = second.param(tt(i32, (2,))), second.param(tt(i32, (2,)))
    second.done(second.emit(ops.SUB, b, a), a)
    return module(first.function, second.function)


def fusion_call() -> Module:
    body = FunctionBuilder("fused_0")
    a, b = body.param(tt(f32, (4, 3))), body.param(tt(f32, (3,)))
    wide = body.builder.emit(ops.BROADCAST_IN_DIM, [b], {"dims": [1]}, tt(f32, (4, 3)))
    total = body.emit(ops.ADD, a, wide)
    (row_sum,) = body.emit_multi(ops.REDUCE, total, dims=[1], kind="sum")
    body.done(total, row_sum)
    entry = FunctionBuilder("main")
    x, y = entry.param(tt(f32, (4, 3)), "x"), entry.param(tt(f32, (3,)), "y")
    out = entry.builder.emit_multi(ops.FUSION, [x, y], {"kind": "row", "calls": "fused_0"},
                                   [tt(f32, (4, 3)), tt(f32, (4,))])
    entry.done(*out)
    return module(entry.function, body.function)


def control_flow() -> Module:
    """A while loop counting to 5 while doubling a vector, then a two-way conditional."""
    cond = FunctionBuilder("cond")
    i, _ = cond.param(tt(i32, ())), cond.param(tt(f32, (4,)))
    five = cond.builder.emit(ops.CONSTANT, [], {"value": Literal(np.int32(5))})
    cond.done(cond.emit(ops.COMPARE, i, five, direction="lt"))
    body = FunctionBuilder("body")
    i, x = body.param(tt(i32, ())), body.param(tt(f32, (4,)))
    one = body.builder.emit(ops.CONSTANT, [], {"value": Literal(np.int32(1))})
    body.done(body.emit(ops.ADD, i, one), body.emit(ops.ADD, x, x))
    negate = FunctionBuilder("negate")
    negate.done(negate.emit(ops.NEG, negate.param(tt(f32, (4,)))))
    same = FunctionBuilder("same")
    same.done(same.param(tt(f32, (4,))))
    entry = FunctionBuilder("main")
    x = entry.param(tt(f32, (4,)), "x")
    zero = entry.builder.emit(ops.CONSTANT, [], {"value": Literal(np.int32(0))})
    count, doubled = entry.builder.emit_multi(ops.WHILE, [zero, x],
                                              {"cond": "cond", "body": "body"})
    chosen = entry.builder.emit_multi(ops.CONDITIONAL, [count, doubled],
                                      {"branches": ["negate", "same"]}, [tt(f32, (4,))])
    entry.done(count, *chosen)
    return module(entry.function, cond.function, body.function, negate.function,
                  same.function)


CASES: dict[str, Callable[[], Module]] = {
    "fusion": fusion_call,
    "control-flow": control_flow,
    **_elementwise_cases(),
    "compare": compare_all_directions,
    "select-clamp": select_and_clamp,
    "conversions": conversions,
    "iota-layouts": iota_and_layouts,
    "shape-ops": shape_ops,
    "dynamic-ops": dynamic_ops,
    "reductions": reductions,
    "contractions": contractions,
    "literals": literals,
    "names-locations": names_and_locations,
    "two-functions": two_functions,
}


def ops_used(m: Module) -> set[str]:
    return {inst.op.name for fn in m.functions.values() for inst in fn.body}
