"""Exports that write into their arguments: in/out parameters in C, the same side effects as
the Python function has on numpy arrays."""

from __future__ import annotations

import numpy as np
import pytest
from aotkit import build, compile_c, needs_gcc, run_clean, write

import jitc.aot

MODEL = """
import numpy as np
import jitc


@jitc.export("f32[6]", "f32[6]")
def decay(state, x):
    state *= 0.5
    state[1:] += x[:-1]
    return state.sum(), x * 2


@jitc.export("f64[4,3]", "f64[3]")
def add_row(table, row):
    table[0] = row
    table[1:, ::2] -= 1.0
"""

CLIENT = r"""
#include <stdio.h>
#include "libmodel.h"

int main(void) {
    float state[6] = {1, 2, 3, 4, 5, 6}, x[6] = {1, 1, 1, 1, 1, 1};
    float total, doubled[6];
    int status = decay(state, x, &total, doubled);
    if (status != 0) return 1;
    for (int i = 0; i < 6; i++) printf("%.9g\n", (double)state[i]);
    printf("%.9g\n", (double)total);
    return 0;
}
"""


def numpy_decay(state, x):
    state *= 0.5
    state[1:] += x[:-1]
    return state.sum(), x * 2


@needs_gcc
def test_written_arguments_are_in_out_parameters(tmp_path):
    model = write(tmp_path / "model.py", MODEL)
    library = build(model, tmp_path / "libmodel.so")
    text = (tmp_path / "libmodel.h").read_text()
    assert "int decay(float *state, const float *x, float *res0, float *res1);" in text
    assert "In/out: state is written in place" in text
    assert "const double *row" in text and "double *table" in text

    lib = jitc.aot.load(library)
    state, x = np.arange(1, 7, dtype=np.float32), np.ones(6, np.float32)
    expected_state = state.copy()
    expected = numpy_decay(expected_state, x.copy())
    total, doubled = lib.decay(state, x)
    np.testing.assert_allclose(state, expected_state)
    np.testing.assert_allclose(total, expected[0])
    np.testing.assert_allclose(doubled, expected[1])

    table = np.arange(12.0).reshape(4, 3)
    expected_table = table.copy()
    expected_table[0] = [7.0, 8.0, 9.0]
    expected_table[1:, ::2] -= 1.0
    transposed = np.asfortranarray(table)  # not C-contiguous: written back through a copy
    lib.add_row(transposed, np.array([7.0, 8.0, 9.0]))
    np.testing.assert_array_equal(transposed, expected_table)

    binary = compile_c(write(tmp_path / "client.c", CLIENT), tmp_path / "client", library,
                       f"-Wl,-rpath,{tmp_path}")
    values = [float(v) for v in run_clean(binary).split()]
    np.testing.assert_allclose(values[:6], expected_state, rtol=1e-6)
    np.testing.assert_allclose(values[6], expected[0], rtol=1e-6)


@needs_gcc
def test_a_written_argument_must_be_a_writable_array(tmp_path):
    library = build(write(tmp_path / "model.py", MODEL), tmp_path / "libmodel.so")
    lib = jitc.aot.load(library)
    frozen = np.ones(6, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(TypeError, match="in/out"):
        lib.decay(frozen, np.ones(6, np.float32))
    with pytest.raises(TypeError, match="in/out"):
        lib.decay([1.0] * 6, np.ones(6, np.float32))
