"""What the CUDA tests share: compiling for the GPU without one, and checking the PTX with
ptxas for the targets the backend promises to support."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ops.cases import CASES, OpCase, Variant, slow_param

import jitc
from jitc import lax
from jitc.backends.cuda.ptx import assemble, entry_names, find_ptxas, function_names
from jitc.ir.dtypes import from_numpy

# The default target and the newest one the tests assemble for.
ARCHS = ("sm_80", "sm_90")
_POOL = ThreadPoolExecutor(max_workers=len(ARCHS))


def require_ptxas() -> None:
    if find_ptxas() is None:
        pytest.skip("ptxas (from the CUDA toolkit) is not installed; it checks the PTX")


def check_ptx(compiled: jitc.Compiled, archs: Sequence[str] = ARCHS) -> None:
    """The PTX for each target defines exactly the executable's kernels, all as `.entry`
    (a kernel that lost its kernel marking would be a `.func`, which ptxas accepts too), and
    ptxas assembles it."""
    executable = compiled.executable
    # Kernels that compute the same thing share one entry (codegen.py): each name once.
    names = sorted({spec.name for spec in executable.lowering.specs})
    texts = {arch: executable.ptx(arch) for arch in archs}
    assert texts[archs[0]] == compiled.as_text() or archs[0] != executable.arch
    for arch, ptx in texts.items():
        assert f"\n.target {arch}\n" in ptx, f"the PTX for {arch} targets something else"
        assert sorted(entry_names(ptx)) == names, f"{arch}: kernels are not all .entry"
        assert not function_names(ptx), f"{arch}: device functions left over"
    # ptxas runs as a subprocess: both targets at once.
    for future in [_POOL.submit(assemble, ptx, arch) for arch, ptx in texts.items()]:
        future.result()


def op_case_params(further_variants_slow: bool = False) -> list[Any]:
    """Every op case with each of its variants and dtypes, as pytest params (control flow
    included: the cuda backend lowers it to host-driven steps). With `further_variants_slow`
    only each case's first variant (on every dtype) runs by default."""
    def slow(case: OpCase, variant: Variant, dtype: np.dtype) -> bool:
        return slow_param(case, variant, dtype) or (further_variants_slow and
                                                     variant is not case.variants[0])
    return [pytest.param(case, variant, dtype,
                         marks=[pytest.mark.slow] if slow(case, variant, dtype) else [],
                         id=f"{case.name}-{variant.label}-{from_numpy(dtype).name}")
            for case in CASES for variant, dtype in case.params()]


def compile_for_gpu(fn: Callable, *args: Any, **jit_options: Any) -> jitc.Compiled:
    return jitc.jit(fn, backend="cuda", verify=True, **jit_options).lower(*args).compile()


MODELS = Path(__file__).resolve().parent.parent / "models"


def _expand(fn: Callable) -> Iterator[tuple[str, dict[str, Any]]]:
    """The parameter combinations pytest would run `fn` with, backend left out."""
    grids = []
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(
            mark.args[0], str) else list(mark.args[0])
        if names == ["backend"]:
            continue
        ids = mark.kwargs.get("ids")
        rows = []
        for n, value in enumerate(mark.args[1]):
            values = value.values if hasattr(value, "values") else (
                value if len(names) > 1 else (value,))
            label = ids[n] if isinstance(ids, list) else getattr(value, "id", None) or \
                "-".join(getattr(v, "__name__", str(v)) for v in values)
            rows.append((label, dict(zip(names, values))))
        grids.append(rows)
    for combo in itertools.product(*grids):
        yield "-".join(label for label, _ in combo), {k: v for _, p in combo for k, v in p.items()}


def _load(path: Path) -> Any:
    """The model test module (the one pytest imported, when it collected tests/models)."""
    if path.stem in sys.modules:
        return sys.modules[path.stem]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def model_tests() -> list[object]:
    """(module, test function, keyword arguments) for each model test run through check_jit,
    with every parametrization but the backend."""
    params = []
    for path in sorted(MODELS.glob("test_model_*.py")):
        module = _load(path)
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            # Tests that run a function without check_jit (checking the compile cache, say)
            # need a GPU; the models they run are checked by the others.
            if name.startswith("test_") and "backend" in inspect.signature(fn).parameters \
                    and "check_jit(" in inspect.getsource(fn):
                for label, kwargs in _expand(fn):
                    params.append(pytest.param(module, fn, kwargs,
                                               id=f"{path.stem}.{name}[{label}]"))
    return params


def nested(x, n):
    """Control flow in control flow: a fori_loop holding a cond and a data-dependent while."""
    def outer(i, carry):
        x, total = carry
        x = lax.cond(i % 2 == 0, lambda v: v * 2, lambda v: v - 1, x)
        steps = lax.while_loop(lambda s: s[0] < s[1].sum(), lambda s: (s[0] + 1, s[1]),
                               (np.float32(0), x))[0]
        return x, total + steps
    return lax.fori_loop(0, n, outer, (x, np.float32(0)))
