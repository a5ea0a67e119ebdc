"""Symbolic dimensions: extents known only when the program is called (see
docs/dynamic-shapes.md).

A static dimension stays a plain `int`. A symbolic one is a `Dim`: a polynomial with integer
coefficients whose variables ("atoms") are symbols (`n`) and floor divisions of a polynomial
by a positive constant (`(n+1)//2`). Arithmetic between ints and Dims gives an int whenever the
result no longer depends on a symbol, so shape rules can be written once for both.

A `Constraint` is a fact about symbols (`n == m`, `n >= 2`, `n % 8 == 0`) that a shape rule
needed and could not prove; the call checks it. Rules ask for facts through `require`, which
answers from the active scope: `recording()` adds what is missing, `checking(known)` accepts
only what `known` implies.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import operator
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np


class ConstraintError(ValueError):
    """A shape rule needs a fact about symbols that the active scope does not grant."""


class UnknownDimensionError(TypeError):
    """Python code asked for the value of a symbolic dimension (`if n > 1`, `int(n)`), which
    only the call decides."""


@dataclass(frozen=True, slots=True)
class FloorDiv:
    """`numerator // divisor` as one variable of a polynomial (divisor > 1)."""

    numerator: Dim
    divisor: int

    def __str__(self) -> str:
        text = str(self.numerator)
        if not _is_symbol(self.numerator):
            text = f"({text})"
        return f"{text}//{self.divisor}"


Atom = str | FloorDiv
Monomial = tuple[Atom, ...]
Terms = dict[Monomial, int]


def _atom_key(atom: Atom) -> tuple[int, str]:
    return (0, atom) if isinstance(atom, str) else (1, str(atom))


def _term_key(item: tuple[Monomial, int]) -> tuple:
    monomial = item[0]
    return (-len(monomial), [_atom_key(a) for a in monomial])


@dataclass(frozen=True, slots=True)
class Dim:
    """A symbolic extent; `terms` are (monomial, coefficient) pairs in canonical order, at
    least one of them non-constant. Build with `symbol`, arithmetic or
    `jitc.ir.dim_text.parse_dim`."""

    terms: tuple[tuple[Monomial, int], ...]

    # Arithmetic: int or Dim in, int or Dim out. With a float (or `/`, `**`, a numpy
    # function) the result is no extent: inside a trace it is the call's value (`value_of`).
    def __add__(self, other: object) -> object:
        return _combine(self, other, 1) if _is_dim_like(other) else _value(self, "+", other)

    def __radd__(self, other: object) -> object:
        return _combine(self, other, 1) if _is_dim_like(other) else _value(other, "+", self)

    def __sub__(self, other: object) -> object:
        return _combine(self, other, -1) if _is_dim_like(other) else _value(self, "-", other)

    def __rsub__(self, other: object) -> object:
        return _combine(-self, other, 1) if _is_dim_like(other) else _value(other, "-", self)

    def __neg__(self) -> Dim:
        return Dim(tuple((m, -c) for m, c in self.terms))

    def __mul__(self, other: object) -> object:
        return _multiply(self, other) if _is_dim_like(other) else _value(self, "*", other)

    def __rmul__(self, other: object) -> object:
        return _multiply(self, other) if _is_dim_like(other) else _value(other, "*", self)

    def __pow__(self, exponent: object) -> object:
        if isinstance(exponent, int) and not isinstance(exponent, bool) and exponent >= 0:
            power: DimLike = 1
            for _ in range(exponent):
                power = _multiply(self, power)  # type: ignore[assignment]
            return power
        if isinstance(exponent, int) and not isinstance(exponent, bool):
            require(at_least(self, 1), f"{self} ** {exponent}")  # 0 ** -k raises in Python
            exponent = float(exponent)
        return _value(self, "**", exponent)

    def __rpow__(self, base: object) -> object:
        if isinstance(base, int) and not isinstance(base, (bool, np.generic)):
            # A Python int's power has no bound; int64 values would wrap where Python's don't.
            raise UnknownDimensionError(f"{base} ** {self} is a Python int of unbounded size "
                                        f"at the call; write {base}.0 ** {self} for a float")
        return _value(base, "**", self)

    def __array_ufunc__(self, ufunc: object, method: str, *inputs: object,
                        **kwargs: object) -> object:
        if value_of is None:
            raise UnknownDimensionError(f"numpy.{getattr(ufunc, '__name__', ufunc)} of the "
                                        f"symbolic dimension {self} is not known until the call")
        values = [value_of(v) if isinstance(v, Dim) else v for v in inputs]
        return getattr(ufunc, method)(*values, **kwargs)

    def __floordiv__(self, divisor: object) -> int | Dim:
        if not isinstance(divisor, int) or isinstance(divisor, bool):
            return NotImplemented
        return floor_divide(self, divisor)

    def __mod__(self, divisor: object) -> int:
        """The remainder when every non-constant coefficient is a multiple of `divisor`
        (`(784*n) % 28` is 0); otherwise it depends on the call, and TypeError says so."""
        if not isinstance(divisor, int) or isinstance(divisor, bool) or divisor < 1:
            return NotImplemented
        terms = _terms(self)
        if any(c % divisor for m, c in terms.items() if m):
            raise UnknownDimensionError(f"{self} % {divisor} depends on the value of the "
                                        "symbolic dimension, which is not known until the call")
        return terms.get((), 0) % divisor

    def __bool__(self) -> bool:
        raise UnknownDimensionError(f"whether the symbolic dimension {self} is zero is not "
                                    "known until the call")

    # Equality is structural: the compiler asks whether two extents are the same expression
    # (so equal at every call). Code being traced asks about the call's values instead
    # (`if x.shape[0] == 5:`, `{3: a}.get(n)`): an answer that holds for every size is
    # given, any other raises, so the trace never takes a branch that a size would not.
    def __eq__(self, other: object) -> bool:
        return self._equals(other)

    def __ne__(self, other: object) -> bool:
        equal = self._equals(other)
        return equal if equal is NotImplemented else not equal

    def _equals(self, other: object) -> bool:
        if isinstance(other, Dim):
            same = self.terms == other.terms
        elif _is_number(other):
            same = False
        else:
            return NotImplemented
        if not same and _asked_by_traced_code(depth=3):
            difference = self - other if _is_dim_like(other) else None
            if _is_dim_like(other) and implied(equal(self, other), known_constraints()):
                return True  # `x.shape[0] == y.shape[0]` after `x + y` recorded it
            if not (isinstance(difference, int) or _never_zero(difference)):
                raise UnknownDimensionError(f"whether the symbolic dimension {self} equals "
                                            f"{other} is not known until the call")
        return same

    def __hash__(self) -> int:
        if _asked_by_traced_code(depth=2):
            raise UnknownDimensionError(f"the symbolic dimension {self} is used as a dict or "
                                        "set key, which needs its value, not known until the "
                                        "call")
        return hash(self.terms)

    def _difference(self, other: object) -> int:
        """`self - other` when it is the same for every size (`n+1` and `n`: 1); else the
        order is not known until the call."""
        if not _is_number(other):
            return NotImplemented  # type: ignore[return-value]
        difference = self - other if _is_dim_like(other) else None
        if not isinstance(difference, int):
            raise UnknownDimensionError(f"how the symbolic dimension {self} compares with "
                                        f"{other} is not known until the call")
        return difference

    def __lt__(self, other: object) -> bool:
        d = self._difference(other)
        return d if d is NotImplemented else d < 0

    def __le__(self, other: object) -> bool:
        d = self._difference(other)
        return d if d is NotImplemented else d <= 0

    def __gt__(self, other: object) -> bool:
        d = self._difference(other)
        return d if d is NotImplemented else d > 0

    def __ge__(self, other: object) -> bool:
        d = self._difference(other)
        return d if d is NotImplemented else d >= 0

    def _unknown_remainder(self, other: object) -> object:
        if not _is_number(other):
            return NotImplemented
        raise UnknownDimensionError(f"a remainder or quotient of {other} and the symbolic "
                                    f"dimension {self} is not known until the call")

    __rmod__ = __rfloordiv__ = __rdivmod__ = _unknown_remainder

    def __divmod__(self, divisor: object) -> object:
        if isinstance(divisor, int) and not isinstance(divisor, bool) and divisor >= 1:
            return self // divisor, self % divisor
        return self._unknown_remainder(divisor)

    def _unknown_value(self) -> int:
        raise UnknownDimensionError(f"the symbolic dimension {self} has no value until the "
                                    "call, so it cannot be used as a Python number (arithmetic "
                                    "on it, n * 1.0 or n / 2, is its value at the call)")

    __int__ = __index__ = __float__ = _unknown_value  # type: ignore[assignment]

    def __truediv__(self, other: object) -> object:
        return _value(self, "/", other)

    def __rtruediv__(self, other: object) -> object:
        return _value(other, "/", self)

    def __str__(self) -> str:
        text = ""
        for monomial, coefficient in self.terms:
            term = _term_text(monomial, coefficient)
            text += term if not text or term.startswith("-") else "+" + term
        return text

    def __repr__(self) -> str:
        return f"Dim({self})"


DimLike = int | Dim

# A symbolic extent as a value of the active trace (jitc.tracing sets it): what `n / 2`,
# `n * 0.5` or `np.sqrt(n)` compute with, since their results are no extents. It raises
# UnknownDimensionError outside a trace.
value_of: Callable[[Dim], object] | None = None

_OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
              "**": operator.pow}


def _value(a: object, op: str, b: object) -> object:
    """`a op b` where one side is a Dim and the result is no extent: on the call's values."""
    if not _is_number(a) or not _is_number(b):
        return NotImplemented  # a traced operand computes it (an op of the trace)
    if value_of is None:
        raise UnknownDimensionError(f"{a} {op} {b} is not an extent, and the symbolic "
                                    "dimension in it has no value until the call")
    if op == "/" and isinstance(b, Dim) and not isinstance(a, np.generic):
        # Python's `1.0 / n` raises ZeroDivisionError for 0, where the value would be inf.
        require(at_least(b, 1), f"{a} / {b}")
    a, b = (value_of(v) if isinstance(v, Dim) else v for v in (a, b))
    return _OPERATORS[op](a, b)


def _asked_by_traced_code(depth: int) -> bool:
    """Whether the question being asked comes from code that jitc traces (not jitc's own),
    while a trace records constraints: such code means the extents' values at the call.
    `depth`: the asking frame, counted from the caller of this function as 1."""
    active = _ACTIVE.get()
    if active is None or not active.record:
        return False
    name = sys._getframe(depth).f_globals.get("__name__", "")
    return not (name == "jitc" or name.startswith("jitc."))


def _never_zero(value: object) -> bool:
    """Whether the constraints recorded so far prove `value` nonzero at every call."""
    if not isinstance(value, Dim):
        return False
    known = known_constraints()
    return implied(at_least(value, 1), known) or implied(at_least(-value, 1), known)


def _is_number(value: object) -> bool:
    """An int, float, complex (numpy scalars included) or Dim: what Python arithmetic on a
    symbolic extent cannot decide. Other operands (a tracer) get their own say."""
    return isinstance(value, (Dim, int, float, complex, np.number))


def _is_dim_like(value: object) -> bool:
    return isinstance(value, Dim) or (isinstance(value, int) and not isinstance(value, bool))


def _is_symbol(dim: object) -> bool:
    return isinstance(dim, Dim) and len(dim.terms) == 1 and dim.terms[0][1] == 1 \
        and len(dim.terms[0][0]) == 1 and isinstance(dim.terms[0][0][0], str)


def symbol_name(dim: object) -> str | None:
    """The name when `dim` is one bare symbol (`n`), else None."""
    return dim.terms[0][0][0] if _is_symbol(dim) else None  # type: ignore[union-attr,return-value]


def _term_text(monomial: Monomial, coefficient: int) -> str:
    if not monomial:
        return str(coefficient)
    factors = [str(a) if isinstance(a, str) or (len(monomial) == 1 and coefficient == 1)
               else f"({a})" for a in monomial]
    text = "*".join(factors)
    if coefficient == 1:
        return text
    if coefficient == -1:
        return "-" + text
    return f"{coefficient}*{text}"


def _terms(value: DimLike) -> Terms:
    if isinstance(value, Dim):
        return dict(value.terms)
    return {(): value} if value else {}


def _make(terms: Terms) -> DimLike:
    items = [(m, c) for m, c in terms.items() if c]
    if all(not m for m, _ in items):
        return sum((c for _, c in items), 0)
    return Dim(tuple(sorted(items, key=_term_key)))


def _combine(a: DimLike, b: object, sign: int) -> DimLike:
    terms = _terms(a)
    for monomial, coefficient in _terms(b).items():  # type: ignore[arg-type]
        terms[monomial] = terms.get(monomial, 0) + sign * coefficient
    return _make(terms)


def _multiply(a: DimLike, b: object) -> DimLike:
    terms: Terms = {}
    for ma, ca in _terms(a).items():
        for mb, cb in _terms(b).items():  # type: ignore[arg-type]
            monomial = tuple(sorted(ma + mb, key=_atom_key))
            terms[monomial] = terms.get(monomial, 0) + ca * cb
    return _make(terms)


def floor_divide(value: DimLike, divisor: int) -> DimLike:
    """`value // divisor` for a positive divisor; the multiples of `divisor` in each
    coefficient come out of the division, so `(8*n+3)//8` is `n`."""
    if divisor < 1:
        raise ValueError(f"a symbolic dimension can only be divided by a positive integer, "
                         f"not {divisor}")
    if divisor == 1:
        return value
    if isinstance(value, int):
        return value // divisor
    whole: Terms = {}
    rest: Terms = {}
    for monomial, coefficient in value.terms:
        quotient, remainder = divmod(coefficient, divisor)
        whole[monomial] = quotient
        rest[monomial] = remainder
    remainder_dim = _make(rest)
    if isinstance(remainder_dim, int):
        return _make(whole) + remainder_dim // divisor
    return _combine(_make(whole), Dim((((FloorDiv(remainder_dim, divisor),), 1),)), 1)


def exact_quotient(value: DimLike, divisor: DimLike) -> DimLike | None:
    """`value / divisor` when it is a polynomial for every size (`768*n` by `n` is 768,
    `n*s` by `s` is `n`), else None. A divisor of several terms divides only itself."""
    if isinstance(divisor, int):
        if divisor == 0:
            return None
        factors: Monomial = ()
        scale = divisor
    elif _terms(value) == _terms(divisor):
        return 1
    elif len(divisor.terms) != 1:
        return None
    else:
        ((factors, scale),) = divisor.terms
    quotient: Terms = {}
    for monomial, coefficient in _terms(value).items():
        rest = list(monomial)
        for atom in factors:
            if atom not in rest:
                return None
            rest.remove(atom)
        if coefficient % scale:
            return None
        quotient[tuple(rest)] = coefficient // scale
    return _make(quotient)


def ceil_divide(value: DimLike, divisor: int) -> DimLike:
    return floor_divide(value + (divisor - 1), divisor)


def symbol(name: str) -> Dim:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"a symbol is an identifier, not {name!r}")
    return Dim((((name,), 1),))


def is_static(dim: object) -> bool:
    return not isinstance(dim, Dim)


def at_most(value: object, bound: int) -> bool:
    """Whether an extent is known to be at most `bound`. A symbol has no upper bound, so a
    symbolic extent is never small: passes that choose by size take their general path for it
    (docs/dynamic-shapes.md, "treat a symbol as large")."""
    return is_static(value) and value <= bound  # type: ignore[operator]


def symbols_of(value: object) -> set[str]:
    """Every symbol in a dimension, or in a (nested) tuple of dimensions."""
    found: set[str] = set()
    if isinstance(value, Dim):
        for monomial, _ in value.terms:
            for atom in monomial:
                found |= {atom} if isinstance(atom, str) else symbols_of(atom.numerator)
    elif isinstance(value, (tuple, list)):
        for item in value:
            if not isinstance(item, int):  # the common case, a static extent, has none
                found |= symbols_of(item)
    return found


def evaluate(value: DimLike, env: Mapping[str, int]) -> int:
    """The integer a dimension has once its symbols are bound (KeyError for an unbound one)."""
    if isinstance(value, int):
        return value
    total = 0
    for monomial, coefficient in value.terms:
        product = coefficient
        for atom in monomial:
            product *= env[atom] if isinstance(atom, str) else \
                evaluate(atom.numerator, env) // atom.divisor
        total += product
    return total


def substitute(value: object, env: Mapping[str, int]) -> object:
    """`value` with every Dim inside it (it may be a nested tuple) evaluated."""
    if isinstance(value, Dim):
        return evaluate(value, env)
    if isinstance(value, tuple):
        return tuple(substitute(v, env) for v in value)
    return value


# -- constraints ------------------------------------------------------------------------------
RELATIONS = ("==", ">=", "%")


@dataclass(frozen=True, slots=True)
class Constraint:
    """`lhs == rhs`, `lhs >= rhs`, or `lhs % rhs == 0` (relation "%", rhs a positive int)."""

    relation: str
    lhs: DimLike
    rhs: DimLike

    def __str__(self) -> str:
        if self.relation == "%":
            return f"{self.lhs} % {self.rhs} == 0"
        return f"{self.lhs} {self.relation} {self.rhs}"

    @property
    def symbols(self) -> set[str]:
        return symbols_of((self.lhs, self.rhs))

    def holds(self, env: Mapping[str, int]) -> bool:
        lhs, rhs = evaluate(self.lhs, env), evaluate(self.rhs, env)
        if self.relation == "==":
            return lhs == rhs
        if self.relation == ">=":
            return lhs >= rhs
        return lhs % rhs == 0


def equal(a: DimLike, b: DimLike) -> Constraint:
    """`a == b`, written with a symbolic side first and otherwise in text order."""
    if isinstance(a, int) or (isinstance(b, Dim) and str(b) < str(a)):
        a, b = b, a
    return Constraint("==", a, b)


def at_least(a: DimLike, b: DimLike) -> Constraint:
    """`a >= b`; against a constant, the constant terms move right and a common factor
    divides out (`n-1 >= 0` and `3*n >= 1` are `n >= 1`)."""
    if isinstance(b, int) and isinstance(a, Dim):
        offset = _terms(a).get((), 0)
        a, b = a - offset, b - offset
        factor = math.gcd(*(c for _, c in a.terms))  # type: ignore[union-attr]
        if factor > 1:
            a, b = exact_quotient(a, factor), -(-b // factor)  # type: ignore[assignment]
    return Constraint(">=", a, b)


def divisible(a: DimLike, k: int) -> Constraint:
    return Constraint("%", a, k)


def _rational(value: DimLike, known: Iterable[Constraint]) -> dict[Monomial, Fraction]:
    """`value` as a polynomial with rational coefficients in which each `e//k` known to
    divide exactly (a declared `e % k == 0`) is replaced by `e/k`."""
    exact = {(c.lhs, c.rhs) for c in known if c.relation == "%"}
    result: dict[Monomial, Fraction] = {}
    for monomial, coefficient in _terms(value).items():
        product: dict[Monomial, Fraction] = {(): Fraction(coefficient)}
        for atom in monomial:
            if isinstance(atom, FloorDiv) and (atom.numerator, atom.divisor) in exact:
                factor = {m: Fraction(c, atom.divisor) for m, c in _terms(atom.numerator).items()}
            else:
                factor = {(atom,): Fraction(1)}
            product = {tuple(sorted(ma + mb, key=_atom_key)): ca * cb
                       for ma, ca in product.items() for mb, cb in factor.items()}
        for m, c in product.items():
            result[m] = result.get(m, Fraction(0)) + c
    return {m: c for m, c in result.items() if c}


def _rewrite(value: DimLike, known: Iterable[Constraint]) -> DimLike:
    """`value` with each symbol that a known `symbol == expression` names replaced."""
    rules = {symbol_name(c.lhs): c.rhs for c in known
             if c.relation == "==" and symbol_name(c.lhs) is not None}
    for _ in range(len(rules)):
        if isinstance(value, int):
            break
        replaced: DimLike = 0
        for monomial, coefficient in value.terms:
            product: DimLike = coefficient
            for atom in monomial:
                product = product * (rules.get(atom, symbol(atom)) if isinstance(atom, str)
                                     else Dim((((atom,), 1),)))
            replaced = replaced + product
        if replaced == value:
            break
        value = replaced
    return value


def _without_subtracted_quotients(terms: dict[Monomial, Fraction],
                                  known: tuple[Constraint, ...]) -> dict[Monomial, Fraction]:
    """`terms` with each subtracted `e//k` replaced by `e/k`, which is at least as large
    (`n - (n+1)//2` is at least `n/2 - 1/2`): a lower bound of the result bounds `terms`."""
    out: dict[Monomial, Fraction] = {}
    for monomial, coefficient in terms.items():
        if coefficient < 0 and len(monomial) == 1 and isinstance(monomial[0], FloorDiv):
            atom = monomial[0]
            for inner, c in _rational(atom.numerator, known).items():
                out[inner] = out.get(inner, Fraction(0)) + coefficient * c / atom.divisor
        else:
            out[monomial] = out.get(monomial, Fraction(0)) + coefficient
    return {m: c for m, c in out.items() if c}


def _lower_bound(value: DimLike, known: Iterable[Constraint]) -> Fraction | None:
    """A lower bound of `value` over every binding that satisfies `known` (symbols are never
    negative), or None when its terms do not all grow with the symbols."""
    known = tuple(known)
    bounds = {symbol_name(c.lhs): c.rhs for c in known if c.relation == ">="
              and symbol_name(c.lhs) is not None and isinstance(c.rhs, int)}
    total = Fraction(0)
    for monomial, coefficient in _without_subtracted_quotients(_rational(value, known),
                                                               known).items():
        if monomial and coefficient < 0:
            return None
        product = coefficient
        for atom in monomial:
            if isinstance(atom, str):
                product *= max(bounds.get(atom, 0), 0)
                continue
            # A floor division is at least the floor of its numerator's bound; a product's
            # bound is the product of its factors' bounds only while none is negative.
            inner = _lower_bound(atom.numerator, known)
            if inner is None or inner < 0:
                return None
            product *= inner // atom.divisor
        total += product
    return total


def implied(constraint: Constraint, known: Iterable[Constraint]) -> bool:
    """Whether `known` proves `constraint` for every binding of the symbols."""
    known = tuple(known)
    if constraint in known:
        return True
    lhs, rhs = _rewrite(constraint.lhs, known), _rewrite(constraint.rhs, known)
    if constraint.relation == "%":
        return all(c % rhs == 0 for _, c in _terms(lhs).items())  # type: ignore[operator]
    difference = lhs - rhs
    if constraint.relation == "==":
        return not _rational(difference, known)
    bound = _lower_bound(difference, known)
    return bound is not None and bound >= 0


def _floor_divisions(value: DimLike) -> set[FloorDiv]:
    return {a for m, _ in _terms(value).items() for a in m if isinstance(a, FloorDiv)}


def divisibility_needed(a: DimLike, b: DimLike,
                        known: Iterable[Constraint]) -> list[Constraint]:
    """The `e % k == 0` facts about the pieces `e//k` of `a` and `b` that make `a == b` hold
    when it does not hold without them (reshaping `n` into `[n//8, 8]`); else []."""
    known = tuple(known)
    if implied(equal(a, b), known):
        return []
    pieces = sorted(_floor_divisions(a) | _floor_divisions(b), key=str)
    needed = [divisible(p.numerator, p.divisor) for p in pieces]
    return needed if needed and implied(equal(a, b), known + tuple(needed)) else []


def refuted(constraint: Constraint) -> bool:
    """Whether `constraint` fails for every binding (a constant that breaks it)."""
    if constraint.relation == "%":
        return isinstance(constraint.lhs, int) and constraint.lhs % constraint.rhs != 0
    difference = constraint.lhs - constraint.rhs
    if not isinstance(difference, int):
        return False
    return difference != 0 if constraint.relation == "==" else difference < 0


class Assumptions:
    """The constraints in force while shape rules run; `record` says whether a rule may add
    one that is not implied."""

    def __init__(self, known: Iterable[Constraint] = (), record: bool = False) -> None:
        self.constraints: list[Constraint] = list(dict.fromkeys(known))
        self.record = record

    def require(self, constraint: Constraint, why: str) -> None:
        if implied(constraint, self.constraints):
            return
        if refuted(constraint):
            raise ConstraintError(f"{why}: {constraint} never holds")
        if self.record:
            self.constraints.append(constraint)
            return
        raise ConstraintError(f"{why} needs `constraint {constraint}`, which the module does "
                              "not declare")


_ACTIVE: contextvars.ContextVar[Assumptions | None] = contextvars.ContextVar(
    "jitc_symbolic_assumptions", default=None)


@contextlib.contextmanager
def _scope(assumptions: Assumptions) -> Iterator[Assumptions]:
    token = _ACTIVE.set(assumptions)
    try:
        yield assumptions
    finally:
        _ACTIVE.reset(token)


# Facts the caller guarantees for the traces started inside `given` (jit's guards).
_GIVEN: contextvars.ContextVar[tuple[Constraint, ...]] = contextvars.ContextVar(
    "jitc_symbolic_given", default=())


@contextlib.contextmanager
def given(facts: Iterable[Constraint]) -> Iterator[None]:
    """Recording scopes opened inside start from `facts` (which their constraints list)."""
    token = _GIVEN.set((*_GIVEN.get(), *facts))
    try:
        yield
    finally:
        _GIVEN.reset(token)


def recording(known: Iterable[Constraint] = ()) -> contextlib.AbstractContextManager:
    """Rules run inside add the constraints they need; `.constraints` lists them after."""
    return _scope(Assumptions((*_GIVEN.get(), *known), record=True))


def checking(known: Iterable[Constraint]) -> contextlib.AbstractContextManager:
    """Rules run inside accept only what `known` implies."""
    return _scope(Assumptions(known, record=False))


def require(constraint: Constraint, why: str) -> None:
    """Grant `constraint` from the active scope or raise ConstraintError saying why not."""
    active = _ACTIVE.get()
    if active is not None:
        active.require(constraint, why)
        return
    if implied(constraint, ()):
        return
    if refuted(constraint):
        raise ConstraintError(f"{why}: {constraint} never holds")
    raise ConstraintError(f"{why} needs `constraint {constraint}`; build symbolic IR inside "
                          "jitc.ir.symbolic.recording()")


def known_constraints() -> tuple[Constraint, ...]:
    active = _ACTIVE.get()
    return tuple(active.constraints) if active is not None else ()
