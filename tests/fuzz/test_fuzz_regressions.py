"""Programs the differential fuzzer found wrong, reduced by hand: each backend must agree with
the interpreter on them (bit for bit: every op here is exact)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from ops.backends import require

from jitc.ir.interpreter import interpret
from jitc.ir.parser import parse_module
from jitc.ir.verifier import verify

from .test_fuzz_backends import BACKENDS, compile_and_run

F16_NAN = np.array([0x7E01], np.uint16).view(np.float16)[0]

CASES = {
    # The C backend had no helper for a bitcast to the same dtype (f16 has no other of its
    # width, so the IR's only bitcast of an f16 is this one).
    "bitcast_f16_to_f16": ("""
        func @f {
          %x = parameter() index=0 : f16[3]
          %y = bitcast_convert(%x) : f16[3]
          return %y
        }
        """, [np.array([1.5, -0.0, F16_NAN], np.float16)]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_fuzzer_finding(backend: str, name: str) -> None:
    require(backend)
    text, args = CASES[name]
    module = verify(parse_module(textwrap.dedent(text)))
    want = interpret(module, args)
    got = compile_and_run(backend, module, [a.copy() for a in args])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w, strict=True)
