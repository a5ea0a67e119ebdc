"""Every op case on every backend: compared with numpy, with the reference interpreter on the
traced module and on the optimized module, and through the compilation cache."""

from __future__ import annotations

import numpy as np
import pytest

from jitc.ir.dtypes import from_numpy
from jitc.ir.opdef import OPS

from .backends import BACKENDS, require
from .cases import CASES, OpCase, Variant, slow_param
from .checks import check, ops_in


def _params() -> list[object]:
    params = []
    for case in CASES:
        for variant, dtype in case.params():
            marks = [pytest.mark.slow] if slow_param(case, variant, dtype) else []
            params.append(pytest.param(case, variant, dtype, marks=marks,
                                       id=f"{case.name}-{variant.label}-"
                                          f"{from_numpy(dtype).name}"))
    return params


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case,variant,dtype", _params())
def test_op_case(backend: str, case: OpCase, variant: Variant, dtype: np.dtype) -> None:
    require(backend)
    args = variant.build(dtype, f"{case.name}/{variant.label}/{dtype}")
    check(case.fn, args, backend, expected=case.expected, tol=case.tol, ops=case.ops,
          signed_zeros=case.signed_zeros, bitwise=case.bitwise)


def test_every_op_has_a_case() -> None:
    """Each op of the table is named by a case (whose traced module is checked to contain it);
    parameters and constants count wherever a case's traced module has them, and ops only the
    optimizer creates (fusion) wherever a case's optimized module has them."""
    named = {op for case in CASES for op in case.ops}
    import jitc
    from jitc.passes import KERNEL_PASSES, run_passes
    seen: set[str] = set()
    for case in CASES:
        variant, dtype = case.params()[0]
        args = variant.build(dtype, "coverage")
        traced = jitc.jit(case.fn, backend="interpreter").lower(*args).module
        seen |= ops_in(traced) | ops_in(run_passes(traced, KERNEL_PASSES))
    # `extent` appears only in traces with symbolic dimensions, which no static op case has:
    # tests/ir/test_symbolic.py and tests/test_symbolic_numpy.py run it against numpy.
    missing = sorted(set(OPS) - named - (seen & {"parameter", "constant", "fusion"}) -
                     {"extent"})
    assert not missing, f"ops without an op case: {', '.join(missing)}"


def test_cases_name_known_ops() -> None:
    unknown = sorted({op for case in CASES for op in case.ops} - set(OPS))
    assert not unknown, f"op cases name ops the IR does not have: {unknown}"
