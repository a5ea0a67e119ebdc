"""The C backend beyond the op table: its source is readable and strict C99 without undefined
behaviour, its build cache and call paths work, float16 rounds once, and it says why it cannot
run where there is no C compiler."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ops.backends import require
from ops.cases import CASES

import jitc
from jitc import lax
from jitc.backends.c import build
from jitc.backends.c.backend import CBackend
from jitc.backends.c.codegen import lower_module
from jitc.ir import parse_module
from jitc.ir.interpreter import interpret
from jitc.ir.verifier import verify
from jitc.options import Options

pytestmark = pytest.mark.usefixtures("c_backend")


@pytest.fixture
def c_backend() -> str:
    return require("c")


def mlp(x, w1, b1, w2):
    h = np.maximum(x @ w1 + b1, 0)
    logits = h @ w2
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mlp_args() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in [(4, 8), (8, 16), (16,), (16, 3)]]


def test_source_has_one_function_per_kernel_headed_by_its_instruction() -> None:
    compiled = jitc.jit(mlp, backend="c").lower(*mlp_args()).compile()
    source = compiled.as_text()
    kernels = re.findall(r"^static void (k\d+_\w+)\(", source, re.M)
    assert len(kernels) == compiled.cost_analysis()["kernels"] == 3
    assert [k.split("_", 1)[1] for k in kernels] == ["dot", "dot_general", "row"]
    # Each kernel is headed by its instruction's IR text and called once, in program order.
    optimized = jitc.ir.print_module(compiled.optimized_module, elide_constants=True)
    for line in optimized.split("\n\n")[0].splitlines()[1:-1]:
        if " = " in line and "parameter(" not in line and "constant(" not in line:
            assert f"// {line.strip()}\n" in source
    entry = source[source.index("void jitc_entry(void **buffers) {"):]
    assert [c for c in re.findall(r"^    (k\w+)\(", entry, re.M)] == kernels
    assert set(re.findall(r"#include <(.+?)>", source)) <= {"math.h", "stdbool.h", "stdint.h",
                                                           "string.h"}
    # Fused ops carry their IR text too.
    assert "// %5 = max(%2, %4) : f32[4,16]{1,0}" in source


def _op_case_sources() -> list[str]:
    """The C source of the first variant of every op case, in its first dtype."""
    sources = []
    for case in CASES:
        variant, dtype = case.params()[0]
        args = variant.build(dtype, "strict-c99")
        lowered = jitc.jit(case.fn, backend="c").lower(*args)
        sources.append(lower_module(lowered.optimize()).source)
    return sources


def test_generated_code_is_strict_warning_free_c99(tmp_path) -> None:
    paths = []
    for n, source in enumerate(_op_case_sources()):
        path = tmp_path / f"case{n}.c"
        path.write_text(source)
        paths.append(str(path))
    flags = ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
    result = subprocess.run([build.find_compiler(), *flags, *paths], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[:4000]


def _sanitizer_works(tmp_path) -> bool:
    probe = tmp_path / "probe.c"
    probe.write_text("int probe(int x) { return x + 1; }\n")
    result = subprocess.run([build.find_compiler(), "-fsanitize=undefined", "-shared", "-fPIC",
                             "-o", str(tmp_path / "probe.so"), str(probe)], capture_output=True)
    return result.returncode == 0


def test_integer_and_conversion_edge_cases_have_no_undefined_behaviour(tmp_path,
                                                                         monkeypatch) -> None:
    """Division by zero and MIN / -1, shifts past the width, negative powers, wrapping
    arithmetic and saturating float-to-int conversion, built with the undefined-behaviour
    sanitizer set to abort: C must never be asked to do what it leaves undefined."""
    if not _sanitizer_works(tmp_path):
        pytest.skip("the C compiler has no working -fsanitize=undefined")
    monkeypatch.setattr(build, "FLAGS", build.FLAGS + (
        "-fsanitize=undefined,float-cast-overflow", "-fno-sanitize-recover=all"))

    def integers(x, y):
        return (lax.div(x, y), lax.rem(x, y), lax.shift_left(x, y),
                lax.shift_right_arithmetic(x, y), lax.shift_right_logical(x, y),
                np.power(x, y), x + y, x * y, x - y, -x, np.abs(x))

    def conversions(f):
        return tuple(lax.convert_element_type(f, t) for t in
                     ("int8", "uint8", "int32", "int64", "bool", "float16"))

    for dtype in (np.int8, np.uint8, np.int32, np.int64):
        info = np.iinfo(dtype)
        edges = np.array([info.min, info.min + 1, -1, 0, 1, 2, 7, 63, info.max]).astype(dtype)
        x, y = np.meshgrid(edges, edges)
        got = jitc.jit(integers, backend="c")(x, y)
        want = interpret(jitc.jit(integers, backend="c").lower(x, y).optimize(), [x, y])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    floats = np.array([np.nan, -np.inf, -1e300, -2.0**63, -129.5, -0.5, 0.0, 0.9, 255.9, 256.0,
                       2.0**31, 2.0**63, 1e300, np.inf])
    for dtype in (np.float16, np.float32, np.float64):
        with np.errstate(over="ignore"):
            f = floats.astype(dtype)
        got = jitc.jit(conversions, backend="c")(f)
        want = interpret(jitc.jit(conversions, backend="c").lower(f).optimize(), [f])
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_float16_conversions_round_once_to_nearest_even() -> None:
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float64))
    finite = np.unique(finite)
    midpoints = (finite[:-1] + finite[1:]) / 2  # exact in float64: ties to even
    near = np.concatenate([midpoints, np.nextafter(midpoints, -np.inf),
                           np.nextafter(midpoints, np.inf), finite, [65519.99, 65520.0, 7e4,
                                                                     1e-8, 2.0**-25, np.inf,
                                                                     -np.inf, np.nan]])
    to_half = jitc.jit(lambda x: x.astype(np.float16), backend="c")
    for source in (near, near.astype(np.float32)):
        with np.errstate(over="ignore"):
            want = source.astype(np.float16)
        np.testing.assert_array_equal(to_half(source), want)
    widened = jitc.jit(lambda h: h.astype(np.float32), backend="c")(halves)
    ok = ~np.isnan(halves)
    np.testing.assert_array_equal(widened[ok].view(np.uint32),
                                  halves[ok].astype(np.float32).view(np.uint32))
    assert np.isnan(widened[~ok]).all()


TRANSPOSED_EPILOGUE = """
func @f {
  %x = parameter() index=0 : f32[4,4]{1,0}
  %w = parameter() index=1 : f32[4,4]{1,0}
  %b = parameter() index=2 : f32[4,4]{1,0}
  %0 = fusion(%x, %w, %b) kind=dot calls=@fused_dot_0 : f32[4,4]{1,0}
  return %0
}

func @fused_dot_0 {
  %x = parameter() index=0 : f32[4,4]{1,0}
  %w = parameter() index=1 : f32[4,4]{1,0}
  %b = parameter() index=2 : f32[4,4]{1,0}
  %0 = dot_general(%x, %w) lhs_contract=[1] rhs_contract=[0] : f32[4,4]{1,0}
  %1 = transpose(%0) permutation=[1,0] : f32[4,4]{1,0}
  %2 = add(%1, %b) : f32[4,4]{1,0}
  return %2
}
"""


def test_epilogue_that_reads_the_contraction_elsewhere_uses_scratch_space() -> None:
    """The fusion pass builds only pointwise epilogues, but any valid fusion body must run:
    one that transposes the product cannot rewrite it in place."""
    module = verify(parse_module(TRANSPOSED_EPILOGUE))
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(3)]
    executable = CBackend().compile(module, Options())
    np.testing.assert_allclose(executable(args)[0], interpret(module, args)[0], rtol=1e-5,
                               atol=1e-6)
    assert "scratch" in executable.as_text()
    in_place = jitc.jit(lambda x, w, b: x @ w + b, backend="c").lower(*args).compile()
    assert "scratch" not in in_place.as_text() and "kind=dot" in in_place.as_text()


@pytest.mark.parametrize("rows", [1, 3, 4, 7, 9])
def test_products_compute_blocks_of_rows_with_each_rhs_row_read_once(rows) -> None:
    """Four output rows share each rhs element loaded; the rows left over, batches and the
    fused epilogue are computed as numpy does."""
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 24)).astype(np.float32)
    w = rng.standard_normal((24, 40)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    jitted = jitc.jit(lambda x, w, b: np.tanh(x @ w + b), backend="c")
    np.testing.assert_allclose(jitted(x, w, b), np.tanh(x @ w + b), rtol=1e-5, atol=1e-6)
    source = jitted.lower(x, w, b).compile().as_text()
    rhs_loads = re.findall(r"= w\[[^]]*\];", source)
    assert len(rhs_loads) == (rows >= 4) + (rows % 4 > 0), rhs_loads
    batched = rng.standard_normal((3, 2, rows, 24)).astype(np.float32)
    np.testing.assert_allclose(jitted(batched, w, b), np.tanh(batched @ w + b), rtol=1e-5,
                               atol=1e-6)
    many = rng.standard_normal((5, rows, 24)).astype(np.float32)
    rhs = rng.standard_normal((5, 24, 40)).astype(np.float32)
    np.testing.assert_allclose(jitted(many, rhs, b), np.tanh(many @ rhs + b), rtol=1e-5,
                               atol=1e-6)


def test_the_library_cache_key_names_the_host_cpu(monkeypatch) -> None:
    """Libraries use the host's vector instructions: another CPU must not load them."""
    key = build.cache_key("int x;", "cc")
    monkeypatch.setattr(build, "host_identity", lambda: "another cpu")
    assert build.cache_key("int x;", "cc") != key
    assert "-march=native" in build.FLAGS


def test_arguments_named_like_c_identifiers_are_renamed() -> None:
    def f(int, exp, t0, buffers):
        return int * exp + t0 - buffers
    args = [np.full(3, v, np.float32) for v in (2, 3, 4, 5)]
    jitted = jitc.jit(f, backend="c")
    np.testing.assert_array_equal(jitted(*args), f(*args))
    source = jitted.lower(*args).compile().as_text()
    assert "void *v_int = buffers[0];" in source and "void *v_buffers = buffers[3];" in source


def test_an_argument_named_like_a_pairwise_sum_counter_is_renamed() -> None:
    def f(n0):  # a float64 sum of more than 64 elements counts its block in `n0`
        return n0.sum(axis=1)
    x = np.random.default_rng(3).standard_normal((3, 100))
    np.testing.assert_allclose(jitc.jit(f, backend="c")(x), f(x), rtol=1e-12)


def test_libraries_are_cached_by_source(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JITC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(build, "_LOADED", {})
    runs = []
    real_run = subprocess.run

    def counting_run(*args, **kwargs):
        if "--version" not in args[0]:  # the compiler's identity, probed once per process
            runs.append(args[0])
        return real_run(*args, **kwargs)
    monkeypatch.setattr(build.subprocess, "run", counting_run)
    args = mlp_args()
    first = jitc.jit(mlp, backend="c")(*args)
    second = jitc.jit(mlp, backend="c")(*args)  # a new jitted function, the same source
    np.testing.assert_array_equal(first, second)
    assert len(runs) == 1
    assert [p.suffix for p in (tmp_path / "c").iterdir()] == [".jce"]
    build._LOADED.clear()  # as in a new process: loaded from the persistent cache
    np.testing.assert_array_equal(jitc.jit(mlp, backend="c")(*args), first)
    assert len(runs) == 1


def test_compile_errors_name_the_source_file(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(build, "build_dir", lambda: tmp_path)
    with pytest.raises(build.CompileError, match=r"\.c:") as info:
        build.library("this is not C;\n", build.find_compiler())
    path = re.search(r"failed on (\S+\.c)", str(info.value)).group(1)
    assert Path(path).read_text() == "this is not C;\n"


def test_ctypes_call_path_without_the_dispatcher() -> None:
    args = mlp_args()
    lowered = jitc.jit(mlp, backend="c").lower(*args)
    executable = CBackend().compile(lowered.optimize(), Options(), use_dispatcher=False)
    assert executable.dispatcher is None
    want = interpret(lowered.module, args)
    np.testing.assert_allclose(executable(args)[0], want[0], rtol=1e-5, atol=1e-6)
    fortran = [np.asfortranarray(a) for a in args]  # converted, then called
    np.testing.assert_allclose(executable(fortran)[0], want[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="compiled for"):
        executable([a[:1] for a in args])


def test_a_machine_without_a_c_compiler_skips_with_a_reason(monkeypatch) -> None:
    monkeypatch.setattr(build, "find_compiler", lambda: None)
    backend = CBackend()
    assert backend.unavailable_reason() == "no C compiler (cc, gcc, clang) found on PATH"
    module = jitc.jit(lambda x: x + 1, backend="interpreter").lower(np.ones(2)).optimize()
    with pytest.raises(RuntimeError, match="no C compiler"):
        backend.compile(module, Options())


def test_every_op_of_the_table_has_a_c_lowering() -> None:
    from jitc.backends.c.codegen import _SPECIAL
    from jitc.backends.c.elemental import RULES
    from jitc.ir import ops
    from jitc.passes.fusion import ELEMENTAL
    assert {op.name for op in ELEMENTAL} <= set(RULES)
    from jitc.backends.c.control import CONTROL
    from jitc.passes.complex_split import SPLIT_AWAY
    lowered = set(RULES) | {op.name for op in _SPECIAL} | {op.name for op in CONTROL} | \
        {"parameter", "constant", "fusion"} | {op.name for op in SPLIT_AWAY}
    assert set(ops.OPS) <= lowered, sorted(set(ops.OPS) - lowered)


