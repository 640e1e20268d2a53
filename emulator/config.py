"""Entity topology from the official Service Bus emulator's ``Config.json`` format.

The file looks like ``{"UserConfig": {"Namespaces": [{"Name": ..., "Queues": [...], "Topics": [...]}],
"Logging": {"Type": "Console"}}}``; see ``emulator/sample-config.json``.
Differences from the official emulator:

* ``//`` and ``/* */`` comments are tolerated anywhere outside JSON strings;
* keys are matched case-insensitively, but an unknown key is an error naming the allowed keys;
* values are checked against the CLOUD limits (:mod:`emulator.limits`), not the emulator's tighter quotas;
* a few extra entity properties are accepted (``MaxSizeInMegabytes``, ``Status``, ``AutoDeleteOnIdle`` ...);
* every problem in the file is reported at once, in a :class:`ConfigError`.

The ``validate_*`` functions are shared with the management API, which builds the same dataclasses from
ATOM/XML requests.
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Literal, TypeAlias

from emulator import limits
from emulator.durations import format_duration, parse_duration

__all__ = [
    "DEFAULT_NAMESPACE_NAME",
    "ConfigError",
    "CorrelationFilterConfig",
    "EmulatorConfig",
    "EntityStatus",
    "FilterType",
    "FrozenProperties",
    "NamespaceConfig",
    "QueueConfig",
    "QueueProperties",
    "RuleConfig",
    "SubscriptionConfig",
    "SubscriptionProperties",
    "TopicConfig",
    "TopicProperties",
    "default_config",
    "load_config",
    "parse_config",
    "strip_json_comments",
    "validate_entity_name",
    "validate_entity_path",
    "validate_namespace",
    "validate_namespace_name",
    "validate_queue_properties",
    "validate_rule",
    "validate_subscription_properties",
    "validate_topic_properties",
]

DEFAULT_NAMESPACE_NAME = "sbemulatorns"

FilterType: TypeAlias = Literal["Sql", "Correlation", "True", "False"]
PropertyValue: TypeAlias = str | int | float | bool


# --------------------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------------------


class EntityStatus(enum.StrEnum):
    ACTIVE = "Active"
    DISABLED = "Disabled"
    SEND_DISABLED = "SendDisabled"
    RECEIVE_DISABLED = "ReceiveDisabled"


class FrozenProperties(Mapping[str, PropertyValue]):
    """Read-only, hashable mapping used for correlation-filter user properties."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, PropertyValue] | Iterable[tuple[str, PropertyValue]] = ()) -> None:
        self._data: dict[str, PropertyValue] = dict(data)

    def __getitem__(self, key: str) -> PropertyValue:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._data) == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenProperties({self._data!r})"


@dataclass(frozen=True, slots=True)
class QueueProperties:
    lock_duration: timedelta = limits.LOCK_DURATION_DEFAULT
    max_delivery_count: int = limits.MAX_DELIVERY_COUNT_DEFAULT
    default_message_time_to_live: timedelta | None = None  # None = infinite
    dead_lettering_on_message_expiration: bool = False
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: timedelta = limits.DUPLICATE_DETECTION_WINDOW_DEFAULT
    requires_session: bool = False
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    max_size_in_megabytes: int = limits.MAX_SIZE_IN_MEGABYTES_DEFAULT
    max_message_size_in_kilobytes: int = limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_DEFAULT
    status: EntityStatus = EntityStatus.ACTIVE
    auto_delete_on_idle: timedelta | None = None  # None = never
    enable_batched_operations: bool = True
    user_metadata: str | None = None


@dataclass(frozen=True, slots=True)
class TopicProperties:
    default_message_time_to_live: timedelta | None = None
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: timedelta = limits.DUPLICATE_DETECTION_WINDOW_DEFAULT
    max_size_in_megabytes: int = limits.MAX_SIZE_IN_MEGABYTES_DEFAULT
    max_message_size_in_kilobytes: int = limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_DEFAULT
    status: EntityStatus = EntityStatus.ACTIVE
    auto_delete_on_idle: timedelta | None = None
    enable_batched_operations: bool = True
    support_ordering: bool = True
    user_metadata: str | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionProperties:
    lock_duration: timedelta = limits.LOCK_DURATION_DEFAULT
    max_delivery_count: int = limits.MAX_DELIVERY_COUNT_DEFAULT
    default_message_time_to_live: timedelta | None = None
    dead_lettering_on_message_expiration: bool = False
    dead_lettering_on_filter_evaluation_exceptions: bool = True
    requires_session: bool = False
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    status: EntityStatus = EntityStatus.ACTIVE
    auto_delete_on_idle: timedelta | None = None
    enable_batched_operations: bool = True
    user_metadata: str | None = None


@dataclass(frozen=True, slots=True)
class CorrelationFilterConfig:
    correlation_id: str | None = None
    message_id: str | None = None
    to: str | None = None
    reply_to: str | None = None
    subject: str | None = None  # "Label" in Config.json / XML
    session_id: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    properties: Mapping[str, PropertyValue] = field(default_factory=FrozenProperties)

    def __post_init__(self) -> None:
        # Keep the dataclass hashable and immutable even when a plain dict was passed in.
        if not isinstance(self.properties, FrozenProperties):
            object.__setattr__(self, "properties", FrozenProperties(self.properties))

    def has_any_condition(self) -> bool:
        """True when at least one system property or user property is constrained."""
        system = (
            self.correlation_id,
            self.message_id,
            self.to,
            self.reply_to,
            self.subject,
            self.session_id,
            self.reply_to_session_id,
            self.content_type,
        )
        return any(value is not None for value in system) or len(self.properties) > 0


@dataclass(frozen=True, slots=True)
class RuleConfig:
    name: str
    filter_type: FilterType
    sql_expression: str | None = None
    correlation: CorrelationFilterConfig | None = None
    action_sql: str | None = None


@dataclass(frozen=True, slots=True)
class QueueConfig:
    name: str
    properties: QueueProperties


@dataclass(frozen=True, slots=True)
class SubscriptionConfig:
    name: str
    properties: SubscriptionProperties
    rules: tuple[RuleConfig, ...]


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    properties: TopicProperties
    subscriptions: tuple[SubscriptionConfig, ...]


@dataclass(frozen=True, slots=True)
class NamespaceConfig:
    name: str
    queues: tuple[QueueConfig, ...]
    topics: tuple[TopicConfig, ...]


@dataclass(frozen=True, slots=True)
class EmulatorConfig:
    namespace: NamespaceConfig
    logging_type: str = "Console"


class ConfigError(ValueError):
    """A configuration could not be used; ``problems`` lists every problem found, one message each."""

    problems: tuple[str, ...]
    source: str

    def __init__(self, problems: Sequence[str], source: str = "<config>") -> None:
        self.problems = tuple(problems)
        self.source = source
        count = len(self.problems)
        header = f"{source}: {count} configuration problem{'s' if count != 1 else ''}:"
        super().__init__("\n".join([header, *(f"  - {problem}" for problem in self.problems)]))


def default_config() -> EmulatorConfig:
    """The configuration used when no file is given: namespace ``sbemulatorns`` without entities."""
    return EmulatorConfig(namespace=NamespaceConfig(name=DEFAULT_NAMESPACE_NAME, queues=(), topics=()))


# --------------------------------------------------------------------------------------------------
# Validators (shared with the management API)
# --------------------------------------------------------------------------------------------------

_ENTITY_PATH_RE = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][\w\-./]*[A-Za-z0-9]", re.ASCII)
_ENTITY_NAME_RE = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][\w\-.]*[A-Za-z0-9]", re.ASCII)
_NAMESPACE_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]", re.ASCII)
_DEFAULT_RULE_NAME = "$Default"

_QUEUE_STATUSES = (
    EntityStatus.ACTIVE,
    EntityStatus.DISABLED,
    EntityStatus.SEND_DISABLED,
    EntityStatus.RECEIVE_DISABLED,
)
# A topic is only ever sent to, a subscription only ever received from (entity-suspend docs).
_TOPIC_STATUSES = (EntityStatus.ACTIVE, EntityStatus.DISABLED, EntityStatus.SEND_DISABLED)
_SUBSCRIPTION_STATUSES = (EntityStatus.ACTIVE, EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED)

_FILTER_TYPES: tuple[FilterType, ...] = ("Sql", "Correlation", "True", "False")


def _kind_label(kind: str) -> str:
    return kind[:1].upper() + kind[1:]


def _subscription_label(topic: str, name: str) -> str:
    return f"Subscription '{topic}/Subscriptions/{name}'"


def _rule_label(topic: str, subscription: str, name: str) -> str:
    return f"Rule '{topic}/Subscriptions/{subscription}/Rules/{name}'"


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


def _duration_range(
    problems: list[str], label: str, key: str, value: timedelta | None, lo: timedelta, hi: timedelta | None
) -> None:
    if value is None:
        if hi is None:  # infinite is allowed where there is no upper bound
            return
    elif value >= lo and (hi is None or value <= hi):
        return
    if hi is None:
        allowed = f"at least {format_duration(lo)}, or infinite"
    else:
        allowed = f"{format_duration(lo)}..{format_duration(hi)}"
    problems.append(f"{label}: {key} {format_duration(value)} is out of range (allowed {allowed})")


def _int_range(problems: list[str], label: str, key: str, value: int, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"{label}: {key} must be an integer, got {value!r}")
    elif not lo <= value <= hi:
        problems.append(f"{label}: {key} {value} is out of range (allowed {lo}..{hi})")


def _status(
    problems: list[str], label: str, kind: str, value: EntityStatus, allowed: Sequence[EntityStatus]
) -> None:
    if value not in allowed:
        names = ", ".join(status.value for status in allowed)
        shown = value.value if isinstance(value, EntityStatus) else repr(value)
        problems.append(f"{label}: Status {shown} is not allowed for a {kind} (allowed {names})")


def _forward(problems: list[str], label: str, key: str, target: str | None, own_name: str | None) -> None:
    if target is None:
        return
    if own_name is not None and target.lower() == own_name.lower():
        problems.append(f"{label}: {key} must not name the entity itself ('{target}')")
        return
    for problem in _path_problems(f"{key} target '{target}'", target):
        problems.append(f"{label}: {problem}")


def _user_metadata(problems: list[str], label: str, value: str | None) -> None:
    if value is not None and len(value) > limits.MAX_USER_METADATA_LENGTH:
        problems.append(
            f"{label}: UserMetadata is {len(value)} characters long "
            f"(allowed 0..{limits.MAX_USER_METADATA_LENGTH})"
        )


def _common_sizes(problems: list[str], label: str, megabytes: int, kilobytes: int) -> None:
    _int_range(
        problems,
        label,
        "MaxSizeInMegabytes",
        megabytes,
        limits.MAX_SIZE_IN_MEGABYTES_MIN,
        limits.MAX_SIZE_IN_MEGABYTES_MAX,
    )
    _int_range(
        problems,
        label,
        "MaxMessageSizeInKilobytes",
        kilobytes,
        limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_MIN,
        limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_MAX,
    )


def _receiver_side(
    problems: list[str],
    label: str,
    lock_duration: timedelta,
    max_delivery_count: int,
    requires_session: bool,
    forward_to: str | None,
) -> None:
    _duration_range(
        problems, label, "LockDuration", lock_duration, limits.LOCK_DURATION_MIN, limits.LOCK_DURATION_MAX
    )
    _int_range(
        problems,
        label,
        "MaxDeliveryCount",
        max_delivery_count,
        limits.MAX_DELIVERY_COUNT_MIN,
        limits.MAX_DELIVERY_COUNT_MAX,
    )
    if requires_session and forward_to is not None:
        problems.append(
            f"{label}: ForwardTo '{forward_to}' is not supported on a session-enabled entity "
            "(RequiresSession is true); Azure refuses auto-forwarding from session-enabled sources"
        )


def validate_queue_properties(name: str, props: QueueProperties) -> list[str]:
    """Range and consistency checks for one queue (existence of forwarding targets is not checked here)."""
    label = f"Queue '{name}'"
    problems: list[str] = []
    _receiver_side(
        problems,
        label,
        props.lock_duration,
        props.max_delivery_count,
        props.requires_session,
        props.forward_to,
    )
    _duration_range(
        problems,
        label,
        "DefaultMessageTimeToLive",
        props.default_message_time_to_live,
        limits.DEFAULT_TTL_MIN,
        None,
    )
    _duration_range(
        problems,
        label,
        "DuplicateDetectionHistoryTimeWindow",
        props.duplicate_detection_history_time_window,
        limits.DUPLICATE_DETECTION_WINDOW_MIN,
        limits.DUPLICATE_DETECTION_WINDOW_MAX,
    )
    _forward(problems, label, "ForwardTo", props.forward_to, name)
    _forward(problems, label, "ForwardDeadLetteredMessagesTo", props.forward_dead_lettered_messages_to, name)
    _common_sizes(problems, label, props.max_size_in_megabytes, props.max_message_size_in_kilobytes)
    _status(problems, label, "queue", props.status, _QUEUE_STATUSES)
    _duration_range(
        problems, label, "AutoDeleteOnIdle", props.auto_delete_on_idle, limits.AUTO_DELETE_ON_IDLE_MIN, None
    )
    _user_metadata(problems, label, props.user_metadata)
    return problems


def validate_topic_properties(name: str, props: TopicProperties) -> list[str]:
    """Range checks for one topic."""
    label = f"Topic '{name}'"
    problems: list[str] = []
    _duration_range(
        problems,
        label,
        "DefaultMessageTimeToLive",
        props.default_message_time_to_live,
        limits.DEFAULT_TTL_MIN,
        None,
    )
    _duration_range(
        problems,
        label,
        "DuplicateDetectionHistoryTimeWindow",
        props.duplicate_detection_history_time_window,
        limits.DUPLICATE_DETECTION_WINDOW_MIN,
        limits.DUPLICATE_DETECTION_WINDOW_MAX,
    )
    _common_sizes(problems, label, props.max_size_in_megabytes, props.max_message_size_in_kilobytes)
    _status(problems, label, "topic", props.status, _TOPIC_STATUSES)
    _duration_range(
        problems, label, "AutoDeleteOnIdle", props.auto_delete_on_idle, limits.AUTO_DELETE_ON_IDLE_MIN, None
    )
    _user_metadata(problems, label, props.user_metadata)
    return problems


def validate_subscription_properties(topic: str, name: str, props: SubscriptionProperties) -> list[str]:
    """Range and consistency checks for one subscription of ``topic``."""
    label = _subscription_label(topic, name)
    problems: list[str] = []
    _receiver_side(
        problems,
        label,
        props.lock_duration,
        props.max_delivery_count,
        props.requires_session,
        props.forward_to,
    )
    _duration_range(
        problems,
        label,
        "DefaultMessageTimeToLive",
        props.default_message_time_to_live,
        limits.DEFAULT_TTL_MIN,
        None,
    )
    # A subscription is not an entity anything can be forwarded to, so there is no "itself" to refuse here;
    # forwarding back into the subscription's own topic is legal (hop counting stops loops).
    _forward(problems, label, "ForwardTo", props.forward_to, None)
    _forward(problems, label, "ForwardDeadLetteredMessagesTo", props.forward_dead_lettered_messages_to, None)
    _status(problems, label, "subscription", props.status, _SUBSCRIPTION_STATUSES)
    _duration_range(
        problems, label, "AutoDeleteOnIdle", props.auto_delete_on_idle, limits.AUTO_DELETE_ON_IDLE_MIN, None
    )
    _user_metadata(problems, label, props.user_metadata)
    return problems


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
    label = _rule_label(topic, subscription, rule.name)
    problems = _name_problems(label, rule.name, allow_default_rule=True)
    if rule.filter_type not in _FILTER_TYPES:
        problems.append(f"{label}: FilterType {rule.filter_type!r} is not one of {', '.join(_FILTER_TYPES)}")
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
    from emulator.filters.sql import SqlSyntaxError, compile_action, compile_filter

    problems: list[str] = []
    if rule.filter_type == "Sql" and rule.sql_expression:
        try:
            compile_filter(rule.sql_expression)
        except SqlSyntaxError as exc:
            problems.append(f"{label}: the SQL filter (SqlFilter.SqlExpression) is not valid: {exc}")
    if rule.action_sql:
        try:
            compile_action(rule.action_sql)
        except SqlSyntaxError as exc:
            problems.append(f"{label}: the SQL action (Action.SqlExpression) is not valid: {exc}")
    return problems


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
    problems = _name_problems(_subscription_label(topic, subscription.name), subscription.name)
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


def _cross_entity_problems(namespace: NamespaceConfig) -> list[str]:
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
            sub_label = _subscription_label(topic.name, subscription.name)
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
                    rule_label = _rule_label(topic.name, subscription.name, rule.name)
                    problems.append(
                        f"{rule_label}: name is already used by rule '{previous_rule}' "
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
    problems.extend(_cross_entity_problems(namespace))
    return problems


def _canonical_forward_targets(namespace: NamespaceConfig) -> NamespaceConfig:
    """Rewrite ForwardTo targets to the spelling the target entity was declared with."""
    declared = {q.name.lower(): q.name for q in namespace.queues}
    declared.update({t.name.lower(): t.name for t in namespace.topics})

    def fix(target: str | None) -> str | None:
        return None if target is None else declared.get(target.lower(), target)

    queues = tuple(
        replace(
            q,
            properties=replace(
                q.properties,
                forward_to=fix(q.properties.forward_to),
                forward_dead_lettered_messages_to=fix(q.properties.forward_dead_lettered_messages_to),
            ),
        )
        for q in namespace.queues
    )
    topics = tuple(
        replace(
            t,
            subscriptions=tuple(
                replace(
                    s,
                    properties=replace(
                        s.properties,
                        forward_to=fix(s.properties.forward_to),
                        forward_dead_lettered_messages_to=fix(s.properties.forward_dead_lettered_messages_to),
                    ),
                )
                for s in t.subscriptions
            ),
        )
        for t in namespace.topics
    )
    return replace(namespace, queues=queues, topics=topics)


# --------------------------------------------------------------------------------------------------
# JSON with comments
# --------------------------------------------------------------------------------------------------

_JSON_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"?|//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)')
_NOT_NEWLINE_RE = re.compile(r"[^\r\n]")


def strip_json_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments outside JSON strings.

    Comments are replaced by spaces (newlines kept), so JSON error positions still point at the original text.
    Raises :class:`ValueError` for an unterminated ``/*`` comment.
    """

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith('"'):
            return token
        if token.startswith("/*") and (len(token) < 4 or not token.endswith("*/")):
            line = text.count("\n", 0, match.start()) + 1
            column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
            raise ValueError(f"unterminated /* comment starting at line {line}, column {column}")
        return _NOT_NEWLINE_RE.sub(" ", token)

    return _JSON_TOKEN_RE.sub(blank, text)


class _JsonObject:
    """A JSON object with its key order and duplicate keys preserved."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[str, object]]) -> None:
        self.pairs = pairs


class _JsonConstant:
    """NaN / Infinity / -Infinity: accepted by Python's json module, never valid here."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _describe(value: object) -> str:
    if isinstance(value, _JsonObject):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, _JsonConstant):
        return value.text
    if value is None or isinstance(value, bool | str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    return type(value).__name__


# --------------------------------------------------------------------------------------------------
# Config.json reader
# --------------------------------------------------------------------------------------------------

_ROOT_KEYS = ("UserConfig", "$schema")
_USER_CONFIG_KEYS = ("Namespaces", "Logging")
_LOGGING_KEYS = ("Type",)
_NAMESPACE_KEYS = ("Name", "Queues", "Topics")
_QUEUE_KEYS = ("Name", "Properties")
_TOPIC_KEYS = ("Name", "Properties", "Subscriptions")
_SUBSCRIPTION_KEYS = ("Name", "Properties", "Rules")
_RULE_KEYS = ("Name", "Properties")
_RULE_PROPERTY_KEYS = ("FilterType", "CorrelationFilter", "SqlFilter", "Action")
_SQL_KEYS = ("SqlExpression",)
_CORRELATION_KEYS = (
    "ContentType",
    "CorrelationId",
    "Label",
    "MessageId",
    "ReplyTo",
    "ReplyToSessionId",
    "SessionId",
    "To",
    "Properties",
)
_CORRELATION_ALIASES = {"subject": "Label"}

_QUEUE_PROPERTY_KEYS = (
    "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow",
    "ForwardDeadLetteredMessagesTo",
    "ForwardTo",
    "LockDuration",
    "MaxDeliveryCount",
    "RequiresDuplicateDetection",
    "RequiresSession",
    "MaxSizeInMegabytes",
    "MaxMessageSizeInKilobytes",
    "Status",
    "AutoDeleteOnIdle",
    "EnableBatchedOperations",
    "UserMetadata",
)
_TOPIC_PROPERTY_KEYS = (
    "DefaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow",
    "RequiresDuplicateDetection",
    "MaxSizeInMegabytes",
    "MaxMessageSizeInKilobytes",
    "Status",
    "AutoDeleteOnIdle",
    "EnableBatchedOperations",
    "SupportOrdering",
    "UserMetadata",
)
_SUBSCRIPTION_PROPERTY_KEYS = (
    "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive",
    "LockDuration",
    "MaxDeliveryCount",
    "ForwardDeadLetteredMessagesTo",
    "ForwardTo",
    "RequiresSession",
    "DeadLetteringOnFilterEvaluationExceptions",
    "Status",
    "AutoDeleteOnIdle",
    "EnableBatchedOperations",
    "UserMetadata",
)

_LOGGING_TYPES = {
    "console": "Console",
    "file": "File",
    "file,console": "File,Console",
    "console,file": "Console,File",
}

_FILTER_TYPE_NAMES: dict[str, FilterType] = {
    "sql": "Sql",
    "sqlfilter": "Sql",
    "correlation": "Correlation",
    "correlationfilter": "Correlation",
    "true": "True",
    "truefilter": "True",
    "false": "False",
    "falsefilter": "False",
}

_STATUS_NAMES = {status.value.lower(): status for status in EntityStatus}


def _peek_name(value: object) -> str | None:
    """The ``Name`` of a JSON object before its keys are checked, so early problems can name the entity."""
    if isinstance(value, _JsonObject):
        for key, item in value.pairs:
            if key.lower() == "name" and isinstance(item, str) and item:
                return item
    return None


def _peek_label(kind: str, index: int, value: object) -> str:
    name = _peek_name(value)
    return f"{kind} #{index}" if name is None else f"{kind} '{name}'"


class _Reader:
    """Walks the parsed JSON, builds the dataclasses and collects every problem on the way."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, label: str, message: str) -> None:
        self.problems.append(f"{label}: {message}")

    # -- generic helpers ---------------------------------------------------------------------------

    def fields(
        self,
        label: str,
        value: object,
        allowed: Sequence[str],
        where: str = "",
        aliases: Mapping[str, str] | None = None,
    ) -> dict[str, object] | None:
        """Map an object's keys case-insensitively onto ``allowed``; report unknown and repeated keys."""
        if not isinstance(value, _JsonObject):
            what = where or "entry"
            self.add(label, f"{what} must be an object, got {_describe(value)}")
            return None
        canonical = {key.lower(): key for key in allowed}
        if aliases:
            canonical.update(aliases)
        suffix = f" in {where}" if where else ""
        result: dict[str, object] = {}
        for key, item in value.pairs:
            name = canonical.get(key.lower())
            if name is None:
                self.add(label, f"unknown key '{key}'{suffix} (allowed: {', '.join(allowed)})")
            elif name in result:
                self.add(label, f"key '{name}' appears more than once{suffix}")
            else:
                result[name] = item
        return result

    def array(self, label: str, fields: Mapping[str, object], key: str) -> list[object]:
        value = fields.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(label, f"{key} must be an array, got {_describe(value)}")
            return []
        return value

    def boolean(self, label: str, fields: Mapping[str, object], key: str, default: bool) -> bool:
        value = fields.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        self.add(label, f"{key} must be a boolean, got {_describe(value)}")
        return default

    def integer(self, label: str, fields: Mapping[str, object], key: str, default: int) -> int:
        value = fields.get(key)
        if value is None:
            return default
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        self.add(label, f"{key} must be an integer, got {_describe(value)}")
        return default

    def text(self, label: str, fields: Mapping[str, object], key: str, prefix: str = "") -> str | None:
        """A string value; ``""`` and ``null`` mean unset."""
        value = fields.get(key)
        if value is None or value == "":
            return None
        if isinstance(value, str):
            return value
        self.add(label, f"{prefix}{key} must be a string, got {_describe(value)}")
        return None

    def duration(
        self, label: str, fields: Mapping[str, object], key: str, default: timedelta | None
    ) -> timedelta | None:
        value = fields.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.add(
                label, f"{key} must be an ISO-8601 duration string such as PT30S, got {_describe(value)}"
            )
            return default
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.add(label, f"{key} is not a valid duration: {exc}")
            return default

    def finite_duration(
        self,
        label: str,
        fields: Mapping[str, object],
        key: str,
        default: timedelta,
        lo: timedelta,
        hi: timedelta,
    ) -> timedelta:
        value = self.duration(label, fields, key, default)
        if value is None:  # infinite where a finite value is required
            problems: list[str] = []
            _duration_range(problems, label, key, None, lo, hi)
            self.problems.extend(problems)
            return default
        return value

    def status(self, label: str, fields: Mapping[str, object]) -> EntityStatus:
        value = fields.get("Status")
        if value is None:
            return EntityStatus.ACTIVE
        if isinstance(value, str) and value.lower() in _STATUS_NAMES:
            return _STATUS_NAMES[value.lower()]
        allowed = ", ".join(status.value for status in EntityStatus)
        self.add(label, f"Status must be one of {allowed}, got {_describe(value)}")
        return EntityStatus.ACTIVE

    def name(self, kind_label: str, fields: Mapping[str, object]) -> str | None:
        value = fields.get("Name")
        if isinstance(value, str) and value:
            return value
        if value is None:
            self.add(kind_label, "Name is required")
        else:
            self.add(kind_label, f"Name must be a non-empty string, got {_describe(value)}")
        return None

    # -- document structure ------------------------------------------------------------------------

    def read(self, document: object) -> EmulatorConfig | None:
        root = self.fields("Config", document, _ROOT_KEYS, "the top level")
        if root is None:
            return None
        if "UserConfig" not in root:
            self.add("Config", "UserConfig is required at the top level")
            return None
        user_config = self.fields("UserConfig", root["UserConfig"], _USER_CONFIG_KEYS, "UserConfig")
        if user_config is None:
            return None
        logging_type = self.logging(user_config.get("Logging"))
        namespaces = user_config.get("Namespaces")
        if not isinstance(namespaces, list):
            shown = "missing" if namespaces is None else f"got {_describe(namespaces)}"
            self.add("UserConfig", f"Namespaces must be an array with exactly one namespace ({shown})")
            return None
        if len(namespaces) != 1:
            self.add("UserConfig", f"Namespaces must contain exactly one namespace, got {len(namespaces)}")
            if not namespaces:
                return None
        namespace = self.namespace(namespaces[0])
        if namespace is None:
            return None
        return EmulatorConfig(namespace=namespace, logging_type=logging_type)

    def logging(self, value: object) -> str:
        if value is None:
            return "Console"
        fields = self.fields("UserConfig", value, _LOGGING_KEYS, "Logging")
        if fields is None:
            return "Console"
        kind = fields.get("Type")
        if kind is None:
            return "Console"
        if isinstance(kind, str):
            normalized = ",".join(part.strip() for part in kind.split(",")).lower()
            if normalized in _LOGGING_TYPES:
                return _LOGGING_TYPES[normalized]
        allowed = ", ".join(_LOGGING_TYPES.values())
        self.add("UserConfig", f"Logging.Type must be one of {allowed}, got {_describe(kind)}")
        return "Console"

    def namespace(self, value: object) -> NamespaceConfig | None:
        fields = self.fields("Namespace #1", value, _NAMESPACE_KEYS)
        if fields is None:
            return None
        name = self.name("Namespace #1", fields)
        if name is None:
            name = DEFAULT_NAMESPACE_NAME
        else:
            self.problems.extend(validate_namespace_name(name))
        label = f"Namespace '{name}'"
        queues = [
            self.queue(index, item) for index, item in enumerate(self.array(label, fields, "Queues"), 1)
        ]
        topics = [
            self.topic(index, item) for index, item in enumerate(self.array(label, fields, "Topics"), 1)
        ]
        return NamespaceConfig(
            name=name,
            queues=tuple(queue for queue in queues if queue is not None),
            topics=tuple(topic for topic in topics if topic is not None),
        )

    def properties(
        self, label: str, fields: Mapping[str, object], allowed: Sequence[str]
    ) -> dict[str, object]:
        value = fields.get("Properties")
        if value is None:
            return {}
        return self.fields(label, value, allowed, "Properties") or {}

    def queue(self, index: int, value: object) -> QueueConfig | None:
        fields = self.fields(_peek_label("Queue", index, value), value, _QUEUE_KEYS)
        if fields is None:
            return None
        name = self.name(f"Queue #{index}", fields)
        if name is None:
            return None
        label = f"Queue '{name}'"
        p = self.properties(label, fields, _QUEUE_PROPERTY_KEYS)
        props = QueueProperties(
            lock_duration=self.finite_duration(
                label,
                p,
                "LockDuration",
                limits.LOCK_DURATION_DEFAULT,
                limits.LOCK_DURATION_MIN,
                limits.LOCK_DURATION_MAX,
            ),
            max_delivery_count=self.integer(label, p, "MaxDeliveryCount", limits.MAX_DELIVERY_COUNT_DEFAULT),
            default_message_time_to_live=self.duration(label, p, "DefaultMessageTimeToLive", None),
            dead_lettering_on_message_expiration=self.boolean(
                label, p, "DeadLetteringOnMessageExpiration", False
            ),
            requires_duplicate_detection=self.boolean(label, p, "RequiresDuplicateDetection", False),
            duplicate_detection_history_time_window=self.finite_duration(
                label,
                p,
                "DuplicateDetectionHistoryTimeWindow",
                limits.DUPLICATE_DETECTION_WINDOW_DEFAULT,
                limits.DUPLICATE_DETECTION_WINDOW_MIN,
                limits.DUPLICATE_DETECTION_WINDOW_MAX,
            ),
            requires_session=self.boolean(label, p, "RequiresSession", False),
            forward_to=self.text(label, p, "ForwardTo"),
            forward_dead_lettered_messages_to=self.text(label, p, "ForwardDeadLetteredMessagesTo"),
            max_size_in_megabytes=self.integer(
                label, p, "MaxSizeInMegabytes", limits.MAX_SIZE_IN_MEGABYTES_DEFAULT
            ),
            max_message_size_in_kilobytes=self.integer(
                label, p, "MaxMessageSizeInKilobytes", limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_DEFAULT
            ),
            status=self.status(label, p),
            auto_delete_on_idle=self.duration(label, p, "AutoDeleteOnIdle", None),
            enable_batched_operations=self.boolean(label, p, "EnableBatchedOperations", True),
            user_metadata=self.text(label, p, "UserMetadata"),
        )
        queue = QueueConfig(name=name, properties=props)
        self.problems.extend(validate_entity_path("Queue", name))
        self.problems.extend(validate_queue_properties(name, props))
        return queue

    def topic(self, index: int, value: object) -> TopicConfig | None:
        fields = self.fields(_peek_label("Topic", index, value), value, _TOPIC_KEYS)
        if fields is None:
            return None
        name = self.name(f"Topic #{index}", fields)
        if name is None:
            return None
        label = f"Topic '{name}'"
        p = self.properties(label, fields, _TOPIC_PROPERTY_KEYS)
        props = TopicProperties(
            default_message_time_to_live=self.duration(label, p, "DefaultMessageTimeToLive", None),
            requires_duplicate_detection=self.boolean(label, p, "RequiresDuplicateDetection", False),
            duplicate_detection_history_time_window=self.finite_duration(
                label,
                p,
                "DuplicateDetectionHistoryTimeWindow",
                limits.DUPLICATE_DETECTION_WINDOW_DEFAULT,
                limits.DUPLICATE_DETECTION_WINDOW_MIN,
                limits.DUPLICATE_DETECTION_WINDOW_MAX,
            ),
            max_size_in_megabytes=self.integer(
                label, p, "MaxSizeInMegabytes", limits.MAX_SIZE_IN_MEGABYTES_DEFAULT
            ),
            max_message_size_in_kilobytes=self.integer(
                label, p, "MaxMessageSizeInKilobytes", limits.MAX_MESSAGE_SIZE_IN_KILOBYTES_DEFAULT
            ),
            status=self.status(label, p),
            auto_delete_on_idle=self.duration(label, p, "AutoDeleteOnIdle", None),
            enable_batched_operations=self.boolean(label, p, "EnableBatchedOperations", True),
            support_ordering=self.boolean(label, p, "SupportOrdering", True),
            user_metadata=self.text(label, p, "UserMetadata"),
        )
        self.problems.extend(validate_entity_path("Topic", name))
        self.problems.extend(validate_topic_properties(name, props))
        subscriptions = [
            self.subscription(name, index, item)
            for index, item in enumerate(self.array(label, fields, "Subscriptions"), 1)
        ]
        return TopicConfig(
            name=name,
            properties=props,
            subscriptions=tuple(sub for sub in subscriptions if sub is not None),
        )

    def subscription(self, topic: str, index: int, value: object) -> SubscriptionConfig | None:
        placeholder = f"Subscription #{index} of topic '{topic}'"
        peeked = _peek_name(value)
        early_label = placeholder if peeked is None else _subscription_label(topic, peeked)
        fields = self.fields(early_label, value, _SUBSCRIPTION_KEYS)
        if fields is None:
            return None
        name = self.name(placeholder, fields)
        if name is None:
            return None
        label = _subscription_label(topic, name)
        p = self.properties(label, fields, _SUBSCRIPTION_PROPERTY_KEYS)
        props = SubscriptionProperties(
            lock_duration=self.finite_duration(
                label,
                p,
                "LockDuration",
                limits.LOCK_DURATION_DEFAULT,
                limits.LOCK_DURATION_MIN,
                limits.LOCK_DURATION_MAX,
            ),
            max_delivery_count=self.integer(label, p, "MaxDeliveryCount", limits.MAX_DELIVERY_COUNT_DEFAULT),
            default_message_time_to_live=self.duration(label, p, "DefaultMessageTimeToLive", None),
            dead_lettering_on_message_expiration=self.boolean(
                label, p, "DeadLetteringOnMessageExpiration", False
            ),
            dead_lettering_on_filter_evaluation_exceptions=self.boolean(
                label, p, "DeadLetteringOnFilterEvaluationExceptions", True
            ),
            requires_session=self.boolean(label, p, "RequiresSession", False),
            forward_to=self.text(label, p, "ForwardTo"),
            forward_dead_lettered_messages_to=self.text(label, p, "ForwardDeadLetteredMessagesTo"),
            status=self.status(label, p),
            auto_delete_on_idle=self.duration(label, p, "AutoDeleteOnIdle", None),
            enable_batched_operations=self.boolean(label, p, "EnableBatchedOperations", True),
            user_metadata=self.text(label, p, "UserMetadata"),
        )
        self.problems.extend(_name_problems(label, name))
        self.problems.extend(validate_subscription_properties(topic, name, props))
        rules = [
            self.rule(topic, name, index, item)
            for index, item in enumerate(self.array(label, fields, "Rules"), 1)
        ]
        return SubscriptionConfig(
            name=name, properties=props, rules=tuple(rule for rule in rules if rule is not None)
        )

    def rule(self, topic: str, subscription: str, index: int, value: object) -> RuleConfig | None:
        placeholder = f"Rule #{index} of {_subscription_label(topic, subscription)}"
        peeked = _peek_name(value)
        early_label = placeholder if peeked is None else _rule_label(topic, subscription, peeked)
        fields = self.fields(early_label, value, _RULE_KEYS)
        if fields is None:
            return None
        name = self.name(placeholder, fields)
        if name is None:
            return None
        label = _rule_label(topic, subscription, name)
        if fields.get("Properties") is None:
            self.add(label, "Properties with a FilterType is required")
            return None
        p = self.fields(label, fields["Properties"], _RULE_PROPERTY_KEYS, "Properties")
        if p is None:
            return None
        raw_type = p.get("FilterType")
        filter_type = _FILTER_TYPE_NAMES.get(raw_type.lower()) if isinstance(raw_type, str) else None
        if filter_type is None:
            shown = "missing" if raw_type is None else f"got {_describe(raw_type)}"
            self.add(label, f"FilterType must be one of {', '.join(_FILTER_TYPES)} ({shown})")
        sql_expression: str | None = None
        sql = p.get("SqlFilter")
        if sql is not None:
            sql_fields = self.fields(label, sql, _SQL_KEYS, "SqlFilter")
            if sql_fields is not None:
                value_ = sql_fields.get("SqlExpression")
                if value_ is not None and not isinstance(value_, str):
                    self.add(label, f"SqlFilter.SqlExpression must be a string, got {_describe(value_)}")
                elif isinstance(value_, str):
                    sql_expression = value_
        correlation = self.correlation(label, p.get("CorrelationFilter"))
        action_sql = self.action(label, p.get("Action"))
        if filter_type is None:
            return None
        rule = RuleConfig(
            name=name,
            filter_type=filter_type,
            sql_expression=sql_expression,
            correlation=correlation,
            action_sql=action_sql,
        )
        self.problems.extend(validate_rule(topic, subscription, rule))
        return rule

    def action(self, label: str, value: object) -> str | None:
        if value is None or value == "":
            return None
        fields = self.fields(label, value, _SQL_KEYS, "Action")
        if fields is None:
            return None
        expression = fields.get("SqlExpression")
        if expression is None or expression == "":
            return None
        if not isinstance(expression, str):
            self.add(label, f"Action.SqlExpression must be a string, got {_describe(expression)}")
            return None
        return expression

    def correlation(self, label: str, value: object) -> CorrelationFilterConfig | None:
        if value is None:
            return None
        fields = self.fields(label, value, _CORRELATION_KEYS, "CorrelationFilter", _CORRELATION_ALIASES)
        if fields is None:
            return None
        system: dict[str, str | None] = {}
        for key in _CORRELATION_KEYS[:-1]:  # all but "Properties"
            system[key] = self.text(label, fields, key, "CorrelationFilter.")
            if system[key] is None and fields.get(key) not in (None, ""):
                # Already reported; keep a stand-in so the filter doesn't also look empty.
                system[key] = _describe(fields[key])
        properties: dict[str, PropertyValue] = {}
        raw_properties = fields.get("Properties")
        if raw_properties is not None:
            if not isinstance(raw_properties, _JsonObject):
                self.add(
                    label, f"CorrelationFilter.Properties must be an object, got {_describe(raw_properties)}"
                )
            else:
                for key, item in raw_properties.pairs:
                    if key in properties:
                        self.add(label, f"CorrelationFilter.Properties has '{key}' more than once")
                    elif isinstance(item, str | int | float | bool):
                        properties[key] = item
                    else:
                        self.add(
                            label,
                            f"CorrelationFilter.Properties['{key}'] must be a string, number or boolean, "
                            f"got {_describe(item)}",
                        )
                        properties[key] = _describe(item)  # stand-in; the config is refused anyway
        return CorrelationFilterConfig(
            correlation_id=system["CorrelationId"],
            message_id=system["MessageId"],
            to=system["To"],
            reply_to=system["ReplyTo"],
            subject=system["Label"],
            session_id=system["SessionId"],
            reply_to_session_id=system["ReplyToSessionId"],
            content_type=system["ContentType"],
            properties=FrozenProperties(properties),
        )


def _too_deep(text: str) -> str:
    """The message for JSON nested beyond what the parser can follow, with where it gets too deep."""
    depth = 0
    line, column = 1, 0
    in_string = escaped = False
    for char in text:
        column += 1
        if char == "\n":
            line, column = line + 1, 0
        elif in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > _MAX_JSON_DEPTH:
                break
        elif char in "]}":
            depth -= 1
    return (
        f"invalid JSON at line {line}, column {column}: arrays and objects are nested more than "
        f"{_MAX_JSON_DEPTH} levels deep (a Config.json needs at most 12)"
    )


# Where the message above points; Python's JSON parser itself gives up at about the recursion limit.
_MAX_JSON_DEPTH = 100


def parse_config(text: str, source: str = "<config>") -> EmulatorConfig:
    """Parse ``Config.json`` text; raise :class:`ConfigError` listing every problem found."""
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        stripped = strip_json_comments(text)
    except ValueError as exc:
        raise ConfigError([str(exc)], source) from None
    try:
        document = json.loads(stripped, object_pairs_hook=_JsonObject, parse_constant=_JsonConstant)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"], source
        ) from None
    except RecursionError:
        raise ConfigError([_too_deep(stripped)], source) from None
    reader = _Reader()
    try:
        config = reader.read(document)
    except RecursionError:  # a value nested hundreds deep where the reader describes it
        raise ConfigError([_too_deep(stripped)], source) from None
    problems = reader.problems
    if config is not None:
        problems.extend(_cross_entity_problems(config.namespace))
    if problems or config is None:
        raise ConfigError(problems or ["configuration is empty"], source)
    return replace(config, namespace=_canonical_forward_targets(config.namespace))


def load_config(path: str | os.PathLike[str]) -> EmulatorConfig:
    """Read and parse a ``Config.json`` file (UTF-8, optional BOM)."""
    source = os.fspath(path)
    try:
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"cannot read configuration file: {exc}"], source) from None
    return parse_config(text, source)
