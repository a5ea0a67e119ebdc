"""Loop nests and conditionals over llvmlite's IR builder."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from llvmlite import ir

from jitc.backends.llvm import extents
from jitc.backends.llvm.types import I64
from jitc.ir.symbolic import DimLike


@contextmanager
def for_range(builder: ir.IRBuilder, start: ir.Value | DimLike, stop: ir.Value | DimLike,
              step: int | ir.Value = 1, name: str = "i", masked_tail: bool = False
              ) -> Iterator[ir.Value]:
    """`for i in range(start, stop, step)` (step > 0); yields i inside the body. A symbolic
    bound is computed from the function's symbol values (extents.py).

    The loop is in canonical form (preheader, header with one phi, latch) so LLVM's
    vectorizer recognises it. `masked_tail`: its vectorized form runs the last, partial vector
    under a lane mask instead of a scalar remainder loop (for loops a vector or two long).
    """
    start = extents.value(builder, start)
    stop = extents.value(builder, stop)
    preheader = builder.block
    header = builder.append_basic_block(f"{name}.header")
    body = builder.append_basic_block(f"{name}.body")
    exit_ = builder.append_basic_block(f"{name}.exit")
    builder.branch(header)
    builder.position_at_end(header)
    counter = builder.phi(I64, name=name)
    counter.add_incoming(start, preheader)
    builder.cbranch(builder.icmp_signed("<", counter, stop), body, exit_)
    builder.position_at_end(body)
    yield counter
    following = builder.add(counter, extents.value(builder, step), name=f"{name}.next",
                            flags=["nsw"])
    counter.add_incoming(following, builder.block)
    latch = builder.branch(header)
    if masked_tail:
        latch.set_metadata("llvm.loop", _masked_tail_loop_id(builder.module))
    builder.position_at_end(exit_)


def _masked_tail_loop_id(module: ir.Module) -> ir.values.MDValue:
    """A fresh loop identity (self-referential, one per loop) asking for tail folding."""
    option = module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.predicate.enable"),
                                  ir.Constant(ir.IntType(1), 1)])
    loop = ir.values.MDValue(module, [option], name=str(len(module.metadata)))
    loop.operands = (loop, option)
    return loop


def loop_nest(builder: ir.IRBuilder,
              bounds: Sequence[tuple[ir.Value | DimLike, ir.Value | DimLike]],
              body: Callable[[list[ir.Value]], None], name: str = "d") -> None:
    """Nested loops over (start, stop) pairs, outermost first; body gets the counters.

    A level with the constant bounds (0, 1) is no loop at all: its counter is the constant 0.
    """
    def level(k: int, counters: list[ir.Value]) -> None:
        if k == len(bounds):
            body(counters)
            return
        start, stop = bounds[k]
        if isinstance(start, int) and isinstance(stop, int) and (start, stop) == (0, 1):
            level(k + 1, counters + [extents.value(builder, 0)])
            return
        with for_range(builder, start, stop, name=f"{name}{k}") as i:
            level(k + 1, counters + [i])
    level(0, [])


@contextmanager
def if_then(builder: ir.IRBuilder, condition: ir.Value) -> Iterator[None]:
    with builder.if_then(condition):
        yield
