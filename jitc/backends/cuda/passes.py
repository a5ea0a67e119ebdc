"""The GPU's optimizer pipeline: the kernel passes, with the GPU's layout preferences and one
guard on output fusion.

Layout preferences (which consumers read a transposed operand in place, through a bitcast,
instead of having a copy made): a reduction reads any layout, since the reduction kernel
chooses its row or column form from the operand's physical layout and stays coalesced
either way; a dot reads any layout, since its tile loads walk each operand along whichever
dimension is contiguous; a convolution reads its kernel in any layout (small, cached) and
its input when the input's contiguous dimension is the one the output's contiguous
dimension walks (NCHW input for NCHW output, NHWC for NHWC), so neighbouring threads read
neighbouring input elements. Elementwise consumers never read strided: a strided read
would not coalesce, and the transpose copy is one kernel anyway.
"""

from __future__ import annotations

from jitc.ir import ops
from jitc.ir.core import Builder, Function, Instruction, Module, Value
from jitc.ir.opdef import Trait
from jitc.ir.types import TensorType
from jitc.passes import DEFAULT_PASSES, dce, fusion, layout_assignment
from jitc.passes.pipeline import Pass, module_pass
from jitc.passes.rewrite import copy_instruction, rebuild_function


def gpu_reads_strided(inst: Instruction, index: int, layout: TensorType) -> bool:
    if inst.op in (ops.REDUCE, ops.ARGMAX, ops.ARGMIN, ops.DOT_GENERAL):
        return True
    if inst.op is ops.CONVOLUTION:
        if index == 1:
            return True
        dims = ops.parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
        out = inst.results[0].type
        out_minor = next((d for d in out.layout if out.shape[d] != 1), None)
        read_minor = next((d for d in layout.layout if layout.shape[d] != 1), None)
        if out_minor is None or read_minor is None or out_minor == dims.out_feature:
            return True  # threads along output features all read the same input element
        if out_minor == dims.out_batch:
            return read_minor == dims.lhs_batch
        spatial = dims.out_spatial.index(out_minor)
        return read_minor == dims.lhs_spatial[spatial]
    return False


def depends_on(value: Value, target: Value, memo: dict[int, bool]) -> bool:
    key = id(value)
    if key not in memo:
        memo[key] = value is target or any(depends_on(v, target, memo)
                                           for v in value.producer.operands)
    return memo[key]


def is_pointwise_epilogue(root: Value, core: Value) -> bool:
    """Whether `root` reads `core` only at its own index: every path between them goes
    through elementwise ops whose operand has the result's shape (no transpose, reverse or
    slice of the contraction). The GPU applies an epilogue in registers, element by element,
    so anything else needs the contraction materialised first."""
    memo: dict[int, bool] = {}

    def pointwise(v: Value) -> bool:
        if v is core or not depends_on(v, core, memo):
            return True
        inst = v.producer
        if not inst.op.has(Trait.ELEMENTWISE):
            return False
        return all(not depends_on(o, core, memo) or
                   (o.type.shape == v.type.shape and pointwise(o)) for o in inst.operands)
    return pointwise(root)


def _split(builder: Builder, inst: Instruction, operands: list[Value], body: Function,
           core: Instruction, name: str) -> tuple[Value, Function]:
    """The contraction as its own instruction, and the rest of the body as a loop fusion
    reading it."""
    params = body.parameters
    position = {id(p): n for n, p in enumerate(params)}
    outside: dict[int, Value] = {}

    def materialise(v: Value) -> Value:
        """`v` in the calling function (a cheap producer the body duplicated is copied)."""
        if id(v) not in outside:
            if id(v) in position:
                outside[id(v)] = operands[position[id(v)]]
            else:
                copied = copy_instruction(builder, v.producer,
                                          [materialise(o) for o in v.producer.operands])
                outside[id(v)] = copied[v.index]
        return outside[id(v)]
    (product,) = copy_instruction(builder, core, [materialise(v) for v in core.operands])
    used = {id(v) for i in body.body if i is not core for v in i.operands}
    kept = [p for p in params if id(p) in used]
    new = Function(name)
    inner = Builder(new)
    mapping: dict[int, Value] = {}
    for n, p in enumerate(kept):
        mapping[id(p)] = inner.emit(ops.PARAMETER, [], {"index": n}, p.type, name_hint=p.name_hint)
    mapping[id(core.results[0])] = inner.emit(ops.PARAMETER, [], {"index": len(kept)},
                                              core.results[0].type, name_hint="product")
    for i in body.body:
        if i.op is ops.PARAMETER or i is core:
            continue
        results = copy_instruction(inner, i, [mapping[id(v)] for v in i.operands])
        for old, value in zip(i.results, results):
            mapping[id(old)] = value
    new.outputs = [mapping[id(v)] for v in body.outputs]
    fused_operands = [operands[position[id(p)]] for p in kept] + [product]
    (result,) = builder.emit_multi(ops.FUSION, fused_operands, {"kind": "loop", "calls": name},
                                   [inst.results[0].type],
                                   name_hints=[inst.results[0].name_hint])
    return result, new


@module_pass("split_epilogues")
def split_epilogues(module: Module) -> Module:
    """Dot fusions whose epilogue is not pointwise become the contraction plus a loop fusion."""
    fn = module.entry
    bodies: list[Function] = []
    replaced: set[str] = set()
    names = set(module.functions)

    def transform(builder: Builder, inst: Instruction,
                  operands: list[Value]) -> list[Value] | None:
        if inst.op is not ops.FUSION or inst.attrs["kind"] != "dot":
            return None
        body = module.functions[inst.attrs["calls"]]  # type: ignore[index]
        core = next(i for i in body.body if i.op in (ops.DOT_GENERAL, ops.CONVOLUTION))
        if is_pointwise_epilogue(body.outputs[0], core.results[0]):
            return None
        n = 0
        while f"{body.name}_epilogue_{n}" in names:
            n += 1
        name = f"{body.name}_epilogue_{n}"
        names.add(name)
        result, new = _split(builder, inst, operands, body, core, name)
        bodies.append(new)
        replaced.add(body.name)
        return [result]

    new_fn, changed = rebuild_function(fn, transform)
    if not changed:
        return module
    others = [f for n, f in module.functions.items() if n != fn.name and n not in replaced]
    return Module([new_fn, *others, *bodies], module.entry_name)


GPU_PASSES: tuple[Pass, ...] = (
    *DEFAULT_PASSES, layout_assignment(gpu_reads_strided), fusion, split_epilogues, dce)
