"""Symbolic dimensions: their arithmetic and text, every op's shape rule over symbols (checked
against numpy on several concrete sizes, 0 and 1 included), the constraints the rules record
or require, and the interpreter binding symbols from argument shapes."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from jitc.backends.interpreter import InterpreterBackend
from jitc.ir import dtypes, ops, symbolic
from jitc.ir.core import Builder, Function, Module
from jitc.ir.dim_text import parse_dim
from jitc.ir.interpreter import ArgumentError, interpret
from jitc.ir.opdef import OPS, AttrKind, IRTypeError, OpDef, Trait
from jitc.ir.parser import ParseError, parse_module
from jitc.ir.printer import print_module
from jitc.ir.symbolic import (
    UnknownDimensionError,
    at_least,
    ceil_divide,
    divisible,
    equal,
    evaluate,
    exact_quotient,
    floor_divide,
    implied,
    symbol,
)
from jitc.ir.types import TensorType
from jitc.ir.verifier import VerifyError, verify
from jitc.options import Options

n, m = symbol("n"), symbol("m")
f32 = dtypes.float32


@pytest.mark.parametrize(("dim", "text"), [
    (n, "n"), (2 * n, "2*n"), (n * m, "m*n"), (n - 1, "n-1"), (1 - n, "-n+1"),
    (n + m + 3, "m+n+3"), (ceil_divide(n, 2), "(n+1)//2"), (floor_divide(n, 8), "n//8"),
    (3 * floor_divide(n, 2), "3*(n//2)"), (m * floor_divide(n, 2), "m*(n//2)"),
    ((n + 1) * (n - 1), "n*n-1"), (floor_divide(8 * n + 3, 8), "n"),
])
def test_dimension_text_round_trips(dim: symbolic.DimLike, text: str) -> None:
    assert str(dim) == text
    assert parse_dim(text) == dim


@pytest.mark.parametrize("value", [0, 1, 2, 7, 8, 9])
def test_dimension_arithmetic_agrees_with_integers(value: int) -> None:
    env = {"n": value, "m": 3}
    for dim, expected in [(ceil_divide(n - 1, 2), -(-(value - 1) // 2)),
                          (floor_divide(n, 8) * 8 + n - 8 * floor_divide(n, 8), value),
                          (n * m - 2 * n, value * 3 - 2 * value), (n - n + 5, 5)]:
        assert evaluate(dim, env) == expected


def _random_dimension(rng: random.Random, depth: int) -> tuple[symbolic.DimLike, object]:
    """A random dimension and a function of a binding computing the same value with ints."""
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.4:
            value = rng.randint(-3, 9)
            return value, lambda env: value
        name = rng.choice("nmk")
        return symbol(name), lambda env: env[name]
    (a, fa), (b, fb) = _random_dimension(rng, depth - 1), _random_dimension(rng, depth - 1)
    operation = rng.choice("+-*/")
    if operation == "+":
        return a + b, lambda env: fa(env) + fb(env)
    if operation == "-":
        return a - b, lambda env: fa(env) - fb(env)
    if operation == "*":
        return a * b, lambda env: fa(env) * fb(env)
    divisor = rng.randint(1, 5)
    return floor_divide(a, divisor), lambda env: fa(env) // divisor


@pytest.mark.parametrize("seed", range(8))
def test_random_dimensions_print_parse_and_evaluate_like_integers(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        dim, reference = _random_dimension(rng, 4)
        assert parse_dim(str(dim)) == dim, str(dim)
        for _ in range(4):
            env = {name: rng.randint(0, 12) for name in "nmk"}
            assert evaluate(dim, env) == reference(env), (str(dim), env)


def test_constant_results_are_plain_integers_and_symbols_have_no_truth() -> None:
    assert n - n == 0 and type(n - n) is int
    assert floor_divide(2 * n + 4, 2) == n + 2
    with pytest.raises(TypeError, match="not known until the call"):
        bool(n)
    with pytest.raises(TypeError):
        n < 3  # noqa: B015


def test_implication_uses_declared_bounds_equalities_and_divisibility() -> None:
    assert implied(at_least(n, 1), [at_least(n, 2)])
    assert not implied(at_least(n, 3), [at_least(n, 2)])
    assert implied(at_least(n + 1, n), [])
    assert implied(equal(n, m), [equal(m, n)]) and not implied(equal(n, m), [])
    assert implied(at_least(floor_divide(n + 3, 2), 1), [])
    # (n-5)//2 is negative for small n: no bound of its numerator proves it is not.
    assert not implied(at_least(floor_divide(n - 5, 2), 0), [])
    assert implied(at_least(floor_divide(n - 5, 2), 0), [at_least(n, 5)])
    assert implied(equal(floor_divide(n, 8) * 8, n), [divisible(n, 8)])
    assert not implied(equal(floor_divide(n, 8) * 8, n), [])
    # A subtracted quotient is at most its numerator's fraction: n - (n+1)//2 >= (n-1)/2.
    assert implied(at_least(n, floor_divide(n + 1, 2)), [at_least(n, 1)])
    assert not implied(at_least(n, floor_divide(n + 1, 2) + 1), [at_least(n, 1)])


def test_extents_that_differ_by_a_constant_compare_and_bounds_normalize() -> None:
    assert n + 1 > n and n <= n and not n < n and n - 2 < n
    with pytest.raises(UnknownDimensionError):
        _ = n > m
    assert str(at_least(n - 1, 0)) == "n >= 1" and str(at_least(3 * n, 1)) == "n >= 1"
    assert str(at_least(4 * n + 2, 7)) == "n >= 2"


def test_exact_quotients_are_polynomials_or_none() -> None:
    assert exact_quotient(768 * n, n) == 768 and exact_quotient(3 * n * m, m) == 3 * n
    assert exact_quotient(n + 1, n + 1) == 1 and exact_quotient(6 * n + 4, 2) == 3 * n + 2
    assert exact_quotient(n + 1, n) is None and exact_quotient(6 * n + 3, 2) is None
    assert exact_quotient(n * m, n + m) is None and exact_quotient(n, 0) is None


# -- every op over symbols, against numpy -------------------------------------------------------
@dataclass
class Case:
    text: str
    args: Callable[[int], list[np.ndarray]]     # the arguments for one size
    expected: Callable[..., object]             # numpy's answer on them
    sizes: tuple[int, ...] = (0, 1, 2, 5)


def _floats(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape).astype(
        np.float32)


def _correlate(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """numpy's 'valid' cross-correlation of (batch, in, width) with (out, in, taps)."""
    out = np.zeros((len(x), len(w), x.shape[2] - w.shape[2] + 1), np.float32)
    for b, o, c in np.ndindex(len(x), len(w), x.shape[1]):
        out[b, o] += np.correlate(x[b, c], w[o, c], "valid")
    return out


def _function(params: str, body: str, results: str, header: str = "") -> str:
    lines = [f"  %p{i} = parameter() index={i} : {t}" for i, t in enumerate(params.split("; "))]
    head = "".join(f"constraint {c}\n" for c in header.split("; ") if c)
    return (head + ("\n" if head else "") + "func @f {\n" + "\n".join(lines) + "\n"
            + "".join(f"  {line}\n" for line in body.split("\n")) + f"  return {results}\n}}\n")


CASES = {
    "add_broadcasts_a_static_row": Case(
        _function("f32[n,3]{1,0}; f32[3]", "%0 = add(%p0, %p1) : f32[n,3]{1,0}", "%0"),
        lambda s: [_floats(s, 3), _floats(3)], np.add),
    "mul_outer_product_of_ones": Case(
        _function("f32[n,1]{1,0}; f32[1,m]{1,0}", "%0 = mul(%p0, %p1) : f32[n,m]{1,0}", "%0"),
        lambda s: [_floats(s, 1), _floats(1, s + 1)], np.multiply),
    "add_of_two_symbols_records_equality": Case(
        _function("f32[n]; f32[m]", "%0 = add(%p0, %p1) : f32[m]", "%0", "m == n"),
        lambda s: [_floats(s), _floats(s)], np.add),
    "select_compare_and_convert": Case(
        _function("f32[n]; f32[n]", "%0 = compare(%p0, %p1) direction=gt : bool[n]\n"
                  "%1 = select(%0, %p0, %p1) : f32[n]\n%2 = convert(%0) : i32[n]", "%1, %2"),
        lambda s: [_floats(s), _floats(s) + 0.5],
        lambda a, b: (np.maximum(a, b), (a > b).astype(np.int32))),
    "reshape_to_a_product": Case(
        _function("f32[n,4]{1,0}", "%0 = reshape(%p0) : f32[4*n]", "%0"),
        lambda s: [_floats(s, 4)], lambda x: x.reshape(-1)),
    "reshape_into_pieces_needs_divisibility": Case(
        _function("f32[n]", "%0 = reshape(%p0) : f32[n//4,4]{1,0}", "%0", "n % 4 == 0"),
        lambda s: [_floats(4 * s)], lambda x: x.reshape(-1, 4)),
    "transpose": Case(
        _function("f32[n,3]{1,0}", "%0 = transpose(%p0) permutation=[1,0] : f32[3,n]{1,0}",
                  "%0"),
        lambda s: [_floats(s, 3)], np.transpose),
    "slice_drops_the_first": Case(
        _function("f32[n]", "%0 = slice(%p0) start=[1] limit=[n] : f32[n-1]", "%0", "n >= 1"),
        lambda s: [_floats(s)], lambda x: x[1:], (1, 2, 5)),
    "slice_drops_the_last": Case(
        _function("f32[n,2]{1,0}", "%0 = slice(%p0) start=[0,0] limit=[n-1,2] : f32[n-1,2]{1,0}",
                  "%0", "n >= 1"),
        lambda s: [_floats(s, 2)], lambda x: x[:-1], (1, 2, 5)),
    "strided_slice": Case(
        _function("f32[n]", "%0 = slice(%p0) start=[0] limit=[n] stride=[2] : f32[(n+1)//2]",
                  "%0"),
        lambda s: [_floats(s)], lambda x: x[::2]),
    "concatenate_two_symbols": Case(
        _function("f32[n,2]{1,0}; f32[m,2]{1,0}",
                  "%0 = concatenate(%p0, %p1) dimension=0 : f32[m+n,2]{1,0}", "%0"),
        lambda s: [_floats(s, 2), _floats(3, 2)], lambda a, b: np.concatenate([a, b])),
    "concatenate_along_a_static_axis": Case(
        _function("f32[n,2]{1,0}; f32[n,3]{1,0}",
                  "%0 = concatenate(%p0, %p1) dimension=1 : f32[n,5]{1,0}", "%0"),
        lambda s: [_floats(s, 2), _floats(s, 3)], lambda a, b: np.concatenate([a, b], 1)),
    "pad_edges": Case(
        _function("f32[n]; f32[]", "%0 = pad(%p0, %p1) low=[1] high=[2] : f32[n+3]", "%0"),
        lambda s: [_floats(s), np.float32(7)], lambda x, v: np.pad(x, (1, 2), constant_values=v)),
    "pad_interior_needs_an_element": Case(
        _function("f32[n]; f32[]",
                  "%0 = pad(%p0, %p1) low=[0] high=[0] interior=[1] : f32[2*n-1]", "%0",
                  "n >= 1"),
        lambda s: [_floats(s), np.float32(0)],
        lambda x, v: np.stack([x, np.zeros_like(x)], 1).reshape(-1)[:-1], (1, 2, 5)),
    "reverse": Case(
        _function("f32[n]", "%0 = reverse(%p0) dims=[0] : f32[n]", "%0"),
        lambda s: [_floats(s)], lambda x: x[::-1]),
    "sort_along_the_symbolic_axis": Case(
        _function("f32[n,3]{1,0}", "%0 = sort(%p0) axis=0 : f32[n,3]{1,0}\n"
                  "%1 = sort(%p0) axis=1 output=indices : i64[n,3]{1,0}", "%0, %1"),
        lambda s: [_floats(s, 3)],
        lambda x: (np.sort(x, 0, kind="stable"), np.argsort(x, 1, kind="stable"))),
    "iota_is_arange_n": Case(
        _function("f32[n]", "%0 = iota() dimension=0 : i64[n]", "%0"),
        lambda s: [_floats(s)], lambda x: np.arange(len(x))),
    "extent_is_the_value_of_an_extent": Case(
        _function("f32[n,3]{1,0}", "%0 = extent() size=[2*n-1] : i64[]\n"
                  "%1 = extent() size=[3] : i64[]", "%0, %1"),
        lambda s: [_floats(s, 3)], lambda x: (np.int64(2 * len(x) - 1), np.int64(3))),
    "broadcast_in_dim": Case(
        _function("f32[n]", "%0 = broadcast_in_dim(%p0) dims=[0] : f32[n,3]{1,0}", "%0"),
        lambda s: [_floats(s)], lambda x: np.repeat(x[:, None], 3, 1)),
    "reduce_over_the_symbolic_axis": Case(
        _function("f32[n,3]{1,0}", "%0 = reduce(%p0) dims=[0] kind=sum : f32[3]\n"
                  "%1 = reduce(%p0) dims=[1] kind=max : f32[n]", "%0, %1"),
        lambda s: [_floats(s, 3)],
        lambda x: (x.sum(0), x.max(1, initial=-np.inf))),
    "argmax_needs_an_element": Case(
        _function("f32[3,n]{1,0}", "%0 = argmax(%p0) axis=1 : i64[3]", "%0", "n >= 1"),
        lambda s: [_floats(3, s)], lambda x: x.argmax(1), (1, 2, 5)),
    "dot_over_symbolic_rows_and_contraction": Case(
        _function("f32[n,m]{1,0}; f32[m,4]{1,0}",
                  "%0 = dot_general(%p0, %p1) lhs_contract=[1] rhs_contract=[0] : "
                  "f32[n,4]{1,0}", "%0"),
        lambda s: [_floats(s, s + 1), _floats(s + 1, 4)], np.matmul),
    "batched_dot": Case(
        _function("f32[n,2,3]{2,1,0}; f32[n,3,4]{2,1,0}",
                  "%0 = dot_general(%p0, %p1) lhs_batch=[0] rhs_batch=[0] lhs_contract=[2] "
                  "rhs_contract=[1] : f32[n,2,4]{2,1,0}", "%0"),
        lambda s: [_floats(s, 2, 3), _floats(s, 3, 4)], np.matmul),
    "gather_rows": Case(
        _function("f32[n,3]{1,0}; i32[m]",
                  "%0 = gather(%p0, %p1) axis=0 : f32[m,3]{1,0}", "%0", "n >= 1"),
        lambda s: [_floats(s, 3), np.arange(2 * s, dtype=np.int32) % s],
        lambda x, i: np.take(x, i, 0), (1, 2, 5)),
    "dynamic_slice_of_symbolic_size": Case(
        _function("f32[n,4]{1,0}; i32[]; i32[]",
                  "%0 = dynamic_slice(%p0, %p1, %p2) sizes=[n,2] : f32[n,2]{1,0}", "%0"),
        lambda s: [_floats(s, 4), np.int32(0), np.int32(1)], lambda x, i, j: x[:, 1:3]),
    "dynamic_update_slice": Case(
        _function("f32[n,4]{1,0}; f32[n,2]{1,0}; i32[]; i32[]",
                  "%0 = dynamic_update_slice(%p0, %p1, %p2, %p3) : f32[n,4]{1,0}", "%0"),
        lambda s: [_floats(s, 4), _floats(s, 2), np.int32(0), np.int32(2)],
        lambda x, u, i, j: np.concatenate([x[:, :2], u], 1)),
    "convolution_with_a_symbolic_batch": Case(
        _function("f32[n,2,5]{2,1,0}; f32[3,2,2]{2,1,0}",
                  '%0 = convolution(%p0, %p1) dim_labels="bf0_oi0->bf0" : f32[n,3,4]{2,1,0}',
                  "%0"),
        lambda s: [_floats(s, 2, 5), _floats(3, 2, 2)],
        lambda x, w: _correlate(x, w)),
}

WHILE_TEXT = """func @f {
  %x = parameter() index=0 : f32[n]
  %0 = constant() value=0 : i32[]
  %1, %2 = while(%0, %x) cond=@cond body=@body : i32[], f32[n]
  %3 = constant() value=1 : i32[]
  %4 = conditional(%3, %2) branches=[@neg, @same] : f32[n]
  return %4
}

func @cond {
  %0 = parameter() index=0 : i32[]
  %1 = parameter() index=1 : f32[n]
  %2 = constant() value=3 : i32[]
  %3 = compare(%0, %2) direction=lt : bool[]
  return %3
}

func @body {
  %0 = parameter() index=0 : i32[]
  %1 = parameter() index=1 : f32[n]
  %2 = constant() value=1 : i32[]
  %3 = add(%0, %2) : i32[]
  %4 = add(%1, %1) : f32[n]
  return %3, %4
}

func @neg {
  %0 = parameter() index=0 : f32[n]
  %1 = neg(%0) : f32[n]
  return %1
}

func @same {
  %0 = parameter() index=0 : f32[n]
  return %0
}
"""
CASES["while_and_conditional_regions"] = Case(WHILE_TEXT, lambda s: [_floats(s)],
                                              lambda x: x * 8)


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_op_text_round_trips_and_runs_like_numpy(name: str) -> None:
    case = CASES[name]
    module = verify(parse_module(case.text))
    assert print_module(module) == case.text
    assert parse_module(print_module(module)) == module
    for size in case.sizes:
        args = case.args(size)
        expected = case.expected(*args)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = interpret(module, args)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            e = np.asarray(e)
            assert g.shape == e.shape, (name, size)
            np.testing.assert_allclose(g, e.astype(g.dtype), rtol=1e-5, atol=1e-5)


CASES["sort_values_and_indices"] = Case(
    _function("f32[n,3]{1,0}", "%0 = sort(%p0) axis=0 : f32[n,3]{1,0}\n"
              "%1 = sort(%p0) axis=1 output=indices : i64[n,3]{1,0}", "%0, %1"),
    lambda s: [_floats(s, 3)],
    lambda x: (np.sort(x, axis=0, kind="stable"), np.argsort(x, axis=1, kind="stable")))

CASES["argmin_bitcast_and_fusion"] = Case(
    """func @f {
  %x = parameter() index=0 : f32[n,2]{1,0}
  %0 = argmin(%x) axis=0 index_dtype=i32 : i32[2]
  %1 = bitcast_convert(%x) : i32[n,2]{1,0}
  %2 = fusion(%x) kind=loop calls=@fused : f32[n,2]{1,0}
  return %0, %1, %2
}

func @fused {
  %0 = parameter() index=0 : f32[n,2]{1,0}
  %1 = abs(%0) : f32[n,2]{1,0}
  return %1
}
""".replace("func @f {", "constraint n >= 1\n\nfunc @f {"),
    lambda s: [_floats(s, 2)],
    lambda x: (x.argmin(0).astype(np.int32), x.view(np.int32), np.abs(x)), (1, 2, 5))

BROADCASTING = sorted(name for name, op in OPS.items() if op.has(Trait.BROADCASTS))


def _elementwise_module(op: OpDef) -> Module:
    """`op` on operands of shapes [n,3], [3] and [n,1] (as many as it takes), in the first
    dtype it accepts."""
    shapes = [(n, 3), (3,), (n, 1)]
    attrs = {a.name: a.choices[0] for a in op.attrs if a.kind is AttrKind.ENUM}
    for dtype in (f32, dtypes.int32, dtypes.bool_, dtypes.complex64):
        fn = Function("f")
        builder = Builder(fn)
        kinds = [dtypes.bool_ if op is ops.SELECT and i == 0 else dtype
                 for i in range(op.num_operands)]
        params = [builder.emit(ops.PARAMETER, [], {"index": i}, TensorType(kind, shapes[i]))
                  for i, kind in enumerate(kinds)]
        try:
            fn.outputs = [builder.emit(op, params, attrs)]
        except IRTypeError:
            continue
        return verify(Module([fn], "f"))
    raise AssertionError(f"{op.name} takes none of f32, i32, bool, c64")


@pytest.mark.parametrize("name", BROADCASTING)
def test_broadcasting_ops_give_numpys_shape_over_symbols(name: str) -> None:
    module = _elementwise_module(OPS[name])
    assert module.entry.outputs[0].type.shape == (n, 3)
    assert not module.constraints
    for size in (0, 1, 2, 5):
        args = [np.ones(tuple(size if isinstance(d, symbolic.Dim) else d for d in t.shape),
                        t.dtype.numpy) for t in module.entry.parameter_types]
        (got,) = interpret(module, args)
        assert got.shape == np.broadcast_shapes(*(a.shape for a in args))


def test_every_op_has_a_symbolic_case() -> None:
    used = {op for case in CASES.values() for op in re.findall(r"= (\w+)\(", case.text)}
    missing = sorted(set(OPS) - used - set(BROADCASTING))
    assert not missing, f"ops without a symbolic shape case: {missing}"


# -- constraints: recorded while building, required when checking --------------------------------
def _build(param_types: list[TensorType], emit: Callable[[Builder, list], object]) -> Module:
    fn = Function("f")
    builder = Builder(fn)
    params = [builder.emit(ops.PARAMETER, [], {"index": i}, t)
              for i, t in enumerate(param_types)]
    with symbolic.recording() as found:
        fn.outputs = [emit(builder, params)]
    return verify(Module([fn], "f", found.constraints))


def test_building_records_the_constraints_rules_need() -> None:
    module = _build([TensorType(f32, (n,)), TensorType(f32, (m,))],
                    lambda b, p: b.emit(ops.ADD, p))
    assert [str(c) for c in module.constraints] == ["m == n"]
    assert print_module(module).startswith("constraint m == n\n\nfunc @f {")
    sliced = _build([TensorType(f32, (n, 4))], lambda b, p: b.emit(
        ops.SLICE, p, {"start": (2, 0), "limit": (n, 4), "stride": (3, 1)}))
    assert [str(c) for c in sliced.constraints] == ["n >= 2"]
    assert str(sliced.entry.outputs[0].type) == "f32[n//3,4]{1,0}"
    for size in (2, 3, 4, 5, 9):
        x = _floats(size, 4)
        np.testing.assert_array_equal(interpret(sliced, [x])[0], x[2::3])
    pieces = _build([TensorType(f32, (n,))], lambda b, p: b.emit(
        ops.RESHAPE, p, result_type=TensorType(f32, (floor_divide(n, 8), 8))))
    assert [str(c) for c in pieces.constraints] == ["n % 8 == 0"]


def test_outside_a_scope_a_needed_constraint_is_an_error() -> None:
    fn = Function("f")
    builder = Builder(fn)
    x = builder.emit(ops.PARAMETER, [], {"index": 0}, TensorType(f32, (n,)))
    y = builder.emit(ops.PARAMETER, [], {"index": 1}, TensorType(f32, (m,)))
    with pytest.raises(IRTypeError, match=r"needs `constraint m == n`; build symbolic IR"):
        builder.emit(ops.ADD, [x, y])
    # A constant that can never match is refused at once, as a static mismatch is.
    z = builder.emit(ops.PARAMETER, [], {"index": 2}, TensorType(f32, (n + 1,)))
    with symbolic.recording(), pytest.raises(IRTypeError, match=r"n == n\+1 never holds"):
        builder.emit(ops.ADD, [x, z])


def test_parsing_accepts_only_the_declared_constraints() -> None:
    text = CASES["add_of_two_symbols_records_equality"].text
    with pytest.raises(ParseError, match=r"line 4: add: broadcasting shapes \[n\] with \[m\] "
                                         r"needs `constraint m == n`, which the module does "
                                         "not declare"):
        parse_module(text.replace("constraint m == n\n\n", ""))
    slice_text = CASES["slice_drops_the_first"].text
    with pytest.raises(ParseError, match=r"needs `constraint n >= 1`"):
        parse_module(slice_text.replace("constraint n >= 1\n\n", ""))
    # A stronger declared bound implies the needed one.
    stronger = slice_text.replace("n >= 1", "n >= 2")
    assert print_module(verify(parse_module(stronger))) == stronger


def test_a_declared_result_may_name_either_of_two_equal_symbols() -> None:
    text = CASES["add_of_two_symbols_records_equality"].text.replace(
        "add(%p0, %p1) : f32[m]", "add(%p0, %p1) : f32[n]")
    module = verify(parse_module(text))
    assert str(module.entry.outputs[0].type) == "f32[n]"
    with pytest.raises(ParseError, match=r"result type f32\[n\+1\] does not match the "
                                         r"inferred f32\[m\]"):
        parse_module(text.replace("add(%p0, %p1) : f32[n]", "add(%p0, %p1) : f32[n+1]"))


def test_every_symbol_must_be_bound_by_an_entry_parameter() -> None:
    text = _function("f32[n]", "%0 = iota() dimension=0 : i64[k]", "%0")
    with pytest.raises(VerifyError, match=r"`%0 = iota\(\) dimension=0 : i64\[k\]`: symbol k "
                                          r"is not a dimension of any parameter of @f"):
        verify(parse_module(text))
    # A parameter dimension that is an expression binds nothing by itself.
    with pytest.raises(VerifyError, match="symbol n is not a dimension"):
        verify(parse_module(_function("f32[n+1]", "%0 = neg(%p0) : f32[n+1]", "%0")))
    with pytest.raises(VerifyError, match="constraint k >= 2: symbol k is not"):
        verify(parse_module(_function("f32[n]", "%0 = neg(%p0) : f32[n]", "%0", "k >= 2")))


def test_bad_dimension_text_names_the_line() -> None:
    with pytest.raises(ParseError, match=r"line 2: unexpected '\*'"):
        parse_module(_function("f32[n**2]", "%0 = neg(%p0) : f32[n]", "%0"))
    with pytest.raises(ParseError, match="line 1: a constraint is"):
        parse_module("constraint n\n" + _function("f32[n]", "%0 = neg(%p0) : f32[n]", "%0"))
    with pytest.raises(ParseError, match="constraints come before the functions"):
        parse_module(_function("f32[n]", "%0 = neg(%p0) : f32[n]", "%0") + "constraint n >= 1\n")


# -- binding at call time ---------------------------------------------------------------------
def test_the_call_binds_symbols_and_checks_constraints() -> None:
    module = parse_module(CASES["add_of_two_symbols_records_equality"].text)
    with pytest.raises(ArgumentError, match=r"constraint m == n does not hold: m=3, n=5"):
        interpret(module, [_floats(5), _floats(3)])
    one = parse_module(_function("f32[n,3]{1,0}; f32[n]", "%0 = neg(%p1) : f32[n]", "%0"))
    with pytest.raises(ArgumentError, match=r"symbol n is 4 \(argument 0 dimension 0\) and 2 "
                                            r"\(argument 1 dimension 0\)"):
        interpret(one, [_floats(4, 3), _floats(2)])
    with pytest.raises(ArgumentError, match=r"argument 0: expected f32\[n,3\], got "
                                            r"float32\[4, 2\]"):
        interpret(one, [_floats(4, 2), _floats(4)])
    with pytest.raises(ArgumentError, match=r"argument 1: expected f32\[n\], got float64"):
        interpret(one, [_floats(4, 3), np.zeros(4)])
    derived = parse_module(_function("f32[n]; f32[n+1]", "%0 = neg(%p1) : f32[n+1]", "%0"))
    np.testing.assert_array_equal(interpret(derived, [_floats(2), _floats(3)])[0],
                                  -_floats(3))
    with pytest.raises(ArgumentError, match=r"dimension 0 is n\+1 = 3 with n=2"):
        interpret(derived, [_floats(2), _floats(2)])


def test_the_interpreter_backend_binds_symbols_itself() -> None:
    module = parse_module(CASES["add_of_two_symbols_records_equality"].text)
    executable = InterpreterBackend().compile(module, Options())
    x, y = _floats(3), _floats(3)
    np.testing.assert_array_equal(executable([x, y])[0], x + y)
    with pytest.raises(ArgumentError, match="constraint m == n does not hold: m=2, n=3"):
        executable([x, _floats(2)])


def test_convolution_keeps_features_and_windows_static() -> None:
    text = _function("f32[2,n,5]{2,1,0}; f32[3,2,2]{2,1,0}",
                     '%0 = convolution(%p0, %p1) dim_labels="bf0_oi0->bf0" : f32[2,3,4]{2,1,0}',
                     "%0")
    with pytest.raises(ParseError, match="only the batch dimension may be symbolic"):
        parse_module(text)
