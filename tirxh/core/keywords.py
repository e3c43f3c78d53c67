"""``-k EXPR``: select items by an expression over names (pytest's keyword matching, own code).

Grammar (``not`` binds tightest, then ``and``, then ``or``)::

    expr    := and_expr ("or" and_expr)*
    and_expr:= not_expr ("and" not_expr)*
    not_expr:= "not" not_expr | "(" expr ")" | NAME

A NAME is any run of characters other than whitespace and parentheses (so ``vadd[n4096]``,
``sm_90a`` and ``gemm.py`` are names). A NAME matches an item when it is a case-insensitive
substring of one of the item's keywords: the module file, the kernel, the case, the target, the
item's own name, and the case's tags.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from .errors import UsageError

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")
_OPS = ("and", "or", "not")


def _tokenize(expr: str) -> list:
    out, pos = [], 0
    expr = expr.rstrip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:  # only trailing whitespace can get here
            break
        out.append((m.group(1), m.start(1)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, expr: str):
        self.expr = expr
        self.tokens = _tokenize(expr)
        self.i = 0

    def error(self, what: str) -> UsageError:
        col = self.tokens[self.i][1] + 1 if self.i < len(self.tokens) else len(self.expr) + 1
        found = repr(self.tokens[self.i][0]) if self.i < len(self.tokens) else "end of input"
        return UsageError(f"-k {self.expr!r}: at column {col}: expected {what}; found {found}")

    def peek(self) -> "str | None":
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.tokens[self.i][0]
        self.i += 1
        return tok

    def parse(self) -> Callable:
        if not self.tokens:
            return lambda match: True
        fn = self.or_expr()
        if self.i != len(self.tokens):
            raise self.error("'and', 'or' or the end of the expression")
        return fn

    def or_expr(self) -> Callable:
        parts = [self.and_expr()]
        while self.peek() == "or":
            self.take()
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else (lambda m: any(p(m) for p in parts))

    def and_expr(self) -> Callable:
        parts = [self.not_expr()]
        while self.peek() == "and":
            self.take()
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else (lambda m: all(p(m) for p in parts))

    def not_expr(self) -> Callable:
        tok = self.peek()
        if tok == "not":
            self.take()
            inner = self.not_expr()
            return lambda m: not inner(m)
        if tok == "(":
            self.take()
            inner = self.or_expr()
            if self.peek() != ")":
                raise self.error("')'")
            self.take()
            return inner
        if tok is None or tok in _OPS or tok == ")":
            raise self.error("a name, 'not' or '('")
        name = self.take()
        return lambda m: m(name)


def compile_expression(expr: str) -> Callable:
    """Parse `expr` once; return ``matches(keywords) -> bool``. Syntax errors are `UsageError`s
    naming the column."""
    fn = _Parser(expr).parse()

    def matches(keywords: Iterable[str]) -> bool:
        lowered = [k.lower() for k in keywords]
        return fn(lambda name: any(name.lower() in k for k in lowered))

    return matches
