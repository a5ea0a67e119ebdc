"""`jitc aot` of jitc.lax loops and branches: the library holds the code of every region, a C
client calls the exports without Python, and the results match the same code run by numpy."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest
from aotkit import (
    build,
    compile_c,
    defined_dynamic_symbols,
    fill,
    generic_client,
    library_symbols,
    manifest,
    needs_gcc,
    parse_sections,
    run_clean,
    split_results,
    write,
)

MODEL = """
import numpy as np
import jitc
from jitc import lax

rng = np.random.default_rng(3)
WX = rng.standard_normal((3, 8)).astype(np.float32)
WH = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)


@jitc.export("f32[4,8]", "f32[6,4,3]")
def rnn(h, xs):
    def step(h, x):
        h = np.tanh(x @ WX + h @ WH)
        return h, h.sum(axis=1)
    return lax.scan(step, h, xs)


@jitc.export("f32[5]")
def grow(x):
    def body(state):
        v, steps = state
        return v * np.float32(1.5) + np.float32(1), steps + 1
    return lax.while_loop(lambda state: state[0].sum() < 100, body, (x, np.int64(0)))


@jitc.export("f32[4]", "f32[4]")
def branches(x, y):
    picked = lax.cond(x.sum() > 0, lambda a, b: a * b, lambda a, b: a - b, x, y)
    nested = lax.fori_loop(0, 3, lambda i, v: lax.cond(i % 2 == 0, lambda u: u + 1,
                                                       lambda u: u * 2, v), y)
    return picked, nested
"""

LIB = "loops"
EXPORTS = ["rnn", "grow", "branches"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("aot_control")
    model = write(folder / "model.py", MODEL)
    return build(model, folder / f"lib{LIB}.so"), runpy.run_path(str(model))


@needs_gcc
def test_region_code_stays_inside_the_library(built):
    library, _ = built
    assert defined_dynamic_symbols(library) == library_symbols(LIB, EXPORTS)


@needs_gcc
def test_c_client_runs_loops_and_branches_like_numpy(built):
    library, model = built
    exports = manifest(library, LIB)["exports"]
    client = write(library.parent / "client.c", generic_client(f"lib{LIB}.h", LIB, exports))
    binary = compile_c(client, library.parent / "client", "-L", library.parent, f"-l{LIB}",
                       f"-Wl,-rpath,{library.parent}")
    sections = parse_sections(run_clean(binary))
    for export in exports:
        inputs = [fill(a["dtype"], tuple(a["shape"]), i) for i, a in enumerate(export["args"])]
        want = model[export["name"]].__wrapped__(*inputs)  # lax runs eagerly on numpy arrays
        want = [np.asarray(w) for w in leaves(want)]
        got = split_results(sections[export["name"]], export["results"])
        assert len(got) == len(want), export["name"]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.astype(np.float64), rtol=1e-5, atol=1e-5,
                                       err_msg=export["name"])


def leaves(tree: object) -> list[object]:
    """The arrays of a nested tuple, in order: how an export's results are flattened."""
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in leaves(item)]
    return [tree]
