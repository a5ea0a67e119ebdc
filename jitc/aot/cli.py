"""`jitc aot MODEL.py -o libNAME.so`: the command line of ahead-of-time compilation.

Any failure is one line on stderr (`jitc aot: FILE:LINE: FUNCTION: PROBLEM`) and exit
status 2, with no output files left behind.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jitc.aot.abi import default_name
from jitc.aot.export import AotError

EXIT_FAILURE = 2


def add_parser(subcommands: argparse._SubParsersAction) -> None:
    aot = subcommands.add_parser(
        "aot", help="compile @jitc.export functions into a C library and header",
        description="Compile the @jitc.export functions of a Python file into a standalone "
                    "shared library (.so), static library (.a) or object file (.o), and a C "
                    "header beside it. See docs/aot.md.")
    aot.add_argument("model", type=Path, help="the Python file defining the exports")
    aot.add_argument("-o", "--output", type=Path, default=None,
                     help="the library to write: .so, .a or .o (default: lib<model>.so)")
    aot.add_argument("--name", default=None,
                     help="library name for the library-wide symbols and macros "
                          "(NAME_error_string, NAME_H); default: the output name without "
                          "'lib' and suffix")
    aot.add_argument("--prefix", default="",
                     help="prepended to the C name of every export (default: none)")
    aot.add_argument("--header", type=Path, default=None,
                     help="where to write the C header (default: the output with suffix .h)")
    aot.add_argument("--target", default=None, metavar="TRIPLE",
                     help="LLVM target triple (default: this machine's); another "
                          "architecture needs --cc for anything but an object file")
    aot.add_argument("--target-cpu", default=None, metavar="CPU",
                     help="LLVM CPU name to tune for; 'host' for this machine (default: "
                          "x86-64-v3 on x86_64, generic elsewhere)")
    aot.add_argument("--threads", type=int, default=1, metavar="N",
                     help="split large kernels over up to N threads (default: 1)")
    aot.add_argument("--cc", default=None,
                     help="C compiler that links the library (default: gcc or cc on PATH)")


def run(args: argparse.Namespace) -> int:
    from jitc.aot.compile import BuildConfig, build
    from jitc.aot.export import load_exports
    output: Path = args.output or Path(f"lib{args.model.stem}.so")
    config = BuildConfig(output=output, name=args.name or default_name(output),
                         prefix=args.prefix, header=args.header, triple=args.target,
                         cpu=args.target_cpu, threads=args.threads, cc=args.cc)
    try:
        exports = load_exports(args.model)
        result = build(exports, config, args.model)
    except AotError as exc:
        # Python reports the model's code by absolute path; show it as the user wrote it.
        message = str(exc).replace(str(args.model.resolve()), str(args.model))
        print(f"jitc aot: {message}", file=sys.stderr)
        return EXIT_FAILURE
    names = ", ".join(fn.c_name for fn in result.abi.exports)
    print(f"wrote {result.library} ({result.size / 1024:.0f} KiB; {names}) and {result.header}")
    return 0
