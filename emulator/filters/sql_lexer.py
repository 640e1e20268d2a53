"""Tokens of the Service Bus SQL filter / rule-action language, and the two errors the engine raises.

The errors live here, in the lowest module of the package, so that every stage can raise them;
``emulator.filters.sql`` re-exports them as the public names.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

# Words that can never be a regular identifier (write [word] to use one as a property name). The docs
# only say that a regular identifier "can't be a reserved keyword"; these are the grammar's own words.
KEYWORDS = frozenset(
    {"and", "or", "not", "is", "null", "in", "like", "escape", "exists", "true", "false", "set", "remove"}
)
# Longest first, so that "<>" is not read as "<" then ">".
_OPERATORS = ("<>", "!=", ">=", "<=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ";", ".")


class SqlSyntaxError(ValueError):
    """A filter or action that cannot be compiled; raised when the rule is created.

    ``position`` is 1-based (the first character of the expression is position 1).
    """

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.message = message
        self.position = position


class FilterEvaluationError(Exception):
    """A filter or action failed on a particular message (Azure's FilterException)."""


class Tok(enum.Enum):
    IDENT = "identifier"  # regular identifier (never a keyword)
    NAME = "delimited identifier"  # [bracketed] or "quoted"; value is the unescaped name
    KEYWORD = "keyword"  # value is the lower-case word
    STRING = "string"
    INTEGER = "integer"
    DECIMAL = "decimal"
    PARAM = "parameter"  # value is the name without '@'
    OP = "operator"
    EOF = "end of input"


@dataclass(frozen=True, slots=True)
class Token:
    kind: Tok
    value: Any
    pos: int  # 1-based
    text: str  # the source text of the token

    def describe(self) -> str:
        """The token as an error message names it."""
        if self.kind is Tok.EOF:
            return "end of input"
        if self.kind is Tok.KEYWORD:
            return f"'{self.value.upper()}'"
        shown = self.text if len(self.text) <= 30 else self.text[:27] + "..."
        return f"'{shown}'"


def _is_ident_start(c: str) -> bool:
    return c.isalpha()


def _is_ident_part(c: str) -> bool:
    return c.isalpha() or c.isdecimal() or c == "_"


def _scan_quoted(text: str, start: int, close: str, what: str) -> tuple[str, int]:
    """Read from the opening quote at ``start`` to its closing ``close``; a doubled ``close`` is literal."""
    out: list[str] = []
    i = start + 1
    n = len(text)
    while True:
        j = text.find(close, i)
        if j < 0:
            raise SqlSyntaxError(f"unterminated {what} (no closing {close})", start + 1)
        out.append(text[i:j])
        if j + 1 < n and text[j + 1] == close:
            out.append(close)
            i = j + 2
            continue
        return "".join(out), j + 1


def _scan_number(text: str, i: int) -> tuple[Token, int]:
    start = i
    n = len(text)
    while i < n and "0" <= text[i] <= "9":
        i += 1
    is_decimal = False
    if i < n and text[i] == ".":
        is_decimal = True
        i += 1
        while i < n and "0" <= text[i] <= "9":
            i += 1
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        if j < n and "0" <= text[j] <= "9":
            is_decimal = True
            i = j
            while i < n and "0" <= text[i] <= "9":
                i += 1
        else:
            raise SqlSyntaxError("expected digits in the exponent of a number", j + 1)
    raw = text[start:i]
    if is_decimal:
        return Token(Tok.DECIMAL, float(raw), start + 1, raw), i
    return Token(Tok.INTEGER, int(raw), start + 1, raw), i


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with an EOF token."""
    tokens: list[Token] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if _is_ident_start(c):
            j = i + 1
            while j < n and _is_ident_part(text[j]):
                j += 1
            word = text[i:j]
            lower = word.lower()
            kind = Tok.KEYWORD if lower in KEYWORDS else Tok.IDENT
            tokens.append(Token(kind, lower if kind is Tok.KEYWORD else word, i + 1, word))
            i = j
        elif "0" <= c <= "9" or (c == "." and i + 1 < n and "0" <= text[i + 1] <= "9"):
            token, i = _scan_number(text, i)
            tokens.append(token)
        elif c == "'":
            value, j = _scan_quoted(text, i, "'", "string constant")
            tokens.append(Token(Tok.STRING, value, i + 1, text[i:j]))
            i = j
        elif c == "[":
            value, j = _scan_quoted(text, i, "]", "delimited identifier")
            tokens.append(Token(Tok.NAME, value, i + 1, text[i:j]))
            i = j
        elif c == '"':
            value, j = _scan_quoted(text, i, '"', "quoted identifier")
            tokens.append(Token(Tok.NAME, value, i + 1, text[i:j]))
            i = j
        elif c == "@":
            j = i + 1
            while j < n and _is_ident_part(text[j]):
                j += 1
            if j == i + 1:
                raise SqlSyntaxError("expected a parameter name after '@'", i + 2)
            tokens.append(Token(Tok.PARAM, text[i + 1 : j], i + 1, text[i:j]))
            i = j
        else:
            for op in _OPERATORS:
                if text.startswith(op, i):
                    tokens.append(Token(Tok.OP, op, i + 1, op))
                    i += len(op)
                    break
            else:
                raise SqlSyntaxError(f"unexpected character {c!r}", i + 1)
    tokens.append(Token(Tok.EOF, None, n + 1, ""))
    return tokens
