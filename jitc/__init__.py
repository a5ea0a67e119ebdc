"""jitc: a tracing JIT compiler for numpy-style tensor code."""

__version__ = "0.1.0"
