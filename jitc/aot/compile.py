"""Exports → one LLVM module → one object file → a `.so`, `.a` or `.o`, plus its C header.

Every export is traced, optimized with the CPU backend's pipeline and lowered by the CPU
code generator with internal, prefixed symbols and baked constants; `wrapper` adds the C ABI
functions. The modules are linked into one and optimized together for the target machine
(`reloc="pic"`, small code model: the default model gives relocations `gcc -shared` rejects).
Constants of STREAMED_CONSTANT_BYTES or more (the weights) never enter LLVM: `objdata` writes
their bytes into the object file as a section of their own.

The C compiler links the shared library (`-lm`, `-Wl,-z,defs` so that nothing stays undefined,
`-static-libgcc`) and, only when some kernel runs on threads, compiles the thread pool of
runtime/ into the library under library-specific, hidden names. All files are made in a
temporary folder and moved into place at the end: a failed build leaves nothing behind.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from jitc.aot import abi, header, objdata, wrapper
from jitc.aot.abi import Argument, FunctionABI, LibraryABI
from jitc.aot.export import AotError, Exported, describe_failure, one_line
from jitc.backends.cpu.codegen import ExternalConstants, Linkage, lower_module
from jitc.backends.llvm import target
from jitc.ir import dtypes
from jitc.ir.core import Module
from jitc.ir.symbolic import DimLike
from jitc.options import Options
from jitc.stages import Lowered
from jitc.tracing import pytree

OUTPUT_KINDS = (".so", ".a", ".o")
# Smaller constants stay LLVM initializers, which LLVM may fold into the code.
STREAMED_CONSTANT_BYTES = 4096
BASELINE_CPU = {"x86_64": "x86-64-v3", "aarch64": "generic"}
C_KEYWORDS = frozenset([
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "alignas",
    "alignof", "static_assert", "thread_local"
])


@dataclass(frozen=True)
class BuildConfig:
    output: Path
    name: str                      # library name: prefixes library-wide symbols and macros
    prefix: str = ""               # prepended to every export's C name
    header: Path | None = None     # default: the output with the suffix .h
    triple: str | None = None      # default: the host
    cpu: str | None = None         # default: a baseline for the architecture; "host"
    threads: int = 1
    cc: str | None = None          # default: gcc or cc on PATH (host targets only)

    @property
    def kind(self) -> str:
        return self.output.suffix

    @property
    def header_path(self) -> Path:
        return self.header if self.header is not None else self.output.with_suffix(".h")


@dataclass(frozen=True)
class BuildResult:
    library: Path
    header: Path
    abi: LibraryABI
    size: int


def _is_c_identifier(name: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None and name not in C_KEYWORDS


# -- target ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    triple: str
    cpu: str
    features: str
    is_host: bool

    def machine(self) -> llvm.TargetMachine:
        target.initialize_all()
        found = llvm.Target.from_triple(self.triple)
        return found.create_target_machine(cpu=self.cpu, features=self.features, opt=3,
                                           reloc="pic", codemodel="small")


_CPU_PROBE = """
import sys
import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
tm = llvm.Target.from_triple(sys.argv[1]).create_target_machine(cpu=sys.argv[2], reloc="pic")
tm.emit_object(llvm.parse_assembly("define void @f() {\\n ret void\\n}"))
"""


def check_cpu(target_: Target, source: Path) -> None:
    """Fail on a CPU name LLVM does not know for the target. LLVM only warns on stderr and may
    then abort the whole process ("64-bit code requested on a subtarget that doesn't support
    it"), so the name is tried in a child process."""
    done = subprocess.run([sys.executable, "-c", _CPU_PROBE, target_.triple, target_.cpu],
                          capture_output=True, text=True)
    if done.returncode != 0 or "not a recognized processor" in done.stderr:
        raise AotError(f"{source}: --target-cpu {target_.cpu!r} is not a CPU that LLVM knows "
                       f"for {target_.triple}")


def resolve_target(triple: str | None, cpu: str | None, source: Path) -> Target:
    host = llvm.get_process_triple()
    triple = triple or host
    is_host = triple.split("-")[0] == host.split("-")[0] and "linux" in triple
    arch = triple.split("-")[0]
    target.initialize_all()
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError as exc:
        raise AotError(f"{source}: unknown --target {triple!r}: {one_line(exc)}") from None
    if cpu == "host":
        if not is_host:
            raise AotError(f"{source}: --target-cpu host describes this machine, not "
                           f"{triple}")
        return Target(triple, *target.host_cpu(), True)
    return Target(triple, cpu or BASELINE_CPU.get(arch, "generic"), "", is_host)


# -- tools -----------------------------------------------------------------------------------

def _find_tool(explicit: str | None, candidates: Sequence[str], what: str, needed_for: str,
               source: Path) -> str:
    for name in ([explicit] if explicit else candidates):
        found = shutil.which(name)
        if found:
            return found
    looked = explicit or " or ".join(candidates)
    raise AotError(f"{source}: cannot {needed_for}: no {what} ({looked}) found on PATH"
                   + ("" if explicit else "; pass --cc"))


def _run(command: list[str], source: Path, what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        detail = " ".join((done.stderr or done.stdout).split())[:400]
        raise AotError(f"{source}: {what} failed ({Path(command[0]).name} exited with "
                       f"{done.returncode}): {detail}")


@dataclass(frozen=True)
class Tools:
    cc: str | None
    ar: str | None


def find_tools(config: BuildConfig, target_: Target, source: Path) -> Tools:
    """The tools this build needs, found before any work is done."""
    output = config.output.name
    if not target_.is_host and config.cc is None and (config.kind == ".so" or
                                                       config.threads > 1):
        need = (f"link {output}" if config.kind == ".so"
                else "compile the thread pool for --threads")
        raise AotError(f"{source}: cannot {need} for {target_.triple}: pass --cc with a C "
                       f"compiler for that target (or write an object file without --threads)")
    cc = None
    if config.kind == ".so" or config.threads > 1:
        cc = _find_tool(config.cc, ["gcc", "cc"], "C compiler",
                        f"link {output}" if config.kind == ".so" else "build the thread pool",
                        source)
    ar = None
    if config.kind == ".a":
        ar = _find_tool(None, ["ar"], "archiver", f"write {output}", source)
    return Tools(cc, ar)


# -- compiling -------------------------------------------------------------------------------

def _c_names(exports: Sequence[Exported], config: BuildConfig, source: Path) -> list[str]:
    names = [config.prefix + e.export_name for e in exports]
    libc = [ctypes.CDLL(path) for path in filter(None, (ctypes.util.find_library("c"),
                                                          ctypes.util.find_library("m")))]
    for e, name in zip(exports, names):
        file, line = e.source
        if not _is_c_identifier(name):
            raise AotError(f"{file}:{line}: {e.name}: {name!r} is not a valid C name")
        if any(hasattr(lib, name) for lib in libc):
            raise AotError(f"{file}:{line}: {e.name}: the C name {name!r} is also a function "
                           "of the C library; pass jitc.export(..., name=...) or --prefix")
    return names


def _complex_name(dtype: np.dtype | None) -> str:
    return "" if dtype is None else dtypes.from_numpy(dtype).name


def _describe(e: Exported, c_name: str, lowered: Lowered, optimized: Module,
              workspace: DimLike) -> FunctionABI:
    fn = optimized.entry
    taken = {f"res{i}" for i in range(len(fn.outputs))} | {"workspace"} | set(e.symbols)
    pairs = lowered.complex_boundary
    complex_params = {} if pairs is None else pairs.params
    complex_outputs = {} if pairs is None else pairs.outputs
    args = []
    for i, (name, param) in enumerate(zip(e.arg_names, fn.parameters)):
        usable = _is_c_identifier(name) and name not in taken
        taken.add(name)
        args.append(Argument(name if usable else f"arg{i}", param.type,
                             _complex_name(complex_params.get(i))))
    written = lowered.side_effects.written
    count = len(fn.outputs) - len(written)  # the written arguments' values come last
    results = tuple(Argument(f"res{i}", v.type, _complex_name(complex_outputs.get(i)))
                    for i, v in enumerate(fn.outputs[:count]))
    for a in (*args, *results):
        if not a.type.is_row_major:
            raise AotError(f"{e.source[0]}:{e.source[1]}: {e.name}: internal error: "
                           f"{a.name} has the non-row-major layout {a.type}")
    scratch = sum(abi.padded(args[i].type.nbytes) for i in written)
    for symbol in e.symbols:
        if not _is_c_identifier(symbol):
            raise AotError(f"{e.source[0]}:{e.source[1]}: {e.name}: the symbol {symbol!r} is "
                           "not a valid C parameter name; rename it in the signature")
    return FunctionABI(c_name, e.name, e.source, tuple(args), results,
                       lowered.out_tree == pytree.LEAF, workspace + scratch, tuple(written),
                       workspace, tuple(e.header_notes()), e.symbols,
                       tuple(sorted(optimized.constraints, key=str)))


def _compile_export(e: Exported, c_name: str, lib_name: str, threads: int,
                    external: ExternalConstants | None) -> tuple[FunctionABI, list[str], bool]:
    """One export as LLVM IR texts (the entry's module first, then its regions'); whether it
    calls the thread pool."""
    file, line = e.source
    options = Options().with_(backend="cpu", num_threads=threads)
    try:
        lowered = e.lower_export(options)
    except Exception as exc:
        where, problem = describe_failure(exc)
        raise AotError(f"{where or f'{file}:{line}'}: {e.name}: failed to trace: {problem}"
                       ) from exc
    try:
        optimized = lowered.optimize()
        internal = f"{lib_name}.{c_name}."
        parallel_for = abi.pool_symbol(lib_name, "jitc_parallel_for")
        lowering = lower_module(optimized, threads, c_name, Linkage(
            prefix=internal, internal=True, bake_constants=True, parallel_for=parallel_for,
            external_constants=external))
        fn = _describe(e, c_name, lowered, optimized, lowering.plan.workspace_bytes)
        wrapper.emit_export(lowering.llvm_ir, fn, lowering.entry, internal)
    except AotError:
        raise
    except Exception as exc:
        raise AotError(f"{file}:{line}: {e.name}: cannot compile: {one_line(exc)}") from exc
    uses_pool = False
    for part in lowering.parts:  # the entry's module, then those of control-flow regions
        pool = part.globals.get(parallel_for)
        if pool is not None:
            pool.visibility = "hidden"  # defined in this library, never exported from it
            uses_pool = True
    return fn, [str(part) for part in lowering.parts], uses_pool


def _check_unique(lib: LibraryABI, source: Path) -> None:
    seen: dict[str, str] = {}
    for owner, symbol in header.declared_names(lib):
        other = seen.setdefault(symbol, owner)
        if other != owner:
            raise AotError(f"{source}: {owner}: the generated name {symbol} is also used by "
                           f"{other}; rename one export or pass --prefix/--name")


def _emit_object(texts: Sequence[str], tm: llvm.TargetMachine) -> bytes:
    modules = [target.parse(text, tm) for text in texts]
    linked = modules[0]
    for other in modules[1:]:
        linked.link_in(other)
    linked.verify()
    target.optimize(linked, tm)
    return tm.emit_object(linked)


@dataclass(frozen=True)
class ObjectCode:
    code: bytes                                  # what LLVM emitted
    constants: list[tuple[str, np.ndarray]]      # the symbols it declares, with their values
    abi: LibraryABI
    threaded: bool                               # whether it needs the thread pool

    def write(self, path: Path, source: Path) -> None:
        try:
            objdata.write_object(path, self.code, self.constants)
        except objdata.ObjectFormatError as exc:
            raise AotError(f"{source}: internal error: cannot add the constants to "
                           f"{path.name}: {exc}") from None


def compile_object(exports: Sequence[Exported], config: BuildConfig, target_: Target,
                   source: Path, version: str) -> ObjectCode:
    """The library's object code and what it needs beside it."""
    names = _c_names(exports, config, source)
    tm = target_.machine()
    # The wrapper passes sizes as i64; a data layout without "p:" has 64-bit pointers.
    pointer_bits = re.search(r"(?:^|-)p0?:(\d+)", str(tm.target_data))
    if pointer_bits and pointer_bits.group(1) != "64":
        raise AotError(f"{source}: --target {target_.triple}: only 64-bit targets are "
                       "supported")
    texts, functions, threaded = [], [], False
    external = (ExternalConstants(STREAMED_CONSTANT_BYTES)
                if objdata.writes_elf(target_.triple) else None)
    for e, c_name in zip(exports, names):
        fn, parts, uses_pool = _compile_export(e, c_name, config.name, config.threads,
                                               external)
        functions.append(fn)
        texts.extend(parts)
        threaded |= uses_pool
    lib = LibraryABI(config.name, tuple(functions), version, target_.triple, target_.cpu,
                     config.threads if threaded else 1)
    _check_unique(lib, source)
    library_module = ir.Module(name=f"{config.name}.library")
    wrapper.emit_library_functions(library_module, lib, json.dumps(lib.manifest()))
    texts.append(str(library_module))
    return ObjectCode(_emit_object(texts, tm), external.arrays if external else [], lib,
                      threaded)


# -- linking ---------------------------------------------------------------------------------

def _pool_object(cc: str, work: Path, name: str, source: Path) -> Path:
    """The thread pool of runtime/, its names made this library's own and hidden."""
    pool = work / f"{name}_pool.o"
    renames = [f"-D{symbol}={abi.pool_symbol(name, symbol)}" for symbol in abi.POOL_SYMBOLS]
    _run([cc, "-std=c11", "-O2", "-fPIC", "-pthread", "-fvisibility=hidden", *renames,
          f"-I{abi.RUNTIME_DIR}", "-c", str(abi.POOL_SOURCE), "-o", str(pool)], source,
         "compiling the thread pool")
    return pool


def _link(objects: list[Path], config: BuildConfig, tools: Tools, work: Path,
          threaded: bool, source: Path) -> Path:
    out = work / config.output.name
    # The pool's worker threads run code of the library and never exit, so a threaded library
    # is marked nodelete: dlclose() then leaves it mapped instead of pulling it from under them.
    if config.kind == ".so":
        assert tools.cc is not None
        _run([tools.cc, "-shared", "-o", str(out), *map(str, objects),
              f"-Wl,-soname,{config.output.name}", "-Wl,-z,defs", "-Wl,-z,noexecstack",
              "-static-libgcc", *(["-pthread", "-Wl,-z,nodelete"] if threaded else []),
              "-Wl,--as-needed", "-lm"],
             source, f"linking {config.output.name}")
    elif config.kind == ".a":
        assert tools.ar is not None
        _run([tools.ar, "rcs", str(out), *map(str, objects)], source,
             f"writing {config.output.name}")
    elif len(objects) == 1:
        objects[0].rename(out)
    else:
        assert tools.cc is not None
        _run([tools.cc, "-r", "-nostdlib", "-o", str(out), *map(str, objects)], source,
             f"writing {config.output.name}")
    return out


def build(exports: Sequence[Exported], config: BuildConfig, source: Path) -> BuildResult:
    """Compile `exports` (from the model file `source`) into a library and its header."""
    from jitc import __version__
    if config.kind not in OUTPUT_KINDS:
        raise AotError(f"{source}: cannot tell what to write from {config.output.name!r}: "
                       "the output must end in .so, .a or .o")
    if config.threads < 1:
        raise AotError(f"{source}: --threads must be at least 1, got {config.threads}")
    if not _is_c_identifier(config.name):
        raise AotError(f"{source}: --name {config.name!r} is not a valid C name")
    if config.prefix and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", config.prefix):
        raise AotError(f"{source}: --prefix {config.prefix!r} is not a valid start of a C name")
    if not exports:
        raise AotError(f"{source}: no exported functions")
    if not abi.ABI_HEADER.is_file():
        raise AotError(f"{source}: jitc's runtime C sources are missing from "
                       f"{abi.RUNTIME_DIR}; this jitc installation is incomplete: reinstall "
                       "it (pip install . from a checkout builds a wheel that carries them)")
    target_ = resolve_target(config.triple, config.cpu, source)
    if config.cpu not in (None, "host"):
        check_cpu(target_, source)
    tools = find_tools(config, target_, source)
    code = compile_object(exports, config, target_, source, __version__)
    lib, threaded = code.abi, code.threaded
    destination = config.output.resolve().parent
    if not destination.is_dir():
        raise AotError(f"{source}: cannot write {config.output}: no folder {destination}")
    with tempfile.TemporaryDirectory(prefix=".jitc-aot-", dir=destination) as tmp:
        work = Path(tmp)
        objects = [work / f"{config.name}.o"]
        code.write(objects[0], source)
        if threaded:
            assert tools.cc is not None
            objects.append(_pool_object(tools.cc, work, config.name, source))
        built = _link(objects, config, tools, work, threaded, source)
        header_tmp = work / "header.h"
        header_tmp.write_text(header.render(lib, config.header_path.name, source))
        os.replace(built, config.output)
        try:
            shutil.move(header_tmp, config.header_path)  # --header may be on another disk
        except OSError as exc:
            config.output.unlink()
            raise AotError(f"{source}: cannot write {config.header_path}: {exc}") from None
    return BuildResult(config.output, config.header_path, lib, config.output.stat().st_size)


__all__ = ["BuildConfig", "BuildResult", "build", "resolve_target"]
