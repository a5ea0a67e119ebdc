"""Tensor types: element type, shape and physical layout.

A dimension is an `int`, or a `jitc.ir.symbolic.Dim` whose value the call decides
(docs/dynamic-shapes.md). A layout is XLA's `minor_to_major`: the list of dimensions from the
fastest varying to the slowest. Row-major (numpy's C order) for rank 3 is (2, 1, 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jitc.ir.dtypes import DType
from jitc.ir.symbolic import (
    Dim,
    DimLike,
    equal,
    implied,
    known_constraints,
    substitute,
    symbols_of,
)


def row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


@dataclass(frozen=True, slots=True)
class TensorType:
    dtype: DType
    shape: tuple[DimLike, ...]
    layout: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        shape = tuple(d if isinstance(d, Dim) else int(d) for d in self.shape)
        object.__setattr__(self, "shape", shape)
        if not self.layout and shape:
            object.__setattr__(self, "layout", row_major(len(shape)))
        else:
            object.__setattr__(self, "layout", tuple(map(int, self.layout)))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return not any(isinstance(d, Dim) for d in self.shape)

    @property
    def symbols(self) -> set[str]:
        return symbols_of(self.shape)

    def concrete(self, env: dict[str, int]) -> TensorType:
        """This type with its symbols replaced by their values in `env`."""
        if self.is_static:
            return self
        return TensorType(self.dtype, substitute(self.shape, env), self.layout)  # type: ignore

    @property
    def size(self) -> DimLike:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> DimLike:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple[DimLike, ...]:
        """Element strides of each logical dimension in a dense buffer of this layout (the
        first dimension of `layout` varies fastest)."""
        result: list[DimLike] = [0] * self.rank
        step: DimLike = 1
        for dim in self.layout:
            result[dim] = step
            step *= self.shape[dim]
        return tuple(result)

    @property
    def is_row_major(self) -> bool:
        return self.layout == row_major(self.rank)

    def with_shape(self, shape: tuple[DimLike, ...]) -> TensorType:
        return TensorType(self.dtype, tuple(shape))

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(dtype, self.shape, self.layout)

    def with_layout(self, layout: tuple[int, ...]) -> TensorType:
        return TensorType(self.dtype, self.shape, tuple(layout))

    def same_shape_and_dtype(self, other: TensorType) -> bool:
        """Same dtype and shape; symbolic extents may differ where the constraints in force
        (jitc.ir.symbolic's active scope) make them equal (`f32[n]` and `f32[m]` under
        `m == n`)."""
        if self.dtype is not other.dtype:
            return False
        if self.shape == other.shape:
            return True
        if (self.is_static and other.is_static) or self.rank != other.rank:
            return False
        known = known_constraints()
        return all(a == b or implied(equal(a, b), known) for a, b in zip(self.shape, other.shape))

    def __str__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        text = f"{self.dtype.name}[{dims}]"
        if self.rank >= 2:
            text += "{" + ",".join(str(d) for d in self.layout) + "}"
        return text

    def short(self) -> str:
        """The type without its layout, for error messages about shapes."""
        return f"{self.dtype.name}[{','.join(str(d) for d in self.shape)}]"
