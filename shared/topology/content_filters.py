"""Content filters: the condition an endpoint adds to its subscription of an event, so that it receives only
the events it wants (``amount >= 1000``, ``{"region": "emea"}``): routing by content, the seeds' "topic with
SQL/correlation filters per subscription".

A condition is SQL over promoted and system properties, or a **correlation filter**: a mapping of promoted
properties to the values they must equal (equality only; the broker indexes it, so it is the cheapest filter
and preferred when it is enough). The subscription then carries one rule holding the condition and no
match-all rule (Azure: "if you add a custom rule, delete the default"); in the multiplexed routing modes the
condition is AND-ed with the event's own type condition (:meth:`ContentFilter.combined`), so the rule still
takes only that event.

A filter is refused before anything is provisioned when it cannot work: SQL that does not parse
(:mod:`shared.topology.sql_check`, naming the position), or a property no contract the event stands for
promotes (:func:`content_filter_errors`). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from shared.contracts import ContractRegistry
from shared.topology.errors import TopologyValidationError
from shared.topology.rule_filters import CorrelationValue, RuleFilter, split_condition, with_condition
from shared.topology.sql_check import SqlFilterError, check_sql_filter


class FilteredEvent(Protocol):
    """An event subscription that may carry a filter (``shared.topology.desired.SubscribedEvent``)."""

    @property
    def event(self) -> str: ...
    @property
    def filter(self) -> ContentFilter | None: ...


@dataclass(frozen=True, slots=True)
class ContentFilter:
    """An event subscription's condition: ``sql`` text, or correlation ``properties`` (name, value)."""

    sql: str | None = None
    properties: tuple[tuple[str, CorrelationValue], ...] = ()

    @classmethod
    def parse(cls, value: object, event: str) -> ContentFilter:
        """From the HTTP/CLI shape: a SQL string, or an object of property names to values. SQL that does
        not parse is a :class:`TopologyValidationError` naming the event, the problem and its position."""
        if isinstance(value, ContentFilter):
            return value
        if isinstance(value, str):
            text = value.strip()
            try:
                check_sql_filter(text)
            except SqlFilterError as error:
                raise TopologyValidationError([f"filter of {event}: {error}"]) from None
            return cls(sql=text)
        if isinstance(value, Mapping):
            errors: list[str] = []
            items: list[tuple[str, CorrelationValue]] = []
            if not value:
                errors.append(f"correlation filter of {event} is empty: give at least one property")
            for name, item in value.items():
                if not isinstance(name, str) or not name.strip():
                    errors.append(
                        f"correlation filter of {event}: a property name must be a non-empty string"
                    )
                elif not isinstance(item, str | int | float | bool):
                    errors.append(
                        f"correlation filter of {event}: property {name!r} must equal a string, number or "
                        f"boolean, not {item!r} (a correlation filter tests equality only)"
                    )
                else:
                    items.append((name, item))
            if errors:
                raise TopologyValidationError(errors)
            return cls(properties=tuple(sorted(items)))
        raise TopologyValidationError(
            [f"filter of {event} must be a SQL string or an object of property values, not {value!r}"]
        )

    @property
    def is_correlation(self) -> bool:
        return self.sql is None

    def to_json(self) -> str | dict[str, Any]:
        """The HTTP/CLI shape :meth:`parse` reads."""
        return self.sql if self.sql is not None else dict(self.properties)

    def property_names(self) -> list[tuple[str, int | None]]:
        """The application properties the condition reads, with their SQL position (correlation: None)."""
        if self.sql is None:
            return [(name, None) for name, _ in self.properties]
        return [(ref.name, ref.position) for ref in check_sql_filter(self.sql) if ref.scope == "user"]

    def as_sql(self) -> str:
        """The condition as SQL (a correlation filter's equalities AND-ed)."""
        if self.sql is not None:
            return self.sql
        return RuleFilter("correlation", properties=self.properties).expression

    def combined(self, type_filter: RuleFilter | None) -> RuleFilter:
        """The rule filter of this condition on a subscription whose event rule is ``type_filter`` (None:
        the subscription takes everything on its topic, the NotMultiplexed mode): the condition alone, or
        AND-ed with the type condition (one correlation filter when both are correlation filters)."""
        if type_filter is None:
            if self.sql is not None:
                return RuleFilter("sql", sql=self.sql)
            return RuleFilter("correlation", properties=self.properties)
        if type_filter.kind == "correlation" and self.sql is None:
            return RuleFilter("correlation", properties=type_filter.properties + self.properties)
        return with_condition(type_filter, self.as_sql())


def refines(existing: RuleFilter, type_filter: RuleFilter) -> bool:
    """Whether ``existing`` is ``type_filter`` with a condition added (:meth:`ContentFilter.combined`): an
    event rule Busbar filtered by content, which a changed condition updates in place."""
    if existing.kind == "correlation" and type_filter.kind == "correlation":
        wanted = set(type_filter.properties)
        return wanted < set(existing.properties)
    split = split_condition(existing.sql or "") if existing.kind == "sql" else None
    return split is not None and split[0] == type_filter.expression


def content_filter_errors(events: Iterable[FilteredEvent], contracts: ContractRegistry) -> list[str]:
    """Why the filters of ``events`` cannot work (empty: they can). Each property a filter reads must be
    promoted by every contract the event stands for (itself, or an interface's known implementers): a
    property no publisher sets never matches, and the subscription would silently receive nothing."""
    errors: list[str] = []
    for item in events:
        content = item.filter
        if content is None:
            continue
        known = contracts.get(item.event)
        if known is None:
            errors.append(
                f"filter of {item.event}: the contract is not known here, so the properties the filter "
                "reads cannot be checked; register the contract (or subscribe without a filter)"
            )
            continue
        carriers = [known] if not known.is_abstract else contracts.implementers(item.event) or [known]
        kind = "SQL filter" if content.sql is not None else "correlation filter"
        for name, position in content.property_names():
            lacking = [c.contract_name for c in carriers if name not in c.promoted_fields]
            if not lacking:
                continue
            where = f" at position {position}" if position is not None else ""
            promoted = sorted({f for c in carriers for f in c.promoted_fields})
            errors.append(
                f"{kind} of {item.event}: property {name!r}{where} is not promoted by "
                f"{', '.join(lacking)} (promoted: {', '.join(promoted) or 'none'}); a filter reads promoted "
                "properties (promoted=... on the contract) and system properties (sys.<name>)"
            )
    return errors


def require_valid_filters(events: Iterable[FilteredEvent], contracts: ContractRegistry) -> None:
    """:class:`TopologyValidationError` listing every problem of :func:`content_filter_errors`."""
    errors = content_filter_errors(events, contracts)
    if errors:
        raise TopologyValidationError(errors)
