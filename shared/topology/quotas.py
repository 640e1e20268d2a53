"""Per-topic quotas, checked on a desired state before any management call.

Azure Service Bus (Standard and Premium) allows per topic 2,000 subscriptions, 2,000 SQL filters and
100,000 correlation filters. True and false filters (``$Default`` ``1=1``, ``$default`` ``1=0``) are SQL
filters, so every subscription's default rule counts against the 2,000, as the emulator counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.topology.desired import DesiredState, RuleFilter
from shared.topology.errors import QuotaExceededError

SUBSCRIPTIONS_PER_TOPIC = 2000
SQL_FILTERS_PER_TOPIC = 2000
CORRELATION_FILTERS_PER_TOPIC = 100_000


@dataclass(frozen=True, slots=True)
class TopicUsage:
    """Entities on one topic."""

    subscriptions: int = 0
    sql_filters: int = 0
    correlation_filters: int = 0

    def __add__(self, other: TopicUsage) -> TopicUsage:
        return TopicUsage(
            self.subscriptions + other.subscriptions,
            self.sql_filters + other.sql_filters,
            self.correlation_filters + other.correlation_filters,
        )


def rule_usage(rule_filter: RuleFilter) -> TopicUsage:
    """What one rule counts: a correlation filter, or a SQL filter (true and false filters included)."""
    if rule_filter.kind == "correlation":
        return TopicUsage(correlation_filters=1)
    return TopicUsage(sql_filters=1)


def usage(desired: DesiredState) -> dict[str, tuple[str, TopicUsage]]:
    """``{topic.lower(): (topic, usage)}`` of what ``desired`` puts on each topic."""
    out: dict[str, tuple[str, TopicUsage]] = {}
    for sub in desired.subscriptions:
        correlation = sum(1 for r in sub.rules if r.filter.kind == "correlation")
        added = TopicUsage(1, len(sub.rules) - correlation, correlation)
        name, current = out.get(sub.topic.lower(), (sub.topic, TopicUsage()))
        out[sub.topic.lower()] = (name, current + added)
    return out


def check(
    planned: Mapping[str, tuple[str, TopicUsage]], existing: Mapping[str, TopicUsage] | None = None
) -> None:
    """Raise :class:`QuotaExceededError` listing every topic and quota that ``planned`` (new entities,
    keyed by lower-case topic) plus ``existing`` (what the topic already holds) would exceed."""
    violations: list[str] = []
    for key, (topic, new) in planned.items():
        old = (existing or {}).get(key, TopicUsage())
        total = new + old
        for label, count, added, before, limit in (
            (
                "subscriptions",
                total.subscriptions,
                new.subscriptions,
                old.subscriptions,
                SUBSCRIPTIONS_PER_TOPIC,
            ),
            (
                "SQL filter rules (including each subscription's $Default/$default rule)",
                total.sql_filters,
                new.sql_filters,
                old.sql_filters,
                SQL_FILTERS_PER_TOPIC,
            ),
            (
                "correlation filter rules",
                total.correlation_filters,
                new.correlation_filters,
                old.correlation_filters,
                CORRELATION_FILTERS_PER_TOPIC,
            ),
        ):
            if count > limit:
                violations.append(
                    f"topic '{topic}' would have {count} {label} ({added} planned + {before} existing), "
                    f"over the limit of {limit} per topic"
                )
    if violations:
        raise QuotaExceededError(violations)


NEAR_QUOTA_FRACTION = 0.9
"""A topic whose projected usage reaches this share of a quota is "near" it: concurrent changes to it are
serialised (see :mod:`shared.api.provisioning.lock`), since two plans could each fit alone but not
together."""


def near_limit(
    planned: Mapping[str, tuple[str, TopicUsage]], existing: Mapping[str, TopicUsage] | None = None
) -> list[str]:
    """The topics of ``planned`` whose new plus existing usage reaches :data:`NEAR_QUOTA_FRACTION` of a
    quota, sorted by lower-case name."""
    near: list[str] = []
    for key, (topic, new) in sorted(planned.items()):
        total = new + (existing or {}).get(key, TopicUsage())
        if (
            total.subscriptions >= NEAR_QUOTA_FRACTION * SUBSCRIPTIONS_PER_TOPIC
            or total.sql_filters >= NEAR_QUOTA_FRACTION * SQL_FILTERS_PER_TOPIC
            or total.correlation_filters >= NEAR_QUOTA_FRACTION * CORRELATION_FILTERS_PER_TOPIC
        ):
            near.append(topic)
    return near


def check_desired(desired: DesiredState) -> None:
    """The quota check on ``desired`` alone (every entity counted as new)."""
    check(usage(desired))


__all__ = [
    "CORRELATION_FILTERS_PER_TOPIC",
    "NEAR_QUOTA_FRACTION",
    "SQL_FILTERS_PER_TOPIC",
    "SUBSCRIPTIONS_PER_TOPIC",
    "TopicUsage",
    "check",
    "check_desired",
    "near_limit",
    "rule_usage",
    "usage",
]
