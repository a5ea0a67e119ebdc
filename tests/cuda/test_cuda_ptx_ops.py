"""Every op case compiles for the GPU, without one: the PTX for sm_80 and sm_90 holds each
kernel as an `.entry` and ptxas assembles it. (The op cases' results are checked on the grid
simulator by tests/ops, where "cuda-sim" is one of the backends.)

The default run assembles each case's first variant on every dtype, which is what selects
the instructions; the further variants (0-d, empty, strided and transposed layouts: the same
instructions with other index arithmetic) run on the simulator in tests/ops and assemble
here under `-m slow`."""

from __future__ import annotations

import numpy as np
import pytest
from cudacheck import check_ptx, compile_for_gpu, op_case_params, require_ptxas
from ops.cases import OpCase, Variant


@pytest.mark.parametrize("case,variant,dtype", op_case_params(further_variants_slow=True))
def test_op_case_assembles(case: OpCase, variant: Variant, dtype: np.dtype) -> None:
    require_ptxas()
    args = variant.build(dtype, f"{case.name}/{variant.label}/{dtype}")
    check_ptx(compile_for_gpu(case.fn, *args))
