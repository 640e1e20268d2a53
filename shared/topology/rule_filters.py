"""Rules as data, and what a rule takes: the one rule model of the planner and the router alike.

A :class:`RuleFilter` is the TrueFilter ``1=1``, the FalseFilter ``1=0``, a SQL filter or a correlation
filter (application properties and system fields), with the shapes NServiceBus's routing modes give an
event's rule and the content conditions Busbar adds (``<type> AND (<condition>)``); a :class:`Rule` is one
by name. :func:`evaluate` reads a filter against what is known of a message: the router against a message it
holds (:mod:`shared.router.decision`), the planner against the enclosed types of an event
(:func:`takes_type`, :mod:`shared.topology.delivery_paths`). Both read one text the same way, so they never
disagree on which subscription delivers an event (a loss, or a double). The ARM form is read and written at
one edge, :mod:`shared.topology.arm`. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from shared.contracts import ENCLOSED_MESSAGE_TYPES

FilterKind = Literal["true", "false", "sql", "correlation"]
CorrelationValue = bool | str | int | float

SYSTEM_FIELDS = {
    "correlation_id": "correlationId", "message_id": "messageId", "to": "to", "reply_to": "replyTo",
    "subject": "label", "session_id": "sessionId", "reply_to_session_id": "replyToSessionId",
    "content_type": "contentType",
}  # fmt: skip
"""The system fields a correlation filter may test: the message's attribute name -> the ARM JSON name."""


class Match(Enum):
    """Whether a filter matches a message; UNKNOWN when it cannot be told from what is known."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class RuleFilter:
    """A rule's filter: TrueFilter ``1=1``, FalseFilter ``1=0``, a SQL filter or a correlation filter on
    application ``properties`` (NServiceBus only ever uses boolean ``True`` ones) and ``system`` fields
    (:data:`SYSTEM_FIELDS`; Busbar never sets them, a rule found with them is someone else's)."""

    kind: FilterKind
    sql: str | None = None
    properties: tuple[tuple[str, CorrelationValue], ...] = ()
    system: tuple[tuple[str, str], ...] = ()

    @property
    def expression(self) -> str:
        """The SQL text Azure stores for SQL, true and false filters (correlation: a readable form)."""
        if self.kind == "true":
            return "1=1"
        if self.kind == "false":
            return "1=0"
        if self.kind == "sql":
            return self.sql or ""
        fields = [f"sys.{SYSTEM_FIELDS[k]} = {_literal(v)}" for k, v in self.system]
        return " AND ".join([*(f"[{k}] = {_literal(v)}" for k, v in self.properties), *fields])

    def to_dict(self) -> dict[str, Any]:
        """Busbar's JSON form (plans, handover records); :meth:`from_dict` reads it back."""
        if self.kind == "correlation":
            fields = {SYSTEM_FIELDS[k]: v for k, v in self.system}
            return {"filterType": "CorrelationFilter", "properties": dict(self.properties), **fields}
        return {"filterType": "SqlFilter", "sqlExpression": self.expression}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RuleFilter:
        """The filter of :meth:`to_dict`'s form, or of the body of an ARM ``correlationFilter`` given
        ``filterType`` ``CorrelationFilter`` (the same names)."""
        if raw.get("filterType") != "CorrelationFilter":
            expression = raw.get("sqlExpression")
            return sql_filter(str(expression) if expression else None)
        system = {k: raw.get(arm) for k, arm in SYSTEM_FIELDS.items()}
        return correlation(dict(raw.get("properties") or {}), {k: str(v) for k, v in system.items() if v})


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


TRUE_FILTER = RuleFilter("true")
FALSE_FILTER = RuleFilter("false")


@dataclass(frozen=True, slots=True, eq=False)
class Rule:
    """A rule: its name and filter. Equal to any rule of the same name and filter, however built."""

    name: str
    filter: RuleFilter

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rule) and (self.name, self.filter) == (other.name, other.filter)

    def __hash__(self) -> int:
        return hash((self.name, self.filter))


def sql_filter(expression: str | None) -> RuleFilter:
    """The :class:`RuleFilter` of a SQL expression as Azure stores it (none: ``1=1``): the true and false
    filters recognised whatever their spacing, any other expression kept as it is."""
    text = expression or "1=1"
    compact = text.replace(" ", "")
    if compact == "1=1":
        return TRUE_FILTER
    if compact == "1=0":
        return FALSE_FILTER
    return RuleFilter("sql", sql=text)


def correlation(properties: Mapping[str, Any], system: Mapping[str, str] | None = None) -> RuleFilter:
    """A correlation filter on ``properties`` (kept in name order) and ``system`` fields."""
    fields = tuple((k, v) for k in SYSTEM_FIELDS if (v := (system or {}).get(k)) is not None)
    return RuleFilter("correlation", properties=tuple(sorted(properties.items())), system=fields)


def sql_like_filter(event: str) -> RuleFilter:
    """``[NServiceBus.EnclosedMessageTypes] LIKE '%<event>%'``."""
    return RuleFilter("sql", sql=f"[{ENCLOSED_MESSAGE_TYPES}] LIKE '%{event}%'")


def correlation_filter(event: str) -> RuleFilter:
    """A correlation filter on the application property ``<event>`` = ``True``."""
    return RuleFilter("correlation", properties=((event, True),))


def with_condition(type_filter: RuleFilter, condition: str) -> RuleFilter:
    """``type_filter`` with a SQL content condition added: ``<type> AND (<condition>)``."""
    return RuleFilter("sql", sql=f"{type_filter.expression} AND ({condition})")


# ------------------------------------------------------------------------------------ what a rule takes

_CONTENT_ADDED = re.compile(r"^(?P<type>.+?) AND \((?P<content>.*)\)$", re.DOTALL)
_STAMP_TRUE = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*=\s*TRUE\s*$", re.IGNORECASE)
_TRUE = re.compile(r"^\s*\(?\s*(1\s*=\s*1|true)\s*\)?\s*$", re.IGNORECASE)
_FALSE = re.compile(r"^\s*\(?\s*(1\s*=\s*0|false)\s*\)?\s*$", re.IGNORECASE)
_ENCLOSED_LIKE = re.compile(
    r"^\s*(?:user\.)?\[?(?P<name>[\w.]+)\]?\s+LIKE\s+'(?P<pattern>(?:[^']|'')*)'\s*$", re.IGNORECASE
)


def split_condition(sql: str) -> tuple[str, str] | None:
    """``(type condition, content condition)`` of a SQL rule :func:`with_condition` wrote, or None."""
    match = _CONTENT_ADDED.match(sql)
    return None if match is None else (match.group("type"), match.group("content"))


def stamp_tested(sql: str) -> str | None:
    """The property a CorrelationFilter-mode stamp test reads (``[Shipping.OrderAccepted] = TRUE``: the
    stamp written as SQL, when a SQL condition joins it), or None for any other SQL."""
    match = _STAMP_TRUE.match(sql)
    return None if match is None else match.group("name")


def enclosed_like(sql: str) -> str | None:
    """The pattern of ``[NServiceBus.EnclosedMessageTypes] LIKE '<pattern>'`` (quotes undoubled), or None."""
    like = _ENCLOSED_LIKE.match(sql)
    if like is None or like.group("name").lower() != ENCLOSED_MESSAGE_TYPES.lower():
        return None
    return like.group("pattern").replace("''", "'")


def _like(value: str, pattern: str) -> bool:
    """SQL ``LIKE``: ``%`` any run, ``_`` any one character, case-sensitive (as Service Bus compares)."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


@dataclass(frozen=True, slots=True)
class Known:
    """What is known of a message a filter is read against: application ``properties`` and system
    ``fields`` (None: unknown). ``complete``: anything not given is absent (a message in hand); otherwise
    only type stamps (names with a dot) are known and a promoted field (no dot) is unknown. Correlation
    property names compare exactly on a message in hand, case-blind when reading contract names."""

    properties: Mapping[str, Any]
    fields: Mapping[str, Any] | None = None
    complete: bool = True


_ABSENT, _UNKNOWN = object(), object()


def _property(known: Known, name: str, *, exact: bool) -> Any:
    missing = _ABSENT if known.complete or "." in name else _UNKNOWN
    if name in known.properties or exact:
        return known.properties.get(name, missing)
    lowered = name.lower()
    return next((v for k, v in known.properties.items() if str(k).lower() == lowered), missing)


def _same(a: Any, b: Any) -> bool:
    # Service Bus compares typed values: true is not 1 and "1" is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _term(actual: Any, wanted: Any) -> Match:
    if actual is _UNKNOWN:
        return Match.UNKNOWN
    return Match.YES if actual is not _ABSENT and _same(actual, wanted) else Match.NO


def evaluate(rule: RuleFilter, known: Known) -> Match:
    """Whether ``rule`` matches a message of which ``known`` is known. SQL beyond Busbar's shapes (the true
    and false forms, an enclosed-types LIKE, a stamp test) is UNKNOWN, and so is a content condition added
    to a type condition that holds: only the broker applies them."""
    if rule.kind in ("true", "false"):
        return Match.YES if rule.kind == "true" else Match.NO
    if rule.kind == "correlation":
        fields = known.fields
        terms = [_term(_UNKNOWN if fields is None else fields.get(n), w) for n, w in rule.system]
        terms += [_term(_property(known, k, exact=known.complete), w) for k, w in rule.properties]
        return Match.NO if Match.NO in terms else Match.UNKNOWN if Match.UNKNOWN in terms else Match.YES
    text = rule.sql or ""
    if takes_everything(rule):
        return Match.YES
    if _FALSE.match(text):
        return Match.NO
    combined = split_condition(text)
    if combined is not None:
        return Match.NO if evaluate(sql_filter(combined[0]), known) is Match.NO else Match.UNKNOWN
    stamp = stamp_tested(text)
    if stamp is not None:
        # A missing property is unknown in SQL, and an unknown filter result does not match.
        return Match.YES if _property(known, stamp, exact=False) is True else Match.NO
    pattern = enclosed_like(text)
    if pattern is None:
        return Match.UNKNOWN
    header = _property(known, ENCLOSED_MESSAGE_TYPES, exact=False)
    return Match.YES if isinstance(header, str) and _like(header, pattern) else Match.NO


def takes_everything(rule: RuleFilter) -> bool:
    """Whether ``rule`` takes every message: the TrueFilter, or its SQL however written (``(1 = 1)``)."""
    return rule.kind == "true" or (rule.kind == "sql" and _TRUE.match(rule.sql or "") is not None)


def takes_type(rule: RuleFilter, enclosed: Sequence[str]) -> bool:
    """Whether ``rule``'s type condition takes a message enclosing ``enclosed`` (types, most concrete
    first): it tests one of them and holds, whatever the content condition added to it."""
    known = Known({**dict.fromkeys(enclosed, True), ENCLOSED_MESSAGE_TYPES: ";".join(enclosed)}, None, False)
    if rule.kind == "sql":
        combined = split_condition(rule.sql or "")
        typed = sql_filter(combined[0]) if combined is not None else rule
        return not takes_everything(typed) and evaluate(typed, known) is Match.YES
    stamps = {t.lower() for t in enclosed}
    tests_type = any(value is True and key.lower() in stamps for key, value in rule.properties)
    return rule.kind == "correlation" and tests_type and evaluate(rule, known) is not Match.NO
