"""Speed of the vmath kernels against numpy on 1M float32 elements, single thread.

Run: ``python bench/vmath_speed.py``. Each kernel is JIT-compiled in a plain loop
(``out[i] = f(in[i])``) through the O3 pipeline with loop vectorization, so the
numbers show what the CPU backend gets. Ratios > 1 mean vmath is faster than numpy.
"""

from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jitc.backends.llvm.vmath import MATH_FUNCTIONS

N = 1_000_000
REPEATS = 30
CASES: list[tuple[str, Callable[[np.ndarray], np.ndarray], tuple[float, float]]] = [
    ("exp", np.exp, (-80.0, 80.0)),
    ("tanh", np.tanh, (-10.0, 10.0)),
    ("log", np.log, (1e-6, 1e6)),
    ("sin", np.sin, (-100.0, 100.0)),
    ("logistic", lambda v: 1.0 / (1.0 + np.exp(-v)), (-20.0, 20.0)),
]


def compile_unary(name: str) -> tuple[Callable[[np.ndarray, np.ndarray], None], object]:
    """JIT ``void f(float* x, float* out, i64 n)``; returns (callable, engine to keep)."""
    f32, i64, ptr = ir.FloatType(), ir.IntType(64), ir.PointerType()
    module = ir.Module(name=f"bench_{name}")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64]), "kernel")
    src, dst, n = fn.args
    entry, loop, done = (fn.append_basic_block(s) for s in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    x = b.load(b.gep(src, [i], source_etype=f32), typ=f32)
    b.store(MATH_FUNCTIONS[name](b, x), b.gep(dst, [i], source_etype=f32))
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
    b.position_at_end(done)
    b.ret_void()

    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )
    mod = llvm.parse_assembly(str(module))
    mod.triple, mod.data_layout = tm.triple, str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    engine = llvm.create_mcjit_compiler(mod, tm)  # takes ownership of tm
    engine.finalize_object()
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    cfunc = proto(engine.get_function_address("kernel"))

    def run(x: np.ndarray, out: np.ndarray) -> None:
        cfunc(x.ctypes.data, out.ctypes.data, x.size)

    return run, (engine, cfunc)


def best_time(fn: Callable[[], object]) -> float:
    fn()  # warm caches and page in the output
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    rng = np.random.default_rng(0)
    print(f"{N:,} float32 elements, single thread, best of {REPEATS}")
    print(f"{'function':10s} {'numpy ms':>9s} {'vmath ms':>9s} {'numpy/vmath':>12s}")
    for name, ref, (lo, hi) in CASES:
        x = rng.uniform(lo, hi, N).astype(np.float32)
        out = np.empty_like(x)
        run, _keep = compile_unary(name)
        with np.errstate(over="ignore"):
            t_np = best_time(partial(ref, x))
        t_vm = best_time(partial(run, x, out))
        print(f"{name:10s} {t_np * 1e3:9.3f} {t_vm * 1e3:9.3f} {t_np / t_vm:11.2f}x")


if __name__ == "__main__":
    main()
