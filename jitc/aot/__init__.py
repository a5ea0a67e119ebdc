"""Ahead-of-time compilation: `jitc.export` functions become a C library (`jitc aot`).

    jitc aot model.py -o libmodel.so      # writes libmodel.so and libmodel.h

See docs/aot.md. `load` calls a built library from Python.
"""

from jitc.aot.export import AotError, Exported, ExportError, ShapeDtype, export
from jitc.aot.loader import AotCallError, Library, load

__all__ = ["AotCallError", "AotError", "ExportError", "Exported", "Library", "ShapeDtype",
           "export", "load"]
