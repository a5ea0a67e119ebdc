"""`jitc.export`: marking functions for `jitc aot`, with one fixed signature each.

An exported function stays an ordinary `jitc.jit` function in Python; the signature only says
which one compiled version goes into a library. Everything about the signature is checked when
the decorator runs, so a model file with a bad one fails at import, naming the function.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jitc.api import Jitted, Lowered
from jitc.ir import dtypes, symbolic
from jitc.ir.parser import ParseError, parse_type
from jitc.ir.types import TensorType
from jitc.options import Options
from jitc.quant.quantize import Quantized
from jitc.tracing import pytree
from jitc.tracing.errors import JitcError
from jitc.tracing.function import AbstractArray, ArgSpec, trace_function


class AotError(JitcError):
    """A problem building a library; the message is one line naming the file, the function
    (when there is one) and the problem."""


class ExportError(AotError, TypeError):
    """A `jitc.export` signature that does not fit its function."""


@dataclass(frozen=True, init=False)
class ShapeDtype:
    """The shape and dtype of an array, without its data: `ShapeDtype((8, 784), np.float32)`."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __init__(self, shape: Sequence[int], dtype: Any) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", np.dtype(dtype))


def source_of(fun: Callable) -> tuple[str, int]:
    """The file and first line (that of the first decorator) of a Python function."""
    code = getattr(fun, "__code__", None)
    if code is None:
        return "<unknown>", 0
    return code.co_filename, code.co_firstlineno


def _fail(fun: Callable, message: str) -> ExportError:
    file, line = source_of(fun)
    name = getattr(fun, "__name__", "function")
    return ExportError(f"{file}:{line}: {name}: {message}")


def as_tensor_type(spec: object) -> TensorType:
    """A signature entry as a row-major tensor type; ValueError says what is wrong."""
    if isinstance(spec, str):
        try:
            type_ = parse_type(spec)
        except ParseError as exc:
            raise ValueError(str(exc).removeprefix("line 1: ")) from None
        if "{" in spec:
            raise ValueError("exported arguments are row-major C arrays; drop the {layout}")
    elif hasattr(spec, "shape") and hasattr(spec, "dtype"):
        try:
            type_ = TensorType(dtypes.from_numpy(spec.dtype), tuple(spec.shape))
        except TypeError as exc:
            raise ValueError(str(exc)) from None
    else:
        raise ValueError(f"expected a type string like 'f32[8,784]', an object with .shape and "
                         f".dtype or an example array, got {type(spec).__name__}")
    if any(isinstance(d, int) and d < 0 for d in type_.shape):
        raise ValueError("dimensions cannot be negative")
    return type_


def _check_symbols(fun: Callable, signature: Sequence[object],
                   types: Sequence[TensorType]) -> None:
    """Every symbol must be a whole dimension of some argument: the C caller passes its value
    and the library checks that every argument agrees with it."""
    bare = {symbolic.symbol_name(d) for t in types for d in t.shape} - {None}
    for i, (spec, t) in enumerate(zip(signature, types)):
        for d in t.shape:
            missing = sorted(symbolic.symbols_of(d) - bare)
            if missing:
                raise _fail(fun, f"bad signature {spec!r} for argument {i}: the dimension {d} "
                                 f"uses {', '.join(missing)}, which is not a whole dimension "
                                 f"of any argument; give {missing[0]} a dimension of its own "
                                 f"(f32[{missing[0]},...]) or use a size")


class Exported(Jitted):
    """A `jitc.jit` function that also carries the one signature `jitc aot` compiles."""

    def __init__(self, fun: Callable, arg_types: Sequence[TensorType], export_name: str,
                 options: Options) -> None:
        super().__init__(fun, options, (), ())
        self.arg_types = tuple(arg_types)
        self.export_name = export_name
        self.source = source_of(fun)
        params = list(inspect.signature(fun).parameters.values())
        self.arg_names = tuple(p.name for p in params[:len(self.arg_types)])
        # The symbolic dimensions of the signature, in the order the C function takes them.
        self.symbols = tuple(sorted(set().union(*(t.symbols for t in self.arg_types))))
        self.quantized: Quantized | None = None  # a jitc.quant function's export

    def header_notes(self) -> list[str]:
        """Lines the C header adds to the export's comment: the quantized products."""
        if self.quantized is None:
            return []
        return ["Quantized by jitc.quant: int8 products with int32 sums; weights stored as "
                "int8, scales as float32 (value = scale * (q - zero point)):",
                *self.quantized.header_notes()]

    def lower_export(self, options: Options) -> Lowered:
        """Trace the function for its export signature, to be compiled with `options`."""
        placeholders = {name: ShapeDtype(t.shape, t.dtype.numpy) if t.is_static
                        else AbstractArray(t.shape, t.dtype.numpy)
                        for name, t in zip(self.arg_names, self.arg_types)}
        treedef = pytree.TreeDef("tuple", (pytree.LEAF,) * len(self.arg_types))
        specs = tuple(ArgSpec(t) for t in self.arg_types)
        module, out_tree, side_effects = trace_function(self.fun, self.signature,
                                                        placeholders, (), specs, treedef)
        return Lowered(self.name, module, self.signature, (), tuple(placeholders), treedef,
                       specs, out_tree, options, 0.0, side_effects)

    def __repr__(self) -> str:
        types = ", ".join(t.short() for t in self.arg_types)
        return f"<jitc.export {self.export_name}({types})>"


def _check_parameters(fun: Callable, count: int) -> None:
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        raise _fail(fun, "has no inspectable signature") from None
    # Signed arguments are passed by position; *args and **kwargs take none of them.
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL,
                                                                               p.VAR_KEYWORD)]
    if any(p.kind is p.KEYWORD_ONLY for p in required):
        raise _fail(fun, "keyword-only parameters without a default cannot be exported")
    if not len(required) <= count <= len(positional):
        want = (f"{len(required)}" if len(required) == len(positional)
                else f"{len(required)} to {len(positional)}")
        raise _fail(fun, f"export gives {count} signature(s) for {want} parameter(s) "
                         f"({', '.join(p.name for p in positional)})")


def export(*signature: object, name: str | None = None) -> Callable[[Callable], Exported]:
    """Mark a function for `jitc aot`: one signature entry per array argument.

        @jitc.export("f32[8,784]")
        def predict(x): ...

    Entries are type strings in the IR's syntax (`f32[8,784]`, `i64[]`, `u8[224,224,3]`),
    objects with `.shape` and `.dtype` (`jitc.ShapeDtype`, example arrays). Parameters beyond
    the signature keep their Python defaults. `name` is the C function name (default: the
    Python name). The result is a normal `jitc.jit` function; `__wrapped__` is the original.

    A dimension may be a symbol (`f32[n,784]`): the C function then takes `int64_t n` before
    the arrays, checks it against the function's constraints, and sizes its workspace from it
    (docs/aot.md, "Symbolic dimensions").
    """
    def wrap(fun: Callable) -> Exported:
        quantized = fun if isinstance(fun, Quantized) else None
        if quantized is not None:  # its int8 function, whose trace bakes int8 weights
            if quantized.argument_weights:
                raise _fail(quantized.float_function, "a quantized function that takes its "
                            f"weights ({', '.join(quantized.argument_weights)}) as arguments "
                            "cannot be exported: the library bakes the weights in. Quantize "
                            "a function that closes over them")
            fun = quantized.fun
        elif isinstance(fun, Jitted):
            raise _fail(fun.fun, "apply jitc.export to the plain function, not to a jitc.jit "
                                 "one (an export is already jitted)")
        types = []
        for i, spec in enumerate(signature):
            try:
                types.append(as_tensor_type(spec))
            except ValueError as exc:
                raise _fail(fun, f"bad signature {spec!r} for argument {i}: {exc}") from None
        _check_parameters(fun, len(types))
        _check_symbols(fun, signature, types)
        export_name = name if name is not None else getattr(fun, "__name__", "")
        if not export_name.isidentifier():
            raise _fail(fun, f"{export_name!r} is not a valid C name; pass "
                             "jitc.export(..., name=...)")
        exported = Exported(fun, types, export_name, Options())
        if quantized is not None:
            exported.quantized = quantized
            exported.source = source_of(quantized.float_function)
        return exported
    return wrap


_LOCATED = re.compile(r"^(?P<file>.+):(?P<line>\d+) in \S+$")


def describe_failure(exc: BaseException) -> tuple[str | None, str]:
    """(`file:line` where the user's code failed, if the message says so; the problem on one
    line). jitc's located messages are `file:line in fn` / `    source line` / message."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    where = None
    if len(lines) >= 3 and (match := _LOCATED.match(lines[0])):
        where = f"{match['file']}:{match['line']}"
        lines = lines[2:]
    joined = [line if line.endswith((".", ":", ";")) else f"{line};" for line in lines[:-1]]
    text = " ".join([*joined, lines[-1]]) if lines else type(exc).__name__
    return where, text if isinstance(exc, JitcError) else f"{type(exc).__name__}: {text}"


def one_line(exc: BaseException) -> str:
    return describe_failure(exc)[1]


def _innermost_line(exc: BaseException, file: str) -> int | None:
    """The line of `file` nearest to where `exc` was raised."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == Path(file).resolve():
            line = frame.lineno
    return line


def load_exports(path: Path) -> list[Exported]:
    """Import a model file and return the exported functions it defines, in order."""
    if not path.is_file():
        raise AotError(f"{path}: no such file")
    module_name = f"_jitc_aot_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise AotError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    # The model's folder goes on sys.path so that it can import its own helper modules, and
    # the module into sys.modules because dataclasses and pickling look it up there.
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except ExportError:
        raise
    except Exception as exc:
        line = exc.lineno if isinstance(exc, SyntaxError) else _innermost_line(exc, str(path))
        where = f"{path}:{line}" if line else str(path)
        raise AotError(f"{where}: failed to import: {one_line(exc)}") from exc
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
        sys.modules.pop(module_name, None)
    found: dict[int, Exported] = {}
    for value in vars(module).values():
        if isinstance(value, Exported):
            found.setdefault(id(value), value)
    if not found:
        raise AotError(f"{path}: no exported functions (decorate them with "
                       "@jitc.export(...))")
    return list(found.values())
