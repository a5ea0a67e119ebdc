"""Builds jitc's C runtime extension; all other metadata lives in setup.cfg."""

import numpy
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "jitc._runtime",
            sources=["runtime/pymodule.c", "runtime/jitc_runtime.c"],
            include_dirs=["runtime", numpy.get_include()],
            extra_compile_args=["-O2", "-std=c11", "-pthread", "-Wall", "-Werror"],
            extra_link_args=["-pthread"],
        )
    ],
)
