"""Element types of the IR and their correspondence with numpy dtypes."""

from __future__ import annotations

import enum

import numpy as np


class Kind(enum.Enum):
    BOOL = "bool"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"
    COMPLEX = "complex"  # a pair (real, imaginary) of floats


class DType:
    """One IR element type. Instances are interned: compare with `is` or `==`."""

    __slots__ = ("bits", "kind", "name", "numpy")

    def __init__(self, name: str, numpy_dtype: str, kind: Kind, bits: int) -> None:
        self.name = name
        self.numpy = np.dtype(numpy_dtype)
        self.kind = kind
        self.bits = bits

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_complex(self) -> bool:
        return self.kind is Kind.COMPLEX

    @property
    def is_int(self) -> bool:
        return self.kind in (Kind.SIGNED, Kind.UNSIGNED)

    @property
    def is_bool(self) -> bool:
        return self.kind is Kind.BOOL

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple:
        return (by_name, (self.name,))


bool_ = DType("bool", "bool", Kind.BOOL, 1)
int8 = DType("i8", "int8", Kind.SIGNED, 8)
int16 = DType("i16", "int16", Kind.SIGNED, 16)
int32 = DType("i32", "int32", Kind.SIGNED, 32)
int64 = DType("i64", "int64", Kind.SIGNED, 64)
uint8 = DType("u8", "uint8", Kind.UNSIGNED, 8)
uint16 = DType("u16", "uint16", Kind.UNSIGNED, 16)
uint32 = DType("u32", "uint32", Kind.UNSIGNED, 32)
uint64 = DType("u64", "uint64", Kind.UNSIGNED, 64)
float16 = DType("f16", "float16", Kind.FLOAT, 16)
float32 = DType("f32", "float32", Kind.FLOAT, 32)
float64 = DType("f64", "float64", Kind.FLOAT, 64)

# Complex dtypes: `bits` is the width of the whole pair, as numpy names them.
complex64 = DType("c64", "complex64", Kind.COMPLEX, 64)
complex128 = DType("c128", "complex128", Kind.COMPLEX, 128)

INTS: tuple[DType, ...] = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)
COMPLEXES: tuple[DType, ...] = (complex64, complex128)
FLOATS: tuple[DType, ...] = (float16, float32, float64)
ALL: tuple[DType, ...] = (bool_, *INTS, *FLOATS, *COMPLEXES)

_BY_NAME = {d.name: d for d in ALL}
_BY_NUMPY = {d.numpy: d for d in ALL}


def real_part(dtype: DType) -> DType:
    """The float dtype of each half of a complex dtype; any other dtype itself."""
    return {complex64: float32, complex128: float64}.get(dtype, dtype)


def complex_of(dtype: DType) -> DType:
    """The complex dtype whose halves are the float `dtype` (float16 widens, as in numpy)."""
    return complex128 if dtype is float64 else complex64


def by_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected one of {sorted(_BY_NAME)}") from None


def from_numpy(dtype: object) -> DType:
    """The IR dtype of a numpy dtype (or anything np.dtype accepts)."""
    nd = np.dtype(dtype)
    try:
        return _BY_NUMPY[nd]
    except KeyError:
        supported = ", ".join(str(d.numpy) for d in ALL)
        raise TypeError(f"dtype {nd} is not supported by jitc (supported: {supported})") from None


def is_supported_numpy(dtype: object) -> bool:
    return np.dtype(dtype) in _BY_NUMPY
