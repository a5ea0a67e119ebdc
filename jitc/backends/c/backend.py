"""The C backend: `jitc.jit(f, backend="c")`.

Its pipeline is the kernel pipeline with the C kernels' layout preference; its executable owns
the loaded library and calls `jitc_entry` through the same C dispatcher as the CPU backend
(or through ctypes when jitc's runtime extension is not built).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from jitc.backends.c import build
from jitc.backends.c.codegen import ENTRY, WORKSPACE_BYTES, Translation, lower_module
from jitc.backends.c.parallel import POOL
from jitc.backends.cpu.plan import ALIGNMENT, contiguous_argument
from jitc.backends.symbolic_keys import Binding, key_specs
from jitc.ir import ops, symbolic
from jitc.ir.core import Instruction, Module
from jitc.ir.interpreter import ArgumentError, bind_symbols
from jitc.ir.types import TensorType
from jitc.options import Options
from jitc.passes import DEFAULT_PASSES, dce, fusion, layout_assignment
from jitc.passes.convolution_products import byte_convolution_products, convolution_products
from jitc.passes.pipeline import Pass

# Calls that touch fewer elements than this keep the GIL: releasing it costs more.
RELEASE_GIL_ELEMENTS = 1 << 14
# Argument shape combinations whose call path a symbolic function keeps.
MAX_BINDINGS = 16
_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))
# A symbolic module's library sizes the workspace for the symbol values.
_WORKSPACE_TYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))


def reads_any_layout(inst: Instruction, index: int, layout: TensorType) -> bool:
    """The C kernels' layout preference: reductions and contractions address their operands
    through strides, so they read a transposed operand in place (the transpose becomes a
    bitcast); elementwise consumers fuse the transpose instead."""
    return inst.op in (ops.REDUCE, ops.DOT_GENERAL, ops.CONVOLUTION)


C_PASSES: tuple[Pass, ...] = (
    *(byte_convolution_products if p is convolution_products else p for p in DEFAULT_PASSES),
    layout_assignment(reads_any_layout), fusion, dce)


def _runtime() -> object | None:
    try:
        import jitc._runtime as runtime
    except ImportError:
        return None
    return runtime


@functools.cache
def _pool_address() -> int | None:
    """The address of the runtime's `jitc_parallel_for`, which the libraries' `jitc_pool_for`
    is pointed at; None without the runtime extension (the kernels then stay on one thread)."""
    from jitc.backends.cpu.runtime import runtime_library
    runtime = runtime_library()
    if runtime is None:
        return None
    return ctypes.cast(runtime.jitc_parallel_for, ctypes.c_void_p).value


@dataclass(frozen=True)
class Frame:
    """What calls of one signature pass the code: the (shape, dtype) of the arguments and
    results, the arrays after the results (the array constants; for a symbolic module then
    its `dims` vector) and the workspace's size."""

    arg_types: list[tuple]
    out_types: list[tuple]
    constants: list[np.ndarray]
    workspace_bytes: int

    @property
    def release_gil(self) -> bool:
        touched = sum(int(np.prod(s)) for s, _ in self.arg_types + self.out_types)
        return touched + self.workspace_bytes // 4 >= RELEASE_GIL_ELEMENTS


class CExecutable:
    """A compiled function: its C source, the library built from it, constants and the
    call path into `jitc_entry`.

    A symbolic module's code serves every binding of its symbols. With jitc's runtime it is
    called through the C dispatcher as the cpu backend's is (jitc/backends/cpu/symbolic_call.py):
    it binds the symbols from the argument shapes and asks `_binding` once per new shape for the
    symbol values, result shapes and workspace size (the symbol values go after the constants,
    before the workspace). Without the runtime each combination of argument shapes is bound once
    into a ctypes call for exactly those shapes."""

    def __init__(self, module: Module, translation: Translation, library: build.Library,
                 use_dispatcher: bool = True) -> None:
        self.module = module
        self.source = translation.source
        self.plan = translation.plan
        self.kernel_count = translation.kernel_count
        self.workspace_bytes = translation.workspace_bytes
        self.library = library  # keeps the code loaded while this executable lives
        self._entry = _ENTRY_TYPE((ENTRY, library))
        self.address = ctypes.cast(self._entry, ctypes.c_void_p).value
        fn = module.entry
        self.arg_types = [(p.type.shape, p.type.dtype.numpy) for p in fn.parameters]
        self.out_types = [(v.type.shape, v.type.dtype.numpy) for v in fn.outputs]
        self.constants = [np.ascontiguousarray(c) for c in self.plan.constants]
        # Per result, the argument whose buffer it is computed in (donate_argnums), or -1.
        self._donations = [self.plan.donations.get(n, -1) for n in range(len(self.out_types))]
        self._runtime = _runtime() if use_dispatcher else None
        # `jitc.jit` asks for `dispatcher` to build its fast path; None means "no fast path"
        # (a symbolic function has no exact shapes for it to check).
        self.dispatcher: Callable[[int], Callable] | None = None
        self.symbols = translation.symbols
        if self.symbols:
            self._workspace_size = _WORKSPACE_TYPE((WORKSPACE_BYTES, library))
            self._bound: dict[tuple, Callable] = {}  # argument shapes -> their ctypes call
            if self._runtime is not None:
                self.dispatcher = self._symbolic_dispatcher
                self._call = self._symbolic_dispatcher(self._runtime.RESULT_LIST)  # type: ignore
            return
        frame = Frame(self.arg_types, self.out_types, self.constants,
                      self.workspace_bytes)  # type: ignore[arg-type]
        self.release_gil = frame.release_gil
        if self._runtime is not None:
            self.dispatcher = self._dispatcher
            self._call = self._dispatcher(self._runtime.RESULT_LIST)  # type: ignore
        else:
            self._call = functools.partial(self._call_with_ctypes, frame=frame)

    def _dispatcher(self, result_kind: int, writes: Sequence[int] | None = None,
                    types: tuple[list, list] | None = None,
                    frame: Frame | None = None) -> Callable:
        """A C-level callable for exactly this signature (or `frame`'s); returns None on any
        mismatch. `writes`: the arguments the last len(writes) results are copied into after
        a call. `types`: the (shape, dtype) callers use where they differ from the code's but
        have its bytes (complex arrays for float pairs)."""
        from jitc._runtime import Dispatcher
        frame = frame or Frame(self.arg_types, self.out_types, self.constants,
                               self.workspace_bytes)  # type: ignore[arg-type]
        arg_types, out_types = types or (frame.arg_types, frame.out_types)
        specs = [(np.dtype(d).num, s) for s, d in arg_types]
        outs = [(np.dtype(d).num, s) for s, d in out_types]
        return Dispatcher(self.address, specs, outs, frame.constants, frame.workspace_bytes,
                          result_kind, int(frame.release_gil), self._donations, self.library,
                          self.module.entry.name, writes)

    def _call_with_ctypes(self, args: Sequence[object],
                          frame: Frame) -> list[np.ndarray] | None:
        if len(args) != len(frame.arg_types) or not all(
                isinstance(a, np.ndarray) and a.shape == s and a.dtype == d and
                a.flags.c_contiguous and a.flags.aligned
                for a, (s, d) in zip(args, frame.arg_types)):
            return None
        donors = [n for n in self._donations if n >= 0]
        if any(not args[n].flags.writeable for n in donors):  # type: ignore[attr-defined]
            return None
        if any(np.may_share_memory(args[n], a) for n in donors
               for k, a in enumerate(args) if k != n):
            return None  # another argument reads the donated buffer: the caller copies it
        # A donated result is the argument itself, which the code writes in place.
        results = [np.empty(s, d) if donor < 0 else args[donor]  # type: ignore[misc]
                   for (s, d), donor in zip(frame.out_types, self._donations)]
        arena = np.empty(frame.workspace_bytes + ALIGNMENT, np.uint8)
        start = -arena.ctypes.data % ALIGNMENT
        pointers = [a.ctypes.data for a in (*args, *results, *frame.constants)]  # type: ignore
        pointers.append(arena.ctypes.data + start)
        self._entry((ctypes.c_void_p * len(pointers))(*pointers))
        return results

    def _frame(self, arrays: Sequence[np.ndarray]) -> Frame:
        """The frame of a call with the shapes of `arrays`: binds the symbols and checks the
        module's constraints (the interpreter's binding: ArgumentError when they fail)."""
        sizes = bind_symbols(self.module.entry, arrays, self.module.constraints)
        dims = np.array([sizes[s] for s in self.symbols], np.int64)
        workspace = int(self._workspace_size(dims.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))))
        return Frame([(a.shape, d) for a, (_, d) in zip(arrays, self.arg_types)],
                     [(symbolic.substitute(s, sizes), d) for s, d in self.out_types],
                     [*self.constants, dims], workspace)

    def _symbolic_dispatcher(self, result_kind: int, writes: Sequence[int] | None = None,
                             types: tuple[list, list] | None = None) -> Callable | None:
        """`jitc.jit`'s fast path for a symbolic function: the C dispatcher, which binds the
        symbols (see the class docstring) and misses (None) on arguments it cannot take as
        they are or shapes the constraints refuse: the general path then converts or compiles
        exactly."""
        if types is not None:
            return None
        from jitc._runtime import Dispatcher
        specs, keys = key_specs([p.type for p in self.module.entry.parameters])
        outs = [(np.dtype(d).num, (-1,) * len(s)) for s, d in self.out_types]
        return Dispatcher(self.address, specs, outs, self.constants, 0, result_kind, 1,
                          self._donations, self.library, self.module.entry.name, writes,
                          (self._binding, keys, len(self.symbols), False,
                           RELEASE_GIL_ELEMENTS))

    def _binding(self, arrays: tuple[np.ndarray, ...]) -> Binding | None:
        """The C dispatcher's binder: the symbol values, result shapes and workspace bytes
        of a call with these arguments' shapes, or None when the constraints refuse them."""
        try:
            frame = self._frame(arrays)
        except ArgumentError:
            return None
        return (tuple(int(v) for v in frame.constants[-1]),
                tuple(tuple(s) for s, _ in frame.out_types), frame.workspace_bytes)

    def _bind(self, arrays: Sequence[np.ndarray]) -> Callable:
        """The ctypes call path for the shapes of `arrays` (see `_frame`)."""
        call = functools.partial(self._call_with_ctypes, frame=self._frame(arrays))
        if len(self._bound) >= MAX_BINDINGS:  # each keeps a workspace of its size
            self._bound.clear()
        self._bound[tuple(a.shape for a in arrays)] = call
        return call

    def _call_symbolic(self, args: tuple) -> list[np.ndarray] | None:
        if len(args) != len(self.arg_types):
            raise ArgumentError(f"@{self.module.entry.name} takes {len(self.arg_types)} "
                                f"argument(s), got {len(args)}")
        if self._runtime is not None:
            result = self._call(args)
            if result is None and all(type(a) is np.ndarray and a.dtype == d
                                      for a, (_, d) in zip(args, self.arg_types)):
                self._frame(args)  # ArgumentError when the constraints refuse the shapes
            return result
        call = self._bound.get(tuple(getattr(a, "shape", None) for a in args))
        if call is None:
            call = self._bind([np.asarray(a, d) for a, (_, d) in zip(args, self.arg_types)])
        return call(args)

    def __call__(self, args: Sequence[np.ndarray]) -> list[np.ndarray]:
        call = self._call_symbolic if self.symbols else self._call
        result = call(tuple(args))
        if result is None:
            # Not C-contiguous, not aligned, or not an ndarray of exactly the dtype (or a
            # donated array that is read-only or shares memory with another argument):
            # convert, then call.
            donors = set(self._donations)
            arrays = tuple(contiguous_argument(a, d, n in donors)
                           for n, (a, (_, d)) in enumerate(zip(args, self.arg_types)))
            result = call(arrays)
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
        pool = _pool_address()
        translation = lower_module(module, options.donated,
                                   options.num_threads if pool is not None else 1,
                                   options.writebacks)
        library = build.library(translation.source, self.compiler)
        if pool is not None and translation.source.count(POOL) > 1:
            ctypes.c_void_p.in_dll(library, POOL).value = pool
        return CExecutable(module, translation, library, use_dispatcher)


__all__ = ["CBackend", "CExecutable", "C_PASSES", "reads_any_layout"]
