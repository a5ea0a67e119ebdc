"""Runs each workload on every installed implementation and reports ratios to numpy.

Fair timing on a small machine: BLAS, numba and XLA keep worker threads spinning for a while
after a call returns (OpenBLAS about 0.1 s), and on two cores they steal time from whatever is
timed next. So every measurement starts from a quiet process (`_quiet` waits until no thread of
this process burns CPU), and the implementations are timed in interleaved rounds, in a rotating
order; an implementation's time is its best round (each round is the median of its samples).
"""

from __future__ import annotations

import ast
import inspect
import statistics
import textwrap
import time
from collections.abc import Callable

import numpy as np

from bench.workloads import COMPILE_ONLY, Workload

ROUNDS = 5          # interleaved measurement rounds per workload
QUIET_STEP = 0.01   # seconds per idle probe
QUIET_MAX = 1.0     # give up waiting for a quiet process after this long
WARM_UP_BELOW = 0.05  # calls faster than this get an untimed warm-up call in every round


def _quiet() -> float:
    """Sleep until this process's helper threads (BLAS, numba, XLA pools) stop spinning: two
    consecutive QUIET_STEP sleeps in which the whole process used under a tenth of the step in
    CPU time. Returns the seconds waited."""
    start = time.perf_counter()
    calm = 0
    while calm < 2 and time.perf_counter() - start < QUIET_MAX:
        cpu = time.process_time()
        time.sleep(QUIET_STEP)
        calm = calm + 1 if time.process_time() - cpu < 0.1 * QUIET_STEP else 0
    return time.perf_counter() - start


def _time_round(fn: Callable, args: tuple, seconds: float, max_repeats: int) -> float:
    """Median seconds per call over about `seconds`: at least 2 samples, or 1 when a call alone
    takes longer than `seconds`; calls under 0.1 ms are timed in batches."""
    times: list[float] = []
    total = 0.0
    while len(times) < max_repeats:
        if times and total >= seconds and (len(times) >= 2 or times[0] >= seconds):
            break
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


def _reason(exc: Exception) -> str:
    """A one-line reason for a skipped cell. numba's typing errors run to dozens of lines: keep
    the innermost workload line it points at and the specific complaint."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    quoted = []  # numba quotes each offending source line just above a caret
    for at in (i for i, ln in enumerate(lines) if ln == "^"):
        file_line = next((ln for ln in reversed(lines[:at]) if ln.startswith("File ")), "")
        quoted.append((f"line {file_line.rpartition(' ')[2].rstrip(':')} `{lines[at - 1]}`: ",
                       "site-packages" in file_line))
    ours = [q for q, library in quoted if not library]  # innermost line of the workload's own
    where = (ours or [q for q, _ in quoted] or [""])[0]
    raised = [i for i, ln in enumerate(lines[:-1]) if ln.endswith("specific error:")]
    specific = ("No implementation of function", "Unknown attribute", "Untyped global",
                "Use of unsupported", "Invalid use of", "Cannot ")
    text = (lines[raised[0] + 1] if raised
            else next((ln for ln in lines if ln.startswith(specific)), "")
            or next((ln for ln in lines if ln and not ln.startswith(("Failed in ", "- "))), ""))
    kind = type(exc).__name__
    return f"{kind}: {where}{text.removeprefix(kind + ': ')}"[:200]


def bind_numpy(fn: Callable) -> Callable:
    """fn(xp, a, b) as a plain function g(a, b) with that exact signature (jitc's fastest call
    path needs named positional parameters, not *args)."""
    params = list(inspect.signature(fn).parameters)[1:]
    names = ", ".join(params)
    namespace = {"fn": fn, "np": np}
    exec(f"def {fn.__name__}({names}):\n    return fn(np, {names})\n", namespace)
    return namespace[fn.__name__]


def _takes_xp(obj: object) -> bool:
    if not inspect.isfunction(obj):
        return False
    params = list(inspect.signature(obj).parameters)
    return bool(params) and params[0] == "xp"


def numba_compile(fn: Callable, parallel: bool, _done: dict | None = None) -> Callable:
    """numba.njit of a workload's own source with the `xp` parameter removed and `xp` bound to
    the numpy module. Calls to other workload functions `helper(xp, ...)` become calls of their
    compiled xp-less versions (built the same way, once per top-level compile, so no compiled
    code is shared between workloads and first-call times stay honest)."""
    import numba
    done = {} if _done is None else _done
    if fn.__name__ in done:
        return done[fn.__name__]
    lines, first_line = inspect.getsourcelines(fn)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first_line - 1)  # numba's errors then point into workloads.py
    fdef = tree.body[0]
    assert isinstance(fdef, ast.FunctionDef) and fdef.args.args[0].arg == "xp"
    fdef.args.args.pop(0)
    fdef.decorator_list = []
    helpers: list[str] = []

    class DropXp(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if (isinstance(node.func, ast.Name) and node.args
                    and isinstance(node.args[0], ast.Name) and node.args[0].id == "xp"
                    and _takes_xp(fn.__globals__.get(node.func.id))):
                node.args.pop(0)
                helpers.append(node.func.id)
            return node

    tree = ast.fix_missing_locations(DropXp().visit(tree))
    namespace = dict(fn.__globals__)
    namespace["xp"] = np
    for name in helpers:
        namespace[name] = numba_compile(fn.__globals__[name], parallel, done)
    exec(compile(tree, inspect.getsourcefile(fn) or "<workload>", "exec"), namespace)
    done[fn.__name__] = numba.njit(namespace[fn.__name__], parallel=parallel)
    return done[fn.__name__]


def implementations() -> dict[str, Callable[[Workload], Callable] | str]:
    """Name -> factory turning a workload into a callable, or a note on why it is missing."""
    import jitc
    found: dict[str, Callable[[Workload], Callable] | str] = {}
    found["numpy"] = lambda w: w.form(_no_wrap, np) if w.form else (lambda *a: w.fn(np, *a))
    found["jitc"] = lambda w: (w.form(jitc.jit, np) if w.form else
                               jitc.jit(bind_numpy(w.fn), backend=w.backend))
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_platforms", "cpu")
        found["jax"] = lambda w: _cpu_row(w) or (
            lambda f: lambda *a: jax.block_until_ready(f(*a)))(
            w.form(jax.jit, jnp) if w.form else jax.jit(lambda *a: w.fn(jnp, *a)))
    except ImportError:
        found["jax"] = "not installed (pip install -e '.[bench]')"
    try:
        import warnings

        import numba
        # parallel=True on a function with nothing to parallelise only warns; not news here.
        warnings.filterwarnings("ignore", category=numba.NumbaPerformanceWarning)
        found["numba"] = lambda w: _no_form(w) or _cpu_row(w) or numba_compile(w.fn, False)
        found["numba-par"] = lambda w: _no_form(w) or _cpu_row(w) or numba_compile(w.fn, True)
    except ImportError:
        found["numba"] = found["numba-par"] = "not installed (pip install -e '.[bench]')"
    found[TORCH] = torch_compiler()
    return found


TORCH = "torch.compile"


def torch_compiler() -> Callable[[Workload], Callable] | str:
    """torch.compile of the workload's own numpy code (TorchDynamo traces numpy calls into
    torch, Inductor compiles them, results come back as numpy arrays), with `fullgraph=True`:
    a function that would fall back to eager Python for part of its body is reported with
    Dynamo's reason rather than timed half-compiled. Inductor's one-time start-up (imports,
    probing the C++ compiler: some 10-30 s) is paid here, on a trivial function, so that a
    workload's first call is its own trace and compile."""
    try:
        import torch
    except ImportError:
        return "not installed (pip install -e '.[bench]')"
    warm = torch.compile(_warm_up, fullgraph=True)
    warm(np.ones(4, np.float32))

    def compile_workload(w: Workload) -> Callable:
        _cpu_row(w)
        if w.form is not None:
            # Dynamo specializes on Python scalars by itself: static_argnames has no
            # counterpart and is dropped.
            return w.form(lambda fun, **options: torch.compile(fun, fullgraph=True), np)
        return torch.compile(bind_numpy(w.fn), fullgraph=True)
    return compile_workload


def _warm_up(x: np.ndarray) -> np.ndarray:
    return x + 1


def _no_wrap(fun: Callable, **options: object) -> Callable:
    return fun


def _cpu_row(w: Workload) -> None:
    if w.backend != "cpu":
        raise TypeError(f"a row of jitc's {w.backend} backend (the peers run on its cpu row)")


def _no_form(w: Workload) -> None:
    if w.form is not None:
        raise TypeError("call forms are measured for jit wrappers only (numba takes "
                        "positional arguments)")


# Rows whose floor is memory traffic: each is timed beside a copy moving the same bytes.
ROOFLINE_GROUPS = ("elementwise", "fusion", "reduction")
COPY = "copy"


def roofline_copy(args: tuple, reference: object) -> dict:
    """The memory roofline of a workload on this machine, now: a jitc kernel moving as many
    bytes as the workload's arguments and result together, timed in the same rounds as the
    implementations. A workload that writes about as much as it reads gets a copy (`x + 1` on
    float32, half the bytes each way); one that writes less than a quarter of what it reads (a
    reduction) gets a read of its input (`x.sum(axis=1)`, one vector add per load), as writing
    fresh memory costs more than reading. "call" is the (function, arguments) to time; the
    caller adds the rounds."""
    import jitc
    reads = sum(np.asarray(a).nbytes for a in args)
    writes = np.asarray(reference).nbytes
    if 4 * writes < reads:
        kind, kernel = "read", _read
        source = np.ones((max(reads // (4 * READ_ROW), 1), READ_ROW), np.float32)
    else:
        kind, kernel = "copy", _touch
        source = np.ones(max((reads + writes) // 8, 1), np.float32)
    timed = jitc.jit(kernel)
    timed(source)
    return {"bytes": int(reads + writes), "kind": kind, "rounds": [],
            "call": (timed, (source,))}


def _touch(x: np.ndarray) -> np.ndarray:
    return x + 1


# The read roofline sums rows of this many float32: a sum over rows is split across threads,
# a sum to one scalar runs on one (and read 16 GB/s where `x.sum(axis=1)` read 30). Not a max:
# one that propagates NaN as numpy's does takes four vector instructions per load.
READ_ROW = 4096


def _read(x: np.ndarray) -> np.ndarray:
    return x.sum(axis=1)


# Rows whose floor is arithmetic: each is timed beside the product this machine multiplies
# float32 fastest, a square one of PEAK_SIZE, by jitc and by numpy (the faster counts).
COMPUTE_GROUPS = ("matmul", "model")
PEAK_SIZE = 512
PEAK_JITC, PEAK_NUMPY = "peak (jitc)", "peak (numpy)"


def compute_roofline(w: Workload, args: tuple) -> dict | None:
    """The compute roofline of a float workload: its flops as jitc's cost model counts them
    (jitc/ir/analysis.py: two per multiply-add of a product, one per elementwise operation)
    and two square float32 products of PEAK_SIZE, jitc's and numpy's, to time in the same
    rounds as the implementations. None for a workload with integer arguments (its operations
    are not float ones) or a call form of its own. "calls" are the (name, function, arguments)
    to time; the caller adds the rounds."""
    if w.form is not None or any(np.asarray(a).dtype.kind != "f" for a in _leaves(args)):
        return None
    import jitc
    from jitc.ir.analysis import cost_analysis
    lowered = jitc.jit(bind_numpy(w.fn), backend="interpreter").lower(*args)
    square = np.random.default_rng(1).standard_normal((PEAK_SIZE, PEAK_SIZE)).astype(
        np.float32)
    product = jitc.jit(_product)
    product(square, square)
    return {"flops": cost_analysis(lowered.module)["flops"], "peak_flops": 2 * PEAK_SIZE ** 3,
            "calls": [(PEAK_JITC, product, (square, square)),
                      (PEAK_NUMPY, _product, (square, square))]}


def _leaves(args: object) -> list:
    """The arrays of arguments that may nest them in lists and tuples (a model's layers)."""
    if isinstance(args, (list, tuple)):
        return [leaf for a in args for leaf in _leaves(a)]
    return [args]


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ b


def compile_only_row(w: Workload, args: tuple, impls: dict) -> dict:
    """jitc's trace and compile of `w` for its backend (nothing runs), the persistent cache
    off; every other implementation is n/a."""
    import jitc
    results: dict = {name: {"skipped": f"a {COMPILE_ONLY} row"} for name in impls}
    _quiet()
    start = time.perf_counter()
    jitc.jit(bind_numpy(w.fn), backend=w.backend, disk_cache=False).lower(*args).compile()
    results["jitc"] = {"first_call": time.perf_counter() - start}
    return {"workload": w.name, "group": w.group, "results": results}


def run(workloads: list[Workload], quick: bool, min_seconds: float) -> list[dict]:
    """Per workload: each implementation's first call (compile included) from a quiet process,
    then ROUNDS interleaved rounds sharing `min_seconds` per implementation; "seconds" is the
    best round's median, "rounds" all of them. Rows of ROOFLINE_GROUPS also get "roofline":
    the bytes the workload must move and a copy of as many bytes timed in the same rounds."""
    rng = np.random.default_rng(0)
    impls = implementations()
    rows = []
    for w in workloads:
        args = w.make(rng, quick)
        if w.group == COMPILE_ONLY:
            rows.append(compile_only_row(w, args, impls))
            continue
        reference = w.form(_no_wrap, np)(*args) if w.form else w.fn(np, *args)
        row: dict = {"workload": w.name, "group": w.group, "results": {}}
        live: dict[str, Callable] = {}
        warm: dict[str, float] = {}  # a second call's time: slow calls skip per-round warm-ups
        for name, factory in impls.items():
            if isinstance(factory, str):
                row["results"][name] = {"skipped": factory}
                continue
            try:
                _quiet()
                start = time.perf_counter()
                fn = factory(w)
                out = fn(*args)
                first = time.perf_counter() - start
                start = time.perf_counter()
                fn(*args)
                warm[name] = time.perf_counter() - start
                row["results"][name] = {"first_call": first, "error": _error(out, reference),
                                        "rounds": []}
                if np.asarray(out).dtype != np.asarray(reference).dtype:
                    row["results"][name]["dtype"] = str(np.asarray(out).dtype)
                live[name] = fn
            except Exception as exc:  # a peer that cannot compile a workload is reported
                row["results"][name] = {"skipped": _reason(exc)}
        max_repeats = -(-(10_000 if w.group == "dispatch" else 50) // ROUNDS)
        timed = {name: (live[name], args, row["results"][name]) for name in live}
        if w.group in ROOFLINE_GROUPS and w.backend == "cpu":
            row["roofline"] = roofline_copy(args, reference)
            timed[COPY] = (*row["roofline"].pop("call"), row["roofline"])
            warm[COPY] = 0.0
        compute = compute_roofline(w, args) if w.group in COMPUTE_GROUPS else None
        if compute is not None:
            row["compute"] = compute
            for name, fn, fn_args in compute.pop("calls"):
                compute[name] = {"rounds": []}
                timed[name] = (fn, fn_args, compute[name])
                warm[name] = 0.0
        order = list(timed)
        for r in range(ROUNDS):
            shift = r % max(len(order), 1)  # rotate, so no one is always timed first
            for name in order[shift:] + order[:shift]:
                fn, fn_args, result = timed[name]
                if "skipped" in result:
                    continue
                try:
                    _quiet()
                    if warm[name] < WARM_UP_BELOW:
                        fn(*fn_args)  # warm caches after the idle wait
                    result["rounds"].append(_time_round(fn, fn_args, min_seconds / ROUNDS,
                                                        max_repeats))
                except Exception as exc:
                    result.clear()
                    result["skipped"] = _reason(exc)
        peaks = [row["compute"][n] for n in (PEAK_JITC, PEAK_NUMPY)] if "compute" in row else []
        for result in [*row["results"].values(), row.get("roofline", {}), *peaks]:
            if "rounds" in result:
                # Other processes only ever add time: the best round is the one they disturbed
                # least (each round is already a median, so one lucky sample cannot win).
                result["seconds"] = min(result["rounds"])
        if peaks and all("seconds" in p for p in peaks):
            by, fastest = min(zip(("jitc", "numpy"), peaks), key=lambda n: n[1]["seconds"])
            row["compute"].update(peak_by=by, peak_seconds=fastest["seconds"])
        base = row["results"]["numpy"].get("seconds")
        for result in row["results"].values():
            if "seconds" in result and base:
                result["ratio"] = base / result["seconds"]
        rows.append(row)
    return rows
