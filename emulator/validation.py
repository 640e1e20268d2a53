"""Checks of the entity model (:mod:`emulator.broker.properties`) against the Service Bus limits.

Shared by the Config.json reader (:mod:`emulator.config`), the ARM API and the ATOM management API, so the
same value is refused with the same words wherever it comes from. Every function returns a list of problems,
one message each, empty when all is well; nothing here raises for a bad value.

Entity properties are checked by a table per kind (:data:`_QUEUE_CHECKS`, :data:`_TOPIC_CHECKS`,
:data:`_SUBSCRIPTION_CHECKS`): the order of a table is the order its problems are reported in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from emulator import limits
from emulator.broker.properties import (
    FILTER_TYPES,
    CorrelationFilterConfig,
    EntityStatus,
    NamespaceConfig,
    QueueProperties,
    RuleConfig,
    SubscriptionConfig,
    SubscriptionProperties,
    TopicConfig,
    TopicProperties,
)
from emulator.durations import format_duration
from emulator.filters.sql import SqlSyntaxError, compile_action, compile_filter

__all__ = [
    "cross_entity_problems",
    "duration_problems",
    "rule_label",
    "subscription_label",
    "validate_entity_name",
    "validate_entity_path",
    "validate_namespace",
    "validate_namespace_name",
    "validate_queue_properties",
    "validate_rule",
    "validate_subscription_name",
    "validate_subscription_properties",
    "validate_topic_properties",
]

_ENTITY_PATH_RE = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][\w\-./]*[A-Za-z0-9]", re.ASCII)
_ENTITY_NAME_RE = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][\w\-.]*[A-Za-z0-9]", re.ASCII)
_NAMESPACE_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]", re.ASCII)
_DEFAULT_RULE_NAME = "$Default"


# --------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------


def subscription_label(topic: str, name: str) -> str:
    """How a problem message names a subscription."""
    return f"Subscription '{topic}/Subscriptions/{name}'"


def rule_label(topic: str, subscription: str, name: str) -> str:
    """How a problem message names a rule."""
    return f"Rule '{topic}/Subscriptions/{subscription}/Rules/{name}'"


def _kind_label(kind: str) -> str:
    return kind[:1].upper() + kind[1:]


def _path_problems(label: str, name: str) -> list[str]:
    if not name:
        return [f"{label}: name must not be empty"]
    problems: list[str] = []
    if len(name) > limits.MAX_ENTITY_PATH_LENGTH:
        problems.append(
            f"{label}: name is {len(name)} characters long (allowed 1..{limits.MAX_ENTITY_PATH_LENGTH})"
        )
    if not _ENTITY_PATH_RE.fullmatch(name):
        problems.append(
            f"{label}: name may contain only letters, digits, periods, hyphens, underscores and slashes, "
            "and must start and end with a letter or digit"
        )
    elif "//" in name:
        problems.append(f"{label}: name must not contain an empty path segment ('//')")
    return problems


def _name_problems(label: str, name: str, *, allow_default_rule: bool = False) -> list[str]:
    if not name:
        return [f"{label}: name must not be empty"]
    if allow_default_rule and name.lower() == _DEFAULT_RULE_NAME.lower():
        return []
    problems: list[str] = []
    if len(name) > limits.MAX_ENTITY_NAME_LENGTH:
        problems.append(
            f"{label}: name is {len(name)} characters long (allowed 1..{limits.MAX_ENTITY_NAME_LENGTH})"
        )
    if "/" in name:
        problems.append(f"{label}: name must not contain '/'")
    elif not _ENTITY_NAME_RE.fullmatch(name):
        problems.append(
            f"{label}: name may contain only letters, digits, periods, hyphens and underscores, "
            "and must start and end with a letter or digit"
        )
    return problems


def validate_namespace_name(name: str) -> list[str]:
    """Namespace names: 6-50 letters, digits and hyphens; start with a letter, end with a letter or digit."""
    label = f"Namespace '{name}'"
    lo, hi = limits.MIN_NAMESPACE_NAME_LENGTH, limits.MAX_NAMESPACE_NAME_LENGTH
    problems: list[str] = []
    if not lo <= len(name) <= hi:
        problems.append(f"{label}: name is {len(name)} characters long (allowed {lo}..{hi})")
    if not _NAMESPACE_NAME_RE.fullmatch(name):
        problems.append(
            f"{label}: name may contain only letters, digits and hyphens, "
            "and must start with a letter and end with a letter or digit"
        )
    elif name.lower().endswith(("-sb", "-mgmt")):
        problems.append(f"{label}: name must not end with '-sb' or '-mgmt'")
    return problems


def validate_entity_path(kind: str, name: str) -> list[str]:
    """Queue/topic names: up to 260 chars; letters, digits, ``.-_/``; start and end with a letter or digit."""
    return _path_problems(f"{_kind_label(kind)} '{name}'", name)


def validate_entity_name(kind: str, name: str) -> list[str]:
    """Subscription/rule names: up to 50 chars, no slashes.  ``$Default`` is accepted as a rule name."""
    allow_default = kind.lower() == "rule"
    return _name_problems(f"{_kind_label(kind)} '{name}'", name, allow_default_rule=allow_default)


def validate_subscription_name(topic: str, name: str) -> list[str]:
    """A subscription's name, with the problems labelled by its full path under ``topic``."""
    return _name_problems(subscription_label(topic, name), name)


# --------------------------------------------------------------------------------------------------
# Entity properties: one table of checks per kind
# --------------------------------------------------------------------------------------------------

_Properties = QueueProperties | TopicProperties | SubscriptionProperties


def duration_problems(
    label: str, key: str, value: timedelta | None, lo: timedelta, hi: timedelta | None
) -> list[str]:
    """``value`` against ``lo..hi``; ``None`` (infinite) passes only where there is no upper bound."""
    if value is None:
        if hi is None:  # infinite is allowed where there is no upper bound
            return []
    elif value >= lo and (hi is None or value <= hi):
        return []
    if hi is None:
        allowed = f"at least {format_duration(lo)}, or infinite"
    else:
        allowed = f"{format_duration(lo)}..{format_duration(hi)}"
    return [f"{label}: {key} {format_duration(value)} is out of range (allowed {allowed})"]


class _Check(Protocol):
    """One row of a table: the problems of one property (or pair of properties) of an entity."""

    def problems(self, label: str, name: str, props: _Properties) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class _Duration:
    key: str
    attribute: str
    lo: timedelta
    hi: timedelta | None  # None: no upper bound, and infinite (None) is allowed

    def problems(self, label: str, name: str, props: _Properties) -> list[str]:
        value: timedelta | None = getattr(props, self.attribute)
        return duration_problems(label, self.key, value, self.lo, self.hi)


@dataclass(frozen=True, slots=True)
class _Integer:
    key: str
    attribute: str
    lo: int
    hi: int
    optional: bool = False  # None allowed: unset, the namespace decides (MaxMessageSizeInKilobytes)

    def problems(self, label: str, name: str, props: _Properties) -> list[str]:
        value: object = getattr(props, self.attribute)
        if value is None and self.optional:
            return []
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{label}: {self.key} must be an integer, got {value!r}"]
        if not self.lo <= value <= self.hi:
            return [f"{label}: {self.key} {value} is out of range (allowed {self.lo}..{self.hi})"]
        return []


@dataclass(frozen=True, slots=True)
class _Forward:
    """A forwarding target's form. The entity itself is a legal target: Azure accepts a queue that
    forwards (or forwards its dead letters) to itself, a cycle of one that hop counting ends."""

    key: str
    attribute: str

    def problems(self, label: str, name: str, props: _Properties) -> list[str]:
        target: str | None = getattr(props, self.attribute)
        if target is None:
            return []
        return [f"{label}: {problem}" for problem in _path_problems(f"{self.key} target '{target}'", target)]


@dataclass(frozen=True, slots=True)
class _Status:
    kind: str
    allowed: tuple[EntityStatus, ...]

    def problems(self, label: str, name: str, props: _Properties) -> list[str]:
        value = props.status
        if value in self.allowed:
            return []
        names = ", ".join(status.value for status in self.allowed)
        shown = value.value if isinstance(value, EntityStatus) else repr(value)
        return [f"{label}: Status {shown} is not allowed for a {self.kind} (allowed {names})"]


@dataclass(frozen=True, slots=True)
class _UserMetadata:
    def problems(self, label: str, name: str, props: _Properties) -> list[str]:
        value = props.user_metadata
        if value is not None and len(value) > limits.MAX_USER_METADATA_LENGTH:
            return [
                f"{label}: UserMetadata is {len(value)} characters long "
                f"(allowed 0..{limits.MAX_USER_METADATA_LENGTH})"
            ]
        return []


_RECEIVER_SIDE: tuple[_Check, ...] = (
    _Duration("LockDuration", "lock_duration", limits.LOCK_DURATION_MIN, limits.LOCK_DURATION_MAX),
    _Integer(
        "MaxDeliveryCount", "max_delivery_count", limits.MAX_DELIVERY_COUNT_MIN, limits.MAX_DELIVERY_COUNT_MAX
    ),
)
_DEFAULT_TTL = _Duration(
    "DefaultMessageTimeToLive", "default_message_time_to_live", limits.DEFAULT_TTL_MIN, None
)
_DUPLICATE_WINDOW = _Duration(
    "DuplicateDetectionHistoryTimeWindow",
    "duplicate_detection_history_time_window",
    limits.DUPLICATE_DETECTION_WINDOW_MIN,
    limits.DUPLICATE_DETECTION_WINDOW_MAX,
)
_SIZES: tuple[_Check, ...] = (
    _Integer(
        "MaxSizeInMegabytes",
        "max_size_in_megabytes",
        limits.MAX_SIZE_IN_MEGABYTES_MIN,
        limits.MAX_SIZE_IN_MEGABYTES_MAX,
    ),
    _Integer(
        "MaxMessageSizeInKilobytes",
        "max_message_size_in_kilobytes",
        limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_MIN,
        limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_MAX,
        optional=True,
    ),
)
_AUTO_DELETE = _Duration("AutoDeleteOnIdle", "auto_delete_on_idle", limits.AUTO_DELETE_ON_IDLE_MIN, None)

_QUEUE_CHECKS: tuple[_Check, ...] = (
    *_RECEIVER_SIDE,
    _DEFAULT_TTL,
    _DUPLICATE_WINDOW,
    _Forward("ForwardTo", "forward_to"),
    _Forward("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_messages_to"),
    *_SIZES,
    _Status(
        "queue",
        (
            EntityStatus.ACTIVE,
            EntityStatus.DISABLED,
            EntityStatus.SEND_DISABLED,
            EntityStatus.RECEIVE_DISABLED,
        ),
    ),
    _AUTO_DELETE,
    _UserMetadata(),
)
_TOPIC_CHECKS: tuple[_Check, ...] = (
    _DEFAULT_TTL,
    _DUPLICATE_WINDOW,
    *_SIZES,
    # A topic is only ever sent to, a subscription only ever received from (entity-suspend docs).
    _Status("topic", (EntityStatus.ACTIVE, EntityStatus.DISABLED, EntityStatus.SEND_DISABLED)),
    _AUTO_DELETE,
    _UserMetadata(),
)
_SUBSCRIPTION_CHECKS: tuple[_Check, ...] = (
    *_RECEIVER_SIDE,
    _DEFAULT_TTL,
    # Forwarding back into the subscription's own topic is legal (hop counting stops loops).
    _Forward("ForwardTo", "forward_to"),
    _Forward("ForwardDeadLetteredMessagesTo", "forward_dead_lettered_messages_to"),
    _Status("subscription", (EntityStatus.ACTIVE, EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED)),
    _AUTO_DELETE,
    _UserMetadata(),
)


def _run(checks: Sequence[_Check], label: str, name: str, props: _Properties) -> list[str]:
    return [problem for check in checks for problem in check.problems(label, name, props)]


def validate_queue_properties(name: str, props: QueueProperties) -> list[str]:
    """Range and consistency checks for one queue (existence of forwarding targets is not checked here)."""
    return _run(_QUEUE_CHECKS, f"Queue '{name}'", name, props)


def validate_topic_properties(name: str, props: TopicProperties) -> list[str]:
    """Range checks for one topic."""
    return _run(_TOPIC_CHECKS, f"Topic '{name}'", name, props)


def validate_subscription_properties(topic: str, name: str, props: SubscriptionProperties) -> list[str]:
    """Range and consistency checks for one subscription of ``topic``."""
    return _run(_SUBSCRIPTION_CHECKS, subscription_label(topic, name), name, props)


# --------------------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------------------


def _count_action_statements(text: str) -> int:
    """Count ``;``-separated statements, ignoring separators inside '...', "..." and [...] literals."""
    count = 0
    current_has_text = False
    closer: str | None = None
    for char in text:
        if closer is not None:
            if char == closer:
                closer = None  # a doubled quote simply reopens on the next character
            continue
        if char in "'\"":
            closer = char
            current_has_text = True
        elif char == "[":
            closer = "]"
            current_has_text = True
        elif char == ";":
            if current_has_text:
                count += 1
            current_has_text = False
        elif not char.isspace():
            current_has_text = True
    if current_has_text:
        count += 1
    return count


def _correlation_problems(label: str, correlation: CorrelationFilterConfig) -> list[str]:
    problems: list[str] = []
    if not correlation.has_any_condition():
        problems.append(
            f"{label}: CorrelationFilter must set at least one of ContentType, CorrelationId, Label, "
            "MessageId, ReplyTo, ReplyToSessionId, SessionId, To or a user property in Properties"
        )
    for key, value in correlation.properties.items():
        if not key:
            problems.append(f"{label}: CorrelationFilter.Properties has an empty property name")
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(
                f"{label}: CorrelationFilter.Properties['{key}'] must be a finite number, got {value}"
            )
    return problems


def validate_rule(topic: str, subscription: str, rule: RuleConfig) -> list[str]:
    """Name, filter-type consistency, expression lengths and correlation-filter content of one rule."""
    label = rule_label(topic, subscription, rule.name)
    problems = _name_problems(label, rule.name, allow_default_rule=True)
    if rule.filter_type not in FILTER_TYPES:
        problems.append(f"{label}: FilterType {rule.filter_type!r} is not one of {', '.join(FILTER_TYPES)}")
    if rule.filter_type == "Sql":
        if rule.sql_expression is None or not rule.sql_expression.strip():
            problems.append(f"{label}: FilterType Sql requires a non-empty SqlFilter.SqlExpression")
    elif rule.sql_expression is not None:
        problems.append(f"{label}: SqlFilter is not allowed with FilterType {rule.filter_type}")
    if rule.sql_expression is not None and len(rule.sql_expression) > limits.MAX_FILTER_EXPRESSION_LENGTH:
        problems.append(
            f"{label}: SqlFilter.SqlExpression is {len(rule.sql_expression)} characters long "
            f"(allowed 1..{limits.MAX_FILTER_EXPRESSION_LENGTH})"
        )
    if rule.filter_type == "Correlation":
        if rule.correlation is None:
            problems.append(f"{label}: FilterType Correlation requires a CorrelationFilter")
        else:
            problems.extend(_correlation_problems(label, rule.correlation))
    elif rule.correlation is not None:
        problems.append(f"{label}: CorrelationFilter is not allowed with FilterType {rule.filter_type}")
    if rule.action_sql is not None:
        if len(rule.action_sql) > limits.MAX_ACTION_EXPRESSION_LENGTH:
            problems.append(
                f"{label}: Action.SqlExpression is {len(rule.action_sql)} characters long "
                f"(allowed 1..{limits.MAX_ACTION_EXPRESSION_LENGTH})"
            )
        statements = _count_action_statements(rule.action_sql)
        if statements > limits.MAX_ACTION_STATEMENTS:
            problems.append(
                f"{label}: Action.SqlExpression has {statements} statements "
                f"(allowed 1..{limits.MAX_ACTION_STATEMENTS})"
            )
    if not problems:
        problems.extend(_sql_problems(label, rule))
    return problems


def _sql_problems(label: str, rule: RuleConfig) -> list[str]:
    """Parse the filter and action as the broker will, so a syntax error names its rule up front."""
    problems: list[str] = []
    if rule.filter_type == "Sql" and rule.sql_expression:
        try:
            compile_filter(rule.sql_expression, rule.sql_parameters)
        except SqlSyntaxError as exc:
            problems.append(f"{label}: the SQL filter (SqlFilter.SqlExpression) is not valid: {exc}")
    if rule.action_sql:
        try:
            compile_action(rule.action_sql, rule.action_parameters)
        except SqlSyntaxError as exc:
            problems.append(f"{label}: the SQL action (Action.SqlExpression) is not valid: {exc}")
    return problems


# --------------------------------------------------------------------------------------------------
# The namespace as a whole
# --------------------------------------------------------------------------------------------------


def _entity_problems(namespace: NamespaceConfig) -> list[str]:
    """Names and per-entity properties of every entity, in document order."""
    problems: list[str] = []
    for queue in namespace.queues:
        problems.extend(validate_entity_path("Queue", queue.name))
        problems.extend(validate_queue_properties(queue.name, queue.properties))
    for topic in namespace.topics:
        problems.extend(_topic_problems(topic))
    return problems


def _topic_problems(topic: TopicConfig) -> list[str]:
    problems = validate_entity_path("Topic", topic.name)
    problems.extend(validate_topic_properties(topic.name, topic.properties))
    for subscription in topic.subscriptions:
        problems.extend(_subscription_problems(topic.name, subscription))
    return problems


def _subscription_problems(topic: str, subscription: SubscriptionConfig) -> list[str]:
    problems = validate_subscription_name(topic, subscription.name)
    problems.extend(validate_subscription_properties(topic, subscription.name, subscription.properties))
    for rule in subscription.rules:
        problems.extend(validate_rule(topic, subscription.name, rule))
    return problems


def _forward_targets(props: QueueProperties | SubscriptionProperties) -> Iterator[tuple[str, str]]:
    for key, target in (
        ("ForwardTo", props.forward_to),
        ("ForwardDeadLetteredMessagesTo", props.forward_dead_lettered_messages_to),
    ):
        if target is not None:
            yield key, target


def cross_entity_problems(namespace: NamespaceConfig) -> list[str]:
    """Duplicates (case-insensitive), forwarding targets and per-topic / per-namespace quotas."""
    problems: list[str] = []
    entity_count = len(namespace.queues) + len(namespace.topics)
    if entity_count > limits.ENTITIES_PER_NAMESPACE:
        problems.append(
            f"Namespace '{namespace.name}': {entity_count} queues and topics exceed the limit of "
            f"{limits.ENTITIES_PER_NAMESPACE} per namespace"
        )
    seen: dict[str, str] = {}
    for kind, name in [("Queue", q.name) for q in namespace.queues] + [
        ("Topic", t.name) for t in namespace.topics
    ]:
        previous = seen.get(name.lower())
        if previous is not None:
            problems.append(
                f"{kind} '{name}': name is already used by {previous} (entity names are case-insensitive)"
            )
        else:
            seen[name.lower()] = f"{kind} '{name}'"

    def check_targets(label: str, props: QueueProperties | SubscriptionProperties) -> None:
        for key, target in _forward_targets(props):
            if not _path_problems("", target) and target.lower() not in seen:
                problems.append(f"{label}: {key} '{target}' does not name a queue or topic in this namespace")

    for queue in namespace.queues:
        check_targets(f"Queue '{queue.name}'", queue.properties)
    for topic in namespace.topics:
        label = f"Topic '{topic.name}'"
        if len(topic.subscriptions) > limits.SUBSCRIPTIONS_PER_TOPIC:
            problems.append(
                f"{label}: {len(topic.subscriptions)} subscriptions exceed the limit of "
                f"{limits.SUBSCRIPTIONS_PER_TOPIC} per topic"
            )
        sql_filters = 0
        correlation_filters = 0
        subscription_names: dict[str, str] = {}
        for subscription in topic.subscriptions:
            sub_label = subscription_label(topic.name, subscription.name)
            previous = subscription_names.get(subscription.name.lower())
            if previous is not None:
                problems.append(
                    f"{sub_label}: name is already used by subscription '{previous}' of the same topic "
                    "(names are case-insensitive)"
                )
            else:
                subscription_names[subscription.name.lower()] = subscription.name
            check_targets(sub_label, subscription.properties)
            if not subscription.rules:
                sql_filters += 1  # the broker adds $Default (a TrueFilter, i.e. a SQL filter)
            rule_names: dict[str, str] = {}
            for rule in subscription.rules:
                if rule.filter_type == "Correlation":
                    correlation_filters += 1
                else:
                    sql_filters += 1
                previous_rule = rule_names.get(rule.name.lower())
                if previous_rule is not None:
                    duplicate = rule_label(topic.name, subscription.name, rule.name)
                    problems.append(
                        f"{duplicate}: name is already used by rule '{previous_rule}' "
                        "of the same subscription (names are case-insensitive)"
                    )
                else:
                    rule_names[rule.name.lower()] = rule.name
        if sql_filters > limits.SQL_FILTERS_PER_TOPIC:
            problems.append(
                f"{label}: {sql_filters} SQL filters (including implicit $Default rules) exceed the limit of "
                f"{limits.SQL_FILTERS_PER_TOPIC} per topic"
            )
        if correlation_filters > limits.CORRELATION_FILTERS_PER_TOPIC:
            problems.append(
                f"{label}: {correlation_filters} correlation filters exceed the limit of "
                f"{limits.CORRELATION_FILTERS_PER_TOPIC} per topic"
            )
    return problems


def validate_namespace(namespace: NamespaceConfig) -> list[str]:
    """Every check :func:`parse_config` makes on an already-built namespace, in document order."""
    problems = validate_namespace_name(namespace.name)
    problems.extend(_entity_problems(namespace))
    problems.extend(cross_entity_problems(namespace))
    return problems
