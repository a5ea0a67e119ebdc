"""`jitc.jit`: signature → cache → trace → optimize → compile → call.

A jitted function keeps one compiled executable per call signature: the pytree structure of
the arguments, the shape, dtype and weak-typedness of each array leaf, and the values of static
arguments.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import types
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from jitc import dispatch, jit_pickle, profiling, progress
from jitc import dynamic as dynamic_policy
from jitc.backends import get_backend
from jitc.ir import symbolic
from jitc.ir.core import Module, transform_module
from jitc.ir.verifier import verify
from jitc.options import Options
from jitc.passes.reroll import reroll
from jitc.stages import Compiled, Lowered, collector_paused
from jitc.tracing import capture, pytree
from jitc.tracing.errors import JitcError, SpecializeArgument
from jitc.tracing.function import (
    _NO_SELF,
    ArgSpec,
    _flatten_arguments,
    _is_leaf,
    _leaf_names,
    _Signature,
    abstractify,
    captured_specs,
    trace_function,
)
from jitc.tracing.state import trace_stack
from jitc.tracing.tracer import Tracer

# Compiled signatures a jitted function keeps by default (each holds its machine code, some
# hundreds of KiB); `jit(..., cache_limit=N)` changes it.
DEFAULT_CACHE_LIMIT = 128


try:
    # Positional calls reach `_fast` from C (runtime/pymodule.c), others `_general_call`.
    from jitc._runtime import FastCall as _FastCall
except ImportError:  # the extension is not built: no C fast path at all
    class _FastCall:  # type: ignore[no-redef]
        """What the C base does, in Python (`_fast` stays None without the extension)."""

        _fast: Callable | None = None

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return self._general_call(args, kwargs)

def _structure(key: tuple) -> tuple:
    """A call's cache key without its argument specs: what a symbolic compilation must match
    exactly (names, tree, static arguments, captured arrays)."""
    return (key[0], key[1], *key[3:])


def _argument_specs(compiled: Compiled, specs: Sequence[ArgSpec]) -> tuple[ArgSpec, ...]:
    """The compiled specs of the call's argument leaves (`specs`), without the captured
    arrays after them: those are part of the structure, equal already."""
    return tuple(compiled.lowered.specs[:len(specs)])


def _is_symbolic(compiled: Compiled) -> bool:
    return any(not s.type.is_static for s in compiled.lowered.specs)


class Jitted(_FastCall):
    """The callable `jitc.jit` returns. A call with positional arrays of the last compiled
    signature runs the machine code from C (`_FastCall`); any other call takes
    `_general_call`."""

    def __init__(self, fun: Callable, options: Options, static_argnums: Sequence[int],
                 static_argnames: Sequence[str], donate_argnums: Sequence[int] = (),
                 cache_limit: int = DEFAULT_CACHE_LIMIT,
                 explicit_options: Iterable[str] = (), dynamic: object = None) -> None:
        self.dynamic = dynamic_policy.normalize(dynamic)
        # A bound method (`jitc.jit(obj.step)`): its instance's state is captured like `self`'s
        # in a method jitted in its class body.
        self._instance = _NO_SELF
        if isinstance(fun, types.MethodType):
            self._instance, fun = fun.__self__, fun.__func__
            static_argnums = tuple(n + 1 if n >= 0 else n for n in static_argnums)
            donate_argnums = tuple(n + 1 for n in donate_argnums)
        self.fun = fun
        self.options = options
        # The options the caller chose; the others are this process's defaults, and those of
        # a process it is pickled to are that process's own.
        self._explicit_options = frozenset(explicit_options)
        self.signature = _Signature(fun, static_argnums, static_argnames)
        self._static_args = (tuple(static_argnums), tuple(static_argnames))
        # Python int arguments used as extents, carried as zero-size arrays (_specialize), and
        # the paths of captured ints that changed between calls (_changed_ints).
        self._extent_args: tuple[str, ...] = ()
        self._extent_paths: frozenset[capture.Path] = frozenset()
        self.donate_argnums = frozenset(donate_argnums)
        self.name = getattr(fun, "__name__", "function")
        # Least recently used first: past `cache_limit` signatures the oldest is dropped (a
        # call running it, or the C fast path, holds its machine code until it is done).
        if cache_limit < 1:
            raise ValueError(f"cache_limit must be at least 1, got {cache_limit}")
        self.cache_limit = cache_limit
        self._cache: OrderedDict[tuple, Compiled] = OrderedDict()
        # Held for every change of `_cache` and `_symbolic` and every copy of their items: the
        # keys hash and compare in Python, so another thread can run (`clear_cache`, a store)
        # in the middle of an iteration, which an OrderedDict answers with KeyError.
        self._cache_lock = threading.Lock()
        # The symbolic compilations (also in `_cache`), newest last, by the key that compiled
        # them; a call whose exact key is not cached tries each (jitc/dynamic.py).
        self._symbolic: dict[tuple, Compiled] = {}
        # Signature structures whose symbolic compilation was refused, with the reason: they
        # compile exactly from then on.
        self._refused: dict[tuple, str] = {}
        self._fast: Callable | None = None  # positional arrays (jitc.dispatch)
        # Per call form (bound or not, positional count, keyword names): its fast path.
        self._forms: dict[tuple, Callable] = {}
        # One compile per signature however many threads ask for it at once: the others wait
        # for it. Each signature has its own lock, so different signatures compile in parallel;
        # reentrant, since tracing may call this function with concrete arrays.
        self._lock = threading.Lock()
        self._compiling: dict[tuple, threading.RLock] = {}
        # Per signature structure: held while deciding (and making) its symbolic compilation.
        self._planning: dict[tuple, threading.RLock] = {}
        self._global_names = capture.code_global_names(fun)
        params = list(self.signature.sig.parameters) if self.signature.sig else []
        self._self_name = params[0] if params else "self"
        functools.update_wrapper(self, fun)
        profiling.register(self)

    def forget_fast_paths(self) -> None:
        """Drop the installed fast paths; the next call of each form installs them again (a
        profile's start and end do this, to put its timing in front of them or take it away)."""
        self._fast = None
        self._forms = {}

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        """`@jitc.jit` on a method: `obj.method` is bound to `obj`, whose array state the
        method reads and writes as captured state (jitc.tracing.capture)."""
        if instance is None:
            return self
        return BoundJitted(self, instance)

    def _abstract_call(self, args: tuple, kwargs: dict[str, Any], instance: object = _NO_SELF):
        if instance is not _NO_SELF:
            args = (instance, *args)
        dynamic, static = self.signature.split(args, kwargs)
        if instance is not _NO_SELF:
            dynamic.pop(self._self_name, None)
        carried = []
        for name in self._extent_args:
            value = dynamic.get(name)
            if type(value) is int:
                if value >= 0:
                    dynamic[name] = capture.extent_carrier(value)
                    carried.append(name)
                else:  # no extent is negative: this call compiles for the value
                    del dynamic[name]
                    static = (*static, (name, value))
        leaves, treedef = _flatten_arguments(dynamic)
        paths = _leaf_names(dynamic)
        specs = tuple(abstractify(leaf, f"{self.name}: argument "
                                        f"{paths[i] if i < len(paths) else i}")
                      for i, leaf in enumerate(leaves))
        if carried:
            carriers = {id(dynamic[name]) for name in carried}
            specs = tuple(replace(spec, extent=True) if id(leaf) in carriers else spec
                          for spec, leaf in zip(specs, leaves))
        return dynamic, static, leaves, treedef, specs

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        return self._specializing(lambda: self._lower_call(args, kwargs, self._instance))

    def _lower_call(self, args: tuple, kwargs: dict[str, Any], instance: object,
                    obstacles: list[JitcError] | None = None) -> Lowered:
        dynamic, static, _, treedef, specs = self._abstract_call(args, kwargs, instance)
        return self._lower(dynamic, static, treedef, specs, self._captured(instance), instance,
                           obstacles)

    def explain(self, *args: Any, **kwargs: Any) -> list[str]:
        """Every obstacle to compiling a call with these arguments, found in one trace: each
        message names the construct, the line and the fix. Empty when the call compiles.

        Past a data-dependent `if`, tracing goes on down the False branch; past an unsupported
        numpy function, with numpy's result on zeros of the same shapes. A shape error ends
        the trace (what follows has no shapes to go on with) and is the last entry.
        """
        def attempt() -> list[JitcError]:
            obstacles: list[JitcError] = []
            try:
                self._lower_call(args, kwargs, self._instance, obstacles)
            except SpecializeArgument:
                raise
            except JitcError as exc:
                obstacles.append(exc)
            return obstacles
        return [str(o) for o in self._specializing(attempt)]

    def _captured(self, instance: object) -> capture.Captured:
        return capture.walk(self.fun, self._global_names, instance, self._extent_paths)

    def _lower(self, dynamic, static, treedef, specs, captured: capture.Captured,
               instance: object = _NO_SELF, obstacles: list[JitcError] | None = None,
               captured_types: Sequence[ArgSpec] | None = None) -> Lowered:
        start = time.perf_counter()
        with profiling.span(f"trace {self.name}", "compile"):
            module, out_tree, side_effects = trace_function(
                self.fun, self.signature, dynamic, static, specs, treedef, captured, instance,
                self._self_name, obstacles, captured_types)
        options = self.options
        if "reroll" not in options.disabled_passes:
            # Loops that tracing unrolled become while ops again (passes/reroll.py), so that
            # `lower().as_text()` shows them and nothing after this grows with a trip count.
            with profiling.span("reroll", "compile"):
                module = transform_module(module, reroll)
            if options.verify:
                verify(module)
        if self.donate_argnums:
            options = options.with_(donated=self._donated_leaves(dynamic))
        if side_effects.written:
            options = options.with_(writebacks=tuple(side_effects.written))
        names = _leaf_names(dynamic) + [capture.path_name(p) for p, _ in captured.arrays]
        specs = (*specs, *(captured_specs(captured) if captured_types is None
                           else captured_types))
        lowered = Lowered(self.name, module, self.signature, static, tuple(dynamic), treedef,
                          specs, out_tree, options, time.perf_counter() - start, side_effects,
                          names)
        lowered.instance = instance
        return lowered

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

    def _general_call(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        instance = self._instance  # a jitted bound method's instance, else _NO_SELF
        form = self._forms.get((instance is not _NO_SELF, len(args), *kwargs))
        if form is not None:
            result = form(args, kwargs, instance)
            if result is not dispatch.MISS:
                return result
        if trace_stack() and _contains_tracer(args, kwargs):
            if self._instance is not _NO_SELF:
                return self.fun(self._instance, *args, **kwargs)
            return self.fun(*args, **kwargs)  # called from another traced function: inline
        return self._call(args, kwargs, self._instance)

    def _specialize(self, name: str) -> None:
        """The function used the Python int argument `name` as a Python int (a shape, a slice
        bound, `range(n)`), which only a known value can be. Under the automatic dynamic
        policy it becomes an extent: compiled for its value, and once it changes for every
        value of at least 2 as a symbolic dimension (a negative value, which no extent is,
        compiles for itself). Otherwise compile for each value."""
        self.forget_fast_paths()
        if self.dynamic is None and name not in self._extent_args:
            self._extent_args = (*self._extent_args, name)
            return
        argnums, argnames = self._static_args
        self._static_args = (argnums, (*argnames, name))
        self.signature = _Signature(self.fun, *self._static_args)

    def _call(self, args: tuple, kwargs: dict[str, Any], instance: object) -> Any:
        return self._specializing(lambda: self._call_once(args, kwargs, instance))

    def _specializing(self, attempt: Callable[[], Any]) -> Any:
        """`attempt()`, again after each int argument it needed as a Python int is made
        static (see `_specialize`)."""
        while True:
            try:
                return attempt()
            except SpecializeArgument as exc:
                if exc.name in self.signature.static_names:
                    raise
                self._specialize(exc.name)

    def _call_once(self, args: tuple, kwargs: dict[str, Any], instance: object,
                   cause: str = "") -> Any:
        dynamic, static, leaves, treedef, specs = self._abstract_call(args, kwargs, instance)
        captured = self._captured(instance)
        # The names matter: f(x, y=a) and f(x, z=a) have the same leaves but mean different
        # things when y and z have defaults.
        # Static values by type too: 1 == True, but `flag is True` tells them apart.
        # The captured arrays' specs follow the arguments': the dynamic policy treats an
        # extent of state that changes between calls (a growing KV cache) like an argument's.
        key = (tuple(dynamic), treedef, (*specs, *captured_specs(captured)), static,
               tuple(type(v) for _, v in static), captured.key())
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._symbolic_serving(key)
        hit = compiled is not None
        if compiled is None:
            changed = self._changed_ints(key, captured)
            if changed:
                # From now on those ints are extents: walk the state again to carry them.
                self._extent_paths |= frozenset(changed)
                self.forget_fast_paths()
                return self._call_once(args, kwargs, instance, "; ".join(changed.values()))
            compiled = self._compile_once(key, dynamic, static, treedef, specs, captured,
                                          instance, cause)
        else:
            self._touch(key)
        if profiling.active() is not None:  # calls under a profile time their kernels
            compiled = profiling.kernels_timed(compiled)
        # A symbolic compilation's fast path binds and checks its symbols (the dispatcher
        # of a backend without one gives none: jitc.dispatch).
        self._remember_form(compiled, captured, args, kwargs, leaves, instance)
        with profiling.call_span(compiled, "hit" if hit else "miss"):
            return compiled.call_flat(leaves + [a for _, a in captured.arrays], self.fun,
                                      instance)

    def _changed_ints(self, key: tuple, captured: capture.Captured) -> dict[capture.Path, str]:
        """Under the automatic dynamic policy, the paths of captured ints whose values alone
        set this call's key apart from a compiled one's (`self.pos` after a decode step):
        made extents, they compile for 0, 1, then once symbolically (docs/dynamic-shapes.md)
        instead of once per value. Each path maps to what changed, for `compile_stats`."""
        if self.dynamic is not None or not captured.scalars:
            return {}
        arrays, scalars, *rest = key[5]
        for other, _ in self._items():
            if (other[:2], other[3:5]) != (key[:2], key[3:5]):
                continue
            other_arrays, other_scalars, *other_rest = other[5]
            if other_rest != rest or other_arrays != arrays or \
                    len(other_scalars) != len(scalars):
                continue
            changed = [(path, kind, value, before) for (path, kind, value), (p, k, before)
                       in zip(scalars, other_scalars) if (path, kind) == (p, k)
                       and value != before]
            if len(changed) < sum(1 for a, b in zip(scalars, other_scalars) if a != b):
                continue  # a path or a type differs too
            if changed and all(kind is int and path not in self._extent_paths
                               for path, kind, _, _ in changed):
                return {path: f"{capture.path_name(path)} changed ({before} -> {value}): an "
                        "extent from now on" for path, _, value, before in changed}
        return {}

    def _compile_once(self, key: tuple, dynamic: dict[str, Any], static: tuple,
                      treedef: pytree.TreeDef, specs: tuple[ArgSpec, ...],
                      captured: capture.Captured, instance: object, cause: str = ""
                      ) -> Compiled:
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
                    compiled = self._symbolic_serving(key)
                reason = ""
                if compiled is None:
                    compiled, reason = self._compile_symbolic(key, dynamic, static, treedef,
                                                              key[2], captured, instance)
                if compiled is None:
                    signature = ", ".join(str(s) for s in specs)
                    with collector_paused(), progress.watch(self.name, signature):
                        compiled = self._lower(dynamic, static, treedef, specs, captured,
                                               instance).compile()
                    compiled.reason = cause or reason
                    self._store(key, compiled)
                return compiled
        finally:
            with self._lock:
                self._compiling.pop(key, None)

    def _store(self, key: tuple, compiled: Compiled, symbolic: bool = False) -> None:
        with self._cache_lock:
            self._cache[key] = compiled
            if symbolic:
                self._symbolic[key] = compiled
            while len(self._cache) > self.cache_limit:
                old_key, _ = self._cache.popitem(last=False)
                self._symbolic.pop(old_key, None)

    def _touch(self, key: tuple) -> None:
        """`key` is the most recently used: evicted last."""
        with self._cache_lock, contextlib.suppress(KeyError):  # evicted by another thread
            self._cache.move_to_end(key)

    def _items(self, symbolic: bool = False) -> list[tuple[tuple, Compiled]]:
        with self._cache_lock:
            return list((self._symbolic if symbolic else self._cache).items())

    def _symbolic_serving(self, key: tuple) -> Compiled | None:
        """The newest symbolic compilation that serves a call with signature `key`."""
        structure = _structure(key)
        for compiled_key, compiled in reversed(self._items(symbolic=True)):
            if _structure(compiled_key) == structure and dynamic_policy.served(
                    _argument_specs(compiled, key[2]), key[2],
                    compiled.lowered.module.constraints)[0]:
                self._touch(compiled_key)
                return compiled
        return None

    def _compile_symbolic(self, key: tuple, dynamic: dict[str, Any], static: tuple,
                          treedef: pytree.TreeDef, specs: tuple[ArgSpec, ...],
                          captured: capture.Captured, instance: object
                          ) -> tuple[Compiled | None, str]:
        """The symbolic compilation the policy asks for this call when it serves the call, else
        None; and the reason an exact compilation gives. One thread at a time per structure:
        calls of several new sizes at once make one symbolic compilation, not one each."""
        structure = _structure(key)
        with self._lock:
            structure_lock = self._planning.setdefault(structure, threading.RLock())
        with structure_lock:
            compiled = self._symbolic_serving(key)  # made while this thread waited
            if compiled is not None:
                return compiled, compiled.reason
            return self._plan_symbolic(key, structure, dynamic, static, treedef, specs,
                                       captured, instance)

    def _plan_symbolic(self, key: tuple, structure: tuple, dynamic: dict[str, Any],
                       static: tuple, treedef: pytree.TreeDef, specs: tuple[ArgSpec, ...],
                       captured: capture.Captured, instance: object
                       ) -> tuple[Compiled | None, str]:
        earlier = [k[2] for k, c in self._items()
                   if _structure(k) == structure and not _is_symbolic(c)]
        arguments = _leaf_names(dynamic)
        leaves = arguments + [capture.path_name(p) for p, _ in captured.arrays]
        plan, reason = dynamic_policy.plan(self.dynamic, leaves, specs, earlier, len(arguments))
        for compiled_key, compiled in self._items(symbolic=True):
            if _structure(compiled_key) == structure:
                # One symbolic compilation per structure; a call it does not serve (a failed
                # guard or constraint) compiles exactly.
                why = dynamic_policy.served(_argument_specs(compiled, specs), specs,
                                            compiled.lowered.module.constraints)[1]
                return None, f"{why}: exact compilation"
        if plan is None:
            return None, reason
        # Read once: `clear_cache` on another thread may empty the map at any moment.
        refused = self._refused.get(structure)
        if refused is not None:
            return None, plan.refused(refused)
        backend = get_backend(self.options.backend)
        if not getattr(backend, "symbolic_extents", False):
            refused = self._refused[structure] = \
                f"the {backend.name} backend takes static extents only"
            return None, plan.refused(refused)
        signature = ", ".join(str(s) for s in plan.specs)
        try:
            with collector_paused(), progress.watch(self.name, signature), \
                    symbolic.given(plan.guards):
                count = len(arguments)
                lowered = self._lower(dynamic, static, treedef, plan.specs[:count], captured,
                                      instance, captured_types=plan.specs[count:])
                module = lowered.module
                lowered.module = Module(module.functions.values(), module.entry_name,
                                        (*plan.guards, *module.constraints))
                compiled = lowered.compile()
        except SpecializeArgument:
            raise  # an int argument becomes static, and the call starts again
        except Exception as exc:
            # A construct that needs a concrete extent (`if x.shape[0] > 1`, an extent used
            # as a float): exact compilations, which work wherever the symbolic one does not.
            text = str(exc)
            refused = self._refused[structure] = text if isinstance(exc, JitcError) else \
                f"{type(exc).__name__}: {text}"
            return None, plan.refused(refused)
        compiled.reason = plan.reason
        symbolic_key = (key[0], key[1], plan.specs, *key[3:])
        self._store(symbolic_key, compiled, symbolic=True)
        ok, why = dynamic_policy.served(plan.specs, specs, lowered.module.constraints)
        if not ok:
            return None, f"{why}: exact compilation"
        return compiled, plan.reason

    def _remember_form(self, compiled: Compiled, captured: capture.Captured, args: tuple,
                       kwargs: dict[str, Any], leaves: Sequence[object],
                       instance: object) -> None:
        """Set up the fast paths (jitc.dispatch) for calls like this one; each is built once
        per compiled signature and call form, and kept with the compiled signature."""
        form_key = (instance is not _NO_SELF, len(args), *kwargs)
        positional = form_key == (False, len(args))
        made = compiled.fast_paths
        if form_key not in made:
            fast = dispatch.positional_path(self, compiled, captured) if positional else None
            made[form_key] = (True, fast) if fast is not None else (False, dispatch.form_path(
                self, compiled, captured, args, kwargs, leaves, instance))
        in_c, fast = made[form_key]
        if fast is not None and profiling.active() is not None:
            fast = profiling.timed(fast, compiled, None if in_c else dispatch.MISS,
                                   "C fast path" if in_c else "call form")
        if positional:
            self._fast = fast if in_c else None
        if fast is not None and not in_c:
            self._forms[form_key] = fast
        else:
            self._forms.pop(form_key, None)

    def compile_stats(self) -> list[dict[str, Any]]:
        """Per compiled signature: why it was compiled (`reason`: the first call, the dimension
        that changed, a refused symbolic compilation), whether its dimensions are symbolic,
        trace, optimize and codegen seconds and each pass's time."""
        out = []
        for _, compiled in self._items():
            s = compiled.stats
            out.append({"signature": ", ".join(str(a) for a in compiled.lowered.specs),
                        "reason": compiled.reason,
                        "symbolic": _is_symbolic(compiled),
                        "trace_seconds": s.trace_seconds,
                        "optimize_seconds": s.optimize_seconds,
                        "codegen_seconds": s.codegen_seconds,
                        "total_seconds": s.total_seconds,
                        "cached": s.cached,
                        "passes": [(r.name, r.seconds) for r in s.passes]})
        return out

    def clear_cache(self) -> None:
        with self._cache_lock:
            self._cache.clear()
            self._symbolic.clear()
        self._refused.clear()
        self._fast = None
        self._forms = {}

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return f"<jitc.jit {self.name} backend={self.options.backend}>"

    def __reduce__(self) -> str | tuple:
        return jit_pickle.reduce(self)


class BoundJitted:
    """A jitted method bound to an instance (what `obj.method` gives)."""

    def __init__(self, jitted: Jitted, instance: object) -> None:
        self.jitted = jitted
        self.instance = instance

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        jitted = self.jitted
        form = jitted._forms.get((True, len(args), *kwargs))
        if form is not None:
            result = form(args, kwargs, self.instance)
            if result is not dispatch.MISS:
                return result
        if trace_stack() and _contains_tracer(args, kwargs):
            return jitted.fun(self.instance, *args, **kwargs)
        return jitted._call(args, kwargs, self.instance)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        jitted = self.jitted
        return jitted._specializing(lambda: jitted._lower_call(args, kwargs, self.instance))

    def __repr__(self) -> str:
        return f"<bound {self.jitted!r} of {self.instance!r}>"


def _contains_tracer(args: tuple, kwargs: dict[str, Any]) -> bool:
    leaves, _ = pytree.flatten((args, kwargs), _is_leaf)
    return any(isinstance(leaf, Tracer) for leaf in leaves)


def jit(fun: Callable | None = None, *, backend: str | None = None,
        static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
        verify: bool | None = None, dump_dir: str | None = None,
        disabled_passes: Iterable[str] = (), donate_argnums: int | Sequence[int] = (),
        num_threads: int | None = None, cache_limit: int = DEFAULT_CACHE_LIMIT,
        disk_cache: bool = True, dynamic: bool | dict[str, dict[int, str]] | None = None
        ) -> Any:
    """Compile `fun` for each new argument signature; usable as `@jit` or `@jit(...)`.

    - `backend`: "cpu" (the default), "interpreter" (the reference semantics), or any other
      registered backend.
    - `static_argnums` / `static_argnames`: arguments passed as Python values, not traced; a
      new value compiles anew (they must be hashable).
    - `donate_argnums`: array arguments whose memory a result of the same type may reuse; the
      result is then that very array, updated in place, and the caller must not use the
      argument's old value afterwards (as in JAX). Reuse happens only where it is safe.
    - `num_threads`: threads the CPU backend may use (default: JITC_NUM_THREADS, else
      OMP_NUM_THREADS, else all CPUs this process may use).
    - `cache_limit`: how many signatures stay compiled; past it the least recently used one
      is dropped (and compiled again if it comes back).
    - `disk_cache`: whether compiles use the persistent cache (docs/cache.md), which keeps
      compiled code on disk for later processes; `JITC_CACHE_DIR=""` turns it off for all.
    - `dynamic`: which dimensions a compilation makes symbolic, so that one compilation
      serves many sizes (docs/dynamic-shapes.md): None (the default) compiles the first call
      exactly and, when a later call changes some extents (each at least 2), once more with
      those symbolic; True makes every dimension symbolic; False compiles per shape;
      `{"x": {0: "batch"}}` names symbolic dimensions per argument. Backends without run-time
      extents (today all but "interpreter") compile exactly, and `compile_stats()` says why.
    - `verify`: verify the IR after every pass; `dump_dir`: write it after every pass;
      `disabled_passes`: names of passes to skip.
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    changes: dict[str, Any] = {"disabled_passes": frozenset(disabled_passes)}
    if not disk_cache:
        changes["disk_cache"] = False
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
    policy = dynamic_policy.normalize(dynamic)  # a malformed one fails here too

    def wrap(f: Callable) -> Jitted:
        return Jitted(f, options, tuple(static_argnums), tuple(static_argnames),
                      tuple(donate_argnums), cache_limit, explicit_options=changes,
                      dynamic=policy)
    return wrap if fun is None else wrap(fun)


__all__ = ["jit", "Jitted", "Lowered", "Compiled", "ArgSpec", "JitcError"]
