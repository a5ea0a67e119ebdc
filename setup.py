"""What goes into the wheel: the Python packages, the C runtime extension and the runtime's C
sources that `jitc aot` compiles. Metadata, dependencies and extras live in setup.cfg."""

import numpy
from setuptools import Extension, find_packages, setup

# runtime/ keeps the C sources once; the wheel carries the ones `jitc aot` compiles into every
# library as the data-only package `jitc.runtime` (jitc/aot/abi.py finds them either way).
AOT_RUNTIME_FILES = ["jitc_aot.h", "jitc_runtime.h", "jitc_runtime.c"]

setup(
    packages=[*find_packages(include=["jitc", "jitc.*"]), "jitc.runtime"],
    package_dir={"jitc.runtime": "runtime"},
    package_data={"jitc.runtime": AOT_RUNTIME_FILES},
    ext_modules=[
        Extension(
            "jitc._runtime",
            sources=["runtime/pymodule.c", "runtime/dispatcher.c", "runtime/bindings.c",
                     "runtime/results.c", "runtime/jitc_runtime.c", "runtime/jitc_profile.c"],
            # The headers: listed, so that the sdist carries them (the wheel is built from it).
            depends=["runtime/pymodule.h", "runtime/dispatcher.h", "runtime/jitc_runtime.h"],
            include_dirs=["runtime", numpy.get_include()],
            extra_compile_args=["-O2", "-std=c11", "-pthread", "-Wall", "-Werror"],
            extra_link_args=["-pthread"],
        )
    ],
)
