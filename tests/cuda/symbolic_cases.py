"""The symbolic programs the cuda tests run (tests/cuda/test_cuda_symbolic.py on the grid
simulator, tests/cuda/test_cuda_gpu.py on a GPU): all of tests/symbolic_programs.py's table,
sorts and control flow included, each compiled once for every size."""

from __future__ import annotations

from symbolic_programs import PROGRAMS

SIZES = (0, 1, 2, 7, 33)
__all__ = ["PROGRAMS", "SIZES"]
