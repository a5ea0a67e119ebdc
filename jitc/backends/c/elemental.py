"""The C elemental emitter: for each op, the C statements that compute one output element from
operand elements. It mirrors `jitc.backends.llvm.elemental` rule for rule.

`CEmitter.value_at(value, index)` returns a C expression (a name or a literal) holding IR
`value` at a logical index whose entries are C names or integer literals. A value the kernel
has in memory is loaded; any other value is computed from its operands at the index its op
maps to, and remembered for the rest of the current C scope, so a fused kernel computes each
element of each body value once.
"""

from __future__ import annotations

from collections.abc import Callable

from jitc.ir.analysis import elementwise_chain
from jitc.ir.core import Instruction, Value
from jitc.ir.dtypes import DType, Kind, bool_, float64, int64
from jitc.ir.opdef import Trait
from jitc.ir.symbolic import DimLike
from jitc.ir.types import TensorType

from .cgen import (
    Writer,
    extent,
    float_name,
    float_suffix,
    literal,
    offset,
    register_type,
    wrapping_type,
)
from .helpers import HELPERS
from .vmath import KERNELS, helper_name

Index = list[str]
Rule = Callable[["CEmitter", Instruction, Index], str]
RULES: dict[str, Rule] = {}
# Ops whose float16 result is exact (a choice among operands, or a float16 value's sign):
# everything else is rounded back to float16 after computing in float.
_EXACT = frozenset({"neg", "abs", "sign", "floor", "ceil", "round", "max", "min", "select",
                    "clamp", "convert", "bitcast_convert", "constant"})


def rule(*names: str) -> Callable[[Rule], Rule]:
    def wrap(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn
    return wrap


class CEmitter:
    """Generates element values into a Writer; `buffers` maps materialised IR values to the C
    pointer holding them, `texts` an instruction to its IR text (written as a comment)."""

    def __init__(self, writer: Writer, buffers: dict[int, str], texts: dict[int, str]) -> None:
        self.w = writer
        self.buffers = buffers
        self.texts = texts
        # A fused kernel's body parameters stand for the fusion's operands.
        self.aliases: dict[int, Value] = {}
        # Values already computed for the current iteration of an outer loop (the reduced
        # values of the row a row kernel is working on).
        self.registers: dict[int, str] = {}

    def value_at(self, value: Value, index: Index) -> str:
        while id(value) in self.aliases:
            value = self.aliases[id(value)]
        register = self.registers.get(id(value))
        if register is not None:
            return register
        base = self.buffers.get(id(value))
        if base is not None:
            return self.load(base, value.type, index)
        known = self.w.recall((id(value), tuple(index)))
        if known is not None:
            return known

        def pending(operand: Value) -> Value | None:
            while id(operand) in self.aliases:
                operand = self.aliases[id(operand)]
            if id(operand) in self.registers or id(operand) in self.buffers or \
                    self.w.recall((id(operand), tuple(index))) is not None:
                return None
            return operand

        # The values it needs at this index first, bottom-up (see `elementwise_chain`): a
        # fused chain of thousands of ops is not one recursive call per op deep.
        result = ""
        for v in elementwise_chain(value, pending):
            if len(v.producer.results) != 1:
                raise NotImplementedError(f"{v.producer.op.name} with several results is not "
                                          "elemental")
            result = self.compute(v.producer, index)
            self.w.remember((id(v), tuple(index)), result)
        return result

    def compute(self, inst: Instruction, index: Index) -> str:
        """The element of `inst`'s result at `index`, computed by its op's rule (the
        statement that defines it gets the instruction's IR text as a comment), rounded back
        to float16 where needed."""
        generate = RULES.get(inst.op.name)
        if generate is None:
            raise NotImplementedError(f"no C elemental rule for {inst.op.name}; it must be "
                                      "materialised by the backend")
        result = generate(self, inst, index)
        dtype = inst.results[0].type.dtype
        if dtype.bits == 16 and dtype.is_float and inst.op.name not in _EXACT \
                and inst.op.has(Trait.ELEMENTWISE):
            rounding = self.helper("jitc_rh")
            if not self.w.wrap_definition(result, rounding):
                result = self.let(dtype, f"{rounding}({result})")
        text = self.texts.get(id(inst))
        if text is not None:
            self.w.comment_definition(result, text)
        return result

    def operand(self, inst: Instruction, n: int, index: Index) -> str:
        return self.value_at(inst.operands[n], index)

    def scalar(self, value: Value) -> str:
        return self.value_at(value, [])

    # -- small helpers shared by the rules -------------------------------------------------
    def helper(self, name: str) -> str:
        """The name of a C helper function (the translation unit defines the helpers its code
        calls); an unknown name is a bug here, not in the C compiler's output."""
        if name not in HELPERS:
            raise KeyError(f"no C helper {name}")
        return name

    def let(self, dtype: DType, expression: str) -> str:
        """A new C name holding `expression` as a register of `dtype`."""
        name = self.w.fresh("t")
        self.w.line(f"const {register_type(dtype)} {name} = {expression};")
        return name

    def let_bool(self, expression: str) -> str:
        return self.let(bool_, expression)

    def let_index(self, expression: str) -> str:
        if _is_atom(expression):
            return expression
        name = self.w.fresh("t")
        self.w.line(f"const int64_t {name} = {expression};")
        return name

    def load(self, base: str, t: TensorType, index: Index) -> str:
        element = f"{base}[{offset(t, index)}]"
        if t.dtype.kind is Kind.BOOL:
            return self.let(t.dtype, f"{element} != 0")
        if t.dtype.is_float and t.dtype.bits == 16:
            return self.let(t.dtype, f"{self.helper('jitc_h2f')}({element})")
        return self.let(t.dtype, element)

    def store(self, value: str, base: str, t: TensorType, index: Index) -> None:
        if t.dtype.is_float and t.dtype.bits == 16:
            value = f"{self.helper('jitc_d2h')}({value})"
        elif t.dtype.kind is Kind.BOOL:
            value = f"(uint8_t){value}"
        self.w.line(f"{base}[{offset(t, index)}] = {value};")

    def to_index(self, value: str) -> str:
        """An integer element as an int64_t index (C's conversion sign- or zero-extends)."""
        return self.let_index(f"(int64_t){value}")

    def clamp_index(self, value: str, lo: DimLike, hi: DimLike) -> str:
        return self.let_index(f"{self.helper('jitc_clamp')}({value}, {extent(lo)}, "
                              f"{extent(hi)})")


def _is_atom(text: str) -> bool:
    return text.isidentifier() or text.lstrip("-").isdigit()


def broadcast_shape_index(operand: TensorType, result: TensorType, index: Index) -> Index:
    """numpy-style implicit broadcasting (trailing alignment, size-1 expansion)."""
    offset_ = result.rank - operand.rank
    return ["0" if operand.shape[i] == 1 and result.shape[i + offset_] != 1
            else index[i + offset_] for i in range(operand.rank)]


def elementwise_operands(e: CEmitter, inst: Instruction, index: Index) -> list[str]:
    result = inst.results[0].type
    return [e.value_at(v, broadcast_shape_index(v.type, result, index)) for v in inst.operands]


def _dtype(inst: Instruction, n: int = 0) -> DType:
    return inst.operands[n].type.dtype


def _result(e: CEmitter, inst: Instruction, expression: str) -> str:
    return e.let(inst.results[0].type.dtype, expression)


def _wrapping(dtype: DType, x: str, op: str, y: str) -> str:
    """x op y for an integer dtype, wrapping: computed in an unsigned type (see
    `wrapping_type`) and truncated to the dtype's width."""
    u, t = wrapping_type(dtype), register_type(dtype)
    return f"({t})(({u}){x} {op} ({u}){y})"


# -- unary -----------------------------------------------------------------------------------

@rule("neg")
def _neg(e: CEmitter, inst: Instruction, index: Index) -> str:
    (x,) = elementwise_operands(e, inst, index)
    dtype = _dtype(inst)
    if dtype.is_float:
        return _result(e, inst, f"-{x}")
    return _result(e, inst, _wrapping(dtype, "0", "-", x))


@rule("abs")
def _abs(e: CEmitter, inst: Instruction, index: Index) -> str:
    (x,) = elementwise_operands(e, inst, index)
    dtype = _dtype(inst)
    if dtype.is_float:
        return _result(e, inst, f"fabs{float_suffix(dtype)}({x})")
    if dtype.kind is Kind.UNSIGNED:
        return x
    return _result(e, inst, f"{x} < 0 ? {_wrapping(dtype, '0', '-', x)} : {x}")


@rule("sign")
def _sign(e: CEmitter, inst: Instruction, index: Index) -> str:
    (x,) = elementwise_operands(e, inst, index)
    dtype = _dtype(inst)
    if dtype.is_float:
        return _result(e, inst, f"{e.helper('jitc_sign_' + float_name(dtype))}({x})")
    if dtype.kind is Kind.UNSIGNED:
        return _result(e, inst, f"{x} != 0")
    return _result(e, inst, f"({x} > 0) - ({x} < 0)")


def _math_rule(name: str) -> Rule:
    def generate(e: CEmitter, inst: Instruction, index: Index) -> str:
        xs = elementwise_operands(e, inst, index)
        call = f"{name}{float_suffix(_dtype(inst))}({', '.join(xs)})"
        return _result(e, inst, call)
    return generate


def _vector_math_rule(name: str) -> Rule:
    """exp and tanh: the CPU backend's vectorizable kernels as C helpers (vmath.py)."""
    def generate(e: CEmitter, inst: Instruction, index: Index) -> str:
        (x,) = elementwise_operands(e, inst, index)
        return _result(e, inst, f"{e.helper(helper_name(name, _dtype(inst)))}({x})")
    return generate


for _name in ("expm1", "log", "log1p", "sin", "cos", "sqrt", "floor", "ceil", "atan2"):
    RULES[_name] = _math_rule(_name)
for _name in KERNELS:
    RULES[_name] = _vector_math_rule(_name)
RULES["round"] = _math_rule("rint")  # ties to even in C's default rounding mode


@rule("pow")
def _pow(e: CEmitter, inst: Instruction, index: Index) -> str:
    x, y = elementwise_operands(e, inst, index)
    dtype = _dtype(inst)
    if dtype.is_float:
        return _result(e, inst, f"pow{float_suffix(dtype)}({x}, {y})")
    return _result(e, inst, f"{e.helper('jitc_pow_' + dtype.name)}({x}, {y})")


@rule("logistic")
def _logistic(e: CEmitter, inst: Instruction, index: Index) -> str:
    (x,) = elementwise_operands(e, inst, index)
    return _result(e, inst, f"{e.helper('jitc_logistic_' + float_name(_dtype(inst)))}({x})")


@rule("rsqrt")
def _rsqrt(e: CEmitter, inst: Instruction, index: Index) -> str:
    (x,) = elementwise_operands(e, inst, index)
    return _result(e, inst, f"1 / sqrt{float_suffix(_dtype(inst))}({x})")


@rule("not")
def _not(e: CEmitter, inst: Instruction, index: Index) -> str:
    (x,) = elementwise_operands(e, inst, index)
    dtype = _dtype(inst)
    if dtype.is_bool:
        return _result(e, inst, f"!{x}")
    return _result(e, inst, f"({register_type(dtype)})~{x}")


@rule("is_finite")
def _is_finite(e: CEmitter, inst: Instruction, index: Index) -> str:
    (x,) = elementwise_operands(e, inst, index)
    return _result(e, inst, f"isfinite({x})")


# -- binary ----------------------------------------------------------------------------------

def _arith_rule(op: str) -> Rule:
    def generate(e: CEmitter, inst: Instruction, index: Index) -> str:
        x, y = elementwise_operands(e, inst, index)
        dtype = _dtype(inst)
        if dtype.is_float:
            return _result(e, inst, f"{x} {op} {y}")
        return _result(e, inst, _wrapping(dtype, x, op, y))
    return generate


RULES["add"] = _arith_rule("+")
RULES["sub"] = _arith_rule("-")
RULES["mul"] = _arith_rule("*")


@rule("div")
def _div(e: CEmitter, inst: Instruction, index: Index) -> str:
    x, y = elementwise_operands(e, inst, index)
    dtype = _dtype(inst)
    if dtype.is_float:
        return _result(e, inst, f"{x} / {y}")
    return _result(e, inst, f"{e.helper('jitc_div_' + dtype.name)}({x}, {y})")


@rule("rem")
def _rem(e: CEmitter, inst: Instruction, index: Index) -> str:
    x, y = elementwise_operands(e, inst, index)
    dtype = _dtype(inst)
    if dtype.is_float:
        return _result(e, inst, f"fmod{float_suffix(dtype)}({x}, {y})")
    return _result(e, inst, f"{e.helper('jitc_rem_' + dtype.name)}({x}, {y})")


def extremum(e: CEmitter, dtype: DType, x: str, y: str, larger: bool) -> str:
    """max/min that propagate nan, like numpy's maximum/minimum (an expression)."""
    if dtype.is_float:
        return f"{e.helper(('jitc_max_' if larger else 'jitc_min_') + float_name(dtype))}" \
               f"({x}, {y})"
    if dtype.is_bool:
        return f"{x} | {y}" if larger else f"{x} & {y}"
    return f"{x} {'>' if larger else '<'} {y} ? {x} : {y}"


@rule("max", "min")
def _max_min(e: CEmitter, inst: Instruction, index: Index) -> str:
    x, y = elementwise_operands(e, inst, index)
    return _result(e, inst, extremum(e, _dtype(inst), x, y, inst.op.name == "max"))


def _bitwise_rule(op: str) -> Rule:
    def generate(e: CEmitter, inst: Instruction, index: Index) -> str:
        x, y = elementwise_operands(e, inst, index)
        return _result(e, inst, f"({register_type(_dtype(inst))})({x} {op} {y})")
    return generate


RULES["and"] = _bitwise_rule("&")
RULES["or"] = _bitwise_rule("|")
RULES["xor"] = _bitwise_rule("^")
_SHIFTS = {"shift_left": "jitc_shl_", "shift_right_logical": "jitc_shrl_",
           "shift_right_arithmetic": "jitc_shra_"}


@rule(*_SHIFTS)
def _shift(e: CEmitter, inst: Instruction, index: Index) -> str:
    x, y = elementwise_operands(e, inst, index)
    return _result(e, inst, f"{e.helper(_SHIFTS[inst.op.name] + _dtype(inst).name)}({x}, {y})")


_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@rule("compare")
def _compare(e: CEmitter, inst: Instruction, index: Index) -> str:
    # C's float comparisons are the IR's: false with a nan, except != which is true.
    x, y = elementwise_operands(e, inst, index)
    return _result(e, inst, f"{x} {_COMPARE[inst.attrs['direction']]} {y}")  # type: ignore


@rule("select")
def _select(e: CEmitter, inst: Instruction, index: Index) -> str:
    pred, on_true, on_false = elementwise_operands(e, inst, index)
    return _result(e, inst, f"{pred} ? {on_true} : {on_false}")


@rule("clamp")
def _clamp(e: CEmitter, inst: Instruction, index: Index) -> str:
    lo, x, hi = elementwise_operands(e, inst, index)
    dtype = _dtype(inst)
    low = e.let(dtype, extremum(e, dtype, x, lo, larger=True))
    return _result(e, inst, extremum(e, dtype, low, hi, larger=False))


# -- conversions -----------------------------------------------------------------------------

def convert_value(e: CEmitter, x: str, source: DType, target: DType) -> str:
    """An expression of register `x` converted with the IR's semantics (saturating float to
    int, nan to 0, one correct rounding to float16)."""
    if source is target:
        return x
    if target.is_bool:
        return f"{x} != 0"  # true for nan, as x != 0 is
    if target.is_float and target.bits == 16:
        if source.is_float and source.bits == 16:
            return x
        return f"{e.helper('jitc_h2f')}({e.helper('jitc_d2h')}((double){x}))"
    if source.is_float and target.is_int:
        return f"{e.helper('jitc_f2i_' + target.name)}((double){x})"
    # The rest is C's conversion: float to float rounds to nearest, integer to float rounds to
    # nearest, integer to integer wraps modulo 2^bits (implementation-defined for signed
    # targets in C99, and two's complement wrapping in every mainstream compiler).
    return f"({register_type(target)}){x}"


@rule("convert")
def _convert(e: CEmitter, inst: Instruction, index: Index) -> str:
    x = e.operand(inst, 0, index)
    target = inst.results[0].type.dtype
    return _result(e, inst, convert_value(e, x, _dtype(inst), target))


@rule("bitcast_convert")
def _bitcast(e: CEmitter, inst: Instruction, index: Index) -> str:
    x = e.operand(inst, 0, index)
    source, target = _dtype(inst), inst.results[0].type.dtype
    if source is target:  # the IR allows it (f16 has no other dtype of its width)
        return _result(e, inst, x)
    if source.is_int and target.is_int:
        return _result(e, inst, f"({register_type(target)}){x}")
    if source.bits == 16:  # float16 registers hold the value as float; memory the bits
        if source.is_float:
            return _result(e, inst, f"({register_type(target)}){e.helper('jitc_d2h')}({x})")
        return _result(e, inst, f"{e.helper('jitc_h2f')}((uint16_t){x})")
    return _result(e, inst, f"{e.helper(f'jitc_bitcast_{source.name}_{target.name}')}({x})")


# -- leaves ----------------------------------------------------------------------------------

@rule("constant")
def _constant(e: CEmitter, inst: Instruction, index: Index) -> str:
    array = inst.attrs["value"].array  # type: ignore[attr-defined]
    if array.size != 1:
        raise NotImplementedError("array constants are materialised by the backend")
    return literal(inst.results[0].type.dtype, array.reshape(())[()])


@rule("extent")
def _extent(e: CEmitter, inst: Instruction, index: Index) -> str:
    """A symbolic extent's value, over the symbols' variables (cgen.extent)."""
    return extent(inst.attrs["size"][0])  # type: ignore[index]


@rule("iota")
def _iota(e: CEmitter, inst: Instruction, index: Index) -> str:
    i = index[inst.attrs["dimension"]]  # type: ignore[index]
    return _result(e, inst, convert_value(e, i, int64, inst.results[0].type.dtype))


def accumulator_dtype(kind: str, dtype: DType) -> DType:
    """Sums and products of floats accumulate in double (the reference accumulates in
    float64 too); integers wrap in their own type; max/min/and/or are exact in any type."""
    return float64 if kind in ("sum", "prod") and dtype.is_float else dtype


def combine(e: CEmitter, kind: str, dtype: DType, acc: str, x: str) -> str:
    """One step of a reduction of `kind` in `dtype` (an expression)."""
    if kind in ("sum", "prod"):
        op = "+" if kind == "sum" else "*"
        return f"{acc} {op} {x}" if dtype.is_float else _wrapping(dtype, acc, op, x)
    if kind in ("and", "or"):
        return f"{acc} {'&' if kind == 'and' else '|'} {x}"
    return extremum(e, dtype, acc, x, larger=kind == "max")


__all__ = ["RULES", "CEmitter", "convert_value", "extremum", "combine", "accumulator_dtype"]


from . import movement  # noqa: E402, F401  (registers the data-movement rules in RULES)
