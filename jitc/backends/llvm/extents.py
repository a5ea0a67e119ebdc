"""Extents as LLVM values: a static `int` becomes a constant, a symbolic `Dim`
(jitc.ir.symbolic) the arithmetic that computes it from the symbol values the call passes.

A function that evaluates symbolic extents first binds its symbol values (`bind`): a pointer
to the call's `int64_t dims[]` vector (in `sorted(symbols)` order, docs/dynamic-shapes.md),
each value loaded once in the function's entry block. `value(builder, dim)` then works
wherever that builder emits code; LLVM's GVN and LICM share and hoist the arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llvmlite import ir

from jitc.backends.llvm.types import I64
from jitc.ir.symbolic import Dim, DimLike, FloorDiv

# The attribute of an ir.Function holding its bound symbol values (name -> i64 value).
_ATTRIBUTE = "jitc_symbol_values"


class SymbolicExtentError(NotImplementedError):
    """Code generation met a symbolic extent where it needs a static one."""


def bind(builder: ir.IRBuilder, dims: ir.Value, symbols: Sequence[str]) -> None:
    """Load each symbol's value from `dims` (a pointer to int64 values in `symbols` order)
    at the builder's position, which must dominate every later use (the entry block)."""
    values = {}
    for n, name in enumerate(symbols):
        address = builder.gep(dims, [ir.Constant(I64, n)], source_etype=I64, inbounds=True)
        loaded = values[name] = builder.load(address, typ=I64, name=f"sym.{name}")
        # An int64_t array is 8-byte aligned; without saying so, a module parsed without a
        # data layout (the cuda kernel IR) assumes 4 and splits each load in two.
        loaded.align = 8
    setattr(builder.function, _ATTRIBUTE, values)


@dataclass(frozen=True)
class Choice:
    """`small` when `extent <= bound` at the call, else `large`: the extent of a kernel whose
    code chooses between two variants by a symbolic size (gemm.py)."""

    extent: DimLike
    bound: int
    small: DimLike
    large: DimLike


def value(builder: ir.IRBuilder, dim: DimLike | Choice | ir.Value) -> ir.Value:
    """`dim` as an i64: a constant when static; an ir.Value passes through."""
    if isinstance(dim, ir.Value):
        return dim
    if isinstance(dim, int):
        return ir.Constant(I64, dim)
    if isinstance(dim, Choice):
        few = builder.icmp_signed("<=", value(builder, dim.extent), ir.Constant(I64, dim.bound))
        return builder.select(few, value(builder, dim.small), value(builder, dim.large))
    symbols = getattr(builder.function, _ATTRIBUTE, None)
    if symbols is None:
        raise SymbolicExtentError(f"the symbolic extent {dim} is needed in "
                                  f"{builder.function.name}, which has no symbol values")
    return _polynomial(builder, dim, symbols)


def _polynomial(b: ir.IRBuilder, dim: Dim, symbols: dict[str, ir.Value]) -> ir.Value:
    total: ir.Value | None = None
    for monomial, coefficient in dim.terms:
        term: ir.Value | None = None
        for atom in monomial:
            factor = symbols[atom] if isinstance(atom, str) else _floor_div(b, atom, symbols)
            term = factor if term is None else b.mul(term, factor, flags=["nsw"])
        if term is None:
            term = ir.Constant(I64, coefficient)
        elif coefficient != 1:
            term = b.mul(term, ir.Constant(I64, coefficient), flags=["nsw"])
        total = term if total is None else b.add(total, term, flags=["nsw"])
    assert total is not None
    return total


def _floor_div(b: ir.IRBuilder, atom: FloorDiv, symbols: dict[str, ir.Value]) -> ir.Value:
    """Floor division by a positive constant (sdiv truncates towards zero)."""
    numerator = value(b, atom.numerator) if isinstance(atom.numerator, int) else \
        _polynomial(b, atom.numerator, symbols)
    divisor = ir.Constant(I64, atom.divisor)
    negative = b.icmp_signed("<", numerator, ir.Constant(I64, 0))
    adjusted = b.select(negative, b.sub(numerator, ir.Constant(I64, atom.divisor - 1)),
                        numerator)
    return b.sdiv(adjusted, divisor)


def is_constant(extent: object) -> bool:
    """Whether an extent is known at compile time: neither a `Dim` nor a `Choice`."""
    return not isinstance(extent, (Dim, Choice))


def static(dim: DimLike, what: str) -> int:
    """`dim` when it is static; SymbolicExtentError naming `what` needs it otherwise."""
    if isinstance(dim, Dim):
        raise SymbolicExtentError(f"{what} needs a static extent, not {dim}")
    return dim


def positive(dim: DimLike) -> DimLike:
    """max(dim, 1) for a cost estimate: a symbolic extent stays as it is (treated as large)."""
    return dim if isinstance(dim, Dim) else max(dim, 1)


__all__ = ["Choice", "SymbolicExtentError", "bind", "is_constant", "positive", "static", "value"]
