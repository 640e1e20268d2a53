"""Checking a subscription's SQL filter before it is provisioned: its syntax, and the properties it reads.

Azure refuses a SQL filter that does not parse only when the rule is created, halfway through a plan; Busbar
checks it first, so a bad filter is refused before anything changes, naming the problem and its 1-based
position. The grammar is Service Bus's SQL filter language (Microsoft, "Subscription rule SQL filter
syntax", learn.microsoft.com/azure/service-bus-messaging/service-bus-messaging-sql-filter: an unscoped name
is a user property, reading a system property that does not exist is an error, a regular identifier starts
with a letter): ``AND``/``OR``/``NOT``, comparisons (``= <> != > >= < <=``), ``[NOT] LIKE`` with ``ESCAPE``,
``[NOT] IN (...)``, ``IS [NOT] NULL``, ``EXISTS(property)``, arithmetic, constants (numbers, ``'strings'``,
``TRUE``/``FALSE``/``NULL``), ``@parameters`` and properties: ``name`` or ``user.name`` (an application
property), ``sys.Name`` (a system property), ``[delimited name]``.

The emulator has its own evaluating parser (``emulator/filters``): the package rules keep ``shared`` and the
emulator apart (``tests/test_layers.py``), and this one only recognises the language, so it stays small.
Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KEYWORDS = frozenset(
    {"and", "or", "not", "is", "null", "in", "like", "escape", "exists", "true", "false", "set", "remove"}
)
SYSTEM_PROPERTIES = frozenset(
    name.lower()
    for name in (
        "ContentType", "CorrelationId", "DeadLetterSource", "DeliveryCount", "EnqueuedSequenceNumber",
        "EnqueuedTimeUtc", "ExpiresAtUtc", "Label", "LockedUntilUtc", "LockToken", "MessageId",
        "PartitionKey", "ReplyTo", "ReplyToSessionId", "ScheduledEnqueueTimeUtc", "SequenceNumber",
        "SessionId", "Size", "State", "TimeToLive", "To", "ViaPartitionKey", "Subject", "EnqueuedTime",
        "ScheduledEnqueueTime", "ExpiresAt", "LockedUntil",
    )
)  # fmt: skip
"""The system properties a filter may read as ``sys.<name>`` (the BrokeredMessage and the
Azure.Messaging.ServiceBus spellings), compared case-insensitively."""

_COMPARISONS = frozenset({"=", "<>", "!=", ">", ">=", "<", "<="})
_OPERATORS = ("<>", "!=", ">=", "<=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", ".")
_NUMBER = re.compile(r"(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


class SqlFilterError(ValueError):
    """A SQL filter that cannot be provisioned: ``message`` at 1-based ``position``."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.message = message
        self.position = position


@dataclass(frozen=True, slots=True)
class PropertyRef:
    """A property the filter reads: ``scope`` ``user`` or ``sys``, its name as written, its position."""

    scope: str
    name: str
    position: int


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # ident, name, keyword, string, number, param, op, end
    value: str
    pos: int

    def describe(self) -> str:
        return "the end of the filter" if self.kind == "end" else f"'{self.value}'"


def _quoted(text: str, start: int, close: str, what: str) -> tuple[str, int]:
    i, parts = start + 1, []
    while True:
        j = text.find(close, i)
        if j < 0:
            raise SqlFilterError(f"unterminated {what} (no closing {close})", start + 1)
        parts.append(text[i:j])
        if text.startswith(close, j + 1):
            parts.append(close)
            i = j + 2
            continue
        return "".join(parts), j + 1


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif (
            c.isalpha()
        ):  # a regular identifier starts with a letter ([[:IsLetter:]][_[:IsLetter:][:IsDigit:]]*)
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append(_Token("keyword" if word.lower() in KEYWORDS else "ident", word, i + 1))
            i = j
        elif (number := _NUMBER.match(text, i)) is not None:
            out.append(_Token("number", number.group(), i + 1))
            i = number.end()
        elif c in "'[\"":
            close = "]" if c == "[" else c
            what = "string constant" if c == "'" else "delimited name"
            value, j = _quoted(text, i, close, what)
            out.append(_Token("string" if c == "'" else "name", value, i + 1))
            i = j
        elif c == "@":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            if j == i + 1:
                raise SqlFilterError("expected a parameter name after '@'", i + 2)
            out.append(_Token("param", text[i:j], i + 1))
            i = j
        else:
            op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
            if op is None:
                raise SqlFilterError(f"unexpected character {c!r}", i + 1)
            out.append(_Token("op", op, i + 1))
            i += len(op)
    out.append(_Token("end", "", n + 1))
    return out


class _Checker:
    """A recursive-descent recogniser: each method consumes one construct and says whether it is a
    condition (True) or a value (False)."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.i = 0
        self.properties: list[PropertyRef] = []

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def at(self, kind: str, *values: str) -> bool:
        return self.tok.kind == kind and (not values or self.tok.value.lower() in values)

    def fail(self, expected: str) -> SqlFilterError:
        found = self.tok.describe()
        if self.tok.kind == "keyword" and self.tok.value.lower() not in ("null", "true", "false"):
            found = f"keyword {found} (write [{self.tok.value}] to use it as a property name)"
        return SqlFilterError(f"expected {expected}, found {found}", self.tok.pos)

    def expect(self, op: str, expected: str) -> None:
        if not self.at("op", op):
            raise self.fail(expected)
        self.take()

    def condition(self, start: int, is_condition: bool, where: str) -> None:
        if not is_condition:
            raise SqlFilterError(f"expected a condition {where}, found a value", start)

    def value(self, start: int, is_condition: bool, where: str) -> None:
        if is_condition:
            raise SqlFilterError(f"expected a value {where}, found a condition", start)

    def logical(self, word: str, operand: str) -> bool:
        start = self.tok.pos
        left = self.and_or(operand)
        while self.at("keyword", word):
            self.take()
            self.condition(start, left, f"before '{word.upper()}'")
            right_start = self.tok.pos
            self.condition(right_start, self.and_or(operand), f"after '{word.upper()}'")
            left = True
        return left

    def and_or(self, operand: str) -> bool:
        return self.logical("and", "not") if operand == "and" else self.negation()

    def negation(self) -> bool:
        if self.at("keyword", "not"):
            self.take()
            start = self.tok.pos
            self.condition(start, self.negation(), "after 'NOT'")
            return True
        return self.predicate()

    def predicate(self) -> bool:
        if self.at("keyword", "exists"):
            self.take()
            self.expect("(", "'(' after EXISTS")
            if not (self.at("ident") or self.at("name")):
                raise self.fail("a property name inside EXISTS( )")
            self.property()
            self.expect(")", "')' to close EXISTS(")
            return True
        start = self.tok.pos
        left = self.arithmetic()
        if self.tok.kind == "op" and self.tok.value in _COMPARISONS:
            op = self.take().value
            self.value(start, left, f"before '{op}'")
            right_start = self.tok.pos
            self.value(right_start, self.arithmetic(), f"after '{op}'")
            return True
        if self.at("keyword", "is"):
            self.take()
            if self.at("keyword", "not"):
                self.take()
            if not self.at("keyword", "null"):
                raise self.fail("NULL after IS")
            self.take()
            self.value(start, left, "before 'IS'")
            return True
        if self.at("keyword", "not") and self.tokens[self.i + 1].value.lower() in ("in", "like"):
            self.take()
        if self.at("keyword", "in"):
            self.take()
            self.value(start, left, "before 'IN'")
            self.expect("(", "'(' after IN")
            self.operand("in the IN list")
            while self.at("op", ","):
                self.take()
                self.operand("in the IN list")
            self.expect(")", "',' or ')' in the IN list")
            return True
        if self.at("keyword", "like"):
            self.take()
            self.value(start, left, "before 'LIKE'")
            self.operand("as the LIKE pattern")
            if self.at("keyword", "escape"):
                self.take()
                self.operand("after ESCAPE")
            return True
        return left

    def operand(self, where: str) -> None:
        start = self.tok.pos
        self.value(start, self.arithmetic(), where)

    def arithmetic(self) -> bool:
        start = self.tok.pos
        left = self.unary()
        while self.at("op", "+", "-", "*", "/", "%"):
            op = self.take().value
            self.value(start, left, f"before '{op}'")
            right_start = self.tok.pos
            self.value(right_start, self.unary(), f"after '{op}'")
            left = False
        return left

    def unary(self) -> bool:
        if self.at("op", "+", "-"):
            op = self.take().value
            start = self.tok.pos
            self.value(start, self.unary(), f"after unary '{op}'")
            return False
        return self.primary()

    def primary(self) -> bool:
        token = self.tok
        if token.kind in ("number", "string", "param") or self.at("keyword", "true", "false", "null"):
            self.take()
            return False
        if self.at("op", "("):
            self.take()
            inner = self.logical("or", "and")
            self.expect(")", f"')' to close the '(' opened at position {token.pos}")
            return inner
        if token.kind in ("ident", "name"):
            if token.kind == "ident" and self.tokens[self.i + 1].value == "(":
                raise SqlFilterError(f"unknown function '{token.value}' in a filter", token.pos)
            self.property()
            return False
        raise self.fail("a condition or a value")

    def property(self) -> None:
        token = self.take()
        if not self.at("op", "."):
            self.properties.append(PropertyRef("user", token.value, token.pos))
            return
        scope = token.value.lower()
        if token.kind != "ident" or scope not in ("sys", "user"):
            raise SqlFilterError(f"unknown scope '{token.value}': expected sys or user", token.pos)
        self.take()
        if self.tok.kind not in ("ident", "name", "keyword"):
            raise self.fail(f"a property name after '{token.value}.'")
        name = self.take()
        if scope == "sys" and name.value.lower() not in SYSTEM_PROPERTIES:
            raise SqlFilterError(f"'sys.{name.value}' is not a system property of a message", token.pos)
        self.properties.append(PropertyRef(scope, name.value, token.pos))


def check_sql_filter(text: str) -> list[PropertyRef]:
    """The properties ``text`` reads, in order; :class:`SqlFilterError` when it is not a filter Azure
    accepts (a syntax error, a value where a condition belongs, an unknown system property)."""
    checker = _Checker(text)
    if checker.tok.kind == "end":
        raise SqlFilterError("expected a condition, found an empty filter", 1)
    is_condition = checker.logical("or", "and")
    if checker.tok.kind != "end":
        raise checker.fail("AND, OR or the end of the filter")
    checker.condition(1, is_condition, "as the filter")
    return checker.properties
