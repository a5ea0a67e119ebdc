"""`jitc.aot.load`: call a library built by `jitc aot` from Python with numpy arrays.

The library describes itself (`NAME_jitc_manifest`, JSON), so nothing but the file and the
library name is needed. Calls go through ctypes, which releases the GIL while they run.
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jitc.aot.abi import default_name
from jitc.ir import dtypes, symbolic
from jitc.ir.dim_text import parse_dim
from jitc.ir.symbolic import DimLike


class AotCallError(RuntimeError):
    """An exported function returned a nonzero status."""

    def __init__(self, function: str, status: int, message: str) -> None:
        super().__init__(f"{function} returned {status}: {message}")
        self.status = status


@dataclass(frozen=True)
class BufferType:
    """The array Python passes for a buffer; dimensions may be expressions of the export's
    symbols (`n`, `2*n`)."""

    shape: tuple[DimLike, ...]
    dtype: np.dtype

    def concrete(self, env: dict[str, int]) -> tuple[int, ...]:
        return tuple(symbolic.evaluate(d, env) for d in self.shape)


def _visible(buffer: dict[str, Any]) -> BufferType:
    """The array Python passes for a buffer: a complex one for interleaved float pairs (the
    same bytes)."""
    shape = tuple(d if isinstance(d, int) else parse_dim(d) for d in buffer["shape"])
    if buffer.get("complex_dtype"):
        return BufferType(shape[:-1], np.dtype(dtypes.by_name(buffer["complex_dtype"]).numpy))
    return BufferType(shape, np.dtype(dtypes.by_name(buffer["dtype"]).numpy))


class AotFunction:
    """One export: `f(*arrays)` returns a new array, or a tuple of them."""

    def __init__(self, library: Library, manifest: dict[str, Any]) -> None:
        self.library = library
        self.name: str = manifest["name"]
        self.args = [_visible(a) for a in manifest["args"]]
        self.results = [_visible(r) for r in manifest["results"]]
        self.single_result: bool = manifest["single_result"]
        workspace = manifest["workspace_bytes"]
        self.workspace_bytes: DimLike = workspace if isinstance(workspace, int) else \
            parse_dim(workspace)
        self.written: tuple[int, ...] = tuple(manifest.get("written", ()))
        self.symbols: tuple[str, ...] = tuple(manifest.get("symbols", ()))
        count = len(self.args) + len(self.results)
        self._plain = self._function(self.name, count)
        self._with_workspace = self._function(f"{self.name}_with_workspace", count + 1)
        self._workspace_function = None
        if self.symbols:
            self._workspace_function = getattr(self.library.dll, f"{self.name}_workspace_bytes")
            self._workspace_function.argtypes = [ctypes.c_int64] * len(self.symbols)
            self._workspace_function.restype = ctypes.c_int64

    def _function(self, symbol: str, count: int) -> Any:
        fn = getattr(self.library.dll, symbol)
        fn.argtypes = [ctypes.c_int64] * len(self.symbols) + [ctypes.c_void_p] * count
        fn.restype = ctypes.c_int
        return fn

    def _bind(self, arrays: list[np.ndarray]) -> dict[str, int]:
        """The symbol values from the arguments' shapes; TypeError when a shape does not fit
        (the library checks the constraints)."""
        env: dict[str, int] = {}
        for want, array in zip(self.args, arrays):
            for dim, size in zip(want.shape, array.shape):
                name = symbolic.symbol_name(dim)
                if name is not None:
                    env.setdefault(name, size)
        for i, (want, array) in enumerate(zip(self.args, arrays)):
            if array.ndim != len(want.shape) or want.concrete(env) != array.shape:
                shape = ", ".join(str(d) for d in want.shape)
                bound = "".join(f", {s}={v}" for s, v in sorted(env.items()))
                raise TypeError(f"{self.name}: argument {i} must have shape [{shape}]{bound}, "
                                f"got {list(array.shape)}")
        return env

    def workspace_size(self, *args: object) -> int:
        """The bytes a `workspace` needs for a call with these arguments."""
        if not self.symbols:
            return int(self.workspace_bytes)
        env = self._bind([np.asarray(a) for a in args])
        assert self._workspace_function is not None
        return int(self._workspace_function(*(env[s] for s in self.symbols)))

    def _convert(self, i: int, value: object) -> np.ndarray:
        want = self.args[i]
        array = np.asarray(value)
        if self.symbols:  # the shape is checked once every symbol is bound
            if array.ndim != len(want.shape):
                raise TypeError(f"{self.name}: argument {i} must have {len(want.shape)} "
                                f"dimension(s), got {list(array.shape)}")
        elif array.shape != want.shape:
            raise TypeError(f"{self.name}: argument {i} must have shape {list(want.shape)}, "
                            f"got {list(array.shape)}")
        if array.dtype != want.dtype and not np.can_cast(array.dtype, want.dtype, "same_kind"):
            raise TypeError(f"{self.name}: argument {i} must be {want.dtype}, got {array.dtype}")
        # The library assumes C order and natural alignment (a view at an odd byte offset
        # is copied).
        return np.require(array, dtype=want.dtype, requirements=["C", "A"])

    def __call__(self, *args: object, workspace: np.ndarray | None = None) -> Any:
        """Run the export; `workspace` (a buffer of at least `workspace_bytes` bytes, aligned
        to 64) calls the `_with_workspace` variant with it."""
        if len(args) != len(self.args):
            raise TypeError(f"{self.name} takes {len(self.args)} arguments, got {len(args)}")
        for i in self.written:
            target = args[i]
            if not isinstance(target, np.ndarray) or not target.flags.writeable:
                raise TypeError(f"{self.name}: argument {i} is written in place (in/out), so it "
                                "must be a writable numpy array")
        arrays = [self._convert(i, a) for i, a in enumerate(args)]
        env = self._bind(arrays) if self.symbols else {}
        results = [np.empty(r.concrete(env), r.dtype) for r in self.results]
        pointers = [*(env[s] for s in self.symbols), *(a.ctypes.data for a in arrays + results)]
        if workspace is None:
            status = self._plain(*pointers)
        else:
            needed = self.workspace_size(*arrays) if self.symbols else self.workspace_bytes
            if not workspace.flags.c_contiguous or workspace.nbytes < needed:
                raise ValueError(f"{self.name}: the workspace must be a contiguous buffer of "
                                 f"at least {needed} bytes")
            status = self._with_workspace(*pointers, workspace.ctypes.data)
        if status != 0:
            raise AotCallError(self.name, status, self.library.error_string(status))
        for i in self.written:  # written into a converted copy: copy it back
            if arrays[i] is not args[i]:
                np.copyto(args[i], arrays[i], casting="unsafe")
        return results[0] if self.single_result else tuple(results)

    def __repr__(self) -> str:
        return f"<jitc.aot function {self.name} from {self.library.path.name}>"


class Library:
    """A loaded library; its exports are attributes (and items, by C name)."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self.dll = ctypes.CDLL(str(path.resolve()))
        try:
            describe = getattr(self.dll, f"{name}_jitc_manifest")
        except AttributeError:
            raise ValueError(f"{path} has no {name}_jitc_manifest: not a jitc library, or built "
                             "with another --name (pass load(path, name=...))") from None
        describe.restype = ctypes.c_char_p
        self.manifest: dict[str, Any] = json.loads(describe())
        self._error_string = self.dll[f"{name}_error_string"]
        self._error_string.argtypes = [ctypes.c_int]
        self._error_string.restype = ctypes.c_char_p
        self.functions = {m["name"]: AotFunction(self, m) for m in self.manifest["exports"]}

    @property
    def jitc_version(self) -> str:
        return self.manifest["jitc_version"]

    @property
    def target_cpu(self) -> str:
        return self.manifest["cpu"]

    def error_string(self, status: int) -> str:
        return self._error_string(status).decode()

    def __getitem__(self, name: str) -> AotFunction:
        return self.functions[name]

    def __getattr__(self, name: str) -> AotFunction:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"{self.path.name} exports no function {name!r}; it has "
                             f"{sorted(functions)}")

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self.functions]


def load(path: str | Path, name: str | None = None) -> Library:
    """Load a shared library built by `jitc aot`. `name` is the library name it was built
    with (`--name`; default, like the build's: `libmodel.so` → `model`)."""
    path = Path(path)
    return Library(path, name or default_name(path))
