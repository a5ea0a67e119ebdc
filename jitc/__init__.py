"""jitc: a tracing JIT compiler for numpy-style tensor code.

    import jitc, jitc.numpy as jnp

    @jitc.jit
    def f(x, w):
        return jnp.tanh(x @ w + 1.0)
"""

__version__ = "0.1.0"

from jitc import lax, numpy
from jitc.aot.export import ShapeDtype, export
from jitc.api import ArgSpec, Compiled, Jitted, Lowered, jit
from jitc.backends.cuda.device import device_put
from jitc.ir.interpreter import interpret
from jitc.options import Options
from jitc.profiling import profile, start_from_environment
from jitc.tracing.errors import (
    ConcretizationError,
    IndexingError,
    JitcError,
    ShapeError,
    TraceError,
)

__all__ = ["jit", "lax", "device_put", "export", "ShapeDtype", "numpy", "interpret", "ArgSpec",
           "Compiled", "Jitted", "Lowered", "Options", "JitcError", "ConcretizationError",
           "IndexingError", "ShapeError", "TraceError", "profile", "__version__"]

start_from_environment()  # JITC_PROFILE
