"""The `jitc` command line."""

from __future__ import annotations

import argparse
import linecache
import sys
import time
from collections.abc import Callable

import numpy as np

# The demo's model, compiled under a file name of its own: jitc's error messages and IR name
# the user's lines, and frames inside the jitc package are never the user's.
DEMO_FILE = "demo_model.py"
DEMO_SOURCE = """\
def mlp(x, w1, b1, w2):
    h = np.maximum(x @ w1 + b1, 0)          # plain numpy: traced through __array_ufunc__
    logits = h @ w2
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
"""


def demo_model() -> Callable:
    """`mlp` of DEMO_SOURCE, its lines known to linecache (for the source in error messages)."""
    lines = DEMO_SOURCE.splitlines(keepends=True)
    linecache.cache[DEMO_FILE] = (len(DEMO_SOURCE), None, lines, DEMO_FILE)
    namespace: dict[str, object] = {"np": np}
    exec(compile(DEMO_SOURCE, DEMO_FILE, "exec"), namespace)
    return namespace["mlp"]  # type: ignore[return-value]


def _demo(args: argparse.Namespace) -> int:
    import jitc

    mlp = demo_model()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8), np.float32)
    w1 = rng.standard_normal((8, 16), np.float32)
    b1 = rng.standard_normal(16, np.float32)
    w2 = rng.standard_normal((16, 3), np.float32)

    fast = jitc.jit(mlp, backend=args.backend)
    print(f"A plain numpy function, unmodified ({DEMO_FILE}):\n")
    print("".join(f"{n:4}  {line}" for n, line in enumerate(DEMO_SOURCE.splitlines(True), 1)))
    lowered = fast.lower(x, w1, b1, w2)
    print("jitc.jit traces it into IR (f.lower(...).as_text()):\n")
    print(lowered.as_text())
    print("and after the optimizer (as_text(optimized=True)):\n")
    print(lowered.as_text(optimized=True))
    start = time.perf_counter()
    got = fast(x, w1, b1, w2)
    first = time.perf_counter() - start
    want = mlp(x, w1, b1, w2)
    print(f"backend {args.backend!r}: first call (trace + compile + run) {first * 1e3:.1f} ms")
    print(f"max |jitc - numpy| = {np.max(np.abs(got - want)):.2e}")
    return 0


BENCH_MISSING = (
    "jitc bench: the benchmark suite is not part of an installed wheel; it runs from a source "
    "checkout of jitc: there, `pip install -e '.[bench]'` (JAX, numba and threadpoolctl for the "
    "comparison columns), then `jitc bench` or `python -m bench`")


def _bench(arguments: list[str]) -> int:
    """`python -m bench` of the source checkout this package was installed from (editable)."""
    from pathlib import Path

    import jitc
    root = Path(jitc.__file__).resolve().parent.parent
    # Beside an installed wheel, root is site-packages: a `bench` there is another project's.
    in_checkout = (root / "setup.py").is_file() and (root / "bench" / "__main__.py").is_file()
    if not in_checkout:
        print(BENCH_MISSING, file=sys.stderr)
        return 2
    sys.path.insert(0, str(root))
    from bench.__main__ import main as bench_main
    return bench_main(arguments)


def _dump(args: argparse.Namespace) -> int:
    """`jitc dump FILE:FUNCTION --input SIG...`: the IR as text, Graphviz or an SVG picture."""
    import shutil
    import subprocess

    from jitc.cli_model import InputSpec, load_function, parse_sizes, random_inputs
    jitted, _ = load_function(args.target)
    specs = [InputSpec.parse(text) for text in args.input]
    lowered = jitted.lower(*random_inputs(specs, parse_sizes(args.size)))
    if args.format == "text":
        output = lowered.as_text(optimized=args.optimized)
    else:
        output = lowered.as_dot(optimized=args.optimized)
    if args.format == "svg":
        dot = shutil.which("dot")
        if dot is None:
            print("jitc dump: --format svg needs Graphviz's `dot` on PATH (apt install "
                  "graphviz, or brew install graphviz); --format dot writes its input",
                  file=sys.stderr)
            return 2
        output = subprocess.run([dot, "-Tsvg"], input=output, capture_output=True, text=True,
                                check=True).stdout
    if args.output is None:
        sys.stdout.write(output)
    else:
        with open(args.output, "w") as f:
            f.write(output)
    return 0


def _megabytes(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def _cache(action: str) -> int:
    from jitc import diskcache
    if action == "clear":
        location = diskcache.root()
        deleted = diskcache.clear()
        print(f"deleted {deleted} entries from {location}" if location is not None
              else "the compile cache is off (JITC_CACHE_DIR): nothing to clear")
        return 0
    info = diskcache.info()
    if not info["enabled"]:
        print("location: none (the compile cache is off: JITC_CACHE_DIR is empty or \"off\")")
        return 0
    print(f"location: {info['location']}")
    print(f"entries:  {info['entries']}")
    print(f"size:     {_megabytes(info['bytes'])}")
    print(f"limit:    {_megabytes(info['limit_bytes'])} (JITC_CACHE_MAX_MB)")
    for name, counts in sorted(info["namespaces"].items()):
        print(f"  {name:9} {counts['entries']:6} entries  {_megabytes(counts['bytes']):>10}")
    return 0


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["bench"]:  # the suite and the function bench parse their own options
        from jitc import cli_bench
        if cli_bench.is_model_target(arguments[1:]):
            return cli_bench.run(arguments[1:])
        return _bench(arguments[1:])
    parser = argparse.ArgumentParser(prog="jitc", description="jitc: a tracing JIT compiler "
                                     "for numpy-style code")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="trace, show and run a small numpy model")
    demo.add_argument("--backend", default=None, help="backend to run on")
    sub.add_parser("version", help="print the version")
    sub.add_parser("bench", add_help=False,
                   help="the benchmark suite against numpy, JAX and numba (from a source "
                        "checkout; `jitc bench --help` for its options), or `jitc bench "
                        "FILE:FUNCTION --input SIG --sweep B=1,8,64`: one function against "
                        "numpy at several batch sizes (`jitc bench FILE:FUNCTION --help`)")
    cache = sub.add_parser("cache", help="the persistent compile cache: where it is, what it "
                           "holds, clearing it (docs/cache.md)")
    cache.add_argument("action", choices=["info", "clear"])
    dump = sub.add_parser("dump", help="the IR of a function as text, Graphviz or SVG "
                          "(docs/profiling.md)")
    dump.add_argument("target", metavar="FILE:FUNCTION", help="the function, in a Python file")
    dump.add_argument("--input", action="append", default=[], metavar="SIG",
                      help="an argument's dtype and shape, such as 'f32[B,784]' (once per "
                           "argument, in order)")
    dump.add_argument("--size", action="append", default=[], metavar="NAME=N",
                      help="the size of a named dimension, such as B=8")
    dump.add_argument("--optimized", action="store_true", help="after the optimizer")
    dump.add_argument("--format", choices=["text", "dot", "svg"], default="text",
                      help="IR text, Graphviz text, or SVG drawn by Graphviz's `dot`")
    dump.add_argument("--svg", dest="format", action="store_const", const="svg",
                      help="the same as --format svg")
    dump.add_argument("-o", "--output", default=None, help="file to write (default: stdout)")
    from jitc.aot import cli as aot_cli
    aot_cli.add_parser(sub)
    args = parser.parse_args(arguments)
    if args.command == "version":
        import jitc
        print(jitc.__version__)
        return 0
    if args.command == "demo":
        if args.backend is None:
            from jitc.options import Options
            args.backend = Options().backend
        return _demo(args)
    if args.command == "aot":
        return aot_cli.run(args)
    if args.command == "cache":
        return _cache(args.action)
    if args.command == "dump":
        from jitc.cli_model import CommandError
        try:
            return _dump(args)
        except CommandError as exc:
            print(f"jitc dump: {exc}", file=sys.stderr)
            return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
