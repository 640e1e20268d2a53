"""The entity model: queue, topic, subscription and rule properties, and the namespace they make up.

These frozen dataclasses are what the broker runs on. Config.json (:mod:`emulator.config`), the ARM API and
the ATOM management API all build them; :mod:`emulator.validation` checks them against the Service Bus limits.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from emulator import limits

__all__ = [
    "DEFAULT_NAMESPACE_NAME",
    "FILTER_TYPES",
    "CorrelationFilterConfig",
    "EmulatorConfig",
    "EntityStatus",
    "FilterType",
    "FrozenProperties",
    "NamespaceConfig",
    "PropertyValue",
    "QueueConfig",
    "QueueProperties",
    "RuleConfig",
    "SubscriptionConfig",
    "SubscriptionProperties",
    "TopicConfig",
    "TopicProperties",
    "default_config",
]

DEFAULT_NAMESPACE_NAME = "sbemulatorns"

type FilterType = Literal["Sql", "Correlation", "True", "False"]
# datetime and timedelta: the dateTime and duration values of rule descriptions (correlation properties,
# SQL parameters), as the ATOM API carries them.
type PropertyValue = str | int | float | bool | datetime | timedelta

# The filter types in the order problem messages list them.
FILTER_TYPES: tuple[FilterType, ...] = ("Sql", "Correlation", "True", "False")


class EntityStatus(enum.StrEnum):
    """Whether an entity accepts sends and receives (the ``Status`` property)."""

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
    max_message_size_in_kilobytes: int | None = None  # None: the tier's default (emulator.tier)
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
    max_message_size_in_kilobytes: int | None = None  # None: the tier's default (emulator.tier)
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
    # Values of the ``@name`` placeholders of the SQL filter and of the action (names as given, with '@').
    sql_parameters: Mapping[str, PropertyValue] = field(default_factory=FrozenProperties)
    action_parameters: Mapping[str, PropertyValue] = field(default_factory=FrozenProperties)

    def __post_init__(self) -> None:
        for name in ("sql_parameters", "action_parameters"):
            value = getattr(self, name)
            if not isinstance(value, FrozenProperties):
                object.__setattr__(self, name, FrozenProperties(value))


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


def default_config() -> EmulatorConfig:
    """The configuration used when no file is given: namespace ``sbemulatorns`` without entities."""
    return EmulatorConfig(namespace=NamespaceConfig(name=DEFAULT_NAMESPACE_NAME, queues=(), topics=()))
