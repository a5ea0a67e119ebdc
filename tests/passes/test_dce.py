"""dce, and the pipeline that runs passes: verification, dumps, disabling."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from jitc.ir import dtypes, ops
from jitc.ir.core import Builder, Function, Module
from jitc.ir.opdef import OpDef, Trait
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.types import TensorType
from jitc.ir.verifier import VerifyError
from jitc.passes import (
    DEFAULT_PASSES,
    SIMPLIFICATION,
    convolution_products,
    dce,
    hoist_steps,
    integer_dots,
    legalize_broadcast,
)
from jitc.passes.pipeline import Pass, Pipeline, module_pass, run_passes

BASIC_PASSES = (legalize_broadcast, dce)


def ir(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CASES = {
    "unused-chain": (ir("""
        func @f {
          %x = parameter() index=0 : f32[4]
          %unused = parameter() index=1 : f32[4]
          %0 = exp(%x) : f32[4]
          %1 = log(%0) : f32[4]
          %2 = neg(%1) : f32[4]
          %3 = tanh(%x) : f32[4]
          %c = constant() value=[1.0, 2.0, 3.0, 4.0] : f32[4]
          return %3
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[4]
          %unused = parameter() index=1 : f32[4]
          %0 = tanh(%x) : f32[4]
          return %0
        }
        """)),
    "multi-result-kept-when-one-result-is-used": (ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %y = parameter() index=1 : i32[2,3]{1,0}
          %0, %1 = reduce(%x, %y) dims=[1] kind=max : f32[2], i32[2]
          %2 = neg(%0) : f32[2]
          %3 = abs(%1) : i32[2]
          return %3, %3
        }
        """), ir("""
        func @f {
          %x = parameter() index=0 : f32[2,3]{1,0}
          %y = parameter() index=1 : i32[2,3]{1,0}
          %0, %1 = reduce(%x, %y) dims=[1] kind=max : f32[2], i32[2]
          %2 = abs(%1) : i32[2]
          return %2, %2
        }
        """)),
    "every-function": (ir("""
        func @main {
          %x = parameter() index=0 : i8[3]
          %0 = iota() dimension=0 : i8[3]
          return %x
        }

        func @other {
          %x = parameter() index=0 : i8[3]
          %0 = not(%x) : i8[3]
          %1 = neg(%x) : i8[3]
          return %1
        }
        """), ir("""
        func @main {
          %x = parameter() index=0 : i8[3]
          return %x
        }

        func @other {
          %x = parameter() index=0 : i8[3]
          %0 = neg(%x) : i8[3]
          return %0
        }
        """)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_text_in_text_out(case: str, assert_same_results) -> None:
    before_text, after_text = CASES[case]
    before = parse_module(before_text)
    assert print_module(before) == before_text
    after = run_passes(before, [dce])
    assert print_module(after) == after_text
    assert_same_results(before, after)


def test_nothing_to_remove_returns_the_same_module() -> None:
    for _, after_text in CASES.values():
        module = parse_module(after_text)
        assert dce(module) is module


def test_unchanged_functions_are_kept() -> None:
    text = CASES["every-function"][0].replace("  %0 = iota() dimension=0 : i8[3]\n", "")
    before = parse_module(text)
    after = dce(before)
    assert after.functions["main"] is before.functions["main"]
    assert after.functions["other"] is not before.functions["other"]


def _effect_rule(types: Sequence[TensorType], attrs: Mapping[str, object],
                 declared: Sequence[TensorType] | None) -> Sequence[TensorType]:
    return [types[0]]


def _effect_reference(args: Sequence[np.ndarray], attrs: Mapping[str, object],
                      results: Sequence[TensorType]) -> list[np.ndarray]:
    return [args[0]]


# No op of the table has side effects yet; one outside the table shows that dce keeps them.
PRINT = OpDef("print", 1, _effect_rule, _effect_reference, "prints its operand",
              traits=frozenset({Trait.SIDE_EFFECT}))


def test_side_effects_are_kept() -> None:
    fn = Function("f")
    b = Builder(fn)
    x = b.emit(ops.PARAMETER, [], {"index": 0}, TensorType(dtypes.float32, (2,)))
    shown = b.emit(ops.NEG, [x])
    b.emit(PRINT, [shown])
    b.emit(ops.EXP, [x])
    fn.outputs = [x]
    after = dce(Module([fn]))
    assert [inst.op.name for inst in after.entry.body] == ["parameter", "neg", "print"]


# --- the pipeline -----------------------------------------------------------------------------

BROADCASTING = ir("""
    func @f {
      %x = parameter() index=0 : f32[2,3]{1,0}
      %s = constant() value=2.0 : f32[]
      %dead = exp(%x) : f32[2,3]{1,0}
      %0 = mul(%x, %s) : f32[2,3]{1,0}
      return %0
    }
    """)


def test_dump_dir_writes_numbered_files(tmp_path: Path) -> None:
    pipeline = Pipeline("basic", BASIC_PASSES, dump_dir=str(tmp_path / "dumps"))
    result = pipeline.run(parse_module(BROADCASTING))
    files = sorted(os.listdir(tmp_path / "dumps"))
    assert files == ["00-input.jir", "01-after-legalize_broadcast.jir", "02-after-dce.jir"]
    assert (tmp_path / "dumps" / "00-input.jir").read_text() == BROADCASTING
    middle = parse_module((tmp_path / "dumps" / "01-after-legalize_broadcast.jir").read_text())
    assert middle == legalize_broadcast(parse_module(BROADCASTING))
    assert (tmp_path / "dumps" / "02-after-dce.jir").read_text() == print_module(result)
    assert "exp" not in print_module(result) and "broadcast_in_dim" in print_module(result)
    assert [(r.name, r.changed) for r in pipeline.records] == [
        ("legalize_broadcast", True), ("dce", True)]


def test_disabled_passes_are_skipped(tmp_path: Path) -> None:
    pipeline = Pipeline("basic", BASIC_PASSES, dump_dir=str(tmp_path),
                        disabled=frozenset({"legalize_broadcast"}))
    result = pipeline.run(parse_module(BROADCASTING))
    assert sorted(os.listdir(tmp_path)) == ["00-input.jir", "01-after-dce.jir"]
    assert [r.name for r in pipeline.records] == ["dce"]
    assert "broadcast_in_dim" not in print_module(result)
    assert "exp" not in print_module(result)


def test_records_say_whether_a_pass_changed_the_module() -> None:
    module = parse_module(CASES["unused-chain"][1])
    pipeline = Pipeline("basic", BASIC_PASSES)
    assert pipeline.run(module) is module
    assert [(r.name, r.changed) for r in pipeline.records] == [
        ("legalize_broadcast", False), ("dce", False)]
    assert all(r.seconds >= 0 for r in pipeline.records)


@module_pass("drop_parameters")
def drop_parameters(module: Module) -> Module:
    """A broken pass: its output uses values that nothing defines."""
    functions = [Function(fn.name, [i for i in fn.body if i.op.name != "parameter"], fn.outputs)
                 for fn in module.functions.values()]
    return Module(functions, module.entry_name)


def test_verification_failure_names_the_pass(tmp_path: Path) -> None:
    pipeline = Pipeline("cpu", [dce, drop_parameters, legalize_broadcast],
                        dump_dir=str(tmp_path))
    with pytest.raises(VerifyError) as info:
        pipeline.run(parse_module(BROADCASTING))
    message = str(info.value)
    assert message.startswith("after pass drop_parameters of pipeline cpu: @f: ")
    assert "operand 0 is used before it is defined" in message
    # Nothing is dumped for the broken module, and no later pass runs.
    assert sorted(os.listdir(tmp_path)) == ["00-input.jir", "01-after-dce.jir"]
    assert [r.name for r in pipeline.records] == ["dce", "drop_parameters"]


def test_without_verification_a_bad_pass_goes_through() -> None:
    pipeline = Pipeline("cpu", [drop_parameters], verify=False)
    result = pipeline.run(parse_module(BROADCASTING))
    assert all(i.op.name != "parameter" for i in result.entry.body)


def test_input_is_verified() -> None:
    broken = drop_parameters(parse_module(BROADCASTING))
    with pytest.raises(VerifyError, match="used before it is defined"):
        run_passes(broken, [dce])


def test_a_pass_is_a_named_callable() -> None:
    assert isinstance(dce, Pass) and dce.name == "dce"
    assert [p.name for p in BASIC_PASSES] == ["legalize_broadcast", "dce"]
    assert DEFAULT_PASSES == (hoist_steps, legalize_broadcast, SIMPLIFICATION,
                              convolution_products, integer_dots, dce)
    module = parse_module(CASES["unused-chain"][0])
    assert print_module(dce(module)) == CASES["unused-chain"][1]
