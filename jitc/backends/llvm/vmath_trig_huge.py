"""The exact argument reduction of sin/cos for huge |x| (Payne-Hanek), off the fast path.

Cody-Waite reduction (vmath_trig.py) needs the quadrant count x * 2/pi exact in the working
precision: |x| < 2^24 (f32), 2^48 (f64). Past that, x = M * 2^E (M the integer significand)
is reduced exactly: only the bits of 2/pi worth less than 2^(1-E) matter modulo 4, since the
others multiply M into multiples of 4. A window of W bits of 2/pi starting there, times M,
modulo 2^W, is x * 2/pi mod 4 as a fixed-point number with 2 integer bits: the quadrant and
a fraction f whose W - 2 bits cover the worst cancellation of the precision (the nearest a
float comes to a multiple of pi/2 is ~2^-29 relative for f32, ~2^-61 for f64), so that
r = f * pi/2 keeps full precision. Integer arithmetic is 32-bit limbs in i64 products,
which every target (x86, NVPTX) has.

How it stays off the fast path: the kernel computes both reductions' inputs and selects,
but the huge one is a call to `jitc_vmath_<fn>_huge_<type>`, which returns at once unless
its argument is huge. On the CPU the loop vectorizer needs a vector form of that call: the
function names vector variants (the `vector-function-abi-variant` attribute, LLVM's
VFABI), one per vector width, each of which tests all its lanes at once and only then runs
the scalar reduction lane by lane. On NVPTX, where nothing is vectorized, the function is
simply inlined, so the test is a branch around the slow code.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

from llvmlite import ir

from .types import declare
from .vmath_base import MathBuilder, Value, type_tag

# |x| from which the quadrant count is no longer exact in Cody-Waite (float, double).
HUGE = {32: 2.0**24, 64: 2.0**48}
# Fixed-point bits of x * 2/pi mod 4: 32-bit limbs.
LIMBS = {32: 3, 64: 6}
# Zero bits in front of 2/pi's table, so that the window of the smallest huge x starts in it.
PAD = 32
# Vector widths that get a vector variant (lanes of f32 / f64).
VECTOR_WIDTHS = {32: (4, 8, 16), 64: (2, 4, 8)}
I32, I64 = ir.IntType(32), ir.IntType(64)

Evaluate = Callable[[MathBuilder, Value, Value, Value, int], Value]


@cache
def two_over_pi_words(bits: int) -> tuple[int, ...]:
    """PAD zero bits, then the bits of 2/pi after the binary point, as 32-bit words: enough
    for the window of the largest finite x of the precision, plus one word of slack."""
    max_e = (1023 - 52) if bits == 64 else (127 - 23)
    needed = max_e + PAD + 32 * LIMBS[bits] + 64
    words = needed // 32 + 2
    fraction = _two_over_pi(32 * words)  # floor(2/pi * 2^(32 * words))
    table = (fraction >> PAD)
    return tuple((table >> (32 * (words - 1 - k))) & 0xFFFFFFFF for k in range(words))


def _two_over_pi(bits: int) -> int:
    """floor(2/pi * 2^bits), from Machin's formula in integers with guard bits."""
    guard = 64
    one = 1 << (bits + guard)

    def arctan_inverse(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total
    pi = 16 * arctan_inverse(5) - 4 * arctan_inverse(239)
    return ((2 * one * one) // pi) >> guard


def _table(module: ir.Module, bits: int) -> ir.GlobalVariable:
    name = f"jitc_vmath_two_over_pi_{bits}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    words = two_over_pi_words(bits)
    table = ir.GlobalVariable(module, ir.ArrayType(I32, len(words)), name)
    table.initializer = ir.Constant(table.value_type, list(words))
    table.global_constant = True
    table.linkage = "internal"
    return table


def _reduce_exactly(m: MathBuilder, x: Value) -> tuple[Value, Value, Value]:
    """(r, r_lo, q) with x = q*pi/2 + r + r_lo (mod 2pi), |r| <= pi/4, q an i32, for a
    scalar finite x with |x| >= HUGE."""
    b, bits = m.b, m.bits
    limbs = LIMBS[bits]
    mask32 = ir.Constant(I64, 0xFFFFFFFF)
    raw = b.zext(m.to_bits(m.fabs(x)), I64) if bits == 32 else m.to_bits(m.fabs(x))
    biased = b.lshr(raw, ir.Constant(I64, m.mant_bits))
    significand = b.or_(b.and_(raw, ir.Constant(I64, (1 << m.mant_bits) - 1)),
                        ir.Constant(I64, 1 << m.mant_bits))
    # x = M * 2^E; the window starts at the bit of 2/pi worth 2^(1-E) (table index E-2+PAD).
    start = b.add(biased, ir.Constant(I64, PAD - 2 - m.exp_bias - m.mant_bits))
    word = b.lshr(start, ir.Constant(I64, 5))
    shift = b.sub(ir.Constant(I64, 32), b.and_(start, ir.Constant(I64, 31)))
    table = _table(b.module, bits)

    def table_word(k: int) -> ir.Value:
        at = b.add(word, ir.Constant(I64, k))
        pointer = b.gep(table, [ir.Constant(I64, 0), at], inbounds=True)
        return b.zext(b.load(pointer, typ=I32), I64)
    words = [table_word(k) for k in range(limbs + 1)]
    # The window's limbs, least significant first.
    window = [b.and_(b.lshr(b.or_(b.shl(words[k], ir.Constant(I64, 32)), words[k + 1]), shift),
                     mask32) for k in reversed(range(limbs))]
    factors = [significand] if bits == 32 else \
        [b.and_(significand, mask32), b.lshr(significand, ir.Constant(I64, 32))]
    # M * window mod 2^(32 * limbs), schoolbook: each column sum fits in 64 bits.
    product = [ir.Constant(I64, 0)] * limbs
    for i, factor in enumerate(factors):
        carry: ir.Value = ir.Constant(I64, 0)
        for k in range(limbs - i):
            t = b.add(b.add(product[i + k], b.mul(factor, window[k])), carry)
            product[i + k] = b.and_(t, mask32)
            carry = b.lshr(t, ir.Constant(I64, 32))
    top = list(reversed(product))  # most significant first
    integer = b.lshr(top[0], ir.Constant(I64, 30))
    # The fraction: the product shifted left past its two integer bits.
    fraction = [b.and_(b.or_(b.shl(top[k], ir.Constant(I64, 2)),
                             b.lshr(top[k + 1], ir.Constant(I64, 30)) if k + 1 < limbs
                             else ir.Constant(I64, 0)), mask32) for k in range(limbs)]
    # A fraction of 1/2 or more rounds the quadrant up and leaves f - 1: the fraction read
    # as a signed fixed-point number.
    q = b.trunc(b.add(integer, b.lshr(fraction[0], ir.Constant(I64, 31))), I32)
    d = m.like(ir.DoubleType())
    terms = [b.sitofp(b.trunc(fraction[0], I32), d.ty)]
    terms += [b.uitofp(limb, d.ty) for limb in fraction[1:]]
    terms = [d.mul(t, d.const(2.0 ** (-32 * (k + 1)))) for k, t in enumerate(terms)]
    # Summed from the smallest as a double-word: exact except for the final ~2^-106.
    total, error = terms[-1], d.const(0.0)
    for t in reversed(terms[:-1]):
        total, e = d.two_sum(total, t)
        error = d.add(error, e)
    f_hi, f_lo = d.fast_two_sum(total, error)
    pio2_hi, pio2_lo = math.pi / 2, 6.123233995736766e-17
    r_hi, r_err = d.two_prod(f_hi, d.const(pio2_hi))
    r_err = d.add(r_err, d.fma(f_hi, d.const(pio2_lo), d.mul(f_lo, d.const(pio2_hi))))
    r_hi, r_lo = d.fast_two_sum(r_hi, r_err)
    if bits == 32:
        r = b.fptrunc(r_hi, m.ty)
        r_lo = b.fptrunc(d.add(d.sub(r_hi, b.fpext(r, d.ty)), r_lo), m.ty)
        r_hi = r
    # sin and cos are odd and even: reduce |x|, then give r the sign of x (q counts backwards).
    negative = m.cmp("<", x, m.const(0.0))
    r_hi = m.select(negative, m.neg(r_hi), r_hi)
    r_lo = m.select(negative, m.neg(r_lo), r_lo)
    q = b.select(negative, b.sub(ir.Constant(I32, 0), q), q)
    return r_hi, r_lo, q


def _is_huge(m: MathBuilder, x: ir.Value, bits: int) -> ir.Value:
    """Per lane: |x| is finite and too large for the fast (Cody-Waite) reduction."""
    magnitude = m.fabs(x)
    return m.and_(m.cmp(">=", magnitude, m.const(HUGE[bits])),
                  m.cmp("<", magnitude, m.const(math.inf)))


def _scalar_function(module: ir.Module, ty: ir.Type, quadrant_offset: int,
                     evaluate: Evaluate) -> ir.Function:
    """The scalar reduction and polynomial: 0 at once unless |x| is huge and finite."""
    bits = 64 if isinstance(ty, ir.DoubleType) else 32
    name = f"jitc_vmath_{('sin', 'cos')[quadrant_offset]}_huge_{type_tag(ty)}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ty, [ty]), name)
    fn.linkage = "internal"
    for attr in ("nounwind", "readnone"):
        fn.attributes.add(attr)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    m = MathBuilder(b, ty)
    (x,) = fn.args
    huge = _is_huge(m, x, bits)
    with b.if_then(b.not_(huge)):
        b.ret(m.const(0.0))
    r, r_lo, q = _reduce_exactly(m, x)
    b.ret(evaluate(m, r, r_lo, q, quadrant_offset))
    return fn


def _vector_variant(module: ir.Module, scalar: ir.Function, ty: ir.Type, lanes: int
                    ) -> ir.Function:
    """`scalar` over `lanes` lanes: one test of all lanes, the scalar calls only if any
    lane is huge."""
    bits = 64 if isinstance(ty, ir.DoubleType) else 32
    vector = ir.VectorType(ty, lanes)
    name = f"{scalar.name}_v{lanes}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(vector, [vector]), name)
    # Nothing calls a variant until the loop vectorizer does: internal, global DCE would
    # delete it before that. weak_odr keeps it, and copies in several modules merge.
    fn.linkage = "weak_odr"
    # The loop around the call keeps its constants in vector registers: a convention
    # that preserves them (the fast exit touches almost none) keeps the call cheap.
    fn.calling_convention = "preserve_allcc"
    for attr in ("nounwind", "alwaysinline"):
        fn.attributes.add(attr)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    m = MathBuilder(b, vector)
    (x,) = fn.args
    huge = _is_huge(m, x, bits)
    bool_vector = ir.VectorType(ir.IntType(1), lanes)
    reduce_or = declare(module, f"llvm.vector.reduce.or.v{lanes}i1",
                        ir.FunctionType(ir.IntType(1), [bool_vector]))
    with b.if_then(b.not_(b.call(reduce_or, [huge])), likely=True):
        b.ret(ir.Constant(vector, None))
    result: ir.Value = ir.Constant(vector, None)
    for lane in range(lanes):
        index = ir.Constant(I32, lane)
        value = b.call(scalar, [b.extract_element(x, index)])
        result = b.insert_element(result, value, index)
    b.ret(result)
    return fn


def call_huge(m: MathBuilder, x: Value, quadrant_offset: int, evaluate: Evaluate) -> Value:
    """sin (offset 0) or cos (offset 1) of the lanes of `x` with huge |x|; other lanes
    get 0 (the caller selects)."""
    module = m.b.module
    ty = m.ty.element if m.lanes else m.ty
    fn = _scalar_function(module, ty, quadrant_offset, evaluate)
    if m.lanes:
        return m.b.call(_vector_variant(module, fn, ty, m.lanes), [x])
    if module.triple.startswith("nvptx"):
        return m.b.call(fn, [x])  # inlined: the early return branches around the slow code
    fn.attributes.add("noinline")
    widths = VECTOR_WIDTHS[m.bits]
    variants = [_vector_variant(module, fn, ty, n) for n in widths]
    call = m.b.call(fn, [x])
    # On the call, not the function: the variants call it too, and the SLP vectorizer would
    # turn a variant's lane calls into a call of the variant itself. llvmlite knows no
    # string attributes; the set underneath prints any.
    mangled = ",".join(f"_ZGV_LLVM_N{n}v_{fn.name}({v.name})" for n, v in zip(widths, variants))
    set.add(call.attributes, f'"vector-function-abi-variant"="{mangled}"')
    return call
