"""`as_dot()` (jitc/ir/dot.py) and `jitc dump`: the IR as a Graphviz graph."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

import jitc
from jitc.cli import demo_model, main
from jitc.ir import ops

DOT = shutil.which("dot")
needs_graphviz = pytest.mark.skipif(DOT is None, reason="Graphviz `dot` is not installed "
                                    "(apt install graphviz)")


def _arguments() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in [(4, 8), (8, 16), (16,), (16, 3)]]


def _check_structure(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]], int]:
    """What Graphviz would read, checked without it: (node -> label, edges, clusters)."""
    assert text.startswith("digraph ") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    nodes = dict(re.findall(r"^\s*(\w+) \[label=\"(.*?)\", shape=", text, re.M))
    edges = re.findall(r"^\s*(\w+) -> (\w+) \[label=\"(.*?)\"\];", text, re.M)
    for source, target, _ in edges:
        assert source in nodes and target in nodes, (source, target)
    return nodes, edges, text.count("subgraph cluster_")


def test_the_optimized_graph_has_a_cluster_per_fusion_and_types_on_edges() -> None:
    lowered = jitc.jit(demo_model()).lower(*_arguments())
    optimized = lowered.optimize()
    text = lowered.as_dot(optimized=True)
    nodes, edges, clusters = _check_structure(text)
    fusions = [i for i in optimized.entry.body if i.op is ops.FUSION]
    assert fusions and clusters == len(fusions)
    for fusion in fusions:
        assert f"@{fusion.attrs['calls']}" in text
    # Every instruction of the entry and of the fused bodies is a node (a fusion is its
    # cluster), plus `return`.
    instructions = sum(len(f.body) for f in optimized.functions.values())
    assert len(nodes) == instructions - len(fusions) + 1
    assert {label for _, _, label in edges} >= {"f32[4,8]", "f32[8,16]", "f32[4,3]"}
    assert any(target == "return_" for _, target, _ in edges)
    assert "kind=max" in text  # the reduce's attribute, on its node
    # Edges are written outside the clusters, which would otherwise swallow both ends.
    for body in re.findall(r"subgraph cluster_\d+ \{(.*?)\n  \}", text, re.S):
        assert "->" not in body
    assert lowered.compile().as_dot() == text


def test_the_traced_graph_has_no_clusters_and_names_control_flow_bodies() -> None:
    def count(x):
        return jitc.lax.fori_loop(0, 3, lambda i, v: v * 2.0 + 1.0, x)

    text = jitc.jit(count).lower(np.ones(4, np.float32)).as_dot()
    nodes, _, clusters = _check_structure(text)
    assert clusters == 0
    loop = [label for label in nodes.values() if " = while" in label]
    assert loop and "@" in loop[0]


@needs_graphviz
def test_graphviz_reads_both_graphs(tmp_path) -> None:
    lowered = jitc.jit(demo_model()).lower(*_arguments())
    for text in (lowered.as_dot(), lowered.as_dot(optimized=True)):
        drawn = subprocess.run([DOT, "-Tsvg"], input=text, capture_output=True, text=True)
        assert drawn.returncode == 0, drawn.stderr
        assert "<svg" in drawn.stdout and not drawn.stderr


MODEL = textwrap.dedent("""\
    import numpy as np

    W = np.linspace(-1, 1, 32 * 4, dtype=np.float32).reshape(32, 4)


    def predict(x):
        logits = x @ W
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    """)


def test_jitc_dump_writes_text_and_graphviz(tmp_path, capsys) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    assert main(["dump", f"{model}:predict", "--input", "f32[B,32]", "--size", "B=8",
                 "--optimized"]) == 0
    text = capsys.readouterr().out
    assert "f32[8,32]" in text and "fusion(" in text
    out = tmp_path / "g.dot"
    assert main(["dump", f"{model}:predict", "--input", "f32[8,32]", "--format", "dot",
                 "-o", str(out)]) == 0
    _check_structure(out.read_text())


def test_jitc_dump_names_a_missing_size_and_a_bad_signature(tmp_path, capsys) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    assert main(["dump", f"{model}:predict", "--input", "f32[B,32]"]) == 2
    assert "no size for B: give it as --size B=8" in capsys.readouterr().err
    assert main(["dump", f"{model}:predict", "--input", "float[8,32]"]) == 2
    assert "unknown dtype 'float'" in capsys.readouterr().err
    assert main(["dump", f"{model}:nothing", "--input", "f32[8,32]"]) == 2
    assert "defines no 'nothing'" in capsys.readouterr().err


@needs_graphviz
def test_jitc_dump_svg_draws_with_graphviz(tmp_path) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    out = tmp_path / "g.svg"
    assert main(["dump", f"{model}:predict", "--input", "f32[8,32]", "--svg", "--optimized",
                 "-o", str(out)]) == 0
    assert out.read_text().lstrip().startswith("<?xml") and "<svg" in out.read_text()
