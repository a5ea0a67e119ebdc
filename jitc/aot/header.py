"""The C header of a library: prototypes and per-export metadata as macros.

The header is self-contained: it carries runtime/jitc_aot.h (status and dtype codes) under that
file's own include guard, so headers of several libraries can share a translation unit.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

from jitc.aot import abi
from jitc.aot.abi import Argument, FunctionABI, LibraryABI
from jitc.backends.c.cgen import extent
from jitc.ir.symbolic import DimLike


def _macro_base(fn: FunctionABI) -> str:
    return fn.c_name.upper()


def c_expression(dim: DimLike) -> str:
    """An extent as a C expression of the export's symbols, computed in `int64_t`."""
    return extent(dim, lambda symbol: f"(int64_t)({symbol})")


def _array_macros(base: str, a: Argument, symbols: str) -> list[tuple[str, str]]:
    """A static array's size and shape are constants; a symbolic one's are function-like
    macros of the export's symbols (`NAME_ARG0_SIZE(n)`)."""
    t = a.type
    macros = [(f"{base}_DTYPE", abi.dtype_enum(t.dtype)), (f"{base}_TYPE", abi.c_type(t.dtype)),
              (f"{base}_RANK", str(t.rank))]
    if t.is_static:
        macros.append((f"{base}_SIZE", str(t.size)))
        if t.rank:  # C has no empty initializer list before C23
            macros.append((f"{base}_SHAPE", "{" + ", ".join(str(d) for d in t.shape) + "}"))
        return macros
    macros.append((f"{base}_SIZE({symbols})", c_expression(t.size)))
    macros.append((f"{base}_SHAPE({symbols})",
                   "{" + ", ".join(c_expression(d) for d in t.shape) + "}"))
    return macros


def export_macros(fn: FunctionABI) -> list[tuple[str, str]]:
    base = _macro_base(fn)
    macros = [(f"{base}_NUM_ARGS", str(len(fn.args))),
              (f"{base}_NUM_RESULTS", str(len(fn.results)))]
    symbols = ", ".join(fn.symbols)
    if fn.symbols:
        macros.append((f"{base}_NUM_SYMBOLS", str(len(fn.symbols))))
    else:
        macros.append((f"{base}_WORKSPACE_BYTES", str(fn.workspace_bytes)))
    for i, a in enumerate(fn.args):
        macros += _array_macros(f"{base}_ARG{i}", a, symbols)
    for i, a in enumerate(fn.results):
        macros += _array_macros(f"{base}_RES{i}", a, symbols)
    return macros


def library_macros(lib: LibraryABI) -> list[tuple[str, str]]:
    base = lib.name.upper()
    return [(f"{base}_JITC_VERSION", f'"{lib.jitc_version}"'),
            (f"{base}_TARGET_TRIPLE", f'"{lib.triple}"'),
            (f"{base}_TARGET_CPU", f'"{lib.cpu}"'),
            (f"{base}_NUM_THREADS", str(lib.threads))]


def guard(lib: LibraryABI) -> str:
    return f"{lib.name.upper()}_H"


def declared_names(lib: LibraryABI) -> Iterator[tuple[str, str]]:
    """(owner, name) for every function and macro a library and its header define; one
    preprocessor namespace holds them all, so no two may be equal."""
    owner = "the library"
    for symbol in (lib.error_string, lib.version_function, lib.cpu_function,
                   lib.manifest_function, *(abi.pool_symbol(lib.name, s)
                                            for s in abi.POOL_SYMBOLS), guard(lib)):
        yield owner, symbol
    for macro, _ in library_macros(lib):
        yield owner, macro
    for fn in lib.exports:
        yield fn.c_name, fn.c_name
        yield fn.c_name, fn.with_workspace
        if fn.symbols:
            yield fn.c_name, fn.workspace_function
        for macro, _ in export_macros(fn):
            yield fn.c_name, macro.split("(")[0]


def type_text(a: Argument) -> str:
    t = a.type
    text = f"{t.dtype.name}[{','.join(str(d) for d in t.shape)}]"
    if a.complex_dtype:  # interleaved pairs, numpy's own layout of a complex array
        return f"{a.complex_dtype}[{','.join(str(d) for d in t.shape[:-1])}] as {text}"
    return text


def _prototype(fn: FunctionABI, name: str, workspace: bool | None) -> str:
    """`int NAME(...)`; with `workspace` None, `int64_t NAME_workspace_bytes(symbols...)`."""
    params = [f"int64_t {s}" for s in fn.symbols]
    if workspace is not None:
        params += [f"{'' if i in fn.written else 'const '}{abi.c_type(a.type.dtype)} *{a.name}"
                   for i, a in enumerate(fn.args)]
        params += [f"{abi.c_type(a.type.dtype)} *{a.name}" for a in fn.results]
    if workspace:
        params.append("void *workspace")
    head = f"{'int' if workspace is not None else 'int64_t'} {name}("
    lines, line = [], head
    for i, p in enumerate(params):
        piece = p + (", " if i < len(params) - 1 else ");")
        if len(line) + len(piece) > 99 and line != head:
            lines.append(line.rstrip())
            line = " " * len(head)
        line += piece
    if not params:
        line += "void);"
    lines.append(line)
    return "\n".join(lines)


def _export_section(fn: FunctionABI) -> str:
    file, line = fn.source
    args = ", ".join(f"{a.name}: {type_text(a)}" for a in fn.args)
    results = ", ".join(f"{a.name}: {type_text(a)}" for a in fn.results)
    base = _macro_base(fn)
    width = max(len(m) for m, _ in export_macros(fn)) + 1
    macros = "\n".join(f"#define {m.ljust(width)}{v}" for m, v in export_macros(fn))
    if fn.symbols:
        names = ", ".join(fn.symbols)
        rules = "; ".join(str(c) for c in fn.constraints)
        memory = (f"Symbolic dimensions: {names}, passed first as int64_t, must be >= 0"
                  + (f" and satisfy {rules}" if rules else "")
                  + "; otherwise the call returns JITC_ERROR_BAD_DIMENSION and touches no "
                  f"buffer. {fn.c_name} allocates {fn.workspace_function}({names}) bytes of "
                  f"temporary memory for each call; {fn.with_workspace} uses the caller's "
                  "buffer instead (aligned to JITC_WORKSPACE_ALIGNMENT, at least that many "
                  "bytes; one call at a time per buffer).")
    elif fn.workspace_bytes:
        memory = (f"{fn.c_name} allocates {base}_WORKSPACE_BYTES bytes of temporary memory "
                  f"for each call; {fn.with_workspace} uses the caller's buffer instead (aligned "
                  "to JITC_WORKSPACE_ALIGNMENT; one call at a time per buffer).")
    else:
        memory = (f"It needs no temporary memory: the workspace of {fn.with_workspace} may be "
                  "NULL.")
    inout = ""
    if fn.written:
        names = ", ".join(fn.args[i].name for i in fn.written)
        inout = (f"In/out: {names} {'is' if len(fn.written) == 1 else 'are'} written in place "
                 "after the results are computed, as the Python function writes "
                 f"{'it' if len(fn.written) == 1 else 'them'}. ")
    comment = textwrap.fill(f"From {fn.python_name} in {Path(file).name}:{line}. {inout}"
                            f"{memory}",
                            width=96, initial_indent=" * ", subsequent_indent=" * ")
    for note in fn.notes:
        comment += "\n" + textwrap.fill(note, width=96, initial_indent=" *   ",
                                        subsequent_indent=" *     ")
    return f"""
/* {fn.c_name}({args}) -> ({results})
{comment} */
{macros}
{_prototype(fn, fn.c_name, False)}
{_prototype(fn, fn.with_workspace, True)}
{_prototype(fn, fn.workspace_function, None) + chr(10) if fn.symbols else ""}"""


def render(lib: LibraryABI, header_name: str, source: Path) -> str:
    """The text of the header for `lib`, built from the model file `source`."""
    shared = abi.ABI_HEADER.read_text().rstrip()
    width = max(len(m) for m, _ in library_macros(lib)) + 1
    macros = "\n".join(f"#define {m.ljust(width)}{v}" for m, v in library_macros(lib))
    sections = "".join(_export_section(fn) for fn in lib.exports)
    return f"""/* {header_name}: the C interface of library `{lib.name}`, built from {source.name}
 * by jitc {lib.jitc_version}. Generated: do not edit.
 *
 * Every function returns JITC_OK (0) or a status code that {lib.error_string}() describes.
 * Arrays are dense row-major (C order) buffers of the element type shown; results go into
 * buffers the caller owns (a rank-0 result is a pointer to one element) and must not overlap
 * the arguments or each other. Every function is reentrant: threads may call the same
 * function at once. The library needs only libc and libm (and libpthread when threaded).
 */
#ifndef {guard(lib)}
#define {guard(lib)}

{shared}

#ifdef __cplusplus
extern "C" {{
#endif

/* What the library was built for; the functions below return the library's own copy. */
{macros}

/* A message for any status code (never NULL; static storage). */
const char *{lib.error_string}(int status);
/* The jitc version the library was built with, and the LLVM CPU name it was tuned for. */
const char *{lib.version_function}(void);
const char *{lib.cpu_function}(void);
/* A JSON description of every export (what jitc.aot.load reads). */
const char *{lib.manifest_function}(void);
{sections}
#ifdef __cplusplus
}}
#endif

#endif
"""
