"""The C backend: `jitc.jit(f, backend="c")`.

Its pipeline is the kernel pipeline with the C kernels' layout preference; its executable owns
the loaded library and calls `jitc_entry` through the same C dispatcher as the CPU backend
(or through ctypes when jitc's runtime extension is not built).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence

import numpy as np

from jitc.backends.c import build
from jitc.backends.c.codegen import ENTRY, WORKSPACE_BYTES, Translation, lower_module
from jitc.backends.cpu.plan import ALIGNMENT, contiguous_argument
from jitc.ir import ops, symbolic
from jitc.ir.core import Instruction, Module
from jitc.ir.interpreter import ArgumentError, bind_symbols
from jitc.ir.types import TensorType
from jitc.options import Options
from jitc.passes import DEFAULT_PASSES, dce, fusion, layout_assignment
from jitc.passes.pipeline import Pass

# Calls that touch fewer elements than this keep the GIL: releasing it costs more.
RELEASE_GIL_ELEMENTS = 1 << 14
_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))
# A symbolic module's entry also takes the symbol values, and its library sizes the workspace.
_SYMBOLIC_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.POINTER(ctypes.c_int64))
_WORKSPACE_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))


def reads_any_layout(inst: Instruction, index: int, layout: TensorType) -> bool:
    """The C kernels' layout preference: reductions and contractions address their operands
    through strides, so they read a transposed operand in place (the transpose becomes a
    bitcast); elementwise consumers fuse the transpose instead."""
    return inst.op in (ops.REDUCE, ops.DOT_GENERAL, ops.CONVOLUTION)


C_PASSES: tuple[Pass, ...] = (*DEFAULT_PASSES, layout_assignment(reads_any_layout), fusion, dce)


def _runtime() -> object | None:
    try:
        import jitc._runtime as runtime
    except ImportError:
        return None
    return runtime


class CExecutable:
    """A compiled function: its C source, the library built from it, constants and the
    call path into `jitc_entry`."""

    def __init__(self, module: Module, translation: Translation, library: build.Library,
                 use_dispatcher: bool = True) -> None:
        self.module = module
        self.source = translation.source
        self.plan = translation.plan
        self.kernel_count = translation.kernel_count
        self.workspace_bytes = translation.workspace_bytes
        self.library = library  # keeps the code loaded while this executable lives
        fn = module.entry
        self.arg_types = [(p.type.shape, p.type.dtype.numpy) for p in fn.parameters]
        self.out_types = [(v.type.shape, v.type.dtype.numpy) for v in fn.outputs]
        self.constants = [np.ascontiguousarray(c) for c in self.plan.constants]
        # Per result, the argument whose buffer it is computed in (donate_argnums), or -1.
        self._donations = [self.plan.donations.get(n, -1) for n in range(len(self.out_types))]
        self.symbols = translation.symbols
        self.dispatcher: Callable[[int], Callable] | None = None
        if self.symbols:
            # `jitc.jit` asks for `dispatcher` to build its fast path, which checks exact
            # shapes: a symbolic function has none and takes the general call path.
            self._entry = _SYMBOLIC_ENTRY_TYPE((ENTRY, library))
            self._workspace_bytes = _WORKSPACE_TYPE((WORKSPACE_BYTES, library))
            self._sizes: dict[tuple[int, ...], int] = {}   # dims -> workspace bytes
            self._arenas = threading.local()               # each thread's workspace
            self._call = self._call_symbolic
            return
        self._entry = _ENTRY_TYPE((ENTRY, library))
        self.address = ctypes.cast(self._entry, ctypes.c_void_p).value
        touched = sum(int(np.prod(s)) for s, _ in self.arg_types + self.out_types)
        self.release_gil = touched + self.workspace_bytes // 4 >= RELEASE_GIL_ELEMENTS
        runtime = _runtime() if use_dispatcher else None
        # `jitc.jit` asks for `dispatcher` to build its fast path; None means "no fast path".
        if runtime is not None:
            self.dispatcher = self._dispatcher
            self._call = self._dispatcher(runtime.RESULT_LIST)  # type: ignore[attr-defined]
        else:
            self._call = self._call_with_ctypes

    def _dispatcher(self, result_kind: int, writes: Sequence[int] | None = None,
                    types: tuple[list, list] | None = None) -> Callable:
        """A C-level callable for exactly this signature; returns None on any mismatch.
        `writes`: the arguments the last len(writes) results are copied into after a call.
        `types`: the (shape, dtype) callers use where they differ from the code's but have its
        bytes (complex arrays for float pairs)."""
        from jitc._runtime import Dispatcher
        arg_types, out_types = types or (self.arg_types, self.out_types)
        specs = [(np.dtype(d).num, s) for s, d in arg_types]
        outs = [(np.dtype(d).num, s) for s, d in out_types]
        return Dispatcher(self.address, specs, outs, self.constants, self.workspace_bytes,
                          result_kind, int(self.release_gil), self._donations, self.library,
                          self.module.entry.name, writes)

    def _call_with_ctypes(self, args: Sequence[object]) -> list[np.ndarray] | None:
        if len(args) != len(self.arg_types) or not all(
                isinstance(a, np.ndarray) and a.shape == s and a.dtype == d and
                a.flags.c_contiguous and a.flags.aligned
                for a, (s, d) in zip(args, self.arg_types)):
            return None
        donors = [n for n in self._donations if n >= 0]
        if any(not args[n].flags.writeable for n in donors):  # type: ignore[attr-defined]
            return None
        if any(np.may_share_memory(args[n], a) for n in donors
               for k, a in enumerate(args) if k != n):
            return None  # another argument reads the donated buffer: the caller copies it
        # A donated result is the argument itself, which the code writes in place.
        results = [np.empty(s, d) if donor < 0 else args[donor]  # type: ignore[misc]
                   for (s, d), donor in zip(self.out_types, self._donations)]
        arena = np.empty(self.workspace_bytes + ALIGNMENT, np.uint8)
        start = -arena.ctypes.data % ALIGNMENT
        pointers = [a.ctypes.data for a in (*args, *results, *self.constants)]  # type: ignore
        pointers.append(arena.ctypes.data + start)
        self._entry((ctypes.c_void_p * len(pointers))(*pointers))
        return results

    def _call_symbolic(self, args: Sequence[object]) -> list[np.ndarray]:
        """Bind the symbols from the arguments' shapes and check the module's constraints
        (the interpreter's binding: ArgumentError when they fail), then run the code on
        results of the bound shapes and a workspace of the size the binding needs."""
        fn = self.module.entry
        if len(args) != len(self.arg_types):
            raise ArgumentError(f"@{fn.name} takes {len(self.arg_types)} argument(s), "
                                f"got {len(args)}")
        arrays = [a if isinstance(a, np.ndarray) and a.dtype == d and a.flags.c_contiguous
                  and a.flags.aligned else contiguous_argument(a, d, False)
                  for a, (_, d) in zip(args, self.arg_types)]
        sizes = bind_symbols(fn, arrays, self.module.constraints)
        dims = tuple(sizes[s] for s in self.symbols)
        results = [np.empty(symbolic.substitute(s, sizes), d)  # type: ignore[call-overload]
                   for s, d in self.out_types]
        values = (ctypes.c_int64 * len(dims))(*dims)
        nbytes = self._sizes.get(dims)
        if nbytes is None:
            nbytes = self._sizes[dims] = int(self._workspace_bytes(values))
        arena = getattr(self._arenas, "array", None)
        if arena is None or arena.nbytes < nbytes + ALIGNMENT:
            # Grown to what this call needs; kept for the next calls of this thread.
            arena = self._arenas.array = np.empty(nbytes + ALIGNMENT, np.uint8)
        start = -arena.ctypes.data % ALIGNMENT
        pointers = [a.ctypes.data for a in (*arrays, *results, *self.constants)]
        pointers.append(arena.ctypes.data + start)
        self._entry((ctypes.c_void_p * len(pointers))(*pointers), values)
        return results

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.symbols:
            return self._call_symbolic(args)
        result = self._call(tuple(args))
        if result is None:
            # Not C-contiguous, not aligned, or not an ndarray of exactly the dtype (or a
            # donated array that is read-only or shares memory with another argument):
            # convert, then call.
            donors = set(self._donations)
            arrays = tuple(contiguous_argument(a, d, n in donors)
                           for n, (a, (_, d)) in enumerate(zip(args, self.arg_types)))
            result = self._call(arrays)
            if result is None:
                want = ", ".join(f"{np.dtype(d)}{list(s)}" for s, d in self.arg_types)
                got = ", ".join(f"{a.dtype}{list(a.shape)}" for a in arrays)
                raise TypeError(f"compiled for ({want}), called with ({got})")
        return result

    def as_text(self) -> str:
        """The C source of this function."""
        return self.source


class CBackend:
    name = "c"
    # A module with symbolic dimensions compiles once; its code takes the symbol values at
    # each call (jitc/backends/c/extents.py, docs/dynamic-shapes.md).
    symbolic_extents = True

    def __init__(self, compiler: str | None = None) -> None:
        self.compiler = compiler or build.find_compiler()

    def unavailable_reason(self) -> str | None:
        if self.compiler is None:
            return f"no C compiler ({', '.join(build.COMPILERS)}) found on PATH"
        return None

    def passes(self, options: Options) -> Sequence[Pass]:
        return C_PASSES

    def compile(self, module: Module, options: Options,
                use_dispatcher: bool = True) -> CExecutable:
        if self.compiler is None:
            raise RuntimeError(f"the C backend is unavailable: {self.unavailable_reason()}")
        translation = lower_module(module, options.donated)
        library = build.library(translation.source, self.compiler)
        return CExecutable(module, translation, library, use_dispatcher)


__all__ = ["CBackend", "CExecutable", "C_PASSES", "reads_any_layout"]
