"""The IR: dtypes, tensor types, the op table, modules, text form, verifier and interpreter."""

from jitc.ir import ops
from jitc.ir.core import Builder, Function, Instruction, Literal, Location, Module, Value
from jitc.ir.dtypes import DType
from jitc.ir.opdef import OPS, IRTypeError, OpDef, Trait
from jitc.ir.parser import ParseError, parse_module
from jitc.ir.printer import print_module
from jitc.ir.symbolic import Constraint, Dim
from jitc.ir.types import TensorType

__all__ = [
    "ops", "Builder", "Function", "Instruction", "Literal", "Location", "Module", "Value",
    "DType", "OPS", "IRTypeError", "OpDef", "Trait", "ParseError", "parse_module",
    "print_module", "TensorType", "Constraint", "Dim",
]
