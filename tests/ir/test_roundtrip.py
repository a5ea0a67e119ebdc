"""Printing then parsing gives back the same module, for every op of the table."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import CASES, FunctionBuilder, f32, i32, module, ops_used, tt

from jitc.ir import ops
from jitc.ir.core import Literal, Location, Module
from jitc.ir.opdef import OPS
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.verifier import verify


def assert_round_trip(m: Module) -> str:
    text = print_module(m)
    parsed = verify(parse_module(text))
    assert parsed == m, text
    assert print_module(parsed) == text
    return text


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip(case: str) -> None:
    assert_round_trip(CASES[case]())


def test_every_op_has_a_round_trip_case() -> None:
    covered = set().union(*(ops_used(build()) for build in CASES.values()))
    missing = sorted(set(OPS) - covered)
    assert not missing, f"ops without a round-trip case: {missing}"


def test_layouts_are_printed_for_rank_two_and_up() -> None:
    text = assert_round_trip(CASES["iota-layouts"]())
    assert "iota() dimension=1 : i32[3,4]{0,1}" in text
    assert ": f64[2,3,4]{1,0,2}" in text
    scalar_and_vector = print_module(CASES["compare"]())
    assert "f32[4]{" not in scalar_and_vector and "f32[]{" not in scalar_and_vector


def test_default_attributes_are_omitted() -> None:
    text = assert_round_trip(CASES["shape-ops"]())
    assert "slice(%x) start=[0,1] limit=[2,3] :" in text
    assert "pad(%x, %0) low=[1,0] high=[0,1] :" in text
    text = assert_round_trip(CASES["reductions"]())
    assert "argmax(%x) axis=2 index_dtype=i32 :" in text
    assert "argmin(%y) axis=0 :" in text


def test_multi_result_reduce_text() -> None:
    text = assert_round_trip(CASES["reductions"]())
    assert "%0, %1 = reduce(%x, %y) dims=[0,2] kind=sum : f32[3], i32[3]" in text


def test_convolution_attributes_text() -> None:
    text = assert_round_trip(CASES["contractions"]())
    assert ('convolution(%image, %kernel) dim_labels="b01f_01io->bf01" strides=[2,1] '
            "padding=[[1,1],[0,-1]] lhs_dilation=[1,2] rhs_dilation=[2,1] "
            "feature_group_count=2 : f32[1,6,3,10]{3,2,1,0}") in text


def test_literal_text() -> None:
    text = assert_round_trip(CASES["literals"]())
    assert "constant() value=true : bool[]" in text
    assert "constant() value=[-128, 0, 127] : i8[3]" in text
    assert "constant() value=[0, 0, 255] : u8[3]" in text
    assert "constant() value=[-9223372036854775808, 0, 9223372036854775807] : i64[3]" in text
    assert "value=[nan, inf, -inf, -0.0, 0.1, 6.104e-05] : f16[6]" in text
    assert "value=[] : f32[0,3]{1,0}" in text
    assert "value=[[], []] : i8[2,0]{1,0}" in text
    # The pool holds each distinct large literal once, declared before the functions.
    declarations = [line for line in text.splitlines() if line.startswith("const @c")]
    assert len(declarations) == len({line.split(" : ", 1)[1] for line in declarations})
    assert text.startswith("const @c0 : bool[4,10]{1,0} = hex\"0001000100")
    (repeated,) = [line.split()[1] for line in declarations if ": f64[20] =" in line]
    assert text.count(f"value={repeated} : f64[20]") == 2


def test_special_floats_keep_their_bits() -> None:
    parsed = parse_module(print_module(CASES["literals"]()))
    arrays = [inst.attrs["value"].array for inst in parsed.entry.body]
    payload = [a for a in arrays if a.dtype == np.float32 and a.size == 1 and np.isnan(a).all()]
    assert [a.view(np.uint32)[0] for a in payload] == [0x7FC00001]
    negative_zero = [a for a in arrays if a.dtype == np.float64 and a.size == 3]
    assert np.signbit(negative_zero[0][1])


def test_names_and_locations() -> None:
    text = assert_round_trip(CASES["names-locations"]())
    assert text == (
        "func @named {\n"
        "  %x = parameter() index=0 : f32[3]\n"
        "  %activations = exp(%x) : f32[3]  # model.py:12 (forward)\n"
        "  %0 = add(%activations, %activations) : f32[3]  # script.py:3\n"
        "  %1 = neg(%0) : f32[3]\n"
        "  return %1, %activations\n"
        "}\n")
    parsed = parse_module(text)
    assert [inst.loc for inst in parsed.entry.body] == [
        None, Location("model.py", 12, "forward"), Location("script.py", 3), None]
    assert [v.name_hint for inst in parsed.entry.body for v in inst.results] == [
        "x", "activations", None, None]


def test_location_with_a_space_in_the_file_name() -> None:
    fb = FunctionBuilder()
    fb.builder.loc = Location("/tmp/my model.py", 7, "<lambda>")
    m = module(fb.done(fb.param(tt(f32, (2,)))))
    assert "# my model.py:7 (<lambda>)" in assert_round_trip(m)
    assert parse_module(print_module(m)).entry.body[0].loc == Location("my model.py", 7,
                                                                        "<lambda>")


def test_two_functions_entry_first() -> None:
    m = CASES["two-functions"]()
    text = assert_round_trip(m)
    assert text.index("func @main") < text.index("func @helper")
    reordered = Module([m.functions["helper"], m.functions["main"]], "main")
    assert print_module(reordered) == text
    assert reordered == m
    entry_last = Module([m.functions["main"], m.functions["helper"]], "helper")
    assert parse_module(print_module(entry_last)) == entry_last
    assert entry_last != m


def _constant_module(value: object, layout: tuple[int, ...] = (), hint: str = "") -> Module:
    fb = FunctionBuilder()
    literal = Literal(value)
    c = fb.builder.emit(ops.CONSTANT, [], {"value": literal},
                        literal.type.with_layout(layout) if layout else None, name_hint=hint)
    return module(fb.done(c))


def test_equality_ignores_names_and_locations_only() -> None:
    base = _constant_module(np.ones((2, 2), np.float32))
    assert base == _constant_module(np.ones((2, 2), np.float32), hint="renamed")
    assert base != _constant_module(np.ones((2, 2), np.float64))
    assert base != _constant_module(np.ones((2, 2), np.float32), layout=(0, 1))
    assert base != _constant_module(np.array([[1, 1], [1, 2]], np.float32))
    assert _constant_module(np.float32(0.0)) != _constant_module(np.float32(-0.0))
    fb = FunctionBuilder()
    x = fb.param(tt(i32, (2,)))
    m1 = module(fb.done(fb.emit(ops.SUB, x, x)))
    fb = FunctionBuilder()
    x, y = fb.param(tt(i32, (2,))), fb.param(tt(i32, (2,)))
    assert m1 != module(fb.done(fb.emit(ops.SUB, x, y)))


def test_elided_constants_show_their_size() -> None:
    text = print_module(CASES["literals"](), elide_constants=True)
    assert "const @c0 : bool[4,10]{1,0} = <40 bytes>" in text
    assert 'hex"' not in text
