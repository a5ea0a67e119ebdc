"""Every plain-numpy model compiles for the GPU: the model tests of tests/models that check
through `check_jit` run with it replaced by one that compiles each function for the cuda
backend and checks its PTX (see cudacheck.check_ptx), then returns numpy's own result so the
test's further assertions still hold. New model tests are covered without being listed
here."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from cudacheck import check_ptx, compile_for_gpu, model_tests, require_ptxas


def _ptx_check_jit(fn: Callable, *args: Any, backend: str = "", rtol: float | None = None,
                   atol: float | None = None, **jit_options: Any) -> Any:
    check_ptx(compile_for_gpu(fn, *copy.deepcopy(args), **jit_options))
    return fn(*copy.deepcopy(args))


@pytest.mark.parametrize("module,test,kwargs", model_tests())
def test_model_assembles(module: Any, test: Callable, kwargs: dict[str, Any],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    require_ptxas()
    monkeypatch.setattr(module, "check_jit", _ptx_check_jit)
    test(**kwargs, backend="cuda")
