"""Complex values from and to their parts: real, imag and complex.

Every other op that accepts complex operands means what numpy means by it; backends never see
complex values, since `jitc.passes.complex_split` rewrites them as pairs of floats first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jitc.ir.dtypes import complex_of, real_part
from jitc.ir.opdef import IRTypeError, OpDef, Trait, register
from jitc.ir.ops.rules import FLOAT, broadcast_shapes, check_kind, same_dtype, tensor
from jitc.ir.types import TensorType

ELEMENTWISE = frozenset({Trait.ELEMENTWISE, Trait.BROADCASTS})
Attrs = Mapping[str, object]


def _part_rule(name: str):
    def rule(types: Sequence[TensorType], attrs: Attrs, declared) -> list[TensorType]:
        (operand,) = types
        if not operand.dtype.is_complex:
            raise IRTypeError(f"{name} needs a complex dtype, got {operand.dtype.name}")
        return [tensor(real_part(operand.dtype), operand.shape)]
    return rule


def _complex_rule(types: Sequence[TensorType], attrs: Attrs, declared) -> list[TensorType]:
    dtype = same_dtype("complex", types)
    check_kind("complex", dtype, FLOAT)
    if dtype.bits == 16:
        raise IRTypeError("complex needs float32 or float64 parts, got f16")
    return [tensor(complex_of(dtype), broadcast_shapes([t.shape for t in types]))]


def _part_reference(part: str):
    def reference(args: Sequence[np.ndarray], attrs: Attrs, results) -> list[np.ndarray]:
        return [np.array(getattr(args[0], part), dtype=results[0].dtype.numpy)]
    return reference


def _complex_reference(args: Sequence[np.ndarray], attrs: Attrs, results) -> list[np.ndarray]:
    re, im = np.broadcast_arrays(*args)
    out = np.empty(re.shape, results[0].dtype.numpy)
    out.real, out.imag = re, im  # not re + 1j*im: that turns (inf, 0) into (inf, nan)
    return [out]


REAL = register(OpDef("real", 1, _part_rule("real"), _part_reference("real"),
                      "the real part of a complex value", traits=ELEMENTWISE))
IMAG = register(OpDef("imag", 1, _part_rule("imag"), _part_reference("imag"),
                      "the imaginary part of a complex value", traits=ELEMENTWISE))
COMPLEX = register(OpDef("complex", 2, _complex_rule, _complex_reference,
                         "the complex value re + im*j of two float parts (f32 -> c64, "
                         "f64 -> c128)", traits=ELEMENTWISE))

__all__ = ["REAL", "IMAG", "COMPLEX"]
