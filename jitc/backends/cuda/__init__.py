"""The CUDA backend: NVPTX kernels from the shared LLVM layer, a grid simulator that runs the
same kernels on the CPU, and a pycuda runtime (imported only for real GPU runs).

See docs/cuda.md for how it is built and tested. This module stays import-light: the
backend registry reads the targets from it.
"""

DEFAULT_ARCH = "sm_80"
# Ampere, Ampere (consumer), Ada, Hopper, Blackwell (data centre and consumer): LLVM picks
# the PTX version for each; a GPU runs PTX for its own or any older target.
ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
