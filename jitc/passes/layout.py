"""Layout assignment: choose each value's physical layout (minor_to_major).

Parameters and results keep the caller's row-major layout. A transpose becomes a pure layout
change, a bitcast that moves no data, when every consumer can read its operand in any layout
and the backend says so: the consumer then reads the original buffer with permuted strides.
Where a consumer wants a particular layout (the CPU dot kernel wants the contracted-against
free dimension of its right operand contiguous) the transpose stays a physical copy.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from jitc.ir import ops
from jitc.ir.core import Builder, Instruction, Module, Value
from jitc.ir.opdef import Trait
from jitc.ir.types import TensorType
from jitc.passes.pipeline import Pass
from jitc.passes.rewrite import rebuild_module

# A consumer's verdict on reading operand `index` through a bitcast with layout `layout`.
Preference = Callable[[Instruction, int, TensorType], bool]
# The layout a backend wants an instruction's (single) result in, or None for row-major.
ResultPreference = Callable[[Instruction], tuple[int, ...] | None]
# The layout a consumer wants operand `index` copied into where it cannot read a bitcast.
CopyPreference = Callable[[Instruction, int], tuple[int, ...] | None]


def no_copy_preference(inst: Instruction, index: int) -> tuple[int, ...] | None:
    return None


def no_result_preference(inst: Instruction) -> tuple[int, ...] | None:
    return None


def bitcast_layout(operand: TensorType, permutation: tuple[int, ...]) -> tuple[int, ...]:
    """The layout that makes transpose(operand, permutation) reuse the operand's bytes."""
    position = {d: j for j, d in enumerate(permutation)}
    return tuple(position[d] for d in operand.layout)


def layout_assignment(reads_strided: Preference,
                      result_layout: ResultPreference = no_result_preference,
                      name: str = "layout_assignment",
                      copy_layout: CopyPreference = no_copy_preference) -> Pass:
    """A layout pass for a backend that states, per consumer, whether it reads strided, and
    which layout it wants for the results of some ops (a convolution's, say). Consumers read
    any layout through strides, so a preference never needs a copy; only results returned to
    the caller stay row-major whatever the preference."""

    def run(module: Module) -> Module:
        fn = module.entry
        users: dict[int, list[tuple[Instruction, int]]] = {}
        for inst in fn.body:
            for n, v in enumerate(inst.operands):
                users.setdefault(id(v), []).append((inst, n))
        returned = {id(v) for v in fn.outputs}

        def transform(builder: Builder, inst: Instruction,
                      operands: list[Value]) -> list[Value] | None:
            if len(inst.results) != 1 or id(inst.result) in returned:
                return None
            if inst.op is not ops.TRANSPOSE:
                preferred = result_layout(inst)
                consumers = users.get(id(inst.result), [])
                # An elementwise consumer fuses the op as its epilogue, which rewrites the
                # result in place in its own layout: keep them agreeing rather than copy.
                if preferred is None or preferred == inst.result.type.layout or any(
                        u.op.has(Trait.ELEMENTWISE) for u, _ in consumers):
                    return None
                return [builder.emit(inst.op, operands, inst.attrs,
                                     inst.result.type.with_layout(preferred),
                                     name_hint=inst.result.name_hint)]
            layout = bitcast_layout(operands[0].type, inst.attrs["permutation"])  # type: ignore
            result = inst.result.type
            if result.layout == layout:
                return None
            wanted = result.with_layout(layout)
            consumers = users.get(id(inst.result), [])
            if not consumers:
                return None
            if not all(reads_strided(u, n, wanted) for u, n in consumers):
                # A copy all the same; in the layout its one consumer wants, if it says.
                copied = copy_layout(*consumers[0]) if len(consumers) == 1 else None
                if copied is None or copied == result.layout:
                    return None
                wanted = result.with_layout(copied)
            return [builder.emit(ops.TRANSPOSE, operands, inst.attrs, wanted,
                                 name_hint=inst.result.name_hint)]

        # Only the entry function: fusion bodies are built later and inherit these layouts.
        others = {n: f for n, f in module.functions.items() if n != fn.name}
        rebuilt = rebuild_module(Module([fn], fn.name), transform)
        if rebuilt is not module and rebuilt.entry is not fn:
            return Module([rebuilt.entry, *others.values()], module.entry_name)
        return module

    return Pass(name, run)


def contractions_read_strided(inst: Instruction, index: int, layout: TensorType) -> bool:
    """The CPU backend's preferences: reductions read any layout; a dot reads its left operand
    in any layout where its GEMM kernel can collapse it to a matrix (or the product is too
    small for that kernel), and its right operand when the rhs free dimensions stay
    contiguous (the dot kernel's innermost loop runs along them)."""
    if inst.op is ops.REDUCE:
        return True
    if inst.op is ops.DOT_GENERAL:
        if index == 0:
            return _small_dot(inst) or _lhs_is_a_matrix(inst, layout)
        batch = set(inst.attrs["rhs_batch"])  # type: ignore[arg-type]
        contract = set(inst.attrs["rhs_contract"])  # type: ignore[arg-type]
        free = [d for d in range(layout.rank) if d not in batch and d not in contract]
        return not free or layout.layout[0] == free[-1]
    return False


def features_minor(inst: Instruction) -> tuple[int, ...] | None:
    """The CPU's convolution output layout: features contiguous (NHWC in memory whatever the
    dimension labels), so the next convolution's inner loop over input features is
    contiguous; the direct kernel writes any layout at the same cost."""
    if inst.op is not ops.CONVOLUTION:
        return None
    dims = ops.parse_dim_labels(inst.attrs["dim_labels"])  # type: ignore[arg-type]
    return (dims.out_feature, *reversed(dims.out_spatial), dims.out_batch)


# Products below this many multiply-adds run the CPU's row kernel, which reads any layout
# equally well (jitc.backends.cpu.gemm.MIN_WORK).
_GEMM_WORK = 1 << 15


def _lhs_parts(inst: Instruction, rank: int) -> tuple[list[int], list[int], list[int]]:
    batch = list(inst.attrs["lhs_batch"])  # type: ignore[arg-type]
    contract = list(inst.attrs["lhs_contract"])  # type: ignore[arg-type]
    free = [d for d in range(rank) if d not in batch and d not in contract]
    return batch, free, contract


def _small_dot(inst: Instruction) -> bool:
    lhs, rhs = (v.type for v in inst.operands)
    rhs_contract = set(inst.attrs["rhs_contract"])  # type: ignore[arg-type]
    rhs_free = [n for d, n in enumerate(rhs.shape) if d not in rhs_contract]
    work = lhs.size * math.prod(rhs_free)
    return isinstance(work, int) and work < _GEMM_WORK


def _lhs_is_a_matrix(inst: Instruction, layout: TensorType) -> bool:
    """Whether the GEMM kernel reads a left operand of `layout` as a matrix: its free
    dimensions, and its contracting ones, each dense in the order the product takes them."""
    _, free, contract = _lhs_parts(inst, layout.rank)
    strides, sizes = layout.strides, layout.shape

    def dense(dims: list[int]) -> bool:
        kept = [d for d in dims if sizes[d] != 1]
        return all(strides[x] == strides[y] * sizes[y] for x, y in itertools.pairwise(kept))
    return dense(free) and dense(contract)


def gemm_operand_layout(inst: Instruction, index: int) -> tuple[int, ...] | None:
    """The CPU's copy of a dot's left operand: batch dimensions major, then the free ones,
    then the contracting ones, each in the product's order (a row-major matrix per batch)."""
    if inst.op is not ops.DOT_GENERAL or index != 0:
        return None
    batch, free, contract = _lhs_parts(inst, inst.operands[0].type.rank)
    return tuple(reversed(batch + free + contract))
