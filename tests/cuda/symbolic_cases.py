"""The symbolic programs the cuda tests run (tests/cuda/test_cuda_symbolic.py on the grid
simulator, tests/cuda/test_cuda_gpu.py on a GPU): tests/symbolic_programs.py's table less what
the cuda kernels refuse with symbolic extents (control flow, refused at compile time and then
compiled exactly by the policy)."""

from __future__ import annotations

from symbolic_programs import PROGRAMS as ALL_PROGRAMS

REFUSED = {"while loop", "conditional"}
PROGRAMS = {name: case for name, case in ALL_PROGRAMS.items() if name not in REFUSED}
SIZES = (0, 1, 2, 7, 33)
