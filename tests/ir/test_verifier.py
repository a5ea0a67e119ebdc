"""The verifier and the parser reject broken IR with messages that say where the problem is."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest
from helpers import BOOL, FunctionBuilder, f32, i32, module, tt

from jitc.ir import ops
from jitc.ir.core import Instruction, Module, Value
from jitc.ir.opdef import Attr, AttrKind, OpDef, Trait
from jitc.ir.parser import ParseError, parse_module
from jitc.ir.printer import print_module
from jitc.ir.types import TensorType
from jitc.ir.verifier import VerifyError, verify

VECTOR = tt(f32, (4,))


def broken(build: Callable[[FunctionBuilder, Value], Instruction | None],
           operand: TensorType = VECTOR) -> Module:
    """A function with one parameter %x; `build` appends (or returns) the faulty instruction."""
    fb = FunctionBuilder()
    x = fb.param(operand, "x")
    inst = build(fb, x)
    if inst is not None:
        fb.function.body.append(inst)
        fb.function.outputs = list(inst.results)
    return Module([fb.function])


def raw(op: OpDef, operands: Sequence[Value], result_types: Sequence[TensorType],
        **attrs: object) -> Instruction:
    """An instruction built without the Builder's checks."""
    return Instruction(op, operands, attrs, result_types)


def verify_error(m: Module) -> str:
    with pytest.raises(VerifyError) as info:
        verify(m)
    return str(info.value)


# --- instructions -----------------------------------------------------------------------------

def test_use_before_definition() -> None:
    def build(fb: FunctionBuilder, x: Value) -> None:
        y = fb.emit(ops.NEG, x)
        z = fb.emit(ops.EXP, y)
        body = fb.function.body
        body[1], body[2] = body[2], body[1]
        fb.function.outputs = [z]
    message = verify_error(broken(build))
    assert "@f: `%0 = exp(%1) : f32[4]`: operand 0 is used before it is defined" in message


def test_operand_from_another_function() -> None:
    other = FunctionBuilder("other")
    foreign = other.param(tt(f32, (4,)))
    message = verify_error(broken(lambda fb, x: raw(ops.ADD, [x, foreign], [tt(f32, (4,))])))
    assert "`%0 = add(%x, %<undefined>) : f32[4]`: operand 1 is used before" in message


@pytest.mark.parametrize(("result", "problem"), [
    (tt(f32, (5,)), "result type f32[5] does not match the inferred f32[4]"),
    (tt(i32, (4,)), "result type i32[4] does not match the inferred f32[4]"),
    (tt(f32, ()), "result type f32[] does not match the inferred f32[4]"),
])
def test_wrong_result_type(result: TensorType, problem: str) -> None:
    message = verify_error(broken(lambda fb, x: raw(ops.NEG, [x], [result])))
    assert f"`%0 = neg(%x) : {result}`" in message
    assert problem in message


def test_wrong_number_of_results() -> None:
    m = broken(lambda fb, x: raw(ops.NEG, [x], [tt(f32, (4,)), tt(f32, (4,))]))
    assert "neg has 1 result(s), 2 type(s) were given" in verify_error(m)


def test_operand_dtype_mismatch() -> None:
    def build(fb: FunctionBuilder, x: Value) -> Instruction:
        y = fb.param(tt(i32, (4,)), "y")
        return raw(ops.ADD, [x, y], [tt(f32, (4,))])
    message = verify_error(broken(build))
    assert "`%0 = add(%x, %y) : f32[4]`" in message
    assert "operand dtypes differ (f32[4], i32[4])" in message


def test_wrong_arity() -> None:
    message = verify_error(broken(lambda fb, x: raw(ops.ADD, [x], [tt(f32, (4,))])))
    assert "`%0 = add(%x) : f32[4]`: add takes 2 operand(s), got 1" in message


def test_select_predicate_must_be_bool() -> None:
    message = verify_error(broken(lambda fb, x: raw(ops.SELECT, [x, x, x], [tt(f32, (4,))])))
    assert "`%0 = select(%x, %x, %x) : f32[4]`: select: the predicate must be bool" in message


@pytest.mark.parametrize(("attrs", "shown", "problem"), [
    ({"perm": (1, 0)}, "%0 = transpose(%x) : f32[3,2]{1,0}", "unknown attribute 'perm'"),
    ({}, "%0 = transpose(%x) : f32[3,2]{1,0}", "missing attribute 'permutation'"),
    ({"permutation": "ab"}, "%0 = transpose(%x) permutation=[a,b] : f32[3,2]{1,0}",
     "attribute permutation='ab': expected an integer, got 'a'"),
    # A value the printer cannot format is shown raw.
    ({"permutation": 5}, "transpose(...) {'permutation': 5}", "'int' object is not iterable"),
    ({"permutation": (0, 0)}, "%0 = transpose(%x) permutation=[0,0] : f32[3,2]{1,0}",
     "permutation=[0, 0] is not a permutation of the dimensions of f32[2,3]"),
    ({"permutation": (1, 0, 2)}, "%0 = transpose(%x) permutation=[1,0,2] : f32[3,2]{1,0}",
     "permutation=[1, 0, 2] is not a permutation"),
])
def test_bad_transpose_attributes(attrs: dict[str, object], shown: str, problem: str) -> None:
    message = verify_error(broken(
        lambda fb, x: raw(ops.TRANSPOSE, [x], [tt(f32, (3, 2))], **attrs), tt(f32, (2, 3))))
    assert message.startswith(f"@f: `{shown}`: ")
    assert problem in message


@pytest.mark.parametrize(("op", "attrs", "problem"), [
    (ops.REDUCE, {"dims": (2,), "kind": "sum"}, "reduce: dimension 2 is out of range for rank 2"),
    (ops.REDUCE, {"dims": (0, 0), "kind": "sum"}, "reduce: dimension 0 is repeated"),
    (ops.REDUCE, {"dims": (0,), "kind": "mean"}, "attribute kind='mean': expected one of sum"),
    (ops.REDUCE, {"dims": (0,), "kind": "and"}, "reduce kind=and needs a bool dtype, got f32"),
    (ops.ARGMAX, {"axis": -1}, "argmax: axis -1 is out of range for rank 2"),
    (ops.ARGMAX, {"axis": 1, "index_dtype": "i8"}, "attribute index_dtype='i8': expected one"),
    (ops.REVERSE, {"dims": (5,)}, "reverse: dimension 5 is out of range for rank 2"),
    (ops.CONCATENATE, {"dimension": 2}, "concatenate: dimension 2 is out of range for rank 2"),
    (ops.GATHER, {"axis": 0}, "gather takes 2 operand(s), got 1"),
])
def test_bad_attribute_values(op: OpDef, attrs: dict[str, object], problem: str) -> None:
    m = broken(lambda fb, x: raw(op, [x], [tt(f32, (2,))], **attrs), tt(f32, (2, 3)))
    message = verify_error(m)
    assert f"`%0 = {op.name}(%x)" in message
    assert problem in message


def test_bad_broadcast_in_dim_dims() -> None:
    def message(operand: TensorType, dims: tuple[int, ...]) -> str:
        return verify_error(broken(lambda fb, x: raw(
            ops.BROADCAST_IN_DIM, [x], [tt(f32, (3, 4))], dims=dims), operand))
    assert "`%0 = broadcast_in_dim(%x) dims=[2] : f32[3,4]{1,0}`" in message(tt(f32, (4,)), (2,))
    assert "dimension 2 is out of range for rank 2" in message(tt(f32, (4,)), (2,))
    assert "dims=[0] must name one result dimension per operand dimension of f32[3,4]" in \
        message(tt(f32, (3, 4)), (0,))
    assert "dims=[1, 0] must be increasing" in message(tt(f32, (4, 3)), (1, 0))
    assert "operand dimension 0 of f32[4] cannot become 3" in message(tt(f32, (4,)), (0,))


def test_attribute_kinds_must_be_canonical() -> None:
    m = broken(lambda fb, x: raw(ops.REVERSE, [x], [tt(f32, (4,))], dims=[0]))
    message = verify_error(m)
    assert "`%0 = reverse(%x) dims=[0] : f32[4]`: attributes are not in canonical form" in message


def test_bool_attribute_is_not_an_int() -> None:
    m = broken(lambda fb, x: raw(ops.CONCATENATE, [x], [tt(f32, (4,))], dimension=True))
    assert "attribute dimension=True: expected an integer, got True" in verify_error(m)


@pytest.mark.parametrize("layout", [(0, 0), (0,), (0, 1, 2), (1, 2)])
def test_bad_layout(layout: tuple[int, ...]) -> None:
    m = broken(lambda fb, x: raw(ops.NEG, [x], [tt(f32, (2, 3), layout)]), tt(f32, (2, 3)))
    message = verify_error(m)
    shown = ",".join(map(str, layout))
    assert f"`%0 = neg(%x) : f32[2,3]{{{shown}}}`" in message
    assert f"layout {{{shown}}} is not a permutation of the 2 dimensions" in message


def test_bad_parameter_layout() -> None:
    fb = FunctionBuilder()
    fb.function.body.append(raw(ops.PARAMETER, [], [tt(f32, (2, 3), (1, 1))], index=0))
    message = verify_error(Module([fb.done()]))
    assert "`%0 = parameter() index=0 : f32[2,3]{1,1}`: parameter: layout {1,1}" in message


def test_duplicate_parameter_index() -> None:
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (2,)), "x")
    fb.function.body.append(raw(ops.PARAMETER, [], [tt(i32, ())], index=0))
    message = verify_error(Module([fb.done(x)]))
    assert ("@f: `%0 = parameter() index=0 : i32[]`: parameter index 0 is already taken by "
            "`%x = parameter() index=0 : f32[2]`") in message


def test_missing_parameter_index() -> None:
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (2,)), "x")
    fb.function.body.append(raw(ops.PARAMETER, [], [tt(f32, (2,))], index=2))
    message = verify_error(Module([fb.done(x)]))
    assert ("@f: `%0 = parameter() index=2 : f32[2]`: parameter index 2 leaves a gap; "
            "2 parameter(s) need the indices 0..1") in message


def test_negative_parameter_index() -> None:
    fb = FunctionBuilder()
    fb.function.body.append(raw(ops.PARAMETER, [], [tt(f32, (2,))], index=-1))
    assert "parameter index -1 is negative" in verify_error(Module([fb.done()]))


def test_undefined_output() -> None:
    elsewhere = FunctionBuilder("g").param(tt(f32, (4,)))
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (4,)), "x")
    message = verify_error(Module([fb.done(x, elsewhere)]))
    assert "@f: `return %x, %<undefined>`: returned value 1 is not defined in it" in message


def test_value_defined_twice() -> None:
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (4,)), "x")
    y = fb.emit(ops.NEG, x)
    fb.function.body.append(y.producer)
    assert "= neg(%x) : f32[4]`: a result value is defined twice" in verify_error(
        Module([fb.done(y)]))


def test_missing_entry_function() -> None:
    fb = FunctionBuilder("f")
    m = Module([fb.done(fb.param(tt(f32, ())))], entry="main")
    assert "the entry function @main is not defined" in verify_error(m)


# An op that refers to a function, as a call would; no op of the table has one yet, so the
# verifier's check of function references is tested with an op outside the table.

def _call_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
               declared: Sequence[TensorType] | None) -> Sequence[TensorType]:
    assert declared is not None
    return [TensorType(t.dtype, t.shape) for t in declared]


def _call_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                    results: Sequence[TensorType]) -> list[np.ndarray]:
    raise NotImplementedError


CALL = OpDef("call", 1, _call_rule, _call_reference, "calls @callee",
             (Attr("callee", AttrKind.FUNCTION),), frozenset({Trait.TYPED_RESULT}))


def test_unknown_function_reference() -> None:
    helper = FunctionBuilder("helper")
    helper.done(helper.param(tt(f32, (4,))))
    fb = FunctionBuilder("main")
    x = fb.param(tt(f32, (4,)), "x")
    good = fb.emit(CALL, x, result=tt(f32, (4,)), callee="helper")
    assert verify(Module([fb.done(good), helper.function])) is not None
    bad = fb.emit(CALL, x, result=tt(f32, (4,)), callee="missing")
    message = verify_error(Module([fb.done(bad), helper.function]))
    assert ("@main: `%1 = call(%x) callee=@missing : f32[4]`: calls @missing, which the module "
            "does not define") in message


def test_a_well_formed_module_verifies() -> None:
    fb = FunctionBuilder()
    x = fb.param(tt(f32, (2, 3), (0, 1)), "x")
    pred = fb.param(tt(BOOL, (3,)), "pred")
    m = module(fb.done(fb.emit(ops.SELECT, pred, x, fb.const(np.float32(1)))))
    assert verify(m) is m


# --- parser -----------------------------------------------------------------------------------

GOOD = """\
func @f {
  %x = parameter() index=0 : f32[4]
  %0 = neg(%x) : f32[4]
  return %0
}
"""


def parse_error(text: str) -> str:
    with pytest.raises(ParseError) as info:
        parse_module(text)
    return str(info.value)


def test_the_unbroken_text_parses() -> None:
    assert print_module(parse_module(GOOD)) == GOOD


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("neg(%x)", "frobnicate(%x)", "line 3: unknown op 'frobnicate' (found 'frobnicate')"),
    ("neg(%x)", "neg(%y)", "line 3: %y is used before it is defined (found '%y')"),
    ("neg(%x) : f32[4]", "neg(%x) : f33[4]", "line 3: unknown dtype 'f33'"),
    ("neg(%x) : f32[4]", "neg(%x) : f32[4,]", "line 3: expected an integer (found ']')"),
    ("neg(%x) : f32[4]", "neg(%x) : f32[2.5]", "line 3: expected an integer (found '2.5')"),
    ("neg(%x) : f32[4]", "neg(%x) : f32[5]",
     "line 3: neg: neg: result type f32[5] does not match the inferred f32[4]"),
    ("index=0 : f32[4]", "index=0 : f32[4,1]{0,0}",
     "line 2: parameter: parameter: layout {0,0} is not a permutation of the 2 dimensions"),
    ("neg(%x) :", "neg(%x) bogus=1 :", "line 3: neg has no attribute 'bogus'"),
    ("index=0", "index=zero", "line 2: attribute index: invalid literal for int()"),
    ("index=0", "", "line 2: parameter: parameter: missing attribute 'index'"),
    ("%0 = neg", "%x = neg", "line 3: %x is defined twice"),
    ("%0 = neg", "%0, %1 = neg", "line 3: 2 name(s) for the 1 result(s) of neg"),
    ("return %0", "return %9", "line 4: %9 is used before it is defined"),
    ("neg(%x)", "neg(%x))", "line 3: expected ':' (found ')')"),
    ("neg(%x)", "neg(%x) $", "line 3: unexpected character '$'"),
    ("func @f {", "func f {", "line 1: expected a function name like @f (found 'f')"),
])
def test_parse_errors_name_the_line(old: str, new: str, expected: str) -> None:
    assert old in GOOD
    assert expected in parse_error(GOOD.replace(old, new, 1))


def test_elided_constant_cannot_be_parsed() -> None:
    fb = FunctionBuilder()
    m = module(fb.done(fb.const(np.arange(32, dtype=np.int32))))
    text = print_module(m, elide_constants=True)
    assert text.startswith("const @c0 : i32[32] = <128 bytes>\n")
    message = parse_error(text)
    assert message.startswith("line 4: attribute value: constant @c0 was printed elided")
    assert parse_module(print_module(m)) == m


def test_constant_errors() -> None:
    text = 'const @c0 : i32[2] = hex"0100"\nfunc @f {\n  %0 = constant() value=@c0 : i32[2]\n' \
        "  return %0\n}\n"
    assert "line 1: @c0 holds 2 bytes, i32[2] needs 8" in parse_error(text)
    undeclared = GOOD.replace("neg(%x) : f32[4]", "constant() value=@c7 : f32[4]")
    assert "line 3: attribute value: constant @c7 is not declared" in parse_error(undeclared)
    wrong_shape = GOOD.replace("neg(%x) : f32[4]", "constant() value=[1.0, 2.0] : f32[4]")
    assert "line 3: attribute value: literal of shape [2] for type f32[4]" in parse_error(
        wrong_shape)


def test_a_module_needs_a_function() -> None:
    assert parse_error("") == "line 1: a module needs at least one function"
    assert "line 1: expected 'constraint', 'const' or 'func' (found 'fn')" in parse_error(
        "fn @f {}")


def test_function_type_errors_are_reported_for_the_defining_line() -> None:
    text = GOOD.replace("  %0 = neg(%x) : f32[4]\n",
                        "  %y = parameter() index=1 : i32[4]\n  %0 = add(%x, %y) : f32[4]\n")
    assert "line 4: add: add: operand dtypes differ (f32[4], i32[4])" in parse_error(text)


def test_parameter_index_errors_are_the_verifier_s() -> None:
    text = GOOD.replace("index=0", "index=1")
    assert "parameter index 1 leaves a gap" in verify_error(parse_module(text))


# -- control flow: regions must fit the carry, the operands and the results ----------------------
def _control_text(cond_out: str = "bool[]", body_out: str = "f32[4]",
                  branch_param: str = "f32[4]") -> str:
    return f"""
func @main {{
  %x = parameter() index=0 : f32[4]
  %y = while(%x) cond=@c body=@b : f32[4]
  %k = constant() value=0 : i32[]
  %z = conditional(%k, %y) branches=[@neg] : f32[4]
  return %z
}}

func @c {{
  %x = parameter() index=0 : f32[4]
  %s = reduce(%x) dims=[0] kind=sum : f32[]
  %z = constant() value=0.0 : f32[]
  %p = compare(%s, %z) direction=gt : bool[]
  %q = convert(%p) : {cond_out}
  return %q
}}

func @b {{
  %x = parameter() index=0 : f32[4]
  %h = constant() value=[0.5, 0.5, 0.5, 0.5] : f32[4]
  %y = mul(%x, %h) : f32[4]
  %w = convert(%y) : {body_out}
  return %w
}}

func @neg {{
  %x = parameter() index=0 : {branch_param}
  %y = neg(%x) : {branch_param}
  return %y
}}
"""


def test_control_flow_regions_that_fit_verify() -> None:
    verify(parse_module(_control_text()))


@pytest.mark.parametrize("change,message", [
    ({"cond_out": "i32[]"}, "the condition @c returns (i32[]), not (bool[])"),
    ({"body_out": "f64[4]"}, "the body @b returns (f64[4]), the carry is (f32[4])"),
    ({"branch_param": "f64[4]"}, "the branch @neg takes (f64[4]), the operands are (f32[4])"),
])
def test_control_flow_region_mismatches_are_named(change: dict, message: str) -> None:
    with pytest.raises(VerifyError) as info:
        verify(parse_module(_control_text(**change)))
    assert message in str(info.value)
    assert "@main" in str(info.value)


def test_a_region_must_be_defined() -> None:
    text = _control_text().replace("body=@b", "body=@missing")
    with pytest.raises(VerifyError, match="calls @missing, which the module does not define"):
        verify(parse_module(text))


def test_conditional_index_must_be_i32() -> None:
    text = _control_text().replace("value=0 : i32[]", "value=0 : i64[]")
    with pytest.raises(ParseError, match="branch index must be i32"):
        parse_module(text)
