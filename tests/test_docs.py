"""The documentation stays true to the op table and to the IR it shows."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from jitc.ir.opdef import OPS
from jitc.ir.parser import parse_module
from jitc.ir.printer import print_module
from jitc.ir.verifier import verify
from jitc.passes import legalize_broadcast

DOCS = Path(__file__).resolve().parent.parent / "docs"
SEMANTICS = DOCS / "operation_semantics.md"
IR_DOCS = ["ir.md", "broadcasting.md", "operation_semantics.md", "dynamic-shapes.md"]


def op_entries() -> dict[str, str]:
    """The `### name` entries of operation_semantics.md and their text, up to the next
    heading."""
    text = SEMANTICS.read_text()
    entries: dict[str, str] = {}
    for match in re.finditer(r"^### (.+?)\s*$(.*?)(?=^#{1,3} |\Z)", text, re.M | re.S):
        name = match.group(1)
        assert name not in entries, f"operation_semantics.md has two entries for {name}"
        entries[name] = match.group(2)
    return entries


def test_every_op_has_an_entry() -> None:
    missing = sorted(set(OPS) - set(op_entries()))
    assert not missing, f"docs/operation_semantics.md has no '### name' entry for {missing}"


def test_every_entry_is_an_op() -> None:
    unknown = sorted(set(op_entries()) - set(OPS))
    assert not unknown, f"docs/operation_semantics.md documents ops that do not exist: {unknown}"


def test_every_attribute_is_documented() -> None:
    entries = op_entries()
    undocumented = [f"{name}.{attr.name}" for name, op in OPS.items() if name in entries
                    for attr in op.attrs if f"`{attr.name}`" not in entries[name]]
    assert not undocumented, f"attributes missing from their op's entry: {undocumented}"


def jir_blocks(name: str) -> list[tuple[str, str]]:
    """The ```jir code blocks of a document: (the words after `jir`, the code)."""
    text = (DOCS / name).read_text()
    return [(m.group(1).strip(), m.group(2))
            for m in re.finditer(r"^```jir([^\n]*)\n(.*?)^```", text, re.M | re.S)]


@pytest.mark.parametrize("name", IR_DOCS)
def test_ir_examples_parse_verify_and_print_back(name: str) -> None:
    for _, code in jir_blocks(name):
        module = verify(parse_module(code))
        assert print_module(module) == code


def test_broadcasting_examples_are_what_the_pass_produces() -> None:
    blocks = jir_blocks("broadcasting.md")
    pairs = [(before, after)
             for (tag, before), (next_tag, after) in itertools.pairwise(blocks)
             if tag == "before" and next_tag == "after"]
    assert len(pairs) == sum(tag == "before" for tag, _ in blocks) >= 2
    for before, after in pairs:
        assert print_module(legalize_broadcast(parse_module(before))) == after


@pytest.mark.parametrize("name", IR_DOCS)
def test_links_between_documents_resolve(name: str) -> None:
    text = (DOCS / name).read_text()
    for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", text):
        assert (DOCS / target).exists(), f"{name} links to missing {target}"
