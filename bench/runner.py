"""Runs each workload on every installed implementation and reports ratios to numpy."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from bench.workloads import Workload


def _time(fn: Callable, args: tuple, min_seconds: float, max_repeats: int) -> float:
    """Median seconds per call, after one warm-up call."""
    fn(*args)
    times: list[float] = []
    total = 0.0
    while (total < min_seconds or len(times) < 5) and len(times) < max_repeats:
        batch = 1
        if times and times[-1] < 1e-4:
            batch = max(1, int(1e-3 / max(times[-1], 1e-9)))
        start = time.perf_counter()
        for _ in range(batch):
            fn(*args)
        elapsed = (time.perf_counter() - start) / batch
        times.append(elapsed)
        total += elapsed * batch
    return statistics.median(times)


def _error(got: object, want: object) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(got - want))) / scale


def bind_numpy(fn: Callable) -> Callable:
    """fn(xp, a, b) as a plain function g(a, b) with that exact signature (jitc's fastest call
    path needs named positional parameters, not *args)."""
    import inspect
    params = list(inspect.signature(fn).parameters)[1:]
    names = ", ".join(params)
    namespace = {"fn": fn, "np": np}
    exec(f"def {fn.__name__}({names}):\n    return fn(np, {names})\n", namespace)
    return namespace[fn.__name__]


def implementations() -> dict[str, Callable[[Workload], Callable] | str]:
    """Name -> factory turning a workload into a callable, or a note on why it is missing."""
    import jitc
    found: dict[str, Callable[[Workload], Callable] | str] = {}
    found["numpy"] = lambda w: (lambda *a: w.fn(np, *a))
    found["jitc"] = lambda w: jitc.jit(bind_numpy(w.fn))
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")
        found["jax"] = lambda w: (lambda f: lambda *a: f(*a).block_until_ready())(
            jax.jit(lambda *a: w.fn(jnp, *a)))
    except ImportError:
        found["jax"] = "not installed (pip install -e '.[bench]')"
    try:
        import numba

        def make_numba(w: Workload) -> Callable:
            fn = w.fn
            compiled = numba.njit(lambda *a: fn(np, *a), parallel=False)
            return compiled
        found["numba"] = make_numba
    except ImportError:
        found["numba"] = "not installed (pip install -e '.[bench]')"
    return found


def run(workloads: list[Workload], quick: bool, min_seconds: float) -> list[dict]:
    rng = np.random.default_rng(0)
    impls = implementations()
    rows = []
    for w in workloads:
        args = w.make(rng, quick)
        reference = w.fn(np, *args)
        row: dict = {"workload": w.name, "group": w.group, "results": {}}
        for name, factory in impls.items():
            if isinstance(factory, str):
                row["results"][name] = {"skipped": factory}
                continue
            try:
                start = time.perf_counter()
                fn = factory(w)
                out = fn(*args)
                first = time.perf_counter() - start
                seconds = _time(fn, args, min_seconds, 10_000 if w.group == "dispatch" else 50)
                row["results"][name] = {"seconds": seconds, "first_call": first,
                                        "error": _error(out, reference)}
            except Exception as exc:  # a peer that cannot compile a workload is reported
                row["results"][name] = {"skipped": f"{type(exc).__name__}: {exc}"[:120]}
        base = row["results"]["numpy"].get("seconds")
        for result in row["results"].values():
            if "seconds" in result and base:
                result["ratio"] = base / result["seconds"]
        rows.append(row)
    return rows
