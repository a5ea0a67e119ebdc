"""`jitc.jit`: signature → cache → trace → optimize → compile → call.

A jitted function keeps one compiled executable per call signature: the pytree structure of
the arguments, the shape, dtype and weak-typedness of each array leaf, and the values of static
arguments.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jitc.arguments import check_int64, check_plain_array, check_python_ints, python_int_bounds
from jitc.backends import get_backend
from jitc.backends.base import Executable
from jitc.ir import analysis, dtypes, ops
from jitc.ir.core import Module
from jitc.ir.printer import print_module
from jitc.ir.types import TensorType
from jitc.options import Options
from jitc.passes.pipeline import PassRecord, Pipeline
from jitc.tracing import pytree
from jitc.tracing.errors import JitcError, TraceError
from jitc.tracing.state import TraceState, trace_stack
from jitc.tracing.tracer import Tracer

# Compiled signatures a jitted function keeps by default (each holds its machine code, some
# hundreds of KiB); `jit(..., cache_limit=N)` changes it.
DEFAULT_CACHE_LIMIT = 128


@dataclass(frozen=True)
class ArgSpec:
    """The abstract value of one array argument: its type, and whether it was a Python scalar
    (weakly typed under NEP 50)."""

    type: TensorType
    weak: bool = False

    def __str__(self) -> str:
        return self.type.short() + (" (Python scalar)" if self.weak else "")


_WEAK_TYPES = {bool: dtypes.bool_, int: dtypes.int64, float: dtypes.float64}


def abstractify(leaf: object, where: str) -> ArgSpec:
    # `__jitc_array__`: an array held elsewhere (a GPU device array) that has shape and dtype.
    if isinstance(leaf, np.ndarray) or getattr(type(leaf), "__jitc_array__", False):
        if isinstance(leaf, np.ndarray):
            check_plain_array(leaf, where)
        try:
            return ArgSpec(TensorType(dtypes.from_numpy(leaf.dtype), leaf.shape))
        except TypeError as exc:
            raise TypeError(f"{where}: {exc}") from None
    kind = type(leaf)
    if kind in _WEAK_TYPES:
        if kind is int:
            check_int64(leaf, where)  # type: ignore[arg-type]
        return ArgSpec(TensorType(_WEAK_TYPES[kind], ()), weak=True)
    if isinstance(leaf, np.generic):
        return abstractify(np.asarray(leaf), where)
    raise TypeError(f"{where}: jitc.jit arguments must be numpy arrays, Python or numpy "
                    f"scalars, or tuples/lists/dicts of them; got {kind.__name__}. Mark "
                    "non-array arguments static with static_argnums/static_argnames.")


def _ir_name(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"f_{cleaned}"


class _Signature:
    """Splits a call's arguments into static values and dynamic pytrees, once per function."""

    def __init__(self, fun: Callable, static_argnums: Iterable[int],
                 static_argnames: Iterable[str]) -> None:
        self.fun = fun
        try:
            self.sig: inspect.Signature | None = inspect.signature(fun)
        except (TypeError, ValueError):
            self.sig = None
        params = list(self.sig.parameters.values()) if self.sig else []
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = set(static_argnames)
        for n in static_argnums:
            if not -len(positional) <= n < len(positional):
                raise ValueError(f"static_argnums={n} is out of range for "
                                 f"{fun.__name__}{self.sig}")
            names.add(positional[n])
        unknown = names - {p.name for p in params}
        if unknown and self.sig is not None:
            raise ValueError(f"static_argnames {sorted(unknown)} are not parameters of "
                             f"{fun.__name__}{self.sig}")
        self.static_names = frozenset(names)
        self.simple = self.sig is not None and not names and all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
            for p in params)
        self.num_positional = len(params)

    def split(self, args: tuple, kwargs: dict[str, Any]) -> tuple[dict[str, Any], tuple]:
        """(dynamic arguments by name in order, static arguments as a hashable tuple)."""
        if self.sig is None:
            if kwargs:
                raise TypeError("keyword arguments need a function with a signature")
            return {f"arg{i}": a for i, a in enumerate(args)}, ()
        bound = self.sig.bind(*args, **kwargs)
        given = dict(bound.arguments)
        # Defaults of static parameters join the cache key; defaults of the others are left
        # to Python, so `def f(x, axis=-1)` keeps a plain int axis instead of tracing it.
        bound.apply_defaults()
        dynamic, static = {}, []
        for name, value in bound.arguments.items():
            if name not in self.static_names and name not in given:
                continue
            if name in self.static_names:
                try:
                    hash(value)
                except TypeError:
                    raise TypeError(f"static argument {name!r} of {self.fun.__name__} must be "
                                    f"hashable, got {type(value).__name__}") from None
                static.append((name, value))
            else:
                dynamic[name] = value
        return dynamic, tuple(static)

    def rebuild(self, dynamic: dict[str, Any], static: tuple) -> tuple[tuple, dict[str, Any]]:
        values = dict(dynamic)
        values.update(static)
        if self.sig is None:
            return tuple(values.values()), {}
        bound = inspect.BoundArguments(self.sig, values)  # type: ignore[arg-type]
        return bound.args, bound.kwargs


def _leaf_names(dynamic: dict[str, Any]) -> list[str]:
    """A readable name per array leaf, in flattening order: `x`, `params_w1`, `xs_0`."""
    return [path for name, value in dynamic.items()
            for path in pytree.leaf_paths(value, name)]


def _flatten_arguments(dynamic: dict[str, Any]) -> tuple[list[Any], pytree.TreeDef]:
    """The array leaves of the dynamic arguments, in parameter order."""
    return pytree.flatten(tuple(dynamic.values()), _is_leaf)


def _is_leaf(x: object) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic)) or \
        getattr(type(x), "__jitc_array__", False)


def trace_function(fun: Callable, signature: _Signature, dynamic: dict[str, Any], static: tuple,
                   specs: Sequence[ArgSpec], treedef: pytree.TreeDef
                   ) -> tuple[Module, pytree.TreeDef]:
    """Run `fun` on tracers and record what it does as a Module."""
    name = getattr(fun, "__name__", "function")
    state = TraceState(_ir_name(name), name)
    paths = _leaf_names(dynamic)
    tracers = []
    for i, spec in enumerate(specs):
        hint = _ir_name(paths[i]) if i < len(paths) else None
        value = state.builder.emit(ops.PARAMETER, [], {"index": i}, spec.type, name_hint=hint)
        tracers.append(Tracer(state, value, spec.weak))
    traced_values = pytree.unflatten(treedef, tracers)
    args, kwargs = signature.rebuild(dict(zip(dynamic, traced_values)), static)
    stack = trace_stack()
    stack.append(state)
    try:
        out = fun(*args, **kwargs)
    finally:
        stack.pop()
    leaves, out_tree = pytree.flatten(out, _is_leaf)
    outputs = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tracer):
            if leaf.trace is not state:
                raise TraceError(f"{name} returned a traced value from another trace (a tracer "
                                 "leaked out of an inner function)")
            outputs.append(leaf.value)
        elif isinstance(leaf, (np.ndarray, np.generic, bool, int, float)):
            outputs.append(state.constant(np.asarray(leaf)).value)
        else:
            raise TraceError(f"{name} returned a {type(leaf).__name__} (output {i}); jitc "
                             "functions return arrays, scalars, or tuples/lists/dicts of them")
    state.function.outputs = outputs
    return Module([state.function]), out_tree


@dataclass
class CompileStats:
    trace_seconds: float = 0.0
    optimize_seconds: float = 0.0
    codegen_seconds: float = 0.0
    passes: tuple[PassRecord, ...] = ()

    @property
    def total_seconds(self) -> float:
        return self.trace_seconds + self.optimize_seconds + self.codegen_seconds


_collector_lock = threading.Lock()
_collector_depth = 0       # compiles in progress, on any thread
_collector_paused = False  # whether the outermost of them turned the collector off


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while compiling (as it was, after).

    A compile allocates tens of thousands of short-lived objects (IR, llvmlite values), and
    every few hundred allocations start a collection; now and then that is a full one, which
    walks every object of the process: 20 to 30 ms, landing in whichever compile is running,
    once JAX or torch is imported. What a compile leaves behind is freed by reference counting
    or by the first collection after it.
    """
    global _collector_depth, _collector_paused
    with _collector_lock:
        _collector_depth += 1
        if _collector_depth == 1 and gc.isenabled():
            gc.disable()
            _collector_paused = True
    try:
        yield
    finally:
        with _collector_lock:
            _collector_depth -= 1
            if _collector_depth == 0 and _collector_paused:
                _collector_paused = False
                gc.enable()


class Compiled:
    """An executable for one call signature; call it with arrays of exactly that signature."""

    def __init__(self, lowered: Lowered, optimized: Module, executable: Executable,
                 stats: CompileStats) -> None:
        self.lowered = lowered
        self.optimized_module = optimized
        self.executable = executable
        self.stats = stats

    def as_text(self, **options: Any) -> str:
        """The backend's code: optimized IR (interpreter), LLVM IR (cpu; `assembly=True` for
        host assembly) or PTX (cuda)."""
        return self.executable.as_text(**options)

    def cost_analysis(self) -> dict[str, int]:
        """flops, transcendentals, bytes_accessed and kernels of the optimized program."""
        costs = analysis.cost_analysis(self.optimized_module)
        kernels = getattr(self.executable, "kernel_count", None)
        if kernels is not None:
            costs["kernels"] = kernels
        return costs

    def memory_analysis(self) -> dict[str, int]:
        """Bytes of arguments, results, constants and temporaries (the workspace arena after
        buffer assignment; `intermediate_bytes` is what no reuse at all would need)."""
        figures = analysis.signature_bytes(self.optimized_module)
        workspace = getattr(self.executable, "workspace_bytes", None)
        intermediate = analysis.intermediate_bytes(self.optimized_module)
        figures["temp_bytes"] = intermediate if workspace is None else workspace
        figures["intermediate_bytes"] = intermediate
        return figures

    def call_flat(self, leaves: Sequence[object]) -> Any:
        check_python_ints(self.lowered.name, leaves, self.lowered.int_bounds)
        arrays = [np.asarray(x, dtype=s.type.dtype.numpy) if s.weak else x
                  for x, s in zip(leaves, self.lowered.specs)]
        outputs = self.executable(arrays)
        return pytree.unflatten(self.lowered.out_tree, outputs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        low = self.lowered
        dynamic, static = low.signature.split(args, kwargs)
        if static != low.static:
            raise TypeError(f"{low.name}: compiled for static arguments {dict(low.static)}, "
                            f"called with {dict(static)}; call the jitted function to "
                            "compile for new static values")
        leaves, treedef = _flatten_arguments(dynamic)
        specs = [abstractify(leaf, f"{low.name}: argument {i}") for i, leaf in enumerate(leaves)]
        if tuple(dynamic) != low.arg_names or treedef != low.in_tree or specs != list(low.specs):
            want = ", ".join(str(s) for s in low.specs)
            got = ", ".join(str(s) for s in specs)
            raise TypeError(f"{low.name}: this compiled function takes ({want}) but was called "
                            f"with ({got}); call the jitted function instead, which compiles "
                            "for each new signature")
        return self.call_flat(leaves)


class Lowered:
    """A traced function for one call signature, not yet compiled."""

    def __init__(self, name: str, module: Module, signature: _Signature, static: tuple,
                 arg_names: tuple[str, ...], in_tree: pytree.TreeDef, specs: Sequence[ArgSpec],
                 out_tree: pytree.TreeDef, options: Options, trace_seconds: float) -> None:
        self.name = name
        self.module = module
        self.signature = signature
        self.static = static
        self.arg_names = arg_names  # the dynamic arguments passed, in parameter order
        self.in_tree = in_tree
        self.specs = tuple(specs)
        self.out_tree = out_tree
        self.options = options
        self.trace_seconds = trace_seconds
        self.int_bounds = python_int_bounds(module, [i for i, s in enumerate(self.specs)
                                                     if s.weak and s.type.dtype is dtypes.int64])

    def pipeline(self) -> Pipeline:
        backend = get_backend(self.options.backend)
        dump = self.options.dump_dir
        if dump is not None:
            import os
            dump = os.path.join(dump, _ir_name(self.name))  # `<lambda>` -> `_lambda_`
        return Pipeline(f"{backend.name}", list(backend.passes(self.options)),
                        verify=self.options.verify, dump_dir=dump,
                        disabled=self.options.disabled_passes)

    def optimize(self) -> Module:
        return self.pipeline().run(self.module)

    def as_text(self, optimized: bool = False) -> str:
        """The IR as traced, or after the backend's optimizer pipeline."""
        module = self.optimize() if optimized else self.module
        return print_module(module, elide_constants=True)

    def compile(self) -> Compiled:
        backend = get_backend(self.options.backend)
        start = time.perf_counter()
        with collector_paused():
            pipeline = self.pipeline()
            optimized = pipeline.run(self.module)
            middle = time.perf_counter()
            executable = backend.compile(optimized, self.options)
        end = time.perf_counter()
        stats = CompileStats(self.trace_seconds, middle - start, end - middle,
                             tuple(pipeline.records))
        return Compiled(self, optimized, executable, stats)


class Jitted:
    """The callable `jitc.jit` returns."""

    def __init__(self, fun: Callable, options: Options, static_argnums: Sequence[int],
                 static_argnames: Sequence[str], donate_argnums: Sequence[int] = (),
                 cache_limit: int = DEFAULT_CACHE_LIMIT) -> None:
        self.fun = fun
        self.options = options
        self.signature = _Signature(fun, static_argnums, static_argnames)
        self.donate_argnums = frozenset(donate_argnums)
        self.name = getattr(fun, "__name__", "function")
        # Least recently used first: past `cache_limit` signatures the oldest is dropped (a
        # call running it, or the C fast path, holds its machine code until it is done).
        if cache_limit < 1:
            raise ValueError(f"cache_limit must be at least 1, got {cache_limit}")
        self.cache_limit = cache_limit
        self._cache: OrderedDict[tuple, Compiled] = OrderedDict()
        self._fast: Callable | None = None
        # One compile per signature however many threads ask for it at once: the others wait
        # for it. Each signature has its own lock, so different signatures compile in parallel;
        # reentrant, since tracing may call this function with concrete arrays.
        self._lock = threading.Lock()
        self._compiling: dict[tuple, threading.RLock] = {}
        functools.update_wrapper(self, fun)

    def _abstract_call(self, args: tuple, kwargs: dict[str, Any]):
        dynamic, static = self.signature.split(args, kwargs)
        leaves, treedef = _flatten_arguments(dynamic)
        paths = _leaf_names(dynamic)
        specs = tuple(abstractify(leaf, f"{self.name}: argument "
                                        f"{paths[i] if i < len(paths) else i}")
                      for i, leaf in enumerate(leaves))
        return dynamic, static, leaves, treedef, specs

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        dynamic, static, _, treedef, specs = self._abstract_call(args, kwargs)
        return self._lower(dynamic, static, treedef, specs)

    def _lower(self, dynamic, static, treedef, specs) -> Lowered:
        start = time.perf_counter()
        module, out_tree = trace_function(self.fun, self.signature, dynamic, static, specs,
                                          treedef)
        options = self.options
        if self.donate_argnums:
            options = options.with_(donated=self._donated_leaves(dynamic))
        return Lowered(self.name, module, self.signature, static, tuple(dynamic), treedef,
                       specs, out_tree, options, time.perf_counter() - start)

    def _donated_leaves(self, dynamic: dict[str, Any]) -> frozenset[int]:
        """Flat leaf indices of the donated positional arguments (each must be one array)."""
        params = list(self.signature.sig.parameters) if self.signature.sig else list(dynamic)
        leaves, position = set(), 0
        for name, value in dynamic.items():
            count = len(_flatten_arguments({name: value})[0])
            argnum = params.index(name) if name in params else -1
            if argnum in self.donate_argnums:
                if count != 1 or not isinstance(value, np.ndarray):
                    raise TypeError(f"{self.name}: donate_argnums names argument {name!r}, "
                                    "which is not a single array")
                leaves.add(position)
            position += count
        return frozenset(leaves)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        if fast is not None and not kwargs:
            result = fast(args)  # C: checks the arrays against the last signature
            if result is not None:
                return result
        if trace_stack() and _contains_tracer(args, kwargs):
            return self.fun(*args, **kwargs)  # called from another traced function: inline
        dynamic, static, leaves, treedef, specs = self._abstract_call(args, kwargs)
        # The names matter: f(x, y=a) and f(x, z=a) have the same leaves but mean different
        # things when y and z have defaults.
        key = (tuple(dynamic), treedef, specs, static)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._compile_once(key, dynamic, static, treedef, specs)
        else:
            with contextlib.suppress(KeyError):  # another thread may have just evicted it
                self._cache.move_to_end(key)
        self._fast = self._fast_path(compiled)
        return compiled.call_flat(leaves)

    def _compile_once(self, key: tuple, dynamic: dict[str, Any], static: tuple,
                      treedef: pytree.TreeDef, specs: tuple[ArgSpec, ...]) -> Compiled:
        """The cached executable for `key`, compiled by exactly one of the threads that ask.

        Replacing a cache entry while another thread runs the old one would free machine code
        under it; here an entry, once made, stays until `clear_cache` or until `cache_limit`
        newer signatures evict it (a call still running it holds it alive meanwhile).
        """
        with self._lock:
            signature_lock = self._compiling.setdefault(key, threading.RLock())
        try:
            with signature_lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    with collector_paused():
                        compiled = self._lower(dynamic, static, treedef, specs).compile()
                    self._cache[key] = compiled
                    while len(self._cache) > self.cache_limit:
                        self._cache.popitem(last=False)
                return compiled
        finally:
            with self._lock:
                self._compiling.pop(key, None)

    def _fast_path(self, compiled: Compiled) -> Callable | None:
        """A C dispatcher for calls like this one, when the signature allows it: positional
        array arguments only, results a single array or a flat tuple of arrays."""
        make = getattr(compiled.executable, "dispatcher", None)
        low = compiled.lowered
        flat = pytree.TreeDef("tuple", (pytree.LEAF,) * len(low.specs))
        if make is None or not self.signature.simple or low.in_tree != flat or \
                any(s.weak for s in low.specs):
            return None
        from jitc._runtime import RESULT_SINGLE, RESULT_TUPLE
        out = low.out_tree
        if out == pytree.LEAF:
            return make(RESULT_SINGLE)
        if out.kind == "tuple" and all(c == pytree.LEAF for c in out.children):
            return make(RESULT_TUPLE)
        return None

    def compile_stats(self) -> list[dict[str, Any]]:
        """Per compiled signature: trace, optimize and codegen seconds and each pass's time."""
        out = []
        for compiled in list(self._cache.values()):
            s = compiled.stats
            out.append({"signature": ", ".join(str(a) for a in compiled.lowered.specs),
                        "trace_seconds": s.trace_seconds,
                        "optimize_seconds": s.optimize_seconds,
                        "codegen_seconds": s.codegen_seconds,
                        "total_seconds": s.total_seconds,
                        "passes": [(r.name, r.seconds) for r in s.passes]})
        return out

    def clear_cache(self) -> None:
        self._cache.clear()
        self._fast = None

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"<jitc.jit {self.name} backend={self.options.backend}>"


def _contains_tracer(args: tuple, kwargs: dict[str, Any]) -> bool:
    leaves, _ = pytree.flatten((args, kwargs), _is_leaf)
    return any(isinstance(leaf, Tracer) for leaf in leaves)


def jit(fun: Callable | None = None, *, backend: str | None = None,
        static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
        verify: bool | None = None, dump_dir: str | None = None,
        disabled_passes: Iterable[str] = (), donate_argnums: int | Sequence[int] = (),
        num_threads: int | None = None, cache_limit: int = DEFAULT_CACHE_LIMIT) -> Any:
    """Compile `fun` for each new argument signature; usable as `@jit` or `@jit(...)`.

    - `backend`: "cpu" (the default), "interpreter" (the reference semantics), or any other
      registered backend.
    - `static_argnums` / `static_argnames`: arguments passed as Python values, not traced; a
      new value compiles anew (they must be hashable).
    - `donate_argnums`: array arguments whose memory a result of the same type may reuse; the
      result is then that very array, updated in place, and the caller must not use the
      argument's old value afterwards (as in JAX). Reuse happens only where it is safe.
    - `num_threads`: threads the CPU backend may use (default: JITC_NUM_THREADS or all CPUs).
    - `cache_limit`: how many signatures stay compiled; past it the least recently used one
      is dropped (and compiled again if it comes back).
    - `verify`: verify the IR after every pass; `dump_dir`: write it after every pass;
      `disabled_passes`: names of passes to skip.
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    changes: dict[str, Any] = {"disabled_passes": frozenset(disabled_passes)}
    if backend is not None:
        changes["backend"] = backend
    if verify is not None:
        changes["verify"] = verify
    if dump_dir is not None:
        changes["dump_dir"] = dump_dir
    if num_threads is not None:
        changes["num_threads"] = int(num_threads)
    if isinstance(donate_argnums, int):
        donate_argnums = (donate_argnums,)
    options = Options().with_(**changes)
    get_backend(options.backend)  # an unknown backend fails here, not at the first call

    def wrap(f: Callable) -> Jitted:
        return Jitted(f, options, tuple(static_argnums), tuple(static_argnames),
                      tuple(donate_argnums), cache_limit)
    return wrap if fun is None else wrap(fun)


__all__ = ["jit", "Jitted", "Lowered", "Compiled", "ArgSpec", "JitcError"]
