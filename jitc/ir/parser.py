"""Reads the text written by `jitc.ir.printer` back into a Module (see docs/ir.md)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from jitc.ir import dtypes, symbolic
from jitc.ir.core import Function, Instruction, Literal, Location, Module, Value
from jitc.ir.dim_text import parse_constraint, parse_dim
from jitc.ir.opdef import AttrKind, IRTypeError, OpDef, lookup
from jitc.ir.types import TensorType


class ParseError(ValueError):
    """The text is not valid IR; the message names the line."""


_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+)
  | (?P<newline>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<local>%[A-Za-z0-9_.]+)
  | (?P<global>@[A-Za-z0-9_.]+)
  | (?P<hex>hex"[0-9a-fA-F]*")
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<elided><[^>\n]*>)
  | (?P<number>-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|inf\b|nan\b))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>->|==|>=|//|[()\[\]{},=:+*%-])
""", re.VERBOSE)

_LOCATION = re.compile(r"^#\s*(?P<file>.+?):(?P<line>\d+)(?:\s+\((?P<fn>[^)]*)\))?\s*$")


# Tokens that can make up a dimension expression such as `(n+1)//2` or `n-1`.
_EXPRESSION_PUNCT = frozenset({"(", ")", "+", "-", "*", "//"})


@dataclass
class Token:
    kind: str
    text: str
    line: int


def tokenize(text: str) -> tuple[list[Token], dict[int, str]]:
    """The tokens of `text`, and the comment that ends each line that has one."""
    tokens, comments, line, pos = [], {}, 1, 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise ParseError(f"line {line}: unexpected character {text[pos]!r}")
        kind = match.lastgroup or ""
        if kind == "newline":
            line += 1
        elif kind == "comment":
            comments[line] = match.group()
        elif kind != "space":
            tokens.append(Token(kind, match.group(), line))
        pos = match.end()
    tokens.append(Token("eof", "", line))
    return tokens, comments


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens, self.comments = tokenize(text)
        self.pos = 0
        self.pool: dict[str, Literal] = {}
        self.elided: set[str] = set()

    # -- token helpers -------------------------------------------------------------------------
    def peek(self) -> Token:
        return self.tokens[self.pos]

    def next(self) -> Token:
        token = self.peek()
        self.pos += 1
        return token

    def error(self, message: str, token: Token | None = None) -> ParseError:
        token = token or self.peek()
        found = token.text or "end of input"
        return ParseError(f"line {token.line}: {message} (found {found!r})")

    def expect(self, text: str) -> Token:
        token = self.next()
        if token.text != text:
            raise self.error(f"expected {text!r}", token)
        return token

    def expect_kind(self, kind: str, what: str) -> Token:
        token = self.next()
        if token.kind != kind:
            raise self.error(f"expected {what}", token)
        return token

    def accept(self, text: str) -> bool:
        if self.peek().text == text:
            self.pos += 1
            return True
        return False

    # -- grammar -------------------------------------------------------------------------------
    def module(self) -> Module:
        functions = []
        constraints: list[symbolic.Constraint] = []
        while self.peek().kind != "eof":
            keyword = self.expect_kind("ident", "'constraint', 'const' or 'func'")
            if keyword.text == "constraint":
                if functions:
                    raise self.error("constraints come before the functions", keyword)
                constraints.append(self.constraint(keyword))
            elif keyword.text == "const":
                self.const_decl()
            elif keyword.text == "func":
                # Instructions may rely on the declared constraints and on nothing else.
                with symbolic.checking(constraints):
                    functions.append(self.function())
            else:
                raise self.error("expected 'constraint', 'const' or 'func'", keyword)
        if not functions:
            raise ParseError("line 1: a module needs at least one function")
        return Module(functions, functions[0].name, constraints)

    def constraint(self, keyword: Token) -> symbolic.Constraint:
        """`constraint n >= 2`: the rest of the keyword's line."""
        tokens = []
        while self.peek().kind != "eof" and self.peek().line == keyword.line:
            tokens.append(self.next())
        try:
            return parse_constraint(" ".join(t.text for t in tokens))
        except ValueError as exc:
            raise self.error(str(exc), keyword) from None

    def const_decl(self) -> None:
        ref = self.expect_kind("global", "a constant name like @c0")
        self.expect(":")
        type_ = self.type()
        self.expect("=")
        data = self.next()
        if not type_.is_static:
            raise self.error(f"{ref.text} needs a static type, not {type_}", ref)
        if data.kind == "elided":
            self.elided.add(ref.text)
            return
        if data.kind != "hex":
            raise self.error('expected hex"..." bytes', data)
        raw = bytes.fromhex(data.text[4:-1])
        if len(raw) != type_.nbytes:
            raise self.error(f"{ref.text} holds {len(raw)} bytes, {type_} needs {type_.nbytes}",
                             data)
        array = np.frombuffer(raw, dtype=type_.dtype.numpy).reshape(type_.shape)
        self.pool[ref.text] = Literal(array)

    def type(self) -> TensorType:
        token = self.expect_kind("ident", "a type like f32[4,8]")
        try:
            dtype = dtypes.by_name(token.text)
        except ValueError as exc:
            raise self.error(str(exc), token) from None
        self.expect("[")
        shape = self.dim_list("]")
        layout: tuple[int, ...] = ()
        if self.accept("{"):
            layout = self.int_list("}")
        return TensorType(dtype, shape, layout)

    def int_list(self, close: str) -> tuple[int, ...]:
        values = []
        while not self.accept(close):
            if values:
                self.expect(",")
            token = self.expect_kind("number", "an integer")
            if not re.fullmatch(r"-?\d+", token.text):
                raise self.error("expected an integer", token)
            values.append(int(token.text))
        return tuple(values)

    def dim_list(self, close: str) -> tuple[symbolic.DimLike, ...]:
        values: list[symbolic.DimLike] = []
        while not self.accept(close):
            if values:
                self.expect(",")
            tokens = self.expression_tokens()
            if len(tokens) == 1 and tokens[0].kind == "number":
                if not re.fullmatch(r"-?\d+", tokens[0].text):
                    raise self.error("expected an integer", tokens[0])
                values.append(int(tokens[0].text))
                continue
            if not tokens:
                raise self.error("expected an integer")
            try:
                values.append(parse_dim(" ".join(t.text for t in tokens)))
            except ValueError as exc:
                raise self.error(str(exc), tokens[0]) from None
        return tuple(values)

    def expression_tokens(self) -> list[Token]:
        """The tokens of one dimension expression, up to a `,` or a closing bracket."""
        tokens: list[Token] = []
        depth = 0
        while True:
            token = self.peek()
            if token.text == ")" and depth == 0:
                break
            if token.kind not in ("number", "ident") and token.text not in _EXPRESSION_PUNCT:
                break
            depth += {"(": 1, ")": -1}.get(token.text, 0)
            tokens.append(self.next())
        return tokens

    def function(self) -> Function:
        name = self.expect_kind("global", "a function name like @f").text[1:]
        self.expect("{")
        fn = Function(name)
        scope: dict[str, Value] = {}
        while not (self.peek().kind == "ident" and self.peek().text == "return"):
            fn.body.append(self.instruction(scope))
        self.next()
        outputs = []
        while self.peek().kind == "local":
            outputs.append(self.use(scope))
            if not self.accept(","):
                break
        self.expect("}")
        fn.outputs = outputs
        return fn

    def use(self, scope: dict[str, Value]) -> Value:
        token = self.expect_kind("local", "a value like %0")
        if token.text not in scope:
            raise self.error(f"{token.text} is used before it is defined", token)
        return scope[token.text]

    def instruction(self, scope: dict[str, Value]) -> Instruction:
        first = self.peek()
        names = [self.expect_kind("local", "a result like %0 or 'return'").text]
        while self.accept(","):
            names.append(self.expect_kind("local", "a result name").text)
        self.expect("=")
        op_token = self.expect_kind("ident", "an op name")
        try:
            op = lookup(op_token.text)
        except IRTypeError as exc:
            raise self.error(str(exc), op_token) from None
        self.expect("(")
        operands = []
        while not self.accept(")"):
            if operands:
                self.expect(",")
            operands.append(self.use(scope))
        raw_attrs = {}
        while self.peek().kind == "ident":
            key = self.next()
            self.expect("=")
            raw_attrs[key.text] = (self.attr_value(), key)
        self.expect(":")
        types = [self.type()]
        while self.accept(","):
            types.append(self.type())
        loc = self.location(self.tokens[self.pos - 1].line)
        attrs = self.convert_attrs(op, raw_attrs, types)
        try:
            result_types = op.result_types([v.type for v in operands], op.normalize_attrs(attrs),
                                           types)
        except IRTypeError as exc:
            raise self.error(f"{op.name}: {exc}", first) from None
        if len(names) != len(result_types):
            raise self.error(f"{len(names)} name(s) for the {len(result_types)} result(s) of "
                             f"{op.name}", first)
        hints = [n[1:] if not n[1:].isdigit() else None for n in names]
        inst = Instruction(op, operands, op.normalize_attrs(attrs), result_types, loc, hints)
        for name, value in zip(names, inst.results):
            if name in scope:
                raise self.error(f"{name} is defined twice", first)
            scope[name] = value
        return inst

    def location(self, line: int) -> Location | None:
        """The source location written as a comment at the end of an instruction's line."""
        match = _LOCATION.match(self.comments.get(line, ""))
        if not match:
            return None
        return Location(match["file"], int(match["line"]), match["fn"] or "")

    def attr_value(self) -> object:
        token = self.next()
        if token.text == "[":
            items = []
            while not self.accept("]"):
                if items:
                    self.expect(",")
                items.append(self.list_item())
            return items
        if token.kind in ("number", "ident", "global", "string"):
            return token
        raise self.error("expected an attribute value", token)

    def list_item(self) -> object:
        """An element of a bracketed attribute: a value, or a dimension expression (`n-1`)
        kept as one token of kind `expression`."""
        if self.peek().text == "[":
            return self.attr_value()
        tokens = self.expression_tokens()
        if not tokens:
            return self.attr_value()
        if len(tokens) == 1:
            return tokens[0]
        return Token("expression", " ".join(t.text for t in tokens), tokens[0].line)

    def convert_attrs(self, op: OpDef, raw: dict, types: list[TensorType]) -> dict[str, object]:
        specs = {a.name: a for a in op.attrs}
        attrs: dict[str, object] = {}
        for key, (value, key_token) in raw.items():
            spec = specs.get(key)
            if spec is None:
                raise self.error(f"{op.name} has no attribute {key!r}", key_token)
            try:
                attrs[key] = self.attr(spec.kind, value, types[0])
            except (ValueError, TypeError) as exc:
                raise self.error(f"attribute {key}: {exc}", key_token) from None
        return attrs

    def attr(self, kind: AttrKind, value: object, result: TensorType) -> object:
        if kind is AttrKind.LITERAL:
            return self.literal(value, result)
        if kind in (AttrKind.INTS, AttrKind.INT_PAIRS):
            return _tree(value, int)
        if kind is AttrKind.DIMS:
            return _tree(value, parse_dim)
        if kind is AttrKind.FUNCTIONS:
            if not isinstance(value, list) or not all(
                    isinstance(v, Token) and v.kind == "global" for v in value):
                raise TypeError("expected a list of functions like [@f, @g]")
            return [v.text[1:] for v in value]
        if not isinstance(value, Token):
            raise TypeError("expected a single value, not a list")
        if kind is AttrKind.INT:
            return int(value.text)
        if kind is AttrKind.BOOL:
            return {"true": True, "false": False}[value.text]
        if kind is AttrKind.FLOAT:
            return float(value.text)
        if kind is AttrKind.STRING:
            return json.loads(value.text)
        if kind is AttrKind.FUNCTION:
            return value.text[1:]
        return value.text

    def literal(self, value: object, result: TensorType) -> Literal:
        if isinstance(value, Token) and value.kind == "global":
            if value.text in self.elided:
                raise ValueError(f"constant {value.text} was printed elided; print the module "
                                 "with elide_constants=False to read it back")
            if value.text not in self.pool:
                raise ValueError(f"constant {value.text} is not declared")
            return self.pool[value.text]
        dtype = result.dtype.numpy
        array = np.array(_tree(value, lambda text: _scalar(text, dtype)), dtype=dtype)
        if array.size == 0 and result.size == 0:
            # `[]` ends at the first zero-length dimension and cannot show those after it.
            array = array.reshape(result.shape)
        if array.shape != result.shape:
            raise ValueError(f"literal of shape {list(array.shape)} for type {result}")
        return Literal(array)


def _scalar(text: str, dtype: np.dtype) -> object:
    if text in ("true", "false"):
        return text == "true"
    return dtype.type(text) if dtype.kind == "f" else int(text)


def _tree(value: object, leaf) -> object:
    if isinstance(value, list):
        return [_tree(v, leaf) for v in value]
    assert isinstance(value, Token)
    return leaf(value.text)


def parse_module(text: str) -> Module:
    """Parse IR text into a Module; ParseError names the line of any mistake."""
    return _Parser(text).module()


def parse_type(text: str) -> TensorType:
    """Parse one tensor type such as `f32[8,784]` or `i64[]`; ParseError on anything else."""
    parser = _Parser(text)
    type_ = parser.type()
    if parser.peek().kind != "eof":
        raise parser.error("unexpected text after the type")
    return type_
