"""C spelling of IR types and literals, C identifiers for IR values, and `Writer`, which
keeps the lines of one C function with their indentation, loops and scopes.

Elements live in memory as the C type of their dtype; bool is a byte (0 or 1) and float16 is
its bit pattern (`uint16_t`). In registers bool is `bool` and float16 is a `float` holding a
value that float16 can represent: every float16 operation is computed in float and rounded
back to float16 (`jitc_rh`), which gives the correctly rounded float16 result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from jitc.ir import symbolic
from jitc.ir.dtypes import DType, Kind
from jitc.ir.symbolic import Dim, DimLike, FloorDiv
from jitc.ir.types import TensorType

_MEMORY = {"bool": "uint8_t", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t",
           "u16": "uint16_t", "i32": "int32_t", "u32": "uint32_t", "i64": "int64_t",
           "u64": "uint64_t", "f16": "uint16_t", "f32": "float", "f64": "double"}
_REGISTER = {**_MEMORY, "bool": "bool", "f16": "float"}
# The unsigned type of the same width, for shifts that must not see sign bits.
_UNSIGNED = {"i8": "uint8_t", "u8": "uint8_t", "i16": "uint16_t", "u16": "uint16_t",
             "i32": "uint32_t", "u32": "uint32_t", "i64": "uint64_t", "u64": "uint64_t"}
_INT_LIMITS = {"i8": ("INT8_MIN", "INT8_MAX"), "u8": ("0", "UINT8_MAX"),
               "i16": ("INT16_MIN", "INT16_MAX"), "u16": ("0", "UINT16_MAX"),
               "i32": ("INT32_MIN", "INT32_MAX"), "u32": ("0", "UINT32_MAX"),
               "i64": ("INT64_MIN", "INT64_MAX"), "u64": ("0", "UINT64_MAX")}


def memory_type(dtype: DType) -> str:
    return _MEMORY[dtype.name]


def register_type(dtype: DType) -> str:
    return _REGISTER[dtype.name]


def unsigned_type(dtype: DType) -> str:
    return _UNSIGNED[dtype.name]


def wrapping_type(dtype: DType) -> str:
    """An unsigned type at least as wide as the integer dtype that C does not promote to
    `int`: signed arithmetic wraps by going through it (signed overflow is undefined
    behaviour in C, and so is uint16_t * uint16_t, promoted to int, past INT_MAX)."""
    return "uint64_t" if dtype.bits == 64 else "uint32_t"


def int_limits(dtype: DType) -> tuple[str, str]:
    return _INT_LIMITS[dtype.name]


def float_suffix(dtype: DType) -> str:
    """The libm suffix of a float dtype's computations: float16 computes in float."""
    return "" if dtype.bits == 64 else "f"


def float_name(dtype: DType) -> str:
    """The helper-name suffix of a float dtype's register type (f16 computes as f32)."""
    return "f64" if dtype.bits == 64 else "f32"


def literal(dtype: DType, value: object) -> str:
    """A C expression of `value` (a Python or numpy scalar) as an element of `dtype`, in its
    register type."""
    if dtype.kind is Kind.BOOL:
        return "1" if value else "0"
    if dtype.kind is Kind.FLOAT:
        return float_literal(dtype, np.asarray(value, dtype.numpy))
    number = int(value)  # type: ignore[call-overload]
    if number == np.iinfo(dtype.numpy).min and dtype.kind is Kind.SIGNED:
        return int_limits(dtype)[0]  # -2147483648 is not a C literal: 2147483648 negated
    if dtype.bits == 64:
        return f"UINT64_C({number})" if dtype.kind is Kind.UNSIGNED else f"INT64_C({number})"
    return f"{number}u" if dtype.kind is Kind.UNSIGNED else str(number)


def float_literal(dtype: DType, value: np.ndarray) -> str:
    """A float constant; nan keeps its bit pattern (sign and payload)."""
    wide = value.astype(np.float64 if dtype.bits == 64 else np.float32)
    if np.isnan(wide):
        bits = int(wide.view(np.uint64 if dtype.bits == 64 else np.uint32))
        return f"jitc_{float_name(dtype)}_from_bits({bits:#x}u)"
    if np.isinf(wide):
        cast = "(double)" if dtype.bits == 64 else "(float)"
        return f"{cast}INFINITY" if wide > 0 else f"-{cast}INFINITY"
    # numpy's shortest text that reads back to the same value of the register type.
    text = repr(float(wide)) if dtype.bits == 64 else str(np.float32(wide))
    if "e" not in text and "." not in text and "n" not in text:
        text += ".0"
    return text + float_suffix(dtype)


# -- identifiers ---------------------------------------------------------------------------

# Names a value must not take: C keywords, what the headers declare that the code uses, and
# the names of the entry function's own variables.
_RESERVED = """
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef
union unsigned void volatile while bool true false main buffers workspace scratch errno NAN
INFINITY isnan isfinite isinf memcpy memset malloc free abs labs fabs fabsf exp expf expm1
expm1f log logf log1p log1pf sqrt sqrtf tanh tanhf sin sinf cos cosf pow powf atan2 atan2f
floor floorf ceil ceilf rint rintf fmod fmodf frexp ldexp round trunc
"""
_KEYWORDS = frozenset(_RESERVED.split())
_GENERATED = re.compile(r"^(?:[taivrkn]\d+|jitc.*|_.*|.*_t|INT.*|UINT.*)$")


def c_identifier(ir_name: str) -> str:
    """The C name of an IR value named `%ir_name`: the same name where it is a safe C
    identifier, `v0` for `%0`, and a `v_` prefix where it would clash with C or with the
    names the generated code uses itself."""
    if ir_name.isdigit():
        return f"v{ir_name}"
    if ir_name in _KEYWORDS or _GENERATED.match(ir_name):
        return f"v_{ir_name}"
    return ir_name


# -- extents ---------------------------------------------------------------------------------

def symbol_variable(symbol: str) -> str:
    """The C `int64_t` holding a symbol's value in the code of a symbolic module
    (docs/dynamic-shapes.md): `d_` and the symbol, a name no other C name of a unit takes."""
    return f"d_{symbol}"


def extent(value: DimLike | str, variable: Callable[[str], str] = symbol_variable) -> str:
    """A C expression of an extent: a static one as its literal, a symbolic one (`2*n`,
    `(n+1)//2`) over the symbols' `int64_t` variables (`variable` names them), in parentheses
    unless it is one name. Text (a C name or expression already) is returned as it is."""
    if isinstance(value, str):
        return value
    if not isinstance(value, Dim):
        return str(value)
    text = ""
    for monomial, coefficient in value.terms:
        alone = len(value.terms) == 1 and len(monomial) == 1 and abs(coefficient) == 1
        factors = [_atom(a, variable) if alone or isinstance(a, str)
                   else f"({_atom(a, variable)})" for a in monomial]
        if abs(coefficient) != 1 or not factors:
            factors.insert(0, str(abs(coefficient)))
        term = " * ".join(factors)
        if not text:
            text = f"-{term}" if coefficient < 0 else term
        elif coefficient < 0:
            text += f" - {term}"
        else:
            text += f" + {term}"
    return text if text.isidentifier() else f"({text})"


def _atom(atom: str | FloorDiv, variable: Callable[[str], str]) -> str:
    if isinstance(atom, str):
        return variable(atom)
    numerator, k = extent(atom.numerator, variable), atom.divisor
    if symbolic.implied(symbolic.at_least(atom.numerator, 0), ()):
        return f"{numerator} / {k}"  # C's division truncates: the floor, for n >= 0
    return f"{numerator} >= 0 ? {numerator} / {k} : -(({k - 1} - {numerator}) / {k})"


def offset(t: TensorType, index: Sequence[str]) -> str:
    """The element offset of a logical index (atoms: names or integer literals)."""
    terms = []
    for i, stride in zip(index, t.strides):
        if i == "0" or stride == 0:
            continue
        terms.append(i if stride == 1 else f"{i} * {extent(stride)}")
    return " + ".join(terms) or "0"


def physical_order(t: TensorType) -> list[int]:
    """Dimensions from the most major to the most minor."""
    return list(reversed(t.layout))


# -- the writer ----------------------------------------------------------------------------

class Writer:
    """Lines of C with indentation. Each `block` is a C scope: values computed inside it are
    remembered (`remember`/`recall`) until it closes, so one element of a fused value is
    computed once however many consumers read it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self._scopes: list[dict[object, str]] = [{}]
        self._counters: dict[str, int] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def comment(self, text: str) -> None:
        self.line("// " + text.replace("\n", " "))

    def comment_definition(self, name: str, text: str) -> None:
        """Put a comment above the statement that defines `name`, when there is one (an op
        that only moves indices, such as a transpose, has none)."""
        pattern = f" {name} = "
        for n in range(len(self.lines) - 1, -1, -1):
            line = self.lines[n]
            if line.lstrip().startswith("const ") and pattern in line:
                indent = line[:len(line) - len(line.lstrip())]
                self.lines.insert(n, indent + "// " + text.replace("\n", " "))
                return
            if line.strip() in ("{", "}") or line.rstrip().endswith(("{", "}")):
                return

    def wrap_definition(self, name: str, function: str) -> bool:
        """Rewrite the last line, when it defines `name`, to apply `function` to its value
        (`t = f(x);` becomes `t = g(f(x));`); False when it does not define `name`."""
        if not self.lines:
            return False
        line = self.lines[-1]
        head, sep, expression = line.partition(f" {name} = ")
        if not sep or not head.lstrip().startswith("const ") or not expression.endswith(";"):
            return False
        self.lines[-1] = f"{head}{sep}{function}({expression[:-1]});"
        return True

    def fresh(self, prefix: str) -> str:
        n = self._counters.get(prefix, 0)
        self._counters[prefix] = n + 1
        return f"{prefix}{n}"

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.line(header + " {")
        self.depth += 1
        self._scopes.append({})
        try:
            yield
        finally:
            self._scopes.pop()
            self.depth -= 1
            self.line("}")

    @contextmanager
    def loop(self, start: DimLike | str, stop: DimLike | str) -> Iterator[str]:
        """`for (int64_t i = start; i < stop; i++)`; yields the counter's name. A symbolic
        bound is a run-time trip count (the loop stays a simple counted one, which the C
        compiler vectorizes with a remainder loop)."""
        i = self.fresh("i")
        with self.block(f"for (int64_t {i} = {extent(start)}; {i} < {extent(stop)}; {i}++)"):
            yield i

    def remember(self, key: object, name: str) -> None:
        self._scopes[-1][key] = name

    def recall(self, key: object) -> str | None:
        for scope in reversed(self._scopes):
            found = scope.get(key)
            if found is not None:
                return found
        return None


def loop_nest(w: Writer, bounds: Sequence[tuple[DimLike | str, DimLike | str]],
              body: Callable[[list[str]], None]) -> None:
    """Nested loops over (start, stop) pairs, outermost first; body gets the counters. A
    level with the bounds (0, 1) is no loop at all: its counter is the literal 0."""
    def level(k: int, counters: list[str]) -> None:
        if k == len(bounds):
            body(counters)
            return
        start, stop = bounds[k]
        if (start, stop) == (0, 1):
            level(k + 1, counters + ["0"])
            return
        with w.loop(start, stop) as i:
            level(k + 1, counters + [i])
    level(0, [])
