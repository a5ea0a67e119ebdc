"""The c backend on modules with symbolic dimensions: each compiles once (one C library) and
runs for every size its constraints accept, agreeing with numpy and with the interpreter.

Each program below is one compiled module (the system C compiler builds each, so they are
few and cover several ops at once); each is run for the sizes 0, 1, 2, 7 and 33."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import jitc
from jitc import lax
from jitc.backends.c import build
from jitc.backends.c.backend import C_PASSES, MAX_BINDINGS, CBackend
from jitc.backends.c.cgen import extent
from jitc.backends.c.codegen import lower_module
from jitc.ir.dim_text import parse_dim
from jitc.ir.interpreter import ArgumentError
from jitc.ir.parser import parse_module
from jitc.options import Options
from jitc.passes.pipeline import Pipeline
from jitc.tracing.errors import TraceError
from jitc.tracing.function import AbstractArray

RNG = np.random.default_rng(5)
SIZES = (0, 1, 2, 7, 33)


def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


W1 = _floats(48, 32)
B1 = _floats(32)
W2 = _floats(32, 10)
A = _floats(12, 9)
G = _floats(5, 3)


def mlp(x):
    return np.tanh(x @ W1 + B1) @ W2


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def batch_ops(x, y):
    """Broadcasting, reductions over the symbolic and the static axis, a softmax, a
    transpose, a flattening reshape, a concatenate along the symbolic axis and a flip."""
    return (x * y + 2.0, x.sum(axis=0), x.max(axis=1), softmax(x), (x.T * 3.0).reshape(-1),
            np.concatenate([x, x * 2.0]) + 1.0, np.flip(x, axis=0) - y)


def axis_ops(x, d, z):
    """Reductions, a softmax and an argmax along a symbolic minor axis; a float64 sum that
    is pairwise for long axes; a concatenate of two run-time extents."""
    return (x.sum(axis=1) * 2.0, softmax(x), np.argmax(x, axis=1), d.sum(axis=1),
            np.concatenate([x, z * 0.5], axis=1))


def products(a, b, c, d, p, q):
    """A matmul with M, one with N, one with K symbolic, and one with all three."""
    return a @ A, A.T @ b, c @ d, p @ q


def chain(x):
    """Temporaries of run-time size alive together: h1 lives on while h2 is computed."""
    h1 = x @ W1
    h2 = np.tanh(h1) @ W1.T
    return (h2 @ W1) * h1, h2.sum(axis=0)


# name: (function, specs, arguments for a size)
PROGRAMS = {
    "mlp": (mlp, ["f32[B,48]"], lambda n: [_floats(n, 48)]),
    "batch ops": (batch_ops, ["f32[B,16]", "f32[16]"], lambda n: [_floats(n, 16), _floats(16)]),
    "axis ops": (axis_ops, ["f32[4,S]", "f64[3,L]", "f32[4,T]"],
                 lambda n: [_floats(4, n), RNG.standard_normal((3, 9 * n)),
                            _floats(4, 3 * n % 5)]),
    "products": (products, ["f32[M,12]", "f32[12,N]", "f32[5,K]", "f32[K,7]", "f32[P,R]",
                            "f32[R,Q]"],
                 lambda n: [_floats(n, 12), _floats(12, n), _floats(5, n), _floats(n, 7),
                            _floats(n, n + 2), _floats(n + 2, 3 * n % 5)]),
    "chain": (chain, ["f32[B,48]"], lambda n: [_floats(n, 48)]),
}


def _check(got, want) -> None:
    got = got if isinstance(got, (tuple, list)) else [got]
    want = want if isinstance(want, tuple) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        # float32 sums in another order than numpy's: errors relative to the largest value
        scale = float(np.abs(w).max()) if w.size and w.dtype.kind == "f" else 1.0
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * max(scale, 1.0))


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_one_compilation_agrees_with_numpy_and_the_interpreter_for_every_size(
        program: str) -> None:
    fun, specs, arguments = PROGRAMS[program]
    abstract = [AbstractArray(s) for s in specs]
    compiled = jitc.jit(fun, backend="c").lower(*abstract).compile()
    reference = jitc.jit(fun, backend="interpreter").lower(*abstract).compile()
    assert "const int64_t *dims = buffers[" in compiled.executable.as_text()
    for size in (*SIZES, 2):  # 2 again: after the workspace grew for 33
        args = arguments(size)
        try:
            want = fun(*args)
        except ValueError:  # argmax of an empty axis: the constraint S >= 1 refuses it too
            with pytest.raises(TypeError, match=r"constraint S >= 1 failed \(S=0\)"):
                compiled(*args)
            continue
        _check(compiled(*args), want)
        _check(compiled(*args), reference(*args))


IR_TEXT = """constraint n >= 1
constraint n % 4 == 0

func @f {
  %x = parameter() index=0 : f32[n,3]{1,0}
  %0 = slice(%x) start=[1,0] limit=[n,3] : f32[n-1,3]{1,0}
  %1 = slice(%x) start=[0,0] limit=[n,3] stride=[2,1] : f32[(n+1)//2,3]{1,0}
  %2 = reshape(%x) : f32[n//4,12]{1,0}
  %3 = transpose(%x) permutation=[1,0] : f32[3,n]{1,0}
  %4 = reduce(%3) dims=[1] kind=sum : f32[3]
  %5 = concatenate(%0, %1) dimension=0 : f32[n+(n+1)//2-1,3]{1,0}
  %6 = iota() dimension=0 : i32[n-1,3]{1,0}
  %7 = convert(%6) : f32[n-1,3]{1,0}
  %8 = add(%0, %7) : f32[n-1,3]{1,0}
  return %0, %1, %2, %4, %5, %8
}
"""


def _numpy_ir_text(x: np.ndarray) -> list[np.ndarray]:
    n = x.shape[0]
    rows = np.arange(n - 1, dtype=np.float32)[:, None] * np.ones(3, np.float32)
    return [x[1:], x[::2], x.reshape(n // 4, 12), x.T.sum(axis=1),
            np.concatenate([x[1:], x[::2]]), x[1:] + rows]


@pytest.mark.parametrize("dispatcher", [True, False], ids=["C dispatcher", "ctypes"])
def test_slices_reshapes_and_iota_with_extent_expressions(dispatcher: bool) -> None:
    module = parse_module(IR_TEXT)
    executable = CBackend().compile(Pipeline("c", list(C_PASSES)).run(module), Options(),
                                    use_dispatcher=dispatcher)
    source = executable.as_text()
    assert "(d_n - 1)" in source and "(d_n + 1) / 2" in source  # n-1 and (n+1)//2 in C
    for n in (4, 8, 36, 4):
        x = _floats(n, 3)
        for argument in (x, x.T.copy().T, x.astype(np.float64).tolist()):  # converted ones
            for got, want, ref in zip(executable([argument]), _numpy_ir_text(x),
                                      jitc.interpret(module, [x])):
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
                np.testing.assert_array_equal(got, ref)
    for n in range(4, 4 * (MAX_BINDINGS + 4), 4):  # more shapes than call paths are kept
        x = _floats(n, 3)
        np.testing.assert_array_equal(executable([x])[4], np.concatenate([x[1:], x[::2]]))
    with pytest.raises(ArgumentError, match=r"constraint n % 4 == 0 does not hold: n=6"):
        executable([_floats(6, 3)])
    with pytest.raises(ArgumentError, match=r"expected f32\[n,3\], got float32\[4, 2\]"):
        executable([_floats(4, 2)])


def test_the_symbolic_sources_compile_without_warnings(tmp_path) -> None:
    sources = [lower_module(Pipeline("c", list(C_PASSES)).run(parse_module(IR_TEXT))).source]
    for program in ("chain", "axis ops", "batch ops"):
        fun, specs, _ = PROGRAMS[program]
        lowered = jitc.jit(fun, backend="c").lower(*[AbstractArray(s) for s in specs])
        sources.append(lower_module(lowered.optimize()).source)
    paths = []
    for n, source in enumerate(sources):
        paths.append(str(tmp_path / f"symbolic{n}.c"))
        (tmp_path / f"symbolic{n}.c").write_text(source)
    flags = ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
    result = subprocess.run([build.find_compiler(), *flags, *paths], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[:4000]


def test_extents_print_as_c_over_the_symbol_variables() -> None:
    assert extent(7) == "7"
    assert extent(parse_dim("n")) == "d_n"
    assert extent(parse_dim("2*n")) == "(2 * d_n)"
    assert extent(parse_dim("n*s-1")) == "(d_n * d_s - 1)"
    assert extent(parse_dim("3*(n//8)+m")) == "(d_m + 3 * (d_n / 8))"


def test_a_floor_division_of_a_negative_numerator_rounds_down() -> None:
    # (n-3)//2 is -1 at n = 1 and n = 2; C's division alone would give 0.
    module = parse_module("""func @f {
  %x = parameter() index=0 : f32[n]{0}
  %0 = slice(%x) start=[0] limit=[n] stride=[2] : f32[(n+1)//2]{0}
  %1 = iota() dimension=0 : i64[(n+1)//2]{0}
  %2 = convert(%1) : f32[(n+1)//2]{0}
  %3 = mul(%0, %2) : f32[(n+1)//2]{0}
  return %3
}
""")
    executable = CBackend().compile(Pipeline("c", list(C_PASSES)).run(module), Options())
    for n in SIZES:
        x = _floats(n)
        (got,) = executable([x])
        np.testing.assert_allclose(got, x[::2] * np.arange(len(x[::2])), rtol=1e-6)


def test_arguments_that_disagree_on_a_symbol_are_refused() -> None:
    compiled = jitc.jit(batch_ops, backend="c").lower(
        AbstractArray("f32[B,16]"), AbstractArray("f32[16]")).compile()
    with pytest.raises(TypeError, match=r"f32\[B,16\], f32\[16\].*f32\[3,16\], f32\[8\]"):
        compiled(_floats(3, 16), _floats(8))


KERNEL = _floats(2, 3, 3, 3)


def convolved(x):
    return lax.conv_general_dilated(x, KERNEL) * 2.0


def test_a_convolution_over_a_symbolic_batch() -> None:
    compiled = jitc.jit(convolved, backend="c").lower(AbstractArray("f32[B,3,5,5]")).compile()
    exact = jitc.jit(convolved, backend="interpreter", dynamic=False)
    for n in SIZES:
        x = _floats(n, 3, 5, 5)
        np.testing.assert_allclose(compiled(x), exact(x), rtol=1e-5, atol=1e-5)


SORT_TEXT = """func @f {
  %x = parameter() index=0 : f32[3,n]{1,0}
  %0 = sort(%x) axis=1 : f32[3,n]{1,0}
  %1 = sort(%x) axis=0 output=indices : i64[3,n]{1,0}
  return %0, %1
}
"""


def test_sorts_along_and_across_a_symbolic_axis() -> None:
    module = parse_module(SORT_TEXT)
    executable = CBackend().compile(Pipeline("c", list(C_PASSES)).run(module), Options())
    for n in SIZES:
        x = _floats(3, n)
        x[:, ::3] = np.nan
        values, indices = executable([x])
        np.testing.assert_array_equal(values, np.sort(x, axis=1))
        np.testing.assert_array_equal(indices, np.argsort(x, axis=0, kind="stable"))


def test_an_op_without_run_time_extents_is_refused_at_compile_time(monkeypatch) -> None:
    """Every op takes run-time extents today; one that did not (here pad, taken off the
    list) is refused when the module compiles, and the automatic policy compiles exactly."""
    from jitc.backends.c import extents
    monkeypatch.setattr(extents, "SYMBOLIC_OPS", extents.SYMBOLIC_OPS - {"pad"})

    def padded(x):
        return np.pad(x, 1) * 2.0

    lowered = jitc.jit(padded, backend="c").lower(AbstractArray("f32[B,4]"))
    with pytest.raises(TraceError, match=r"(?s)test_c_symbolic.py:\d+ in padded\n.*np.pad.*\n"
                                         r"the c backend cannot compile `pad` \(in a `loop` "
                                         r"fusion\) with symbolic dimensions yet"):
        lowered.compile()
    f = jitc.jit(padded, backend="c")
    for n in (3, 5, 7):
        x = _floats(n, 4)
        np.testing.assert_array_equal(f(x), padded(x))
    stats = f.compile_stats()
    assert [s["symbolic"] for s in stats] == [False, False, False]
    assert "the c backend cannot compile `pad`" in stats[1]["reason"]
    assert stats[1]["reason"].endswith("exact compilation")


def layer(x, w1, b1, w2):
    return np.tanh(x @ w1 + b1) @ w2


def test_the_automatic_policy_compiles_a_batch_sweep_three_times() -> None:
    f = jitc.jit(layer, backend="c", dynamic=None)
    for n in (3, 5, 9, 1, 33, 2, 64):
        x = _floats(n, 48)
        np.testing.assert_allclose(f(x, W1, B1, W2), layer(x, W1, B1, W2), rtol=2e-5,
                                   atol=2e-5)
    stats = f.compile_stats()
    weights = "f32[48,32], f32[32], f32[32,10]"
    assert sorted((s["signature"], s["symbolic"]) for s in stats) == [
        (f"f32[1,48], {weights}", False), (f"f32[3,48], {weights}", False),
        (f"f32[x_0,48], {weights}", True)]


INDEXING_TEXT = """constraint n >= 1
constraint n >= k

func @f {
  %x = parameter() index=0 : f32[n,3]{1,0}
  %i = parameter() index=1 : i64[m]
  %u = parameter() index=2 : f32[k,3]{1,0}
  %s = parameter() index=3 : i32[]
  %zero = constant() value=0 : i32[]
  %fill = constant() value=0.5 : f32[]
  %0 = gather(%x, %i) axis=0 : f32[m,3]{1,0}
  %1 = pad(%u, %fill) low=[1,-1] high=[2,1] : f32[k+3,3]{1,0}
  %2 = dynamic_slice(%x, %s, %zero) sizes=[k,3] : f32[k,3]{1,0}
  %3 = dynamic_update_slice(%x, %u, %s, %zero) : f32[n,3]{1,0}
  return %0, %1, %2, %3
}
"""


def test_gather_pad_and_dynamic_slices_with_run_time_extents() -> None:
    """Each reads an operand that may be empty at run time (k = 0, m = 0) only where an
    element is selected."""
    module = parse_module(INDEXING_TEXT)
    executable = CBackend().compile(Pipeline("c", list(C_PASSES)).run(module), Options())
    for n, k, m, start in [(1, 0, 0, 0), (1, 1, 3, -1), (2, 0, 2, 1), (7, 3, 5, 6),
                           (33, 33, 0, 2), (33, 7, 40, 30)]:
        x, u = _floats(n, 3), _floats(k, 3)
        i = RNG.integers(0, n, m)
        s = np.int32(start)
        got = executable([x, i, u, s])
        for g, want in zip(got, jitc.interpret(module, [x, i, u, s])):
            np.testing.assert_array_equal(g, want)
        padded = np.pad(u[:, 1:], ((1, 2), (0, 1)), constant_values=0.5)
        np.testing.assert_array_equal(got[0], x[i])
        np.testing.assert_array_equal(got[1], padded)
        at = min(max(start, 0), n - k)
        np.testing.assert_array_equal(got[2], x[at:at + k])
        updated = x.copy()
        updated[at:at + k] = u
        np.testing.assert_array_equal(got[3], updated)


def repeated(x, y):
    for _ in range(12):  # traced as one while loop (reroll)
        x = np.tanh(x * y + 1.0)
    return x


def damped(x, y):
    z = lax.fori_loop(0, 4, lambda i, c: c * 0.5 + y, x)
    return lax.cond(z.sum() > 0, lambda a: a * 2, lambda a: -a, z)


@pytest.mark.parametrize("fun, specs, arguments", [
    (repeated, ["f32[n]", "f32[m]"], lambda n: [_floats(n), _floats(n)]),
    (damped, ["f32[n,3]", "f32[3]"],
     lambda n: [_floats(n, 3), np.abs(_floats(3)) * (1 if n % 2 else -1)]),
], ids=["python loop", "fori_loop and cond"])
def test_loops_and_branches_over_symbolic_carries(fun, specs, arguments) -> None:
    abstract = [AbstractArray(s) for s in specs]
    lowered = jitc.jit(fun, backend="c").lower(*abstract)
    assert " = while(" in lowered.as_text()
    compiled = lowered.compile()
    reference = jitc.jit(fun, backend="interpreter").lower(*abstract).compile()
    for size in (*SIZES, 2):
        args = arguments(size)
        np.testing.assert_allclose(compiled(*args), fun(*args), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(compiled(*args), reference(*args), rtol=1e-6, atol=1e-6)


SCAN_TEXT = """func @scanned {
  %x = parameter() index=0 : f32[5,m]{1,0}
  %h = parameter() index=1 : f32[m]
  %0 = constant() value=0.0 : f32[]
  %1 = broadcast_in_dim(%0) dims=[] : f32[5,m]{1,0}
  %2 = constant() value=0 : i64[]
  %3, %4, %5, %6 = while(%2, %h, %1, %x) cond=@scanned.cond body=@scanned.body
    : i64[], f32[m], f32[5,m]{1,0}, f32[5,m]{1,0}
  return %4, %5
}

func @scanned.cond {
  %0 = parameter() index=0 : i64[]
  %1 = parameter() index=1 : f32[m]
  %2 = parameter() index=2 : f32[5,m]{1,0}
  %x = parameter() index=3 : f32[5,m]{1,0}
  %3 = constant() value=5 : i64[]
  %4 = compare(%0, %3) direction=lt : bool[]
  return %4
}

func @scanned.body {
  %0 = parameter() index=0 : i64[]
  %1 = parameter() index=1 : f32[m]
  %2 = parameter() index=2 : f32[5,m]{1,0}
  %x = parameter() index=3 : f32[5,m]{1,0}
  %3 = constant() value=0 : i64[]
  %4 = dynamic_slice(%x, %0, %3) sizes=[1,m] : f32[1,m]{1,0}
  %5 = reshape(%4) : f32[m]
  %6 = constant() value=0.9 : f32[]
  %7 = mul(%1, %6) : f32[m]
  %8 = add(%7, %5) : f32[m]
  %9 = tanh(%8) : f32[m]
  %10 = constant() value=2.0 : f32[]
  %11 = mul(%9, %10) : f32[m]
  %12 = reshape(%11) : f32[1,m]{1,0}
  %13 = dynamic_update_slice(%2, %12, %0, %3) : f32[5,m]{1,0}
  %14 = constant() value=1 : i64[]
  %15 = add(%0, %14) : i64[]
  return %15, %9, %13, %x
}
"""


def test_a_scan_writes_its_stacked_rows_of_run_time_width_in_place() -> None:
    module = parse_module(SCAN_TEXT)
    executable = CBackend().compile(Pipeline("c", list(C_PASSES)).run(module), Options())
    assert "memcpy((char *)" in executable.as_text()  # the block write of the step
    for m in SIZES:
        x, h = _floats(5, m), _floats(m)
        rows = []
        carry = h
        for row in x:
            carry = np.tanh(carry * np.float32(0.9) + row)
            rows.append(carry * np.float32(2.0))
        got = executable([x, h])
        np.testing.assert_allclose(got[0], carry, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], np.stack(rows), rtol=1e-5, atol=1e-6)
        for g, want in zip(got, jitc.interpret(module, [x, h])):
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6)


ASAN_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {tests!r})
from jitc.backends.c import build
build.FLAGS = build.FLAGS + ("-O0", "-fsanitize=address", "-fno-omit-frame-pointer")
import test_c_symbolic as t
from jitc.backends.c.backend import C_PASSES, CBackend
from jitc.ir.parser import parse_module
from jitc.options import Options
from jitc.passes.pipeline import Pipeline
cases = [
    (t.IR_TEXT, lambda n: [t._floats(4 * n, 3)]),
    (t.INDEXING_TEXT, lambda n: [t._floats(n + 1, 3), np.arange(n) % (n + 1),
                                 t._floats(n, 3), np.int32(n - 1)]),
    (t.SORT_TEXT, lambda n: [t._floats(3, n)]),
    (t.SCAN_TEXT, lambda n: [t._floats(5, n), t._floats(n)]),
]
for text, arguments in cases:
    module = Pipeline("c", list(C_PASSES)).run(parse_module(text))
    executable = CBackend().compile(module, Options())
    for n in (0, 1, 2, 7):
        try:
            executable(arguments(n))
        except TypeError as exc:  # a constraint refuses the size
            assert "constraint" in str(exc), exc
print("clean")
"""


def test_small_and_empty_extents_stay_in_bounds_under_address_sanitizer(tmp_path) -> None:
    """The kernels that read at clamped or computed indices (concatenate, pad, gather,
    dynamic slices, sort, a scan's block writes), built with AddressSanitizer and run for
    extents 0, 1, 2 and 7: an access outside any argument, result or the workspace aborts.
    Built at -O0: at -O3 the compiler may move a load it can prove unused into the branch
    that selects it, which would hide a load the code asks for."""
    compiler = build.find_compiler()
    runtime = subprocess.run([compiler, "-print-file-name=libasan.so"], capture_output=True,
                             text=True).stdout.strip()
    probe = tmp_path / "probe.c"
    probe.write_text("int probe(int x) { return x + 1; }\n")
    built = subprocess.run([compiler, "-fsanitize=address", "-shared", "-fPIC", "-o",
                            str(tmp_path / "probe.so"), str(probe)], capture_output=True)
    if built.returncode != 0 or not runtime.startswith("/"):
        pytest.skip("the C compiler has no AddressSanitizer runtime to preload")
    tests = str(Path(__file__).resolve().parent)
    env = {**os.environ, "LD_PRELOAD": runtime, "ASAN_OPTIONS": "detect_leaks=0",
           "JITC_CACHE_DIR": ""}
    result = subprocess.run([sys.executable, "-c", ASAN_SCRIPT.format(tests=tests)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0 and result.stdout.strip() == "clean", result.stderr[-4000:]


def test_threads_calling_with_different_sizes_get_their_own_results() -> None:
    module = parse_module(IR_TEXT)
    executable = CBackend().compile(Pipeline("c", list(C_PASSES)).run(module), Options())
    # The large ones release the GIL, so two threads run one binding's code at once.
    inputs = [_floats(n, 3) for n in (4, 2048, 4096, 2048, 4096, 8)]
    failures: list[str] = []

    def run(x: np.ndarray) -> None:
        want = np.concatenate([x[1:], x[::2]])
        for _ in range(50):
            got = executable([x])[4]
            if got.shape != want.shape or not np.array_equal(got, want):
                failures.append(f"n={x.shape[0]}")
                return

    threads = [threading.Thread(target=run, args=(x,)) for x in inputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_arguments_named_like_the_entrys_own_variables() -> None:
    def named(dims, offsets, d_B):
        return np.tanh(dims @ offsets) @ offsets.T + d_B

    specs = [AbstractArray("f32[B,3]"), AbstractArray("f32[3,5]"), AbstractArray("f32[3]")]
    compiled = jitc.jit(named, backend="c").lower(*specs).compile()
    for n in (0, 4):
        args = [_floats(n, 3), _floats(3, 5), _floats(3)]
        _check(compiled(*args), named(*args))


def test_calls_served_symbolically_take_the_c_fast_path() -> None:
    """A symbolic c compilation gives jit a dispatcher: each new argument shape is bound once
    into a C dispatcher; shapes its constraints refuse are a miss the general path compiles
    exactly."""
    weights = np.linspace(-1, 1, 16 * 8, dtype=np.float32).reshape(16, 8)

    def layer(x):
        return np.tanh(x @ weights)

    jitted = jitc.jit(layer, backend="c", disk_cache=False)
    for n in (3, 5, 7, 5, 1, 9, 0):
        x = np.linspace(-2, 2, n * 16, dtype=np.float32).reshape(n, 16)
        np.testing.assert_allclose(jitted(x), layer(x), rtol=1e-5, atol=1e-6)
    (compiled,) = jitted._symbolic.values()
    fast = [path for made, path in compiled.fast_paths.values() if made]
    assert fast and all(path is not None for path in fast)
    assert [s["symbolic"] for s in jitted.compile_stats()].count(True) == 1
