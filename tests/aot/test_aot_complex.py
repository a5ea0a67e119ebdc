"""Complex arguments and results of `jitc aot` libraries: interleaved (real, imaginary) float
pairs in C, complex arrays through the Python loader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from aotkit import build, compile_c, needs_gcc, run_clean, write

from jitc.aot import loader

MODEL = '''
import numpy as np

import jitc


@jitc.export("c64[4]", "f32[4]")
def rotate(z, theta):
    return z * np.exp(1j * theta), np.abs(z)
'''

CLIENT = r'''
#include <stdio.h>
#include "libcplx.h"

int main(void) {
    float z[ROTATE_ARG0_SIZE] = {1, 0, 0, 1, 3, 4, -1, -1};  /* 1, 1j, 3+4j, -1-1j */
    float theta[ROTATE_ARG1_SIZE] = {0, 0.25f, 0, 0.5f};
    float out[ROTATE_RES0_SIZE], magnitude[ROTATE_RES1_SIZE];
    int status = rotate(z, theta, out, magnitude);
    for (int i = 0; i < 4; i++)
        printf("%.7g %.7g %.7g\n", out[2 * i], out[2 * i + 1], magnitude[i]);
    return status;
}
'''

Z = np.array([1, 1j, 3 + 4j, -1 - 1j], np.complex64)
THETA = np.array([0, 0.25, 0, 0.5], np.float32)


@needs_gcc
def test_complex_pairs_in_c_and_python(tmp_path: Path) -> None:
    library = build(write(tmp_path / "cplx.py", MODEL), tmp_path / "libcplx.so")
    header = (tmp_path / "libcplx.h").read_text()
    assert "rotate(z: c64[4] as f32[4,2], theta: f32[4]) -> (res0: c64[4] as f32[4,2]" in header
    assert "#define ROTATE_ARG0_SHAPE      {4, 2}" in header
    want = Z * np.exp(1j * THETA)

    client = compile_c(write(tmp_path / "app.c", CLIENT), tmp_path / "app", "-L", tmp_path,
                       "-lcplx", "-Wl,-rpath,$ORIGIN")
    rows = np.array([[float(v) for v in line.split()]
                     for line in run_clean(client).splitlines()])
    np.testing.assert_allclose(rows[:, 0] + 1j * rows[:, 1], want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(rows[:, 2], np.abs(Z), rtol=1e-6)

    rotated, magnitude = loader.load(library).rotate(Z, THETA)
    assert rotated.dtype == np.complex64 and rotated.shape == (4,)
    np.testing.assert_allclose(rotated, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(magnitude, np.abs(Z), rtol=1e-6)
