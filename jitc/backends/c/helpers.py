"""The small C functions generated code calls, each defined once and emitted only when used.

They spell out the IR's semantics where C leaves something undefined or different: integer
division by zero, shifts by out-of-range amounts, saturating float to integer conversion,
signed overflow (wraps, computed in the unsigned type), float16 (stored as bits), and
nan-propagating max/min. `HELPERS[name]` is `(C source, names it depends on)`.
"""

from __future__ import annotations

from jitc.ir import dtypes
from jitc.ir.dtypes import DType, Kind

from .cgen import int_limits, register_type, unsigned_type, wrapping_type
from .parallel import POOL, POOL_SOURCE
from .vmath import HELPER_SOURCES

HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {}


def _define(name: str, source: str, *deps: str) -> None:
    HELPERS[name] = (source.strip("\n"), deps)


# -- float16: bits in memory, float in registers -----------------------------------------------

_define("jitc_h2f", """
/* float16 bits -> float (exact). */
static float jitc_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu, bits;
    float f;
    if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24 */
        f = (float)mantissa * 5.9604644775390625e-08f;
        return sign ? -f : f;
    }
    if (exponent == 31) bits = sign | 0x7f800000u | (mantissa << 13); /* inf, nan */
    else bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    memcpy(&f, &bits, sizeof f);
    return f;
}""")
_define("jitc_d2h", """
/* double -> float16 bits, rounded to nearest even (one rounding, from any double). */
static uint16_t jitc_d2h(double d) {
    uint64_t bits;
    double a, m;
    int e;
    memcpy(&bits, &d, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 48) & 0x8000u);
    if ((bits & 0x7fffffffffffffffu) > 0x7ff0000000000000u) /* nan: keep it quiet */
        return (uint16_t)(sign | 0x7e00u | ((bits >> 42) & 0x1ffu));
    a = fabs(d);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00u); /* overflows to inf */
    if (a < 6.103515625e-05) /* below 2^-14: a multiple of 2^-24 (1024 is the smallest normal) */
        return (uint16_t)(sign | (uint16_t)rint(a * 16777216.0));
    frexp(a, &e); /* a = f * 2^e with f in [0.5, 1) */
    m = rint(ldexp(a, 11 - e)); /* 11 significant bits, in [1024, 2048] */
    if (m == 2048.0) {
        m = 1024.0;
        e += 1;
    }
    return (uint16_t)(sign | ((uint16_t)(e + 14) << 10) | ((uint16_t)m - 1024u));
}""")
_define("jitc_rh", """
/* A float rounded to the nearest float16 value: every float16 operation ends with it. */
static float jitc_rh(float x) { return jitc_h2f(jitc_d2h(x)); }""", "jitc_h2f", "jitc_d2h")

# -- floats ----------------------------------------------------------------------------------

for _t, _c, _u, _s in (("f32", "float", "uint32_t", "f"), ("f64", "double", "uint64_t", "")):
    _define(f"jitc_{_t}_from_bits", f"""
static {_c} jitc_{_t}_from_bits({_u} bits) {{
    {_c} x;
    memcpy(&x, &bits, sizeof x);
    return x;
}}""")
    _define(f"jitc_max_{_t}", f"""
/* numpy's maximum: nan if either operand is nan. */
static {_c} jitc_max_{_t}({_c} x, {_c} y) {{
    return isnan(y) ? y : (x > y || isnan(x)) ? x : y;
}}""")
    _define(f"jitc_min_{_t}", f"""
/* numpy's minimum: nan if either operand is nan. */
static {_c} jitc_min_{_t}({_c} x, {_c} y) {{
    return isnan(y) ? y : (x < y || isnan(x)) ? x : y;
}}""")
    _define(f"jitc_sign_{_t}", f"""
/* -1, 0 or 1; nan stays nan and both zeros give +0, as numpy's sign. */
static {_c} jitc_sign_{_t}({_c} x) {{
    return x > 0 ? ({_c})1 : x < 0 ? ({_c})-1 : x == 0 ? ({_c})0 : x;
}}""")
    _define(f"jitc_logistic_{_t}", f"""
/* 1 / (1 + e^-x), with exp taken where it cannot overflow. */
static {_c} jitc_logistic_{_t}({_c} x) {{
    {_c} e = exp{_s}(-fabs{_s}(x));
    return x >= 0 ? 1 / (1 + e) : e / (1 + e);
}}""")

_define("jitc_clamp", """
static int64_t jitc_clamp(int64_t x, int64_t lo, int64_t hi) {
    return x < lo ? lo : x > hi ? hi : x;
}""")


# -- pairwise float64 sums --------------------------------------------------------------------

_define("jitc_cascade_push", """
/* Pairwise summation: level j of `levels` holds the sum of 2^j blocks while bit j of
 * *pushed is set; a new block absorbs the levels below the first clear bit (older first). */
static void jitc_cascade_push(double *levels, uint64_t *pushed, double block) {
    uint64_t n = *pushed;
    int j = 0;
    for (; n & 1u; n >>= 1, j++) block = levels[j] + block;
    levels[j] = block;
    *pushed += 1;
}""")

_define("jitc_cascade_total", """
/* The open block plus the occupied levels, smallest first. */
static double jitc_cascade_total(const double *levels, uint64_t pushed, double open) {
    for (int j = 0; pushed != 0; pushed >>= 1, j++)
        if (pushed & 1u) open = levels[j] + open;
    return open;
}""")


# -- integers --------------------------------------------------------------------------------

def _integer_helpers(dtype: DType) -> None:
    t, u, name = register_type(dtype), unsigned_type(dtype), dtype.name
    w = wrapping_type(dtype)
    bits = dtype.bits
    signed = dtype.kind is Kind.SIGNED
    lo, hi = int_limits(dtype)
    if signed:
        _define(f"jitc_div_{name}", f"""
/* Truncating division; x / 0 is 0 and MIN / -1 wraps to MIN. */
static {t} jitc_div_{name}({t} x, {t} y) {{
    if (y == 0) return 0;
    if (y == -1) return ({t})(0u - ({w})x);
    return ({t})(x / y);
}}""")
        _define(f"jitc_rem_{name}", f"""
/* Remainder with the sign of x; x rem 0 is 0. */
static {t} jitc_rem_{name}({t} x, {t} y) {{
    if (y == 0 || y == -1) return 0;
    return ({t})(x % y);
}}""")
    else:
        _define(f"jitc_div_{name}", f"""
static {t} jitc_div_{name}({t} x, {t} y) {{ return y == 0 ? 0 : ({t})(x / y); }}""")
        _define(f"jitc_rem_{name}", f"""
static {t} jitc_rem_{name}({t} x, {t} y) {{ return y == 0 ? 0 : ({t})(x % y); }}""")
    negative = """
    if (y < 0) return x == 1 ? 1 : x == -1 ? (y % 2 != 0 ? -1 : 1) : 0; /* 1 / x^-y */""" \
        if signed else ""
    _define(f"jitc_pow_{name}", f"""
/* x^y by squaring, wrapping on overflow. */
static {t} jitc_pow_{name}({t} x, {t} y) {{{negative}
    {w} result = 1, base = ({w})x, e = ({u})y;
    for (; e != 0; e >>= 1) {{
        if (e & 1u) result = result * base;
        base = base * base;
    }}
    return ({t})result;
}}""")
    _define(f"jitc_shl_{name}", f"""
/* x << y; 0 when y is negative or not below {bits}. */
static {t} jitc_shl_{name}({t} x, {t} y) {{
    return ({u})y < {bits}u ? ({t})(({w})x << ({u})y) : 0;
}}""")
    _define(f"jitc_shrl_{name}", f"""
/* x >> y filling with zeros; 0 when y is out of range. */
static {t} jitc_shrl_{name}({t} x, {t} y) {{
    return ({u})y < {bits}u ? ({t})(({u})x >> ({u})y) : 0;
}}""")
    arithmetic = f"""
    if (({u})y >= {bits}u) return x < 0 ? -1 : 0;
    return x < 0 ? ({t})~(~x >> y) : ({t})(x >> y);""" if signed else f"""
    return ({u})y < {bits}u ? ({t})(x >> y) : 0;"""
    _define(f"jitc_shra_{name}", f"""
/* x >> y filling with the sign bit (without relying on C's signed shift). */
static {t} jitc_shra_{name}({t} x, {t} y) {{{arithmetic}
}}""")
    low = "0.0" if not signed else f"{-(2.0 ** (bits - 1))!r}"
    _define(f"jitc_f2i_{name}", f"""
/* Float to {name}: truncates toward zero, saturates at the range, nan gives 0. */
static {t} jitc_f2i_{name}(double x) {{
    if (x != x) return 0;
    if (x <= {low}) return {lo};
    if (x >= {2.0 ** (bits - 1 if signed else bits)!r}) return {hi};
    return ({t})x;
}}""")


for _dtype in dtypes.INTS:
    _integer_helpers(_dtype)

for _int, _float in (("i32", "f32"), ("u32", "f32"), ("i64", "f64"), ("u64", "f64")):
    for _src, _dst in ((_int, _float), (_float, _int)):
        _st = register_type(dtypes.by_name(_src))
        _dt = register_type(dtypes.by_name(_dst))
        _define(f"jitc_bitcast_{_src}_{_dst}", f"""
static {_dt} jitc_bitcast_{_src}_{_dst}({_st} x) {{
    {_dt} y;
    memcpy(&y, &x, sizeof y);
    return y;
}}""")


_define(POOL, POOL_SOURCE)
for _name, _source in HELPER_SOURCES.items():
    _define(_name, _source)


def preamble(used: set[str]) -> str:
    """The definitions of the helpers in `used` and of everything they call, each once, in
    dependency order."""
    needed: list[str] = []

    def visit(name: str) -> None:
        if name in needed:
            return
        for dep in HELPERS[name][1]:
            visit(dep)
        needed.append(name)
    for name in sorted(used):
        visit(name)
    return "\n\n".join(HELPERS[name][0] for name in needed)


__all__ = ["HELPERS", "preamble"]
