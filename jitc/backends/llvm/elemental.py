"""The elemental emitter: for each op, the scalar LLVM code that computes one output element
from operand elements.

`ElementalEmitter.value_at(value, index)` returns the LLVM value of IR `value` at a logical
multi-index. A value the backend has materialised in memory is loaded; any other value is
generated from its operands at the index that op maps to (that is how fused kernels work: the
producers inside a kernel are never stored). Loops, threads and memory belong to the backends;
the per-op arithmetic lives here once, shared by the CPU and GPU backends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from llvmlite import ir

from jitc.backends.llvm import extents, indexing
from jitc.backends.llvm.types import FLOAT, I1, I64, constant, declare, value_type
from jitc.ir.analysis import elementwise_chain
from jitc.ir.core import Instruction, Value
from jitc.ir.dtypes import DType, Kind, float32
from jitc.ir.symbolic import DimLike, is_static
from jitc.ir.types import TensorType

Index = list[ir.Value]
Rule = Callable[["ElementalEmitter", Instruction, Index], ir.Value]
RULES: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def wrap(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn
    return wrap


class ElementalEmitter:
    """Generates element values; `buffers` maps materialised IR values to their base pointer.

    A backend whose target needs a different rule for some op subclasses this with its own
    `rules` table.
    """

    rules: Mapping[str, Rule] = RULES

    def __init__(self, builder: ir.IRBuilder, buffers: dict[int, ir.Value]) -> None:
        self.builder = builder
        self.buffers = buffers
        # A fused kernel's body parameters stand for the fusion's operands.
        self.aliases: dict[int, Value] = {}
        # Values already computed for the current iteration of an outer loop (the reduced
        # values of the row a row kernel is working on).
        self.registers: dict[int, ir.Value] = {}
        # Values of the current row already computed into a row buffer: (buffer, row type);
        # the row is indexed by the trailing dimensions of the full index.
        self.rows: dict[int, tuple[ir.Value, TensorType]] = {}
        # Elements generated for the element being computed: (value, index) -> LLVM value.
        self._computed: dict[tuple[int, tuple[int, ...]], tuple[ir.Value, Index]] | None = None

    def value_at(self, value: Value, index: Index) -> ir.Value:
        value = self._resolve(value)
        stored = self._stored(value, index)
        if stored is not None:
            return stored
        if self._computed is not None:
            return self._element(value, index)
        # The values computed for this element are kept until it is done: they are all in
        # straight-line code at this point, and a value used twice is generated once.
        self._computed = {}
        try:
            return self._element(value, index)
        finally:
            self._computed = None

    def _resolve(self, value: Value) -> Value:
        while id(value) in self.aliases:
            value = self.aliases[id(value)]
        return value

    def _stored(self, value: Value, index: Index) -> ir.Value | None:
        """The element of a value held in a register, a buffer or a row buffer, else None."""
        register = self.registers.get(id(value))
        if register is not None:
            return register
        base = self.buffers.get(id(value))
        if base is not None:
            return indexing.load(self.builder, base, value.type, index)
        row = self.rows.get(id(value))
        if row is not None:
            return indexing.load(self.builder, row[0], row[1], index[len(index) - row[1].rank:])
        return None

    def _element(self, value: Value, index: Index) -> ir.Value:
        """Generate `value` at `index` with the values it needs at that index first, bottom-up
        (see `elementwise_chain`), so that its rule finds them computed."""
        assert self._computed is not None
        # The key holds the index's values: their ids cannot be reused while it is alive.
        index_key = tuple(id(i) for i in index)

        def pending(operand: Value) -> Value | None:
            operand = self._resolve(operand)
            if id(operand) in self.registers or id(operand) in self.buffers or \
                    id(operand) in self.rows or (id(operand), index_key) in self._computed:
                return None
            return operand

        if (id(value), index_key) in self._computed:
            return self._computed[id(value), index_key][0]
        result = None
        for v in elementwise_chain(value, pending):
            inst = v.producer
            generate = self.rules.get(inst.op.name)
            if generate is None:
                raise NotImplementedError(f"no elemental rule for {inst.op.name}; it must be "
                                          "materialised by the backend")
            if len(inst.results) != 1:
                raise NotImplementedError(f"{inst.op.name} with several results is not "
                                          "elemental")
            result = generate(self, inst, index)
            self._computed[id(v), index_key] = (result, index)
        return result

    def operand(self, inst: Instruction, n: int, index: Index) -> ir.Value:
        return self.value_at(inst.operands[n], index)

    def operand_in_branch(self, inst: Instruction, n: int, index: Index) -> ir.Value:
        """`operand` generated in a block that not every path runs: what it computes there is
        forgotten afterwards, since code after the branches cannot use it."""
        saved = None if self._computed is None else dict(self._computed)
        try:
            return self.operand(inst, n, index)
        finally:
            self._computed = saved

    def scalar(self, value: Value) -> ir.Value:
        return self.value_at(value, [])

    # -- small helpers shared by the rules -------------------------------------------------
    def const(self, dtype: DType, value: object) -> ir.Constant:
        return constant(dtype, value)

    def index_const(self, n: DimLike) -> ir.Value:
        """An extent or position as an i64: a constant, or computed from the symbol values."""
        return extents.value(self.builder, n)

    def to_index(self, value: ir.Value, dtype: DType) -> ir.Value:
        """An integer element as an i64 index (sign- or zero-extended)."""
        b = self.builder
        if value.type.width == 64:
            return value
        if dtype.kind is Kind.UNSIGNED or dtype.kind is Kind.BOOL:
            return b.zext(value, I64)
        return b.sext(value, I64)

    def clamp_index(self, value: ir.Value, lo: int, hi: DimLike) -> ir.Value:
        b = self.builder
        low, high = self.index_const(lo), self.index_const(hi)
        if not is_static(hi):  # hi may be below lo at the call: lo wins, never out of bounds
            value = b.select(b.icmp_signed(">", value, high), high, value)
            return b.select(b.icmp_signed("<", value, low), low, value)
        value = b.select(b.icmp_signed("<", value, low), low, value)
        return b.select(b.icmp_signed(">", value, high), high, value)


def broadcast_shape_index(operand: TensorType, result: TensorType, index: Index) -> Index:
    """numpy-style implicit broadcasting (trailing alignment, size-1 expansion)."""
    offset = result.rank - operand.rank
    zero = ir.Constant(I64, 0)
    return [zero if operand.shape[i] == 1 and result.shape[i + offset] != 1
            else index[i + offset] for i in range(operand.rank)]


def elementwise_operands(e: ElementalEmitter, inst: Instruction, index: Index) -> list[ir.Value]:
    result = inst.results[0].type
    return [e.value_at(v, broadcast_shape_index(v.type, result, index)) for v in inst.operands]


# -- element types ---------------------------------------------------------------------------

def _kind(inst: Instruction, n: int = 0) -> Kind:
    return inst.operands[n].type.dtype.kind


def _with_float32(b: ir.IRBuilder, fn: Callable[..., ir.Value], *xs: ir.Value) -> ir.Value:
    """Evaluate fn in float32 for half inputs: our math functions exist for f32 and f64."""
    if xs[0].type == ir.HalfType():
        wide = [b.fpext(x, FLOAT) for x in xs]
        return b.fptrunc(fn(b, *wide), ir.HalfType())
    return fn(b, *xs)


def _intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    fn = b.module.declare_intrinsic(name, [args[0].type])
    return b.call(fn, list(args))


def _is_nan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fcmp_unordered("uno", x, x)


# -- unary -----------------------------------------------------------------------------------

@rule("neg")
def _neg(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    (x,) = elementwise_operands(e, inst, index)
    b = e.builder
    return b.fneg(x) if _kind(inst) is Kind.FLOAT else b.sub(ir.Constant(x.type, 0), x)


@rule("abs")
def _abs(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    (x,) = elementwise_operands(e, inst, index)
    b, kind = e.builder, _kind(inst)
    if kind is Kind.FLOAT:
        return _intrinsic(b, "llvm.fabs", x)
    if kind is Kind.UNSIGNED:
        return x
    return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x)


@rule("sign")
def _sign(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    (x,) = elementwise_operands(e, inst, index)
    b, kind = e.builder, _kind(inst)
    zero, one, minus = (ir.Constant(x.type, v) for v in ((0.0, 1.0, -1.0) if kind is Kind.FLOAT
                                                       else (0, 1, -1)))
    if kind is Kind.FLOAT:
        # nan stays nan and both zeros give +0, as numpy's sign does.
        inner = b.select(b.fcmp_ordered("==", x, zero), zero, x)
        return b.select(b.fcmp_ordered(">", x, zero), one,
                        b.select(b.fcmp_ordered("<", x, zero), minus, inner))
    if kind is Kind.UNSIGNED:
        return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
    return b.select(b.icmp_signed(">", x, zero), one,
                    b.select(b.icmp_signed("<", x, zero), minus, zero))


def _math_rule(name: str) -> Rule:
    def generate(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
        from jitc.backends.llvm import vmath
        xs = elementwise_operands(e, inst, index)
        return _with_float32(e.builder, vmath.MATH_FUNCTIONS[name], *xs)
    return generate


for _name in ("exp", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos"):
    RULES[_name] = _math_rule(_name)


@rule("pow")
def _pow(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x, y = elementwise_operands(e, inst, index)
    if _kind(inst) is Kind.FLOAT:
        from jitc.backends.llvm import vmath
        return _with_float32(e.builder, vmath.MATH_FUNCTIONS["pow"], x, y)
    return _integer_pow(e.builder, x, y, _kind(inst) is Kind.SIGNED)


def _integer_pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool) -> ir.Value:
    """Exponentiation by squaring over every exponent bit, branch-free (it vectorizes)."""
    t = x.type
    one, zero = ir.Constant(t, 1), ir.Constant(t, 0)
    result, base, exponent = one, x, y
    for _ in range(t.width):
        odd = b.trunc(exponent, I1)
        result = b.select(odd, b.mul(result, base), result)
        base = b.mul(base, base)
        exponent = b.lshr(exponent, one)
    if not signed:
        return result
    # A negative exponent: 1 / x**-y truncated toward zero.
    minus_one = ir.Constant(t, -1)
    odd_y = b.trunc(y, I1)
    reciprocal = b.select(b.icmp_signed("==", x, one), one,
                          b.select(b.icmp_signed("==", x, minus_one),
                                   b.select(odd_y, minus_one, one), zero))
    return b.select(b.icmp_signed("<", y, zero), reciprocal, result)


@rule("atan2")
def _atan2(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    from jitc.backends.llvm import vmath
    y, x = elementwise_operands(e, inst, index)
    return _with_float32(e.builder, vmath.MATH_FUNCTIONS["atan2"], y, x)


def _intrinsic_rule(name: str) -> Rule:
    def generate(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
        (x,) = elementwise_operands(e, inst, index)
        return _intrinsic(e.builder, name, x)
    return generate


RULES["sqrt"] = _intrinsic_rule("llvm.sqrt")
RULES["floor"] = _intrinsic_rule("llvm.floor")
RULES["ceil"] = _intrinsic_rule("llvm.ceil")
RULES["round"] = _intrinsic_rule("llvm.roundeven")


@rule("rsqrt")
def _rsqrt(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    (x,) = elementwise_operands(e, inst, index)
    b = e.builder
    return b.fdiv(ir.Constant(x.type, 1.0), _intrinsic(b, "llvm.sqrt", x))


@rule("not")
def _not(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    (x,) = elementwise_operands(e, inst, index)
    return e.builder.not_(x)


@rule("is_finite")
def _is_finite(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    (x,) = elementwise_operands(e, inst, index)
    b = e.builder
    return b.fcmp_ordered("<", _intrinsic(b, "llvm.fabs", x), ir.Constant(x.type, float("inf")))


# -- binary ----------------------------------------------------------------------------------

def _arith_rule(float_op: str, int_op: str) -> Rule:
    def generate(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
        x, y = elementwise_operands(e, inst, index)
        op = float_op if _kind(inst) is Kind.FLOAT else int_op
        return getattr(e.builder, op)(x, y)
    return generate


RULES["add"] = _arith_rule("fadd", "add")
RULES["sub"] = _arith_rule("fsub", "sub")
RULES["mul"] = _arith_rule("fmul", "mul")


def _safe_divisor(b: ir.IRBuilder, x: ir.Value, y: ir.Value, signed: bool) -> ir.Value:
    """y with the cases C leaves undefined (y == 0, MIN / -1) replaced by 1."""
    t = y.type
    bad = b.icmp_unsigned("==", y, ir.Constant(t, 0))
    if signed:
        overflow = b.and_(b.icmp_signed("==", x, ir.Constant(t, -(1 << (t.width - 1)))),
                          b.icmp_signed("==", y, ir.Constant(t, -1)))
        bad = b.or_(bad, overflow)
    return b.select(bad, ir.Constant(t, 1), y)


@rule("div")
def _div(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x, y = elementwise_operands(e, inst, index)
    b, kind = e.builder, _kind(inst)
    if kind is Kind.FLOAT:
        return b.fdiv(x, y)
    signed = kind is Kind.SIGNED
    quotient = (b.sdiv if signed else b.udiv)(x, _safe_divisor(b, x, y, signed))
    is_zero = b.icmp_unsigned("==", y, ir.Constant(y.type, 0))
    return b.select(is_zero, ir.Constant(y.type, 0), quotient)


@rule("rem")
def _rem(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x, y = elementwise_operands(e, inst, index)
    b, kind = e.builder, _kind(inst)
    if kind is Kind.FLOAT:
        return b.frem(x, y)
    signed = kind is Kind.SIGNED
    remainder = (b.srem if signed else b.urem)(x, _safe_divisor(b, x, y, signed))
    is_zero = b.icmp_unsigned("==", y, ir.Constant(y.type, 0))
    return b.select(is_zero, ir.Constant(y.type, 0), remainder)


def _extremum(b: ir.IRBuilder, x: ir.Value, y: ir.Value, kind: Kind, larger: bool) -> ir.Value:
    """max/min that propagate nan, like numpy's maximum/minimum."""
    if kind is Kind.FLOAT:
        pick_x = b.fcmp_unordered(">" if larger else "<", x, y)  # true when either is nan
        chosen = b.select(pick_x, x, y)
        return b.select(_is_nan(b, y), y, chosen)
    if kind is Kind.BOOL:
        return b.or_(x, y) if larger else b.and_(x, y)
    compare = b.icmp_signed if kind is Kind.SIGNED else b.icmp_unsigned
    return b.select(compare(">" if larger else "<", x, y), x, y)


@rule("max")
def _max(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x, y = elementwise_operands(e, inst, index)
    return _extremum(e.builder, x, y, _kind(inst), larger=True)


@rule("min")
def _min(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x, y = elementwise_operands(e, inst, index)
    return _extremum(e.builder, x, y, _kind(inst), larger=False)


def _bitwise_rule(op: str) -> Rule:
    def generate(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
        x, y = elementwise_operands(e, inst, index)
        return getattr(e.builder, op)(x, y)
    return generate


RULES["and"] = _bitwise_rule("and_")
RULES["or"] = _bitwise_rule("or_")
RULES["xor"] = _bitwise_rule("xor")


@rule("shift_left", "shift_right_logical", "shift_right_arithmetic")
def _shift(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x, y = elementwise_operands(e, inst, index)
    b, t = e.builder, x.type
    in_range = b.icmp_unsigned("<", y, ir.Constant(t, t.width))
    # The amount is masked rather than selected: LLVM's NVPTX backend folds `select(y < 64,
    # x << y, 0)` into one PTX shift that reads only the low 32 bits of a 64-bit y, so
    # y = -2**63 shifted by 0 on the GPU. With the mask the select stays and is exact.
    amount = b.and_(y, ir.Constant(t, t.width - 1))
    name = inst.op.name
    if name == "shift_left":
        return b.select(in_range, b.shl(x, amount), ir.Constant(t, 0))
    if name == "shift_right_logical":
        return b.select(in_range, b.lshr(x, amount), ir.Constant(t, 0))
    if _kind(inst) is Kind.UNSIGNED:
        return b.select(in_range, b.lshr(x, amount), ir.Constant(t, 0))
    return b.select(in_range, b.ashr(x, amount), b.ashr(x, ir.Constant(t, t.width - 1)))


_FLOAT_COMPARE = {"eq": "==", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_INT_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@rule("compare")
def _compare(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x, y = elementwise_operands(e, inst, index)
    b, kind = e.builder, _kind(inst)
    direction = inst.attrs["direction"]
    if kind is Kind.FLOAT:
        if direction == "ne":
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(_FLOAT_COMPARE[direction], x, y)  # type: ignore[index]
    compare = b.icmp_signed if kind is Kind.SIGNED else b.icmp_unsigned
    return compare(_INT_COMPARE[direction], x, y)  # type: ignore[index]


@rule("select")
def _select(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    pred, on_true, on_false = elementwise_operands(e, inst, index)
    return e.builder.select(pred, on_true, on_false)


@rule("clamp")
def _clamp(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    lo, x, hi = elementwise_operands(e, inst, index)
    b, kind = e.builder, _kind(inst)
    return _extremum(b, _extremum(b, x, lo, kind, larger=True), hi, kind, larger=False)


# -- conversions -----------------------------------------------------------------------------

_FLOAT_SUFFIX = {16: "f16", 32: "f32", 64: "f64"}


def convert_value(b: ir.IRBuilder, x: ir.Value, source: DType, target: DType) -> ir.Value:
    """Element conversion with the IR's semantics (saturating float to int, nan to 0)."""
    to = value_type(target)
    if source is target:
        return x
    if target.kind is Kind.BOOL:
        if source.kind is Kind.FLOAT:
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if target.bits == 16 and target.kind is Kind.FLOAT and source.bits != 32:
        return _to_half(b, x, source)
    if source.kind is Kind.BOOL:
        return b.uitofp(x, to) if target.kind is Kind.FLOAT else b.zext(x, to)
    if source.kind is Kind.FLOAT and target.kind is Kind.FLOAT:
        return b.fpext(x, to) if target.bits > source.bits else b.fptrunc(x, to)
    if source.kind is Kind.FLOAT:
        # The saturating conversions give exactly the IR's semantics, nan included; except
        # LLVM's own half to i16 (nan gave -32768), so half goes through float (exactly).
        if source.bits == 16:
            x, source = b.fpext(x, FLOAT), float32
        base = "llvm.fptosi.sat" if target.kind is Kind.SIGNED else "llvm.fptoui.sat"
        name = f"{base}.i{to.width}.{_FLOAT_SUFFIX[source.bits]}"
        fn = declare(b.module, name, ir.FunctionType(to, [x.type]))
        return b.call(fn, [x])
    if target.kind is Kind.FLOAT:
        return b.sitofp(x, to) if source.kind is Kind.SIGNED else b.uitofp(x, to)
    if target.bits == source.bits:
        return x
    if target.bits < source.bits:
        return b.trunc(x, to)
    return b.sext(x, to) if source.kind is Kind.SIGNED else b.zext(x, to)


def _to_half(b: ir.IRBuilder, x: ir.Value, source: DType) -> ir.Value:
    """Conversion to float16 through float32 without a libm/compiler-rt call.

    Integers are exact in float32 wherever float16 is finite. A double first rounds to
    float32 *to odd* (truncate, then set the last bit when inexact), which makes the second
    rounding to float16 correctly rounded.
    """
    from jitc.ir.dtypes import float32
    if source.kind is not Kind.FLOAT:
        return b.fptrunc(convert_value(b, x, source, float32), ir.HalfType())
    nearest = b.fptrunc(x, FLOAT)
    bits = b.bitcast(nearest, ir.IntType(32))
    wide = b.fpext(nearest, x.type)
    fabs = b.module.declare_intrinsic("llvm.fabs", [x.type])
    too_far = b.fcmp_ordered(">", b.call(fabs, [wide]), b.call(fabs, [x]))
    bits = b.select(too_far, b.sub(bits, ir.Constant(ir.IntType(32), 1)), bits)
    truncated = b.bitcast(bits, FLOAT)
    inexact = b.fcmp_unordered("!=", b.fpext(truncated, x.type), x)
    odd = b.or_(bits, ir.Constant(ir.IntType(32), 1))
    rounded_to_odd = b.bitcast(b.select(inexact, odd, bits), FLOAT)
    return b.fptrunc(rounded_to_odd, ir.HalfType())


@rule("convert")
def _convert(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x = e.operand(inst, 0, index)
    return convert_value(e.builder, x, inst.operands[0].type.dtype, inst.results[0].type.dtype)


@rule("bitcast_convert")
def _bitcast(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    x = e.operand(inst, 0, index)
    to = value_type(inst.results[0].type.dtype)
    return x if x.type == to else e.builder.bitcast(x, to)


# -- leaves ----------------------------------------------------------------------------------

@rule("constant")
def _constant(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    literal = inst.attrs["value"]
    array = literal.array  # type: ignore[attr-defined]
    if array.size != 1:
        raise NotImplementedError("array constants are materialised by the backend")
    return constant(inst.results[0].type.dtype, array.reshape(()).item())


@rule("extent")
def _extent(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    """A symbolic extent's value, from the call's symbol values (jitc.backends.llvm.extents)."""
    return extents.value(e.builder, inst.attrs["size"][0])  # type: ignore[index]


@rule("iota")
def _iota(e: ElementalEmitter, inst: Instruction, index: Index) -> ir.Value:
    i = index[inst.attrs["dimension"]]  # type: ignore[index]
    return convert_value(e.builder, i, _INDEX_DTYPE, inst.results[0].type.dtype)


def _index_dtype() -> DType:
    from jitc.ir.dtypes import int64
    return int64


_INDEX_DTYPE = _index_dtype()


# The data-movement rules live in their own module; importing it registers them in RULES.
from jitc.backends.llvm import elemental_movement  # noqa: E402, F401
