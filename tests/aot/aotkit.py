"""Helpers for the AOT tests: build libraries with the real command line, write and compile C
clients against the generated headers, run them in an empty environment, read their output."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from jitc.aot import abi
from jitc.cli import main
from jitc.ir import dtypes

GCC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is needed to link libraries and to "
                                                   "compile the C clients")
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libpthread.so.0"}


@dataclass
class CliRun:
    status: int
    stdout: str
    stderr: str


def jitc_aot(*args: str | Path) -> CliRun:
    """`jitc aot ARGS` in this process (the same code path as the console script)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["aot", *map(str, args)])
    return CliRun(status, out.getvalue(), err.getvalue())


def build(model: Path, output: Path, *options: str) -> Path:
    run = jitc_aot(model, "-o", output, *options)
    assert run.status == 0, run.stderr
    return output


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def needed(library: Path) -> set[str]:
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True,
                             check=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))


def defined_dynamic_symbols(library: Path) -> set[str]:
    table = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                           text=True, check=True).stdout
    return {line.split()[-1] for line in table.splitlines() if line.strip()}


def library_symbols(lib: str, exports: list[str] | tuple[str, ...]) -> set[str]:
    """Everything a `jitc aot` library named `lib` should export: each function, its
    `_with_workspace` form and the library's own queries; nothing else (kernels, region
    code, constants and the thread pool stay inside)."""
    return {*exports, *(f"{e}_with_workspace" for e in exports),
            *(f"{lib}_{f}" for f in ("error_string", "jitc_version", "target_cpu",
                                     "jitc_manifest"))}


def compile_c(source: Path, output: Path, *link: str | Path) -> Path:
    """gcc -Wall -Werror: the generated header must compile without a single warning."""
    assert GCC is not None
    command = [GCC, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I", str(source.parent),
               str(source), "-o", str(output), *map(str, link)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return output


def run_clean(binary: Path, *args: str) -> str:
    """Run with an empty environment: no PYTHONPATH, no LD_LIBRARY_PATH, nothing of jitc."""
    done = subprocess.run(["env", "-i", str(binary), *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# -- inputs both C and numpy can make bit for bit ----------------------------------------------

C_FILLS = {
    "f32": "(float)(((i * 37) + seed) % 101) / 50.0f - 1.0f",
    "f64": "(double)(((i * 37) + seed) % 101) / 50.0 - 1.0",
    "i32": "(int32_t)(((i * 37) + seed) % 101 - 50)",
    "i64": "(int64_t)(((i * 37) + seed) % 101 - 50)",
    "u8": "(uint8_t)(((i * 37) + seed) % 256)",
    "i8": "(int8_t)(((i * 37) + seed) % 101 - 50)",
    "bool": "(((i * 37) + seed) % 101) % 2 == 1",
    # Past the range of the dtype, so that inputs wrap at its bounds.
    "i16": "(int16_t)(((i * 37) + seed) % 101 * 700 - 35000)",
    "u16": "(uint16_t)(((i * 37) + seed) % 101 * 700)",
    "u32": "(uint32_t)(((i * 37) + seed) % 101) * 50000000u",
    "u64": "(uint64_t)(((i * 37) + seed) % 101) * UINT64_C(200000000000000000)",
}
C_PRINTS = {"f32": ('"%.9g\\n"', "(double)"), "f64": ('"%.17g\\n"', "(double)"),
            "i32": ('"%lld\\n"', "(long long)"), "i64": ('"%lld\\n"', "(long long)"),
            "u8": ('"%lld\\n"', "(long long)"), "i8": ('"%lld\\n"', "(long long)"),
            "bool": ('"%lld\\n"', "(long long)"), "i16": ('"%lld\\n"', "(long long)"),
            "u16": ('"%lld\\n"', "(long long)"), "u32": ('"%lld\\n"', "(long long)"),
            "u64": ('"%llu\\n"', "(unsigned long long)")}


def fill(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """numpy's copy of the C_FILLS formulas."""
    i = np.arange(int(np.prod(shape)), dtype=np.int64)
    if dtype in ("f32", "f64"):
        t = np.float32 if dtype == "f32" else np.float64
        x = ((i * 37 + seed) % 101).astype(t) / t(50) - t(1)
    elif dtype == "u8":
        x = ((i * 37 + seed) % 256).astype(np.uint8)
    elif dtype == "bool":
        x = ((i * 37 + seed) % 101) % 2 == 1
    elif dtype in ("i16", "u16"):
        x = ((i * 37 + seed) % 101 * 700 - (35000 if dtype == "i16" else 0)).astype(
            dtypes.by_name(dtype).numpy)
    elif dtype in ("u32", "u64"):
        t = dtypes.by_name(dtype).numpy.type
        x = ((i * 37 + seed) % 101).astype(t) * t(50000000 if dtype == "u32" else 2 * 10**17)
    else:
        x = ((i * 37 + seed) % 101 - 50).astype({"i32": np.int32, "i64": np.int64,
                                                  "i8": np.int8}[dtype])
    return x.reshape(shape)


def manifest(library: Path, name: str) -> dict:
    """The library's own description of its exports, read with ctypes."""
    import ctypes
    describe = getattr(ctypes.CDLL(str(library.resolve())), f"{name}_jitc_manifest")
    describe.restype = ctypes.c_char_p
    return json.loads(describe())


def generic_client(header: str, lib_name: str, exports: list[dict], seed: int = 0) -> str:
    """A C program that calls every export on C_FILLS inputs, both plain and with a caller
    workspace, and prints `== NAME` then every result element."""
    fills = "".join(f"static inline {_ctype(d)} fill_{d}(long i, long seed) "
                    f"{{ return {C_FILLS[d]}; }}\n" for d in C_FILLS)
    calls = []
    for e in exports:
        name, up = e["name"], e["name"].upper()
        lines = [f"static void run_{name}(void) {{"]
        args = [f"a{i}" for i in range(len(e["args"]))]
        results = [f"r{i}" for i in range(len(e["results"]))]
        for i, a in enumerate(e["args"]):
            lines.append(f"    static {up}_ARG{i}_TYPE a{i}[{up}_ARG{i}_SIZE];")
            lines.append(f"    for (long i = 0; i < {up}_ARG{i}_SIZE; i++) "
                         f"a{i}[i] = fill_{a['dtype']}(i, {seed + i});")
        for i in range(len(e["results"])):
            lines.append(f"    static {up}_RES{i}_TYPE r{i}[{up}_RES{i}_SIZE], "
                         f"w{i}[{up}_RES{i}_SIZE];")
        lines.append(f"    check(\"{name}\", {name}({', '.join(args + results)}));")
        lines.append(f"    void *ws = {up}_WORKSPACE_BYTES ? aligned_alloc("
                     f"JITC_WORKSPACE_ALIGNMENT, {up}_WORKSPACE_BYTES) : NULL;")
        wres = [f"w{i}" for i in range(len(e["results"]))]
        lines.append(f"    check(\"{name}_with_workspace\", {name}_with_workspace("
                     f"{', '.join(args + wres)}, ws));")
        lines.append("    free(ws);")
        lines.append(f"    printf(\"== {name}\\n\");")
        for i, r in enumerate(e["results"]):
            fmt, cast = C_PRINTS[r["dtype"]]
            lines.append(f"    if (memcmp(r{i}, w{i}, sizeof r{i}) != 0) "
                         f"printf(\"workspace variant differs\\n\");")
            lines.append(f"    for (long i = 0; i < {up}_RES{i}_SIZE; i++) "
                         f"printf({fmt}, {cast}r{i}[i]);")
        lines.append("}")
        calls.append("\n".join(lines))
    runs = "\n".join(f"    run_{e['name']}();" for e in exports)
    return f"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "{header}"

{fills}
static void check(const char *what, int status) {{
    if (status != JITC_OK) {{
        fprintf(stderr, "%s: %s\\n", what, {lib_name}_error_string(status));
        exit(1);
    }}
}}

{chr(10).join(calls)}

int main(void) {{
{runs}
    return 0;
}}
"""


def _ctype(dtype: str) -> str:
    return abi.c_type(dtypes.by_name(dtype))


def parse_sections(text: str) -> dict[str, list[float]]:
    sections: dict[str, list[float]] = {}
    current: list[float] = []
    for line in text.splitlines():
        if line.startswith("== "):
            current = sections.setdefault(line[3:], [])
        else:
            assert line != "workspace variant differs"
            current.append(int(line) if line.lstrip("-").isdigit() else float(line))
    return sections


def split_results(values: list[float], results: list[dict]) -> list[np.ndarray]:
    out, at = [], 0
    for r in results:
        size = int(np.prod(r["shape"]))
        dtype = dtypes.by_name(r["dtype"]).numpy
        out.append(np.array(values[at:at + size], dtype=dtype).reshape(r["shape"]))
        at += size
    assert at == len(values)
    return out
