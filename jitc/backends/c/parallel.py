"""Threads for C kernels: a kernel whose code is one loop over its output (after constant
declarations) runs that loop's iterations in chunks on the runtime's thread pool.

The generated file stays standalone: it defines `jitc_pool_for`, a pointer to a function
with the signature of the runtime's `jitc_parallel_for`, which starts as a serial loop over
the chunks in the file itself. The C backend points it at the runtime's pool after loading
the library (backend.py). Every iteration of the outer loop computes its own output elements
the same way whichever thread runs it, so the threads change no result.
"""

from __future__ import annotations

import re

from jitc.ir.symbolic import DimLike, is_static

from .cgen import extent

# Work (elements touched, multiply-adds) per thread below which a kernel stays on one
# thread: the CPU backend's codegen.PARALLEL_GRAIN.
PARALLEL_GRAIN = 1 << 15
POOL = "jitc_pool_for"

# The pool's entry point as the generated file declares it (helpers.py registers it).
POOL_SOURCE = f"""\
/* The thread pool: jitc points {POOL} at its runtime's jitc_parallel_for after loading
 * this library; on its own the file runs the chunks in order on the calling thread. */
typedef void (*jitc_task)(void *frame, int64_t begin, int64_t end);

static void jitc_serial_for(jitc_task task, void *frame, int64_t n, int64_t threads) {{
    (void)threads;
    if (n > 0)
        task(frame, 0, n);
}}

void (*{POOL})(jitc_task, void *, int64_t, int64_t) = jitc_serial_for;"""

_OUTER = re.compile(r"^    for \(int64_t (i\d+) = 0; \1 < (.+); \1\+\+\) \{$")


def thread_count(cost: DimLike, threads: int) -> str | None:
    """The threads a kernel of `cost` is worth (a C expression where the cost is known at
    run time only), or None for one."""
    if threads <= 1:
        return None
    if is_static(cost):
        count = min(threads, int(cost) // PARALLEL_GRAIN)  # type: ignore[arg-type]
        return str(count) if count > 1 else None
    per_grain = f"{extent(cost)} / {PARALLEL_GRAIN}"
    return f"({per_grain} < {threads} ? {per_grain} : {threads})"


def split_outer_loop(name: str, params: list[tuple[str, str]], body: list[str],
                     threads: str) -> list[str] | None:
    """The C of kernel `name` (parameters `(declaration, name)`, `body` its lines) with its
    outer loop run by the pool on up to `threads` threads: a frame struct of its parameters,
    `name_part` computing the iterations [jitc_begin, jitc_end), and `name` calling the pool.
    None when the body is not one outer loop after declarations."""
    start = next((n for n, line in enumerate(body) if line.startswith("    for ")), None)
    if start is None or body[-1] != "    }" or not params:
        return None
    if any(not line.lstrip().startswith(("//", "const ", "(void)")) for line in body[:start]):
        return None
    match = _OUTER.match(body[start])
    inner = body[start + 1:-1]
    if match is None or any(line.startswith("    ") and not line.startswith("     ")
                            for line in inner):
        return None
    counter, count = match.groups()
    frame = f"{name}_frame"
    fields, locals_ = [], []
    for declaration, field in params:
        pointer = "*" in declaration
        fields.append(f"    {declaration.replace('restrict ', '')}{field};" if pointer else
                      f"    {declaration} {field};")
        locals_.append(f"    {declaration}{field} = jitc_f->{field};" if pointer else
                       f"    const {declaration} {field} = jitc_f->{field};")
    loop = f"    for (int64_t {counter} = jitc_begin; {counter} < jitc_end; {counter}++) {{"
    values = ", ".join(field for _, field in params)
    return [f"struct {frame} {{", *fields, "};", "",
            f"static void {name}_part(void *jitc_frame, int64_t jitc_begin, int64_t jitc_end) {{",
            f"    const struct {frame} *jitc_f = jitc_frame;", *locals_,
            *body[:start], loop, *inner, "    }", "}", "",
            "@SIGNATURE",
            f"    struct {frame} jitc_f = {{{values}}};",
            f"    {POOL}({name}_part, &jitc_f, {count}, {threads});", "}"]
