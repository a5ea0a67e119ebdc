"""Accuracy, special values, vectorization and NVPTX code generation of vmath.

Every kernel is JIT-compiled in the loop the CPU backend would generate
(``out[i] = f(x[i], y[i])``) through the O3 pipeline with loop vectorization, so the
vectorized code is what gets measured. Errors are in ulps of the target type against
a wider reference: numpy in float64 for float32 results, numpy in long double (x87
extended precision, i.e. the C library's ``expl``, ``powl``...) for float64 results.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from functools import cache

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llvmlite import ir

from jitc.backends.llvm import vmath
from jitc.backends.llvm.target import host_has
from jitc.backends.llvm.vmath_base import scale_with_ldexp

F32, F64 = np.float32, np.float64
UNARY = ["exp", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos"]
BINARY = ["pow", "atan2"]
DTYPES = [F32, F64]
LD = np.longdouble
EXTENDED_LD = np.finfo(LD).nmant >= 63
needs_extended = pytest.mark.skipif(
    not EXTENDED_LD, reason="float64 references need an extended-precision long double"
)

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()


# -- JIT harness ---------------------------------------------------------------------


def _ir_type(dtype: type) -> ir.Type:
    return ir.FloatType() if dtype is F32 else ir.DoubleType()


def build_loop(module: ir.Module, fname: str, name: str, ty: ir.Type) -> ir.Function:
    """``void fname(T* x, T* y, T* out, i64 n)`` applying vmath's ``name`` elementwise
    (``name`` "fmul": a plain multiplication, the baseline for vector widths)."""
    ptr, i64 = ir.PointerType(), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i64]), fname)
    x_ptr, y_ptr, out_ptr, n = fn.args
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    args = [b.load(b.gep(x_ptr, [i], source_etype=ty), typ=ty)]
    if name in BINARY:
        args.append(b.load(b.gep(y_ptr, [i], source_etype=ty), typ=ty))
    result = b.fmul(args[0], args[0]) if name == "fmul" else vmath.MATH_FUNCTIONS[name](b, *args)
    b.store(result, b.gep(out_ptr, [i], source_etype=ty))
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return fn


def host_target_machine(opt: int = 3, cpu: str | None = None) -> llvm.TargetMachine:
    """The host's target machine, or (``cpu``) the host's features tuned as another CPU."""
    return llvm.Target.from_default_triple().create_target_machine(
        cpu=cpu or llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=opt,
    )


def run_o3_pipeline(mod: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    inline = llvm.create_new_module_pass_manager()  # as target.optimize: vector variants
    inline.add_always_inliner_pass()
    inline.run(mod, pb)


def parse_for(module: ir.Module, tm: llvm.TargetMachine) -> llvm.ModuleRef:
    mod = llvm.parse_assembly(str(module))
    mod.triple, mod.data_layout = tm.triple, str(tm.target_data)
    mod.verify()
    return mod


class Kernel:
    """A JIT-compiled elementwise loop; keeps its execution engine alive."""

    def __init__(self, name: str, dtype: type, optimize: bool = True,
                 native_ldexp: bool | None = None) -> None:
        self.dtype = dtype
        module = ir.Module(name=f"test_{name}")
        # Like the CPU backend: scaling by llvm.ldexp where the host has vscalef.
        if host_has("avx512f") if native_ldexp is None else native_ldexp:
            scale_with_ldexp(module)
        build_loop(module, "kernel", name, _ir_type(dtype))
        tm = host_target_machine(3 if optimize else 0)
        mod = parse_for(module, tm)
        if optimize:
            run_o3_pipeline(mod, tm)
        self.optimized_ir = str(mod)
        self.engine = llvm.create_mcjit_compiler(mod, tm)  # owns tm from here on
        self.engine.finalize_object()
        proto = ctypes.CFUNCTYPE(
            None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64
        )
        self.cfunc = proto(self.engine.get_function_address("kernel"))

    def __call__(self, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=self.dtype)
        y = x if y is None else np.ascontiguousarray(np.broadcast_to(y, x.shape), self.dtype)
        out = np.empty_like(x)
        self.cfunc(x.ctypes.data, y.ctypes.data, out.ctypes.data, x.size)
        return out


@cache
def kernel(name: str, dtype: type, optimize: bool = True,
           native_ldexp: bool | None = None) -> Kernel:
    return Kernel(name, dtype, optimize, native_ldexp)


# -- references and ulp errors -------------------------------------------------------


def reference(name: str, dtype: type, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """The function in a wider type: float64 for float32, long double for float64."""
    wide = F64 if dtype is F32 else LD
    with np.errstate(all="ignore"):  # signalling NaNs raise "invalid" on conversion
        xw = np.asarray(x).astype(wide)
        yw = None if y is None else np.asarray(y).astype(wide)
        if name == "logistic":
            return 1 / (1 + np.exp(-xw))
        if name == "pow":
            return np.power(xw, yw)
        if name == "atan2":
            return np.arctan2(xw, yw)
        return getattr(np, name)(xw)


def ulp_error(got: np.ndarray, ref: np.ndarray, dtype: type) -> np.ndarray:
    """|got - ref| in ulps of ref at dtype's precision (subnormal ulp at the bottom).

    inf in ``got`` counts as 2^(emax+1), the first value past the largest finite one,
    so results at the overflow threshold are scored like any other rounding. NaN must
    match NaN and an infinite reference must be matched exactly.
    """
    fi = np.finfo(dtype)
    wide = ref.dtype.type
    with np.errstate(all="ignore"):
        g = got.astype(wide)
        g_num = np.where(np.isinf(g), np.sign(g) * np.ldexp(wide(1), fi.maxexp), g)
        exponent = np.frexp(np.abs(ref))[1].astype(np.int64) - 1
        ulp = np.ldexp(wide(1), np.maximum(exponent, fi.minexp) - fi.nmant)
        err = (np.abs(g_num - ref) / ulp).astype(F64)
        rounded = ref.astype(dtype)
    err = np.where(np.isinf(rounded) & (got == rounded), 0.0, err)
    err = np.where(np.isinf(ref), np.where(g == ref, 0.0, np.inf), err)
    ref_nan, got_nan = np.isnan(ref), np.isnan(g)
    return np.where(ref_nan | got_nan, np.where(ref_nan & got_nan, 0.0, np.inf), err)


def assert_within(name: str, dtype: type, x: np.ndarray, y: np.ndarray | None = None) -> None:
    got = kernel(name, dtype)(x, y)
    err = ulp_error(got, reference(name, dtype, x, y), dtype)
    bound = vmath.ULP_BOUNDS[name][0 if dtype is F32 else 1]
    i = int(np.argmax(err))
    where = f"x={x[i]!r}" + ("" if y is None else f", y={y[i]!r}")
    assert err[i] <= bound, (
        f"{name} {dtype.__name__}: {err[i]:.3f} ulp > {bound} at {where}: got {got[i]!r}"
    )


# -- inputs --------------------------------------------------------------------------


def all_binades(dtype: type, n: int, rng: np.random.Generator) -> np.ndarray:
    """Uniformly random bit patterns: every exponent (subnormals, inf, NaN included)
    is equally represented, i.e. a stratified sweep over the binades."""
    if dtype is F32:
        return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(F32)
    return rng.integers(0, 2**64, n, dtype=np.uint64).view(F64)


def around(dtype: type, center: float, count: int) -> np.ndarray:
    """``count`` consecutive floats on each side of ``center`` (threshold probing)."""
    c = np.array(center, dtype=dtype)
    steps = np.arange(-count, count + 1)
    if dtype is F32:
        return (c.view(np.int32) + steps.astype(np.int32)).view(F32)
    return (c.view(np.int64) + steps.astype(np.int64)).view(F64)


def near_half_pi_multiples(dtype: type, limit: float, rng: np.random.Generator) -> np.ndarray:
    """Floats nearest to k*pi/2 (and their neighbours): where reduction loses the most."""
    k = np.unique(np.exp(rng.uniform(0, np.log(limit / 1.6), 20_000)).astype(np.int64))
    half_pi = LD("1.57079632679489661923132169163975144")
    base = (k.astype(LD) * half_pi).astype(dtype)
    up = np.nextafter(base, dtype(np.inf))
    down = np.nextafter(base, dtype(-np.inf))
    both = np.concatenate([base, up, down])
    return np.concatenate([both, -both])


# Dense sweeps of the interesting part of each domain plus its thresholds.
DOMAINS: dict[str, tuple[float, float]] = {
    "exp": (-110.0, 90.0),
    "expm1": (-25.0, 90.0),
    "log": (0.0, 8.0),
    "log1p": (-1.0, 8.0),
    "tanh": (-12.0, 12.0),
    "logistic": (-110.0, 110.0),
    "sin": (-20.0, 20.0),
    "cos": (-20.0, 20.0),
}
THRESHOLDS: dict[str, list[float]] = {
    "exp": [88.72283935546875, 709.782712893384, -87.33654475055310, -103.97207708,
            -708.3964185322641, -745.1332191019411, 0.0],
    "expm1": [88.72283935546875, 709.782712893384, -17.32868, 0.0, 0.34657359, -0.34657359],
    "log": [1.0, 0.0, 2.0 ** -126, 2.0 ** -1022, 0.70710678, 1.41421356],
    "log1p": [-1.0, 0.0, -0.29289322, 0.41421356, 1.0],
    "tanh": [0.55, 0.0, 9.010913, 19.06154747],
    "logistic": [0.0, -87.33654475055310, -103.97207708, -708.3964185322641, 16.635532],
    "sin": [0.0, 0.78539816, 1.57079633],
    "cos": [0.0, 0.78539816, 1.57079633],
}


def unary_inputs(name: str, dtype: type) -> np.ndarray:
    rng = np.random.default_rng(2 * UNARY.index(name) + (dtype is F64))
    n = 2_000_000 if dtype is F32 else 400_000
    parts = [all_binades(dtype, n, rng), rng.uniform(*DOMAINS[name], n).astype(dtype)]
    if name == "log":
        parts.append(rng.uniform(0.5, 2.0, n // 2).astype(dtype))
    if name == "log1p":
        parts.append(rng.uniform(-0.5, 0.5, n // 2).astype(dtype))
    for t in THRESHOLDS[name]:
        if abs(t) <= np.finfo(dtype).max:
            parts.extend([around(dtype, t, 3000), around(dtype, -t, 3000)])
    if name in ("sin", "cos"):
        limit = vmath.TRIG_DOMAIN[0 if dtype is F32 else 1]
        mags = np.exp(rng.uniform(0.0, np.log(limit), n))
        parts.append((mags * rng.choice([-1.0, 1.0], n)).astype(dtype))
        parts.append(near_half_pi_multiples(dtype, limit, rng))
    x = np.concatenate(parts)
    if name in ("sin", "cos"):
        x = x[np.abs(x) < vmath.TRIG_DOMAIN[0 if dtype is F32 else 1]]
    return x


def binary_inputs(name: str, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7 if dtype is F32 else 8)
    n = 500_000 if dtype is F32 else 200_000
    xs, ys = [all_binades(dtype, n, rng)], [all_binades(dtype, n, rng)]
    if name == "atan2":
        xs.append(rng.uniform(-10, 10, n).astype(dtype))
        ys.append(rng.uniform(-10, 10, n).astype(dtype))
        # Polar samples over many magnitudes, and ratios at the octant switch points.
        angle, radius = rng.uniform(-np.pi, np.pi, n), np.exp(rng.uniform(-80, 80, n))
        xs.append((radius * np.sin(angle)).astype(dtype))
        ys.append((radius * np.cos(angle)).astype(dtype))
        base = rng.uniform(-1e3, 1e3, n).astype(dtype)
        ratio = rng.choice([0.5, 1.0, 2.0], n) * (1 + rng.uniform(-1e-5, 1e-5, n))
        xs.append((base * ratio).astype(dtype))
        ys.append(base)
        return np.concatenate(xs), np.concatenate(ys)
    xs[0] = np.abs(xs[0])
    ys[0] = rng.uniform(-3, 3, n).astype(dtype)
    xs.append(rng.uniform(0, 4, n).astype(dtype))
    ys.append(rng.uniform(-60, 60, n).astype(dtype))
    # x near 1 with y large enough that y*log(x) spans the whole exponent range.
    mant = np.finfo(dtype).nmant
    near1 = 1 + rng.choice([-1, 1], n) * np.ldexp(rng.uniform(0.5, 1, n), rng.integers(-mant, 0, n))
    near1 = near1.astype(dtype)
    log_max = 88.0 if dtype is F32 else 709.0
    xs.append(near1)
    ys.append((rng.uniform(-log_max, log_max, n) / np.log(near1.astype(F64))).astype(dtype))
    # Negative bases with integral exponents (odd and even).
    xs.append(-rng.uniform(0, 3, n).astype(dtype))
    ys.append(rng.integers(-40, 40, n).astype(dtype))
    # Results around the overflow and underflow thresholds.
    base = rng.uniform(1.5, 100, n).astype(dtype)
    scale = rng.choice([-1.19, 1.0], n) * rng.uniform(0.97, 1.02, n)
    xs.append(base)
    ys.append((scale * log_max / np.log(base.astype(F64))).astype(dtype))
    return np.concatenate(xs), np.concatenate(ys)


# -- accuracy ------------------------------------------------------------------------


def _skip_f64_without_reference(dtype: type) -> None:
    if dtype is F64 and not EXTENDED_LD:
        pytest.skip("float64 references need an extended-precision long double")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", UNARY)
def test_unary_accuracy(name: str, dtype: type) -> None:
    _skip_f64_without_reference(dtype)
    assert_within(name, dtype, unary_inputs(name, dtype))


def test_single_word_exp_f32_where_its_roundings_weigh_most() -> None:
    """float32 exp rounds r and its small term in single words: its worst cases are results
    just below 1 (r near -ln2/2) and |n| near 126, where r's low word is largest (an earlier
    form that dropped it there was 1.96 ulp off at x = 86.99)."""
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(lo, hi, 400_000) for lo, hi in
                        [(-0.36, 0.0), (80.0, 88.7), (-103.9, -80.0)]]).astype(F32)
    assert_within("exp", F32, x)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", BINARY)
def test_binary_accuracy(name: str, dtype: type) -> None:
    _skip_f64_without_reference(dtype)
    x, y = binary_inputs(name, dtype)
    assert_within(name, dtype, x, y)


def _hyp_floats(dtype: type) -> st.SearchStrategy[float]:
    return st.floats(width=32 if dtype is F32 else 64)


HYP = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", BINARY)
def test_binary_hypothesis(name: str, dtype: type) -> None:
    """Hypothesis is good at the corners sweeps miss: subnormal/huge mixes, exact
    integers, signed zeros against infinities."""
    _skip_f64_without_reference(dtype)

    @HYP
    @given(_hyp_floats(dtype), _hyp_floats(dtype))
    def check(a: float, b: float) -> None:
        assert_within(name, dtype, np.array([a], dtype), np.array([b], dtype))

    check()


@needs_extended
@pytest.mark.parametrize("name", UNARY)
def test_unary_hypothesis_f64(name: str) -> None:
    limit = vmath.TRIG_DOMAIN[1] if name in ("sin", "cos") else np.inf

    @HYP
    @given(_hyp_floats(F64).filter(lambda v: not abs(v) >= limit))
    def check(a: float) -> None:
        assert_within(name, F64, np.array([a], F64))

    check()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_beyond_domain_stays_bounded(name: str, dtype: type) -> None:
    rng = np.random.default_rng(5)
    limit = vmath.TRIG_DOMAIN[0 if dtype is F32 else 1]
    fmax = float(np.finfo(dtype).max)
    x = np.exp(rng.uniform(np.log(limit), np.log(fmax), 200_000)).astype(dtype)
    x = np.concatenate([x, -x, np.array([fmax, -fmax], dtype)])
    got = kernel(name, dtype)(x)
    assert np.all(np.abs(got) <= 1.0), "finite input produced a value outside [-1, 1] or NaN"


def test_symmetry_is_exact() -> None:
    """sin and tanh are exactly odd, cos exactly even (the slow exhaustive test relies
    on it to sweep one sign only)."""
    rng = np.random.default_rng(9)
    for dtype in DTYPES:
        x = np.abs(all_binades(dtype, 100_000, rng))
        for name, odd in (("sin", True), ("tanh", True), ("cos", False)):
            f = kernel(name, dtype)
            want = -f(x) if odd else f(x)
            np.testing.assert_array_equal(f(-x), want, err_msg=f"{name} {dtype}")


@pytest.mark.slow
@pytest.mark.parametrize("name", UNARY)
def test_exhaustive_f32(name: str) -> None:
    """Every float32 input (a few minutes per function). Odd/even functions sweep the
    non-negative half; sin/cos stop at their stated domain."""
    f = kernel(name, F32)
    bound = vmath.ULP_BOUNDS[name][0]
    limit = vmath.TRIG_DOMAIN[0] if name in ("sin", "cos") else np.inf
    top = 1 << (31 if name in ("sin", "cos", "tanh") else 32)
    chunk = 1 << 24
    worst = 0.0
    for start in range(0, top, chunk):
        bits = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32)
        x = bits.view(F32)
        x = x[~(np.abs(x) >= limit)]
        if x.size == 0:
            continue
        got = f(x)
        ref = reference(name, F32, x)
        # Cheap conservative screen (the ulp of the value below the rounded reference
        # is never larger than the true ulp); exact scoring only where it fails.
        with np.errstate(all="ignore"):
            r32 = np.abs(ref.astype(F32))
            ulp = np.spacing(np.nextafter(r32, F32(0))).astype(F64)
            ok = np.abs(got.astype(F64) - ref) <= bound * ulp
        suspect = ~ok
        if suspect.any():
            err = ulp_error(got[suspect], ref[suspect], F32)
            worst = max(worst, float(err.max()))
            i = int(np.argmax(err))
            assert err[i] <= bound, f"{name}({x[suspect][i]!r}): {err[i]:.3f} ulp > {bound}"
    assert worst <= bound


# -- special values ------------------------------------------------------------------

INF, NAN = float("inf"), float("nan")
PI = np.pi

# (function, arguments, expected) straight from C99 Annex F; signed zeros matter.
SPECIAL_CASES: list[tuple[str, tuple[float, ...], float]] = [
    ("exp", (0.0,), 1.0), ("exp", (-0.0,), 1.0), ("exp", (INF,), INF), ("exp", (-INF,), 0.0),
    ("exp", (NAN,), NAN), ("exp", (1e4,), INF), ("exp", (-1e4,), 0.0),
    ("expm1", (0.0,), 0.0), ("expm1", (-0.0,), -0.0), ("expm1", (INF,), INF),
    ("expm1", (-INF,), -1.0), ("expm1", (NAN,), NAN), ("expm1", (1e4,), INF),
    ("expm1", (-1e4,), -1.0),
    ("log", (0.0,), -INF), ("log", (-0.0,), -INF), ("log", (1.0,), 0.0), ("log", (-1.0,), NAN),
    ("log", (INF,), INF), ("log", (-INF,), NAN), ("log", (NAN,), NAN),
    ("log1p", (0.0,), 0.0), ("log1p", (-0.0,), -0.0), ("log1p", (-1.0,), -INF),
    ("log1p", (-2.0,), NAN), ("log1p", (INF,), INF), ("log1p", (-INF,), NAN),
    ("log1p", (NAN,), NAN),
    ("tanh", (0.0,), 0.0), ("tanh", (-0.0,), -0.0), ("tanh", (INF,), 1.0),
    ("tanh", (-INF,), -1.0), ("tanh", (NAN,), NAN), ("tanh", (50.0,), 1.0),
    ("tanh", (-50.0,), -1.0),
    ("logistic", (0.0,), 0.5), ("logistic", (-0.0,), 0.5), ("logistic", (INF,), 1.0),
    ("logistic", (-INF,), 0.0), ("logistic", (NAN,), NAN), ("logistic", (1e4,), 1.0),
    ("logistic", (-1e4,), 0.0),
    ("sin", (0.0,), 0.0), ("sin", (-0.0,), -0.0), ("sin", (INF,), NAN), ("sin", (-INF,), NAN),
    ("sin", (NAN,), NAN),
    ("cos", (0.0,), 1.0), ("cos", (-0.0,), 1.0), ("cos", (INF,), NAN), ("cos", (-INF,), NAN),
    ("cos", (NAN,), NAN),
    ("pow", (NAN, 0.0), 1.0), ("pow", (INF, -0.0), 1.0), ("pow", (1.0, NAN), 1.0),
    ("pow", (1.0, -INF), 1.0), ("pow", (-1.0, INF), 1.0), ("pow", (-1.0, -INF), 1.0),
    ("pow", (NAN, 1.0), NAN), ("pow", (2.0, NAN), NAN),
    ("pow", (-8.0, 1.0 / 3.0), NAN), ("pow", (-2.0, 0.5), NAN), ("pow", (-1.0, 2.5), NAN),
    ("pow", (-2.0, 3.0), -8.0), ("pow", (-2.0, -3.0), -0.125), ("pow", (-2.0, 2.0), 4.0),
    ("pow", (0.0, -3.0), INF), ("pow", (-0.0, -3.0), -INF), ("pow", (-0.0, -2.0), INF),
    ("pow", (-0.0, -0.5), INF), ("pow", (0.0, 3.0), 0.0), ("pow", (-0.0, 3.0), -0.0),
    ("pow", (-0.0, 2.0), 0.0), ("pow", (-0.0, 0.5), 0.0), ("pow", (-0.0, -INF), INF),
    ("pow", (0.5, -INF), INF), ("pow", (-0.5, -INF), INF), ("pow", (2.0, -INF), 0.0),
    ("pow", (-2.0, -INF), 0.0), ("pow", (0.5, INF), 0.0), ("pow", (-2.0, INF), INF),
    ("pow", (-INF, -3.0), -0.0), ("pow", (-INF, -2.0), 0.0), ("pow", (-INF, -0.5), 0.0),
    ("pow", (-INF, 3.0), -INF), ("pow", (-INF, 2.0), INF), ("pow", (-INF, 0.5), INF),
    ("pow", (INF, -1.0), 0.0), ("pow", (INF, 0.5), INF), ("pow", (2.0, 1e6), INF),
    ("pow", (2.0, -1e6), 0.0), ("pow", (-2.0, 1e6 + 1), -INF), ("pow", (2.0, 10.0), 1024.0),
    ("atan2", (0.0, 0.0), 0.0), ("atan2", (-0.0, 0.0), -0.0), ("atan2", (0.0, -0.0), PI),
    ("atan2", (-0.0, -0.0), -PI), ("atan2", (0.0, -1.0), PI), ("atan2", (-0.0, -1.0), -PI),
    ("atan2", (0.0, 1.0), 0.0), ("atan2", (-0.0, 1.0), -0.0), ("atan2", (1.0, 0.0), PI / 2),
    ("atan2", (-1.0, -0.0), -PI / 2), ("atan2", (1.0, -INF), PI), ("atan2", (-1.0, -INF), -PI),
    ("atan2", (1.0, INF), 0.0), ("atan2", (-1.0, INF), -0.0), ("atan2", (INF, 1.0), PI / 2),
    ("atan2", (-INF, -1.0), -PI / 2), ("atan2", (INF, -INF), 3 * PI / 4),
    ("atan2", (-INF, -INF), -3 * PI / 4), ("atan2", (INF, INF), PI / 4),
    ("atan2", (-INF, INF), -PI / 4), ("atan2", (NAN, 1.0), NAN), ("atan2", (1.0, NAN), NAN),
    ("atan2", (1.0, 1.0), PI / 4), ("atan2", (-1.0, -1.0), -3 * PI / 4),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_special_values(dtype: type) -> None:
    failures = []
    for name, args, expected in SPECIAL_CASES:
        arrays = [np.array([a], dtype) for a in args]
        got = kernel(name, dtype)(*arrays)[0]
        want = dtype(expected)
        same = (np.isnan(got) and np.isnan(want)) or (
            got == want and np.signbit(got) == np.signbit(want)
        )
        if not same:
            failures.append(f"{name}{args} = {got!r}, expected {want!r}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", BINARY)
def test_binary_special_grid_matches_libm(name: str, dtype: type) -> None:
    """Every pair from a grid of special operands behaves like the C library (numpy)."""
    fi = np.finfo(dtype)
    grid = [0.0, 1.0, 0.5, 2.0, 3.0, 2.5, 1.5, INF, float(fi.max), float(fi.tiny),
            float(fi.smallest_subnormal), 1e-30, 7.0, 1e10]
    vals = np.array(grid + [-v for v in grid] + [NAN], dtype)
    x, y = (a.ravel() for a in np.meshgrid(vals, vals))
    got = kernel(name, dtype)(x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y) if name == "pow" else np.arctan2(x, y)
    exact = np.isnan(want) | np.isinf(want) | (want == 0)
    mismatch = exact & ~(
        (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))
    )
    assert not mismatch.any(), [(x[i], y[i], got[i], want[i]) for i in np.where(mismatch)[0]]
    if dtype is F32 or EXTENDED_LD:
        err = ulp_error(got, reference(name, dtype, x, y), dtype)
        bound = vmath.ULP_BOUNDS[name][0 if dtype is F32 else 1]
        assert err.max() <= bound


# -- code generation -----------------------------------------------------------------


def _called_functions(ir_text: str) -> set[str]:
    return set(re.findall(r"call [^@]*@\"?([\w.$]+)\"?\(", ir_text))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_vectorizes_without_libm_calls(dtype: type) -> None:
    """After O3 every kernel is inlined, widened to vectors and calls only intrinsics."""
    elem = "float" if dtype is F32 else "double"
    for name in UNARY + BINARY:
        text = kernel(name, dtype).optimized_ir
        widths = {int(w) for w in re.findall(rf"<(\d+) x {elem}>", text)}
        assert widths and max(widths) >= 4, f"{name} {elem}: loop was not vectorized"
        # The exact reduction of huge sin/cos arguments is a call, on the cold path only.
        foreign = {f for f in _called_functions(text) if not f.startswith("llvm.")
                   and not re.fullmatch(r"jitc_vmath_(sin|cos)_huge_f(32|64)", f)}
        assert not foreign, f"{name} {elem}: calls {sorted(foreign)}"
        assert vmath.HELPER_PREFIX not in text, f"{name} {elem}: helper was not inlined"


def vector_lanes(name: str, dtype: type, cpu: str | None) -> int:
    """The widest vector of ``dtype`` in the O3 loop of ``name`` tuned for ``cpu``."""
    module = ir.Module(name=f"width_{name}")
    if host_has("avx512f"):
        scale_with_ldexp(module)
    build_loop(module, "kernel", name, _ir_type(dtype))
    tm = host_target_machine(3, cpu)
    mod = parse_for(module, tm)
    run_o3_pipeline(mod, tm)
    element = "float" if dtype is F32 else "double"
    return max(map(int, re.findall(rf"<(\d+) x {element}>", str(mod))), default=1)


# LLVM tunes some AVX-512 CPUs for 256-bit vectors (rocketlake, skylake-avx512) and others for
# 512 (emeraldrapids, znver5); hosts of one machine kind differ. vmath must vectorize exactly
# as wide as the target vectorizes a plain multiplication, whatever that width is.
@pytest.mark.parametrize("cpu", [None, "rocketlake", "skylake-avx512", "sapphirerapids",
                                 "znver4"], ids=lambda c: c or "host")
def test_vmath_vectorizes_at_the_targets_preferred_width(cpu: str | None) -> None:
    if "+avx512f" not in llvm.get_host_cpu_features().flatten():
        pytest.skip("host has no AVX-512")
    for dtype in DTYPES:
        plain = vector_lanes("fmul", dtype, cpu)
        assert plain * np.dtype(dtype).itemsize >= 32, (cpu, dtype, plain)
        for name in ("exp", "tanh", "log"):
            assert vector_lanes(name, dtype, cpu) == plain, (cpu, dtype, name)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_unoptimized_module_agrees(dtype: type) -> None:
    """Without the optimizer the helpers stay real calls; results must not change
    (this would catch reliance on poison or on optimizer-specific folding)."""
    rng = np.random.default_rng(11)
    x = np.concatenate([all_binades(dtype, 4000, rng), rng.uniform(-5, 5, 4000).astype(dtype)])
    y = np.concatenate([rng.uniform(-3, 3, 4000).astype(dtype), all_binades(dtype, 4000, rng)])
    for name in UNARY + BINARY:
        args = (x, y) if name in BINARY else (x,)
        fast, slow = kernel(name, dtype)(*args), kernel(name, dtype, optimize=False)(*args)
        np.testing.assert_array_equal(fast, slow, err_msg=name)


def test_vector_operands() -> None:
    """Emitters accept vector types directly (e.g. for an SLP-style backend)."""
    module = ir.Module(name="test_vector_ops")
    ptr = ir.PointerType()
    shapes = {F32: ir.VectorType(ir.FloatType(), 4), F64: ir.VectorType(ir.DoubleType(), 2)}
    for dtype, vty in shapes.items():
        for name in UNARY + BINARY:
            fn = ir.Function(
                module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr]), f"{name}_{dtype.__name__}"
            )
            b = ir.IRBuilder(fn.append_basic_block())
            args = [b.load(fn.args[0], typ=vty)]
            if name in BINARY:
                args.append(b.load(fn.args[1], typ=vty))
            b.store(vmath.MATH_FUNCTIONS[name](b, *args), fn.args[2])
            b.ret_void()
    tm = host_target_machine()
    mod = parse_for(module, tm)
    run_o3_pipeline(mod, tm)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    rng = np.random.default_rng(3)
    for dtype, vty in shapes.items():
        for name in UNARY + BINARY:
            x = rng.uniform(-3, 3, vty.count).astype(dtype)
            y = rng.uniform(0.5, 3, vty.count).astype(dtype)
            out = np.empty_like(x)
            proto(engine.get_function_address(f"{name}_{dtype.__name__}"))(
                x.ctypes.data, y.ctypes.data, out.ctypes.data
            )
            want = kernel(name, dtype)(x, y) if name in BINARY else kernel(name, dtype)(x)
            np.testing.assert_array_equal(out, want, err_msg=f"{name} {dtype.__name__}")


def test_rejects_half_and_integer_operands() -> None:
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.HalfType(), ir.IntType(32)]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    with pytest.raises(TypeError, match="fpext"):
        vmath.emit_exp(b, fn.args[0])
    with pytest.raises(TypeError):
        vmath.emit_sin(b, fn.args[1])
    with pytest.raises(TypeError, match="one type"):
        vmath.emit_pow(b, b.fpext(fn.args[0], ir.FloatType()), ir.Constant(ir.DoubleType(), 2))


def test_registry_and_helper_reuse() -> None:
    assert set(vmath.MATH_FUNCTIONS) == set(UNARY + BINARY)
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(b.fadd(vmath.emit_exp(b, fn.args[0]), vmath.emit_exp(b, fn.args[0])))
    helpers = [g for g in module.globals if g.startswith(vmath.HELPER_PREFIX)]
    assert helpers == [f"{vmath.HELPER_PREFIX}exp.f32"], "one shared helper per function/type"


def _nvptx_assembly(optimize: bool) -> str:
    module = ir.Module(name="vmath_nvptx")
    module.triple = "nvptx64-nvidia-cuda"  # as the CUDA backend's: no CPU vector variants
    for dtype in DTYPES:
        for name in UNARY + BINARY:
            fn = build_loop(module, f"k_{name}_{dtype.__name__}", name, _ir_type(dtype))
            fn.calling_convention = "ptx_kernel"
    tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(
        cpu="sm_80", opt=3 if optimize else 0
    )
    mod = parse_for(module, tm)
    if optimize:
        run_o3_pipeline(mod, tm)
    return tm.emit_assembly(mod)


@pytest.mark.parametrize("optimize", [True, False], ids=["O3", "O0"])
def test_compiles_for_nvptx(optimize: bool, tmp_path) -> None:
    """llvm.exp & co. abort NVPTX code generation; vmath's IR must lower cleanly."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    try:
        llvm.Target.from_triple("nvptx64-nvidia-cuda")
    except RuntimeError:
        pytest.skip("this LLVM build has no NVPTX target")
    ptx = _nvptx_assembly(optimize)
    for dtype in DTYPES:
        for name in UNARY + BINARY:
            assert f".entry k_{name}_{dtype.__name__}(" in ptx
    if optimize:
        assert "call.uni" not in ptx, "helpers should be inlined at O3"
    else:
        assert ".func" in ptx, "unoptimized, the helpers stay device functions"
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not on PATH; PTX was generated but not assembled")
    path = tmp_path / "vmath.ptx"
    path.write_text(ptx)
    proc = subprocess.run(
        [ptxas, "-arch=sm_80", str(path), "-o", "/dev/null"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_docstring_table_matches_bounds() -> None:
    """The accuracy table in vmath's docstring states the bounds the tests enforce."""
    doc = vmath.__doc__ or ""
    for name, (b32, b64) in vmath.ULP_BOUNDS.items():
        row = next((ln for ln in doc.splitlines() if ln.strip().startswith(name + " ")), None)
        assert row is not None, f"{name} missing from the table"
        numbers = [float(v) for v in re.findall(r"<= ([\d.]+)", row)]
        assert numbers[:2] == [b32, b64], f"{name}: table says {numbers}, tests use {b32, b64}"


@pytest.mark.skipif(not host_has("avx512f"), reason="the host has no AVX-512 (vscalef)")
@pytest.mark.parametrize("name", ["exp", "tanh", "logistic", "pow"])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_scaling_by_ldexp_gives_the_same_bits(name: str, dtype: type) -> None:
    """scale() as llvm.ldexp (one vscalef) against two exact half-size multiplications:
    both round p * 2**n once, so every result, subnormal and overflowing ones included,
    must be identical."""
    rng = np.random.default_rng(7)
    fi = np.finfo(dtype)
    top = 750.0 if dtype is F64 else 105.0
    x = np.concatenate([rng.uniform(-top, top, 200_000), rng.standard_normal(50_000),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.max, -fi.max,
                                  fi.tiny, -fi.tiny])]).astype(dtype)
    with np.errstate(invalid="ignore"):  # inf % 4 is nan: a case like any other
        args = (x,) if name != "pow" else (np.abs(x) % 4, rng.uniform(-200, 200, x.size))
    native = kernel(name, dtype, native_ldexp=True)(*args)
    portable = kernel(name, dtype, native_ldexp=False)(*args)
    np.testing.assert_array_equal(native.view(f"u{dtype().itemsize}"),
                                  portable.view(f"u{dtype().itemsize}"))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_huge_arguments_within_bounds(name: str, dtype: type) -> None:
    """Past the Cody-Waite domain (up to the largest float) the exact reduction keeps the
    same ulp bounds: random magnitudes over every binade, the extremes, and the floats
    nearest to multiples of pi/2 (the worst cancellation)."""
    if dtype is F64 and not EXTENDED_LD:
        pytest.skip("the float64 reference needs an extended long double")
    rng = np.random.default_rng(11)
    limit = vmath.TRIG_DOMAIN[0 if dtype is F32 else 1]
    fmax = float(np.finfo(dtype).max)
    n = 200_000
    x = np.exp(rng.uniform(np.log(limit), np.log(fmax), n)).astype(dtype)
    bits = rng.integers(0, 2**31 if dtype is F32 else 2**63, n, dtype=np.uint64)
    patterns = bits.astype(np.uint32).view(F32) if dtype is F32 else bits.view(F64)
    x = np.concatenate([x, patterns[np.abs(patterns) >= limit],
                        around(dtype, limit, 500), np.array([fmax, np.nextafter(
                            dtype(fmax), dtype(0))], dtype)])
    x = x[np.isfinite(x) & (np.abs(x) >= limit)]
    assert_within(name, dtype, np.concatenate([x, -x]))


@pytest.mark.parametrize("backend", ["cpu", "c", "cuda-sim"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_jitted_trig_of_huge_arguments_matches_numpy(dtype: type, backend: str) -> None:
    """`jitc.jit(np.sin)(np.array([1e22]))` gave 0.718 (numpy -0.852): through whole jitted
    programs, vectorized loops and their remainders alike, on every backend."""
    import jitc

    fmax = float(np.finfo(dtype).max)
    x = np.array([1e22, -1e22, 3e7, 1e10, 1e30, fmax, 2.0**24, 0.5, 2.0**60, 1e38] * 3,
                 dtype)
    for fn in (np.sin, np.cos, np.tan):
        got = jitc.jit(fn, backend=backend)(x)
        np.testing.assert_allclose(got, fn(x), rtol=8 * np.finfo(dtype).eps, atol=0,
                                   err_msg=f"{fn.__name__} {backend}")
