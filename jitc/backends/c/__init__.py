"""The C backend: portable C source for every compiled function, built with the system C
compiler and loaded with ctypes.

It was written from docs/porting.md alone, as a proof that the guide is complete: one C
function per kernel (a fusion or a single op), plain loops, each IR op as a comment above the
statements that compute it. `compiled.as_text()` is the C source; it needs nothing but libm.

- `cgen.py`: C types, literals and the `Writer` that keeps indentation, loops and scopes;
- `helpers.py`: the small C functions the generated code calls (float16, integer division,
  saturating conversions, ...), emitted only when used;
- `elemental.py`: the per-op scalar C emitter (mirrors `jitc.backends.llvm.elemental`), with
  the data-movement ops' index arithmetic in `movement.py`;
- `extents.py`: symbolic modules (run-time extents): the ops they may use and the workspace
  layout whose offsets are computed at each call;
- `kernels.py`, `fusions.py`: kernel templates for single ops and for each fusion kind;
- `codegen.py`: one C translation unit per function, with the `jitc_entry` ABI;
- `build.py`: compiler discovery, the build cache and loading;
- `backend.py`: `CBackend` and `CExecutable`.
"""

from jitc.backends.c.backend import CBackend, CExecutable

__all__ = ["CBackend", "CExecutable"]
