"""The text form of symbolic extents and constraints: `n`, `2*n+1`, `(n+1)//2`; `n >= 2`,
`m == n`, `n % 8 == 0` (docs/dynamic-shapes.md, "Symbols in the IR"). The printer writes
them with `str`; these functions read them back, so `parse_dim(str(d)) == d`."""

from __future__ import annotations

import re

from jitc.ir.symbolic import (
    Constraint,
    DimLike,
    at_least,
    divisible,
    equal,
    floor_divide,
    symbol,
)

_DIM_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*()]))")


def parse_dim(text: str) -> DimLike:
    """`n`, `2*n+1`, `n*s`, `(n+1)//2`, `768`: the dimension a printed expression denotes."""
    tokens: list[str] = []
    pos = 0
    while pos < len(text.rstrip()):
        match = _DIM_TOKEN.match(text, pos)
        if not match:
            raise ValueError(f"unexpected {text[pos:].strip()[:1]!r} in dimension {text!r}")
        tokens.append(match.group().strip())
        pos = match.end()
    reader = _DimReader(tokens, text)
    value = reader.expression()
    if reader.pos != len(tokens):
        raise ValueError(f"unexpected {tokens[reader.pos]!r} in dimension {text!r}")
    return value


class _DimReader:
    def __init__(self, tokens: list[str], text: str) -> None:
        self.tokens, self.text, self.pos = tokens, text, 0

    def peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def take(self) -> str:
        token = self.peek()
        if not token:
            raise ValueError(f"dimension {self.text!r} ends too early")
        self.pos += 1
        return token

    def expression(self) -> DimLike:
        sign = -1 if self.peek() == "-" else 1
        if self.peek() in "+-" and self.peek():
            self.take()
        value = sign * self.term()
        while self.peek() in ("+", "-"):
            sign = 1 if self.take() == "+" else -1
            value = value + sign * self.term()
        return value

    def term(self) -> DimLike:
        value = self.factor()
        while self.peek() == "*":
            self.take()
            value = value * self.factor()
        return value

    def factor(self) -> DimLike:
        value = self.primary()
        while self.peek() == "//":
            self.take()
            divisor = self.take()
            if not divisor.isdigit() or int(divisor) < 1:
                raise ValueError(f"dimension {self.text!r}: // needs a positive integer")
            value = floor_divide(value, int(divisor))
        return value

    def primary(self) -> DimLike:
        token = self.take()
        if token.isdigit():
            return int(token)
        if token == "(":
            value = self.expression()
            if self.take() != ")":
                raise ValueError(f"dimension {self.text!r}: expected ')'")
            return value
        if token[0].isalpha() or token[0] == "_":
            return symbol(token)
        raise ValueError(f"unexpected {token!r} in dimension {self.text!r}")


def parse_constraint(text: str) -> Constraint:
    """The constraint a printed `n >= 2`, `m == n` or `n % 8 == 0` denotes."""
    match = re.fullmatch(r"\s*(.+?)\s*%\s*(\d+)\s*==\s*0\s*", text)
    if match:
        return divisible(parse_dim(match[1]), int(match[2]))
    match = re.fullmatch(r"(.+?)(==|>=)(.+)", text)
    if not match:
        raise ValueError(f"a constraint is `a == b`, `a >= b` or `a % k == 0`, not {text!r}")
    lhs, rhs = parse_dim(match[1]), parse_dim(match[3])
    return equal(lhs, rhs) if match[2] == "==" else at_least(lhs, rhs)
