"""Rule filters as data: the TrueFilter ``1=1``, the FalseFilter ``1=0``, SQL filters and correlation
filters, with the shapes NServiceBus's routing modes give an event's rule. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from shared.contracts import ENCLOSED_MESSAGE_TYPES

FilterKind = Literal["true", "false", "sql", "correlation"]


@dataclass(frozen=True, slots=True)
class RuleFilter:
    """A rule's filter: TrueFilter ``1=1``, FalseFilter ``1=0``, a SQL filter or a correlation filter on
    application properties (NServiceBus only ever uses boolean ``True`` properties)."""

    kind: FilterKind
    sql: str | None = None
    properties: tuple[tuple[str, bool | str | int | float], ...] = ()

    @property
    def expression(self) -> str:
        """The SQL text Azure stores for SQL, true and false filters (correlation: a readable form)."""
        if self.kind == "true":
            return "1=1"
        if self.kind == "false":
            return "1=0"
        if self.kind == "sql":
            return self.sql or ""
        return " AND ".join(f"[{k}] = {_literal(v)}" for k, v in self.properties)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "correlation":
            return {"filterType": "CorrelationFilter", "properties": dict(self.properties)}
        return {"filterType": "SqlFilter", "sqlExpression": self.expression}


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


TRUE_FILTER = RuleFilter("true")
FALSE_FILTER = RuleFilter("false")


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


def sql_like_filter(event: str) -> RuleFilter:
    """``[NServiceBus.EnclosedMessageTypes] LIKE '%<event>%'``."""
    return RuleFilter("sql", sql=f"[{ENCLOSED_MESSAGE_TYPES}] LIKE '%{event}%'")


def correlation_filter(event: str) -> RuleFilter:
    """A correlation filter on the application property ``<event>`` = ``True``."""
    return RuleFilter("correlation", properties=((event, True),))
