"""docs/numpy_coverage.md: every public function of numpy, numpy.linalg, numpy.fft and
numpy.lib.stride_tricks and every
ufunc, with what `jitc.jit` does with it, and how that compares with numba's list.

The statuses come from jitc's own tables, the ones tracing dispatches through: the registry
behind `Tracer.__array_function__` (`jitc.numpy._core.HANDLED`), the ufunc table
(`jitc.numpy.ufuncs.UFUNCS`), the creation functions a traced function's `np` turns into
traced arrays (`jitc.numpy.creation.TRACED_CREATION`) and the reasons jitc's errors give when
it refuses a function (`jitc.numpy.dispatch.WHY_NOT`). docs/jit.md's list of the supported
surface is generated from the same classification.

`python tests/test_docs_runnable.py --update` rewrites the page (and docs/jit.md's list);
tests/test_docs_runnable.py fails when the page is not what this module generates.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from pathlib import Path

import numpy as np

PAGE = Path(__file__).resolve().parent.parent / "docs" / "numpy_coverage.md"
NAMESPACES = {"numpy": np, "numpy.linalg": np.linalg, "numpy.fft": np.fft,
              "numpy.lib.stride_tricks": np.lib.stride_tricks}
NOT_FUNCTIONS = {"test"}  # numpy's own test runner in each namespace

# numba's documented numpy support ("Supported NumPy features" in numba's reference manual,
# numba 0.60): the functions it lists, under numpy's names. Names numpy 2 removed (asfarray,
# round_, trapz) are kept as numba lists them and reported as absent from this numpy.


def _words(text: str) -> list[str]:
    return text.split()


NUMBA_FUNCTIONS = _words("""
    all any amax amin argmax argmin cumprod cumsum max mean min prod std sum var diff median
    nancumprod nancumsum nanmax nanmean nanmedian nanmin nanpercentile nanquantile nanprod
    nanstd nansum nanvar percentile quantile nonzero
    dot kron outer trace vdot
    linalg.cholesky linalg.cond linalg.det linalg.eig linalg.eigh linalg.eigvals
    linalg.eigvalsh linalg.inv linalg.lstsq linalg.matrix_power linalg.matrix_rank linalg.norm
    linalg.pinv linalg.qr linalg.slogdet linalg.solve linalg.svd
    allclose append arange argsort argwhere array array_equal array_split asarray
    asarray_chkfinite ascontiguousarray asfarray asfortranarray atleast_1d atleast_2d
    atleast_3d bartlett bincount blackman broadcast_arrays broadcast_shapes broadcast_to clip
    column_stack concatenate convolve copy corrcoef correlate count_nonzero cov cross delete
    diag diagflat digitize dstack ediff1d empty empty_like expand_dims extract eye
    fill_diagonal flatnonzero flip fliplr flipud frombuffer full full_like geomspace hamming
    hanning histogram hstack identity indices interp intersect1d iscomplex iscomplexobj
    isclose isneginf isposinf isreal isrealobj isscalar kaiser linspace logspace nan_to_num
    ones ones_like partition ptp ravel repeat reshape resize roll roots rot90 round_ around
    searchsorted select shape sinc sort split stack swapaxes take take_along_axis transpose
    trapz tri tril tril_indices tril_indices_from trim_zeros triu triu_indices
    triu_indices_from union1d unique vander vsplit vstack where zeros zeros_like
""")
NUMBA_UFUNCS = _words("""
    add subtract multiply divide logaddexp logaddexp2 true_divide floor_divide negative power
    float_power remainder mod fmod abs absolute fabs rint sign conj conjugate exp exp2 log log2
    log10 expm1 log1p sqrt square cbrt reciprocal gcd lcm
    sin cos tan arcsin arccos arctan arctan2 hypot sinh cosh tanh arcsinh arccosh arctanh
    deg2rad rad2deg degrees radians
    bitwise_and bitwise_or bitwise_xor bitwise_not invert left_shift right_shift
    greater greater_equal less less_equal not_equal equal logical_and logical_or logical_xor
    logical_not maximum minimum fmax fmin
    isfinite isinf isnan signbit copysign nextafter modf ldexp frexp floor ceil trunc spacing
    isnat
""")


class Status(enum.Enum):
    TRACED = "traced"
    NUMPY_AT_TRACE_TIME = "numpy's own code"
    REFUSED = "refused"
    NOT_YET = "not supported yet"


def later(impl: object) -> bool:
    """A registration that only explains why the function is not traced yet."""
    return getattr(impl, "__qualname__", "").startswith("_not_yet.")


def backends() -> str:
    """The backends every op case and numpy-surface test runs on."""
    from jitcheck import BACKENDS
    return ", ".join(BACKENDS)


def classify(obj: Callable, public: str) -> tuple[Status, str]:
    """What jitc.jit does with numpy's `obj` (public name `public`, such as numpy.linalg.inv),
    and a note: where it is traced, or why not."""
    from jitc.numpy._core import HANDLED
    from jitc.numpy.creation import TRACED_CREATION
    from jitc.numpy.dispatch import WHY_NOT
    from jitc.numpy.ufuncs import UFUNCS

    if isinstance(obj, np.ufunc):
        traced = obj in UFUNCS or obj is np.matmul
    else:
        impl = HANDLED.get(obj)
        traced = (impl is not None and not later(impl)) or obj in TRACED_CREATION
    if traced:
        return Status.TRACED, "all backends"
    if public in WHY_NOT:
        return Status.REFUSED, WHY_NOT[public].split("\n")[0]
    if isinstance(obj, np.ufunc) or type(obj).__name__ == "_ArrayFunctionDispatcher" or \
            obj in HANDLED:
        return Status.NOT_YET, ""
    # No __array_function__ dispatch: numpy's code runs while tracing, on what it is given.
    return Status.NUMPY_AT_TRACE_TIME, "static arguments only; the result is a constant"


def functions(namespace: str) -> dict[str, Callable]:
    """The public functions of a numpy namespace (not its types, modules or ufuncs)."""
    module = NAMESPACES[namespace]
    found = {}
    for name in sorted(dir(module)):
        obj = getattr(module, name)
        if name.startswith("_") or name in NOT_FUNCTIONS or not callable(obj) or \
                isinstance(obj, (type, np.ufunc)) or inspect.ismodule(obj):
            continue
        found[name] = obj
    return found


def ufuncs() -> dict[str, list[str]]:
    """Each ufunc of numpy's namespace by its name, with the other names it goes by."""
    names: dict[str, list[str]] = {}
    for name in sorted(dir(np)):
        obj = getattr(np, name)
        if isinstance(obj, np.ufunc):
            names.setdefault(obj.__name__, [])
            if name != obj.__name__:
                names[obj.__name__].append(name)
    return names


def traced_names() -> tuple[list[str], list[str]]:
    """For docs/jit.md: the functions registered for tracing and those registered only to say
    why they are not traced yet, by their public names without `numpy.`."""
    from jitc.numpy._core import HANDLED
    from jitc.numpy.dispatch import public_name
    traced = [public_name(f).removeprefix("numpy.") for f, impl in HANDLED.items()
              if not later(impl)]
    pending = [public_name(f).removeprefix("numpy.") for f, impl in HANDLED.items()
               if later(impl)]
    return traced, pending


def resolve(name: str) -> Callable | None:
    """numpy's object for a name such as `linalg.solve`, or None where this numpy lacks it."""
    obj: object = np
    for part in name.split("."):
        obj = getattr(obj, part, None)
    return obj if callable(obj) else None


def _status_cell(status: Status, note: str) -> str:
    if status is Status.TRACED:
        return f"traced ({note})"
    if status is Status.NUMPY_AT_TRACE_TIME:
        return f"numpy at trace time: {note}"
    return status.value + (f": {note}" if note else "")


def _summary(rows: list[Status]) -> str:
    counts = {s: rows.count(s) for s in Status}
    return " | ".join([str(len(rows))] + [str(counts[s]) for s in Status])


def _numba_section() -> list[str]:
    from jitc.numpy.ufuncs import UFUNCS
    listed = sorted(set(NUMBA_FUNCTIONS))
    present = {n: resolve(n) for n in listed}
    missing_here = [n for n, obj in present.items() if obj is None]
    status = {n: classify(obj, f"numpy.{n}")[0] for n, obj in present.items() if obj is not None}
    traced = [n for n, s in status.items() if s is Status.TRACED]
    static = [n for n, s in status.items() if s is Status.NUMPY_AT_TRACE_TIME]
    lacking = [n for n, s in status.items() if s in (Status.NOT_YET, Status.REFUSED)]
    refused = [n for n in lacking if status[n] is Status.REFUSED]
    numba_ufuncs = sorted({getattr(np, n).__name__ for n in NUMBA_UFUNCS})
    traced_ufuncs = {u.__name__ for u in UFUNCS} | {"matmul"}
    lacking_ufuncs = [n for n in numba_ufuncs if n not in traced_ufuncs]

    def names(items: list[str]) -> str:
        return ", ".join(f"`{n}`" for n in items) or "none"

    return [
        "## Against numba's list",
        "",
        "numba's reference manual (\"Supported NumPy features\", numba 0.60) lists "
        f"{len(listed)} numpy functions (numpy and numpy.linalg; numba has no numpy.fft) and "
        f"{len(numba_ufuncs)} ufuncs. Of the {len(status)} functions this numpy still has, "
        f"jitc traces **{len(traced)}**; {len(static)} more run as numpy at trace time on "
        f"static arguments ({names(static)}); it lacks **{len(lacking)}**"
        f"{f' ({len(refused)} of them refused for a stated reason, marked *)' if refused else ''}"
        f": {', '.join(f'`{n}`' + ('*' if n in refused else '') for n in lacking)}.",
        "",
        f"Names numba lists that numpy {np.__version__} no longer has: {names(missing_here)}.",
        "",
        f"Of numba's ufuncs jitc traces **{len(numba_ufuncs) - len(lacking_ufuncs)}** and lacks "
        f"{len(lacking_ufuncs)}: {names(lacking_ufuncs)}.",
        "",
    ]


def coverage_page() -> str:
    lines = [
        "# numpy coverage",
        "",
        "<!-- generated by tests/numpy_coverage.py from jitc's tables; "
        "`python tests/test_docs_runnable.py --update` rewrites it -->",
        "",
        f"What `jitc.jit` does with each public function of numpy {np.__version__}'s main "
        "namespace, `numpy.linalg`, `numpy.fft` and `numpy.lib.stride_tricks`, and with each "
        "ufunc. The statuses:",
        "",
        f"- **traced**: the call on traced arrays becomes IR ops, which every backend lowers "
        f"(the op table's tests run each op on {backends()});",
        "- **numpy at trace time**: numpy does not dispatch it to jitc, so numpy's own code "
        "runs while the function is traced: right for static arguments (shapes, sizes, "
        "constant arrays), whose result becomes a constant, not for traced arrays;",
        "- **refused**: jitc raises an error with the reason shown;",
        "- **not supported yet**: jitc raises an error naming the function and the place.",
        "",
        "[docs/jit.md](jit.md#the-supported-numpy-surface) says how the traced functions "
        "behave.",
        "",
        "| namespace | functions | " + " | ".join(s.value for s in Status) + " |",
        "|---|---|" + "---|" * len(Status),
    ]
    tables: list[str] = []
    for namespace in NAMESPACES:
        rows = []
        statuses = []
        for name, obj in functions(namespace).items():
            status, note = classify(obj, f"{namespace}.{name}")
            statuses.append(status)
            rows.append(f"| `{name}` | {_status_cell(status, note)} |")
        lines.append(f"| `{namespace}` | {_summary(statuses)} |")
        tables += [f"## `{namespace}`", "", "| function | status |", "|---|---|", *rows, ""]
    rows, statuses = [], []
    for name, aliases in ufuncs().items():
        status, note = classify(getattr(np, name), f"numpy.{name}")
        statuses.append(status)
        also = f" (also {', '.join(f'`{a}`' for a in aliases)})" if aliases else ""
        rows.append(f"| `{name}`{also} | {_status_cell(status, note)} |")
    lines.append(f"| ufuncs | {_summary(statuses)} |")
    tables += ["## Ufuncs", "", "| ufunc | status |", "|---|---|", *rows, ""]
    return "\n".join(lines + [""] + _numba_section() + tables)


if __name__ == "__main__":
    import sys
    sys.path.insert(0, str(PAGE.parent.parent))
    PAGE.write_text(coverage_page())
    print(f"{PAGE.name} updated")
