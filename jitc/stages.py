"""The stages of a jitted call once its arguments are known: `Lowered` (the traced module,
optimized on request) and `Compiled` (the backend's executable, callable with arguments of its
signature), with the compile statistics they keep. `jitc.api` makes them; `jax.stages` names
the same idea.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from jitc import compile_cache, profiling, progress
from jitc import dynamic as dynamic_policy
from jitc.arguments import check_python_ints, python_int_bounds
from jitc.backends import complex_pairs, get_backend
from jitc.backends.base import Executable
from jitc.ir import analysis, dtypes
from jitc.ir.core import Module
from jitc.ir.dot import module_to_dot
from jitc.ir.printer import print_module
from jitc.options import Options
from jitc.passes.complex_split import ComplexBoundary
from jitc.passes.pipeline import PassRecord, Pipeline
from jitc.tracing import capture, effects, pytree
from jitc.tracing.errors import TraceError
from jitc.tracing.function import (
    _NO_SELF,
    ArgSpec,
    SideEffects,
    _flatten_arguments,
    _ir_name,
    _Signature,
    abstractify,
    symbol_values,
)


@dataclass
class CompileStats:
    trace_seconds: float = 0.0
    optimize_seconds: float = 0.0
    codegen_seconds: float = 0.0
    passes: tuple[PassRecord, ...] = ()
    cached: bool = False  # loaded from the persistent cache: no optimizer or codegen ran

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

    def __init__(self, lowered: Lowered, optimized: Module | Callable[[], Module],
                 executable: Executable, stats: CompileStats) -> None:
        self.lowered = lowered
        # Loaded from the persistent cache: the optimized IR is made when first asked for.
        self._optimized = optimized
        self.executable = executable
        self.stats = stats
        self.reason = ""  # why the jitted function compiled it (Jitted.compile_stats)
        # Fast paths for calls of this signature, by call form (see Jitted._remember_form):
        # (whether it is the positional C path, the path or None).
        self.fast_paths: dict[tuple, tuple[bool, Callable | None]] = {}

    @functools.cached_property
    def optimized_module(self) -> Module:
        optimized = self._optimized
        return optimized if isinstance(optimized, Module) else optimized()

    def as_text(self, **options: Any) -> str:
        """The backend's code: optimized IR (interpreter), LLVM IR (cpu; `assembly=True` for
        host assembly) or PTX (cuda)."""
        return self.executable.as_text(**options)

    @functools.cached_property
    def kernel_costs(self) -> list[dict[str, object]]:
        """Each kernel of the optimized program with its cost-model figures (what a profile's
        call spans show; jitc/ir/analysis.py `kernel_costs`)."""
        return analysis.kernel_costs(self.optimized_module)

    def as_dot(self) -> str:
        """Graphviz text of the optimized IR: fusions as clusters, types on the edges."""
        return module_to_dot(self.optimized_module, f"{self.lowered.name} (optimized)")

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

    def call_flat(self, leaves: Sequence[object], fun: Callable | None = None,
                  instance: object = _NO_SELF) -> Any:
        """Run on the flat leaves: the arguments', then the captured arrays' (read by the
        caller at call time); then replay the side effects on them and on `fun`'s state."""
        low = self.lowered
        check_python_ints(low.name, leaves, low.int_bounds)
        arrays = [np.asarray(x, dtype=s.type.dtype.numpy) if s.weak else x
                  for x, s in zip(leaves, low.specs)]
        effects_ = low.side_effects
        if not effects_:
            return pytree.unflatten(low.out_tree, self.executable(arrays))
        if effects_.written:
            _check_writable(low, leaves)
        outputs = list(self.executable(arrays))
        count = low.out_tree.num_leaves
        for index, value in zip(effects_.written,
                                outputs[len(outputs) - len(effects_.written):]):
            if value is not leaves[index]:  # else computed in its own buffer, in place
                np.copyto(leaves[index], value, casting="no")
        for write in effects_.rebound:
            write.apply(outputs, fun, instance)
        outputs = outputs[:count]
        env = symbol_values(low.specs, leaves) if effects_.returned else None
        for position, index, steps in effects_.returned:
            # The argument itself, or the same view of it; where its strides make numpy copy
            # instead (a reshape of a transposed array), the computed copy is numpy's answer.
            with contextlib.suppress(ValueError):
                outputs[position] = effects.numpy_view(leaves[index], steps, env)
        for position in effects_.scalars:
            outputs[position] = outputs[position][()]
        return pytree.unflatten(low.out_tree, outputs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        low = self.lowered
        dynamic, static = low.signature.split(args, kwargs)
        if static != low.static:
            raise TypeError(f"{low.name}: compiled for static arguments {dict(low.static)}, "
                            f"called with {dict(static)}; call the jitted function to "
                            "compile for new static values")
        leaves, treedef = _flatten_arguments(dynamic)
        leaves, carried = _carried(leaves, low.specs)
        specs = [abstractify(leaf, f"{low.name}: argument {i}") for i, leaf in enumerate(leaves)]
        specs = [replace(spec, extent=True) if i in carried else spec
                 for i, spec in enumerate(specs)]
        mine = low.specs[:len(specs)]
        if all(s.type.is_static for s in mine):
            served, why = specs == list(low.specs), ""
        else:
            served, why = dynamic_policy.served(mine, specs, low.module.constraints)
        if tuple(dynamic) != low.arg_names or treedef != low.in_tree or not served:
            want = ", ".join(str(s) for s in low.specs)
            got = ", ".join(str(s) for s in specs)
            raise TypeError(f"{low.name}: this compiled function takes ({want}) but was called "
                            f"with ({got}){f' ({why})' if why else ''}; call the jitted "
                            "function instead, which compiles for each new signature")
        fun, instance = low.signature.fun, low.instance
        captured, carried = _carried([capture.resolve(p, fun, instance)
                                      for p in low.side_effects.captured],
                                     low.specs[len(leaves):])
        if [replace(abstractify(a, low.name), extent=i in carried)
                for i, a in enumerate(captured)] != list(low.specs[len(leaves):]):
            names = ", ".join(map(capture.path_name, low.side_effects.captured))
            raise TypeError(f"{low.name}: state it reads ({names}) changed shape or dtype "
                            "since it was compiled; call the jitted function instead, which "
                            "compiles anew")
        return self.call_flat(leaves + captured, fun, instance)


def _carried(leaves: list[object], specs: Sequence[ArgSpec]) -> tuple[list[object], set[int]]:
    """`leaves` with each int that `specs` take as an extent in its carrier array, and the
    positions of those."""
    carried = {i for i, leaf in enumerate(leaves) if i < len(specs) and specs[i].extent and
               type(leaf) is int and leaf >= 0}
    return [capture.extent_carrier(leaf) if i in carried else leaf  # type: ignore[arg-type]
            for i, leaf in enumerate(leaves)], carried


def _check_writable(low: Lowered, leaves: Sequence[object]) -> None:
    """Before a call that writes into arguments: each is writable, and shares no memory with
    another argument (numpy would see a write through both names; compiled code reads the
    arguments as they were before the call)."""
    names = low.leaf_names
    for index in low.side_effects.written:
        target = leaves[index]
        if not isinstance(target, np.ndarray):
            raise TypeError(f"{low.name}: argument {names[index]!r} is written by the function, "
                            f"but it is a {type(target).__name__}; pass a numpy array")
        if not target.flags.writeable:
            raise ValueError(f"{low.name}: argument {names[index]!r} is written by the function "
                             "but is read-only (assignment destination is read-only)")
        for other, leaf in enumerate(leaves):
            if other == index or not isinstance(leaf, np.ndarray):
                continue
            try:
                shared = np.shares_memory(target, leaf, max_work=10_000)
            except np.exceptions.TooHardError:
                shared = True
            if shared:
                raise ValueError(
                    f"{low.name}: argument {names[index]!r} is written by the function and "
                    f"shares memory with argument {names[other]!r}. numpy would see each write "
                    "through both names; jitc compiles them as separate arrays and will not "
                    f"guess. Pass a copy ({names[other]}.copy()) or one array once.")


class Lowered:
    """A traced function for one call signature, not yet compiled."""

    def __init__(self, name: str, module: Module, signature: _Signature, static: tuple,
                 arg_names: tuple[str, ...], in_tree: pytree.TreeDef, specs: Sequence[ArgSpec],
                 out_tree: pytree.TreeDef, options: Options, trace_seconds: float,
                 side_effects: SideEffects | None = None,
                 leaf_names: Sequence[str] = ()) -> None:
        self.name = name
        self.side_effects = side_effects or SideEffects()
        self.instance: object = _NO_SELF  # the bound instance whose state it captured
        self.leaf_names = tuple(leaf_names) or tuple(f"arg{i}" for i in range(len(specs)))
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

    @functools.cached_property
    def _backend_module(self) -> tuple[Module, ComplexBoundary | None]:
        """The module the backend compiles: complex values split into pairs of floats unless
        the backend computes with them (jitc/backends/complex_pairs.py)."""
        return complex_pairs.module_for(get_backend(self.options.backend), self.module)

    @property
    def complex_boundary(self) -> ComplexBoundary | None:
        """How the optimized module takes and gives complex values (as float pairs), or None
        when it has them as they are (jitc/passes/complex_split.py)."""
        return self._backend_module[1]

    def optimize(self) -> Module:
        """The module after the backend's pipeline (with complex values as float pairs for
        backends other than the interpreter: see `complex_boundary`)."""
        with profiling.span("optimize", "compile"):
            return self.pipeline().run(self._backend_module[0])

    def as_text(self, optimized: bool = False) -> str:
        """The IR as traced, or after the backend's optimizer pipeline."""
        module = self.optimize() if optimized else self.module
        return print_module(module, elide_constants=True)

    def as_dot(self, optimized: bool = False) -> str:
        """Graphviz text of the IR as traced, or after the optimizer (fusions as clusters,
        shapes and dtypes on the edges); `dot -Tsvg` draws it (docs/profiling.md)."""
        module = self.optimize() if optimized else self.module
        return module_to_dot(module, f"{self.name} (optimized)" if optimized else self.name)

    def compile(self) -> Compiled:
        backend = get_backend(self.options.backend)
        symbols = sorted(set().union(*(t.symbols for t in self.module.entry.parameter_types)))
        if symbols and not getattr(backend, "symbolic_extents", False):
            raise TraceError(f"{self.name}: compiling with symbolic dimensions "
                             f"({', '.join(symbols)}) is not supported by the {backend.name} "
                             "backend yet (its kernels take static extents); use "
                             "backend='interpreter', run the traced module with "
                             "jitc.interpret(lowered.module, args), or lower with arrays of "
                             "concrete shapes")
        start = time.perf_counter()
        signature = ", ".join(str(s) for s in self.specs)
        with collector_paused(), progress.watch(self.name, signature), \
                profiling.span(f"compile {self.name}", "compile", signature=signature,
                               backend=backend.name) as span:
            # The persistent cache (compile_cache.py): a hit skips the optimizer and backend.
            progress.stage("the persistent cache")
            module, boundary = self._backend_module
            key = compile_cache.key(module, self.options, backend)
            executable = compile_cache.load(
                key, backend,
                lambda: backend.compile(self.optimize(), self.options.with_(disk_cache=False)))
            span.note(disk_cache="hit" if executable is not None else "miss")
            profiling.instant(f"disk cache {'hit' if executable is not None else 'miss'}",
                              "cache", function=self.name, signature=signature)
            if executable is not None:
                stats = CompileStats(self.trace_seconds, 0.0, time.perf_counter() - start,
                                     cached=True)
                return Compiled(self, self.optimize, complex_pairs.wrap(executable, boundary),
                                stats)
            pipeline = self.pipeline()
            with profiling.span("optimize", "compile"):
                optimized = pipeline.run(module)
            middle = time.perf_counter()
            progress.stage(f"codegen ({backend.name} backend)")
            with profiling.span("codegen", "compile", backend=backend.name):
                executable = backend.compile(optimized, self.options)
            compile_cache.store(key, backend, executable)
        end = time.perf_counter()
        stats = CompileStats(self.trace_seconds, middle - start, end - middle,
                             tuple(pipeline.records))
        return Compiled(self, optimized, complex_pairs.wrap(executable, boundary), stats)
