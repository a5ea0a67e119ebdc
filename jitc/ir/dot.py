"""A module's entry function as a Graphviz graph (`Lowered.as_dot`, `Compiled.as_dot`).

Each instruction is a node labelled with its op and the name `as_text` gives its value; each
use is an edge labelled with the value's type (`f32[4,8]`). A fusion is a cluster holding its
function's body: the edges into it go to its parameters, the edge out of it leaves its
returned value. Parameters are ellipses, constants boxes with rounded corners, the returned
values end at a `return` node. Control flow (while, conditional) is one node that names the
functions it runs.
"""

from __future__ import annotations

from jitc.ir import ops
from jitc.ir.core import Function, Instruction, Module, Value
from jitc.ir.opdef import AttrKind
from jitc.ir.printer import _Printer, value_names

# Instructions past which a graph is no longer readable anyway: the rest is elided.
MAX_NODES = 2000
# Longer attribute texts (a literal's values, long dimension lists) are left to `as_text`.
ATTRIBUTE_COLUMNS = 32


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _type_text(value: Value) -> str:
    t = value.type
    return f"{t.dtype.name}[{','.join(map(str, t.shape))}]"


class _Graph:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.lines: list[str] = []
        # Edges go after every node, at the top level: an edge written inside a cluster would
        # pull both its ends into that cluster.
        self.edges: list[str] = []
        self.clusters = 0
        self.nodes = 0
        # id(value) -> the node that produces it (inside a cluster: the fusion's result node).
        self.producer: dict[int, str] = {}
        self.printer = _Printer(module, elide_constants=True)

    def node(self, node_id: str, label: str, shape: str, indent: str,
             style: str = "") -> None:
        extra = f", style={_quote(style)}" if style else ""
        self.lines.append(f"{indent}{node_id} [label={_quote(label)}, shape={shape}{extra}];")
        self.nodes += 1

    def edge(self, source: Value, target: str) -> None:
        start = self.producer.get(id(source))
        if start is not None:
            self.edges.append(f"  {start} -> {target} [label={_quote(_type_text(source))}];")

    def function(self, fn: Function, prefix: str, indent: str,
                 arguments: list[Value] | None = None) -> list[str]:
        """The body of `fn`; inside a fusion, `arguments` are the values its parameters stand
        for. Returns the nodes of its returned values."""
        names = value_names(fn)
        for n, inst in enumerate(fn.body):
            if self.nodes >= MAX_NODES:
                self.node(f"{prefix}elided", "... (more instructions)", "plaintext", indent)
                break
            node_id = f"{prefix}{n}"
            label = f"%{names[id(inst.results[0])]} = {inst.op.name}"
            if inst.op is not ops.PARAMETER:
                label += _details(self.printer, inst)
            if inst.op is ops.PARAMETER:
                self.node(node_id, label, "ellipse", indent)
                if arguments is not None:
                    self.edge(arguments[inst.attrs["index"]], node_id)  # type: ignore
            elif inst.op is ops.CONSTANT:
                self.node(node_id, label, "box", indent, "rounded")
            elif inst.op is ops.FUSION:
                self.fusion(inst, node_id, indent)
                continue
            else:
                self.node(node_id, label, "box", indent)
                for operand in inst.operands:
                    self.edge(operand, node_id)
            for value in inst.results:
                self.producer[id(value)] = node_id
        return [self.producer[id(v)] for v in fn.outputs if id(v) in self.producer]

    def fusion(self, inst: Instruction, node_id: str, indent: str) -> None:
        body = self.module.functions[inst.attrs["calls"]]  # type: ignore[index]
        self.clusters += 1
        kind = inst.attrs.get("kind", "")
        self.lines.append(f"{indent}subgraph cluster_{self.clusters} {{")
        self.lines.append(f"{indent}  label={_quote(f'fusion {kind} @{body.name}')};")
        self.lines.append(f"{indent}  style=filled; fillcolor=\"#eef3fb\";")
        outputs = self.function(body, f"{node_id}_", indent + "  ", list(inst.operands))
        self.lines.append(f"{indent}}}")
        for value, output in zip(inst.results, outputs):
            self.producer[id(value)] = output


def _details(printer: _Printer, inst: Instruction) -> str:
    """The attributes worth a glance (`kind=max`, `dims=[1]`, a scalar constant's value) and
    the functions control flow runs, as a second line of the label."""
    shown = []
    for spec in inst.op.attrs:
        value = inst.attrs.get(spec.name, spec.default)
        if value == spec.default or spec.kind in (AttrKind.FUNCTION, AttrKind.FUNCTIONS):
            continue
        text = f"{spec.name}={printer.attr(spec, value)}"
        if len(text) <= ATTRIBUTE_COLUMNS:
            shown.append(text)
    shown += [f"@{name}" for name in inst.op.called_functions(inst.attrs)]
    return "\n" + " ".join(shown) if shown else ""


def module_to_dot(module: Module, title: str | None = None) -> str:
    """Graphviz `digraph` text of `module`'s entry function (see the module docstring)."""
    graph = _Graph(module)
    fn = module.entry
    name = title or fn.name
    graph.lines += [f"digraph {_quote(name)} {{", f"  label={_quote(name)}; labelloc=t;",
                    "  node [fontname=\"monospace\", fontsize=10];",
                    "  edge [fontname=\"monospace\", fontsize=9];"]
    outputs = graph.function(fn, "n", "  ")
    graph.lines.append("  return_ [label=\"return\", shape=doublecircle];")
    graph.lines += graph.edges
    for value, node in zip(fn.outputs, outputs):
        graph.lines.append(f"  {node} -> return_ [label={_quote(_type_text(value))}];")
    graph.lines.append("}")
    return "\n".join(graph.lines) + "\n"
