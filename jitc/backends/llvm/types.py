"""IR dtypes as LLVM types: how elements sit in memory and how they are held in registers.

bool is a byte in memory and an i1 in registers; everything else is the same in both.
"""

from __future__ import annotations

from llvmlite import ir

from jitc.ir.dtypes import DType, Kind

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
HALF = ir.HalfType()
FLOAT = ir.FloatType()
DOUBLE = ir.DoubleType()
VOID = ir.VoidType()
PTR = ir.PointerType()

_MEMORY = {"bool": I8, "i8": I8, "u8": I8, "i16": I16, "u16": I16, "i32": I32, "u32": I32,
           "i64": I64, "u64": I64, "f16": HALF, "f32": FLOAT, "f64": DOUBLE}


def memory_type(dtype: DType) -> ir.Type:
    return _MEMORY[dtype.name]


def value_type(dtype: DType) -> ir.Type:
    return I1 if dtype.kind is Kind.BOOL else _MEMORY[dtype.name]


def index(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def constant(dtype: DType, value: object) -> ir.Constant:
    """An LLVM constant holding `value` converted to `dtype`."""
    t = value_type(dtype)
    if dtype.kind is Kind.BOOL:
        return ir.Constant(t, int(bool(value)))
    if dtype.kind is Kind.FLOAT:
        return ir.Constant(t, float(value))  # type: ignore[arg-type]
    bits = dtype.bits
    return ir.Constant(t, int(value) & ((1 << bits) - 1))  # type: ignore[call-overload]


def declare(module: ir.Module, name: str, type_: ir.FunctionType) -> ir.Function:
    """Function `name` of `module`, declared with `type_` unless it is there already (how
    intrinsics are declared here: llvmlite's declare_intrinsic mangles vector and some
    multi-parameter overloads wrongly)."""
    existing = module.globals.get(name)
    return existing if existing is not None else ir.Function(module, type_, name)


def pointer_to(b: ir.IRBuilder, pointer: ir.Value, pointee: ir.Type) -> ir.Value:
    """`pointer` as a pointer to `pointee`: a no-op in the IR, needed only to satisfy the
    builder's type check on (typed) pointers derived from an alloca."""
    return pointer if pointer.type.is_opaque else b.bitcast(pointer, pointee.as_pointer())
