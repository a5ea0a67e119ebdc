"""The op table. Importing this package registers every op in `jitc.ir.opdef.OPS`."""

from jitc.ir.opdef import OPS, lookup
from jitc.ir.ops.complex import COMPLEX, IMAG, REAL
from jitc.ir.ops.control import CONDITIONAL, WHILE
from jitc.ir.ops.elementwise import *  # noqa: F403
from jitc.ir.ops.fusion import FUSION, FUSION_KINDS
from jitc.ir.ops.leaves import CONSTANT, EXTENT, IOTA, PARAMETER
from jitc.ir.ops.linalg import CONVOLUTION, DOT_GENERAL, parse_dim_labels
from jitc.ir.ops.reduce import ARGMAX, ARGMIN, REDUCE, reduce_identity
from jitc.ir.ops.shape import (
    BROADCAST_IN_DIM,
    CONCATENATE,
    DYNAMIC_SLICE,
    DYNAMIC_UPDATE_SLICE,
    GATHER,
    PAD,
    RESHAPE,
    REVERSE,
    SLICE,
    TRANSPOSE,
)
from jitc.ir.ops.sort import SORT

__all__ = [
    "OPS", "lookup", "CONDITIONAL", "WHILE", "FUSION", "FUSION_KINDS", "CONSTANT", "EXTENT", "IOTA",
    "PARAMETER", "CONVOLUTION", "COMPLEX", "IMAG", "REAL",
    "DOT_GENERAL",
    "parse_dim_labels", "ARGMAX", "ARGMIN", "REDUCE", "reduce_identity", "BROADCAST_IN_DIM",
    "CONCATENATE", "DYNAMIC_SLICE", "DYNAMIC_UPDATE_SLICE", "GATHER", "PAD", "RESHAPE",
    "REVERSE", "SLICE", "TRANSPOSE", "SORT",
]
