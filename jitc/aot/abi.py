"""The C ABI of `jitc aot` libraries, as Python sees it.

`runtime/jitc_aot.h` is the C side of this table; tests/aot keeps the two equal. Status codes
and dtype codes are part of the ABI: a value never changes meaning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from jitc.ir import dtypes
from jitc.ir.dtypes import DType
from jitc.ir.symbolic import Constraint, DimLike, ceil_divide
from jitc.ir.types import TensorType

ABI_VERSION = 1
WORKSPACE_ALIGNMENT = 64

# code -> (C enumerator, message returned by NAME_error_string)
STATUS: dict[int, tuple[str, str]] = {
    0: ("JITC_OK", "success"),
    1: ("JITC_ERROR_NULL_POINTER", "an argument or result pointer is NULL"),
    2: ("JITC_ERROR_OUT_OF_MEMORY", "the temporary workspace could not be allocated"),
    3: ("JITC_ERROR_BAD_WORKSPACE",
        f"the workspace is NULL or not aligned to {WORKSPACE_ALIGNMENT} bytes"),
    4: ("JITC_ERROR_OVERLAPPING_BUFFERS", "a result buffer overlaps an argument or a result"),
    5: ("JITC_ERROR_BAD_DIMENSION",
        "a dimension argument is negative or breaks a constraint of the function"),
}
UNKNOWN_STATUS = "unknown jitc status code"
OK, NULL_POINTER, OUT_OF_MEMORY, BAD_WORKSPACE, OVERLAPPING_BUFFERS, BAD_DIMENSION = range(6)

# dtype -> (C enumerator, code, C element type)
DTYPES: dict[DType, tuple[str, int, str]] = {
    dtypes.bool_: ("JITC_BOOL", 0, "bool"),
    dtypes.int8: ("JITC_I8", 1, "int8_t"),
    dtypes.uint8: ("JITC_U8", 2, "uint8_t"),
    dtypes.int32: ("JITC_I32", 3, "int32_t"),
    dtypes.int64: ("JITC_I64", 4, "int64_t"),
    dtypes.float16: ("JITC_F16", 5, "jitc_f16"),
    dtypes.float32: ("JITC_F32", 6, "float"),
    dtypes.float64: ("JITC_F64", 7, "double"),
    dtypes.int16: ("JITC_I16", 8, "int16_t"),
    dtypes.uint16: ("JITC_U16", 9, "uint16_t"),
    dtypes.uint32: ("JITC_U32", 10, "uint32_t"),
    dtypes.uint64: ("JITC_U64", 11, "uint64_t"),
}


def _runtime_dir() -> Path:
    """The runtime's C sources: package data `jitc/runtime/` in an installed wheel (setup.py
    puts them there), the top-level `runtime/` folder in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    installed, checkout = package / "runtime", package.parent / "runtime"
    return checkout if checkout.is_dir() and not installed.is_dir() else installed


RUNTIME_DIR = _runtime_dir()
ABI_HEADER = RUNTIME_DIR / "jitc_aot.h"
POOL_SOURCE = RUNTIME_DIR / "jitc_runtime.c"
# The thread pool's public names, renamed per library so two libraries can share a program.
POOL_SYMBOLS = ("jitc_parallel_for", "jitc_pool_size", "jitc_pool_busy_sections")


def default_name(output: Path) -> str:
    """`libmodel.so` → `model`: the library name a build and `jitc.aot.load` agree on."""
    stem = output.name.split(".")[0]
    stem = stem.removeprefix("lib") or stem
    name = re.sub(r"\W", "_", stem)
    return name if name and not name[0].isdigit() else f"_{name}"


def pool_symbol(library: str, symbol: str) -> str:
    """A thread pool function's name inside `library`: `jitc_parallel_for` → `NAME_parallel_for`."""
    return library + symbol.removeprefix("jitc")


def c_type(dtype: DType) -> str:
    return DTYPES[dtype][2]


def dtype_enum(dtype: DType) -> str:
    return DTYPES[dtype][0]


def padded(nbytes: DimLike) -> DimLike:
    """`nbytes` rounded up to the workspace alignment."""
    return ceil_divide(nbytes, WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT


def dim_text(dim: DimLike) -> int | str:
    """An extent as the manifest writes it: an int, or the expression (`n`, `784*n`)."""
    return dim if isinstance(dim, int) else str(dim)


@dataclass(frozen=True)
class Argument:
    name: str          # the C parameter name
    type: TensorType
    # A complex array passed as interleaved (real, imaginary) float pairs: its dtype name
    # (`c64`); `type` is then the float array with a last dimension of 2.
    complex_dtype: str = ""


@dataclass(frozen=True)
class FunctionABI:
    """The C interface of one export: `int NAME(int64_t symbols..., const T *args...,
    T *results...)`; sizes are expressions over the symbols when it has any."""

    c_name: str
    python_name: str
    source: tuple[str, int]
    args: tuple[Argument, ...]
    results: tuple[Argument, ...]
    single_result: bool        # Python returns one array rather than a tuple
    workspace_bytes: DimLike   # all the caller provides: the entry's, then `scratch`
    written: tuple[int, ...] = ()  # arguments the function writes (in/out parameters)
    entry_workspace_bytes: DimLike | None = None  # the compiled entry's part (None: all)
    notes: tuple[str, ...] = ()  # more for the header's comment (jitc.quant's scales)
    symbols: tuple[str, ...] = ()  # the `int64_t` parameters, in order
    constraints: tuple[Constraint, ...] = ()  # checked before each call

    @property
    def workspace_function(self) -> str:
        """`NAME_workspace_bytes(symbols...)`, which symbolic exports have."""
        return f"{self.c_name}_workspace_bytes"

    @property
    def with_workspace(self) -> str:
        return f"{self.c_name}_with_workspace"

    def scratch(self) -> list[tuple[DimLike, DimLike]]:
        """(workspace offset, bytes) of the buffer each written argument's new value is
        computed in before it is copied over the argument (compiled code reads the argument
        while it computes the new value)."""
        offset = self.workspace_bytes if self.entry_workspace_bytes is None else \
            self.entry_workspace_bytes
        out = []
        for index in self.written:
            size = self.args[index].type.nbytes
            out.append((offset, size))
            offset += padded(size)
        return out

    @property
    def buffers(self) -> tuple[Argument, ...]:
        return self.args + self.results

    def manifest(self) -> dict[str, object]:
        def describe(a: Argument) -> dict[str, object]:
            described = {"name": a.name, "dtype": a.type.dtype.name,
                         "shape": [dim_text(d) for d in a.type.shape]}
            if a.complex_dtype:
                described["complex_dtype"] = a.complex_dtype
            return described
        return {"name": self.c_name, "python_name": self.python_name,
                "args": [describe(a) for a in self.args],
                "results": [describe(a) for a in self.results],
                "single_result": self.single_result,
                "workspace_bytes": dim_text(self.workspace_bytes),
                "written": list(self.written), "symbols": list(self.symbols),
                "constraints": [str(c) for c in self.constraints]}


@dataclass(frozen=True)
class LibraryABI:
    """Everything a library exposes: its exports and its library-wide functions."""

    name: str                  # prefixes the library-wide symbols and macros
    exports: tuple[FunctionABI, ...]
    jitc_version: str
    triple: str
    cpu: str
    threads: int

    @property
    def error_string(self) -> str:
        return f"{self.name}_error_string"

    @property
    def version_function(self) -> str:
        return f"{self.name}_jitc_version"

    @property
    def cpu_function(self) -> str:
        return f"{self.name}_target_cpu"

    @property
    def manifest_function(self) -> str:
        return f"{self.name}_jitc_manifest"

    def manifest(self) -> dict[str, object]:
        """What `jitc.aot.load` reads back from a built library."""
        return {"abi": ABI_VERSION, "name": self.name, "jitc_version": self.jitc_version,
                "triple": self.triple, "cpu": self.cpu, "threads": self.threads,
                "exports": [e.manifest() for e in self.exports]}
