"""Topology options: pydantic models that read and write NServiceBus's ``TopologyOptions`` JSON shape, and
loading them from app settings.

JSON shape (NServiceBus 6.4+, ``TopologyOptionsSerializationContext``)::

    {
        "$type": "topology-options",
        "PublishedEventToTopicsMap": {
            "Shipping.OrderAccepted": "Shipping.IOrderStatusChanged",
            "Tenant.CustomerCreated": {"Topic": "t", "RoutingMode": "CorrelationFilter"},
        },
        "SubscribedEventToTopicsMap": {
            "Shipping.IOrderStatusChanged": [
                "Shipping.OrderAccepted",
                {"Topic": "x", "RoutingMode": "SqlLikeFilter"},
            ]
        },
        "QueueNameToSubscriptionNameMap": {"billing": "billing-sub"},
        "FallbackTopic": {"TopicName": "SharedEvents", "RoutingMode": "CorrelationFilter"},
        "ThrowIfUnmappedEventTypes": false,
    }

``"$type": "migration-topology-options"`` adds ``TopicToPublishTo``, ``TopicToSubscribeOn``,
``EventsToMigrateMap`` (array) and ``SubscribedEventToRuleNameMap``. Entries are a plain string when they
have no routing mode, single subscription entries a scalar, as the NServiceBus writer emits them. Routing
modes are case-sensitive enum names (``Enum.Parse``). ``HierarchyNamespace`` is not part of the JSON (it is
set on the transport in NServiceBus): here it is the ``hierarchy_namespace`` field, from the app setting
``BUSBAR_HIERARCHY_NAMESPACE``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.app_settings import AppSetting, read
from shared.topology.errors import TopologyValidationError

TOPOLOGY_OPTIONS_TYPE = "topology-options"
MIGRATION_TOPOLOGY_OPTIONS_TYPE = "migration-topology-options"
DEFAULT_BUNDLE_TOPIC = "bundle-1"


class TopicRoutingMode(StrEnum):
    """How events share a topic (NServiceBus ``TopicRoutingMode``, 6.4+)."""

    NotMultiplexed = "NotMultiplexed"
    """One event per topic (or every subscriber wants everything): catch-all subscriptions, no stamps."""
    CorrelationFilter = "CorrelationFilter"
    """Publishers stamp each enclosed type as a boolean property; subscribers add correlation rules."""
    SqlLikeFilter = "SqlLikeFilter"
    """Subscribers add ``[NServiceBus.EnclosedMessageTypes] LIKE '%Name%'`` rules; nothing is stamped."""


def parse_routing_mode(raw: object, where: str) -> TopicRoutingMode | None:
    """``raw`` as a routing mode (None stays None); a value that is no enum name is a validation error."""
    if raw is None:
        return None
    if isinstance(raw, str) and raw in TopicRoutingMode.__members__:
        return TopicRoutingMode(raw)
    raise TopologyValidationError(
        [f"{where}: 'RoutingMode' has value '{raw}' which is not a recognized TopicRoutingMode."]
    )


class PublishEntry(BaseModel):
    """Where one event is published: a topic and, optionally, an explicit routing mode."""

    model_config = ConfigDict(frozen=True)
    topic: str
    routing_mode: TopicRoutingMode | None = None


class SubscriptionEntry(BaseModel):
    """One topic an event is subscribed on, optionally with an explicit routing mode."""

    model_config = ConfigDict(frozen=True)
    topic: str
    routing_mode: TopicRoutingMode | None = None


class FallbackTopicOptions(BaseModel):
    """The topic unmapped events are published to and subscribed on, and its (filtered) routing mode."""

    model_config = ConfigDict(frozen=True)
    topic_name: str
    routing_mode: TopicRoutingMode | None = None


class TopologyOptions(BaseModel):
    """Topic-per-event topology options (NServiceBus ``TopologyOptions``)."""

    model_config = ConfigDict(frozen=True)

    published_event_to_topics_map: dict[str, PublishEntry] = Field(default_factory=dict)
    subscribed_event_to_topics_map: dict[str, tuple[SubscriptionEntry, ...]] = Field(default_factory=dict)
    queue_name_to_subscription_name_map: dict[str, str] = Field(default_factory=dict)
    throw_if_unmapped_event_types: bool = False
    fallback_topic: FallbackTopicOptions | None = None
    hierarchy_namespace: str | None = None
    """Not in the JSON: every queue and topic path is prefixed with ``<hierarchy_namespace>/``."""

    @property
    def is_migration(self) -> bool:
        return False

    # ---------------------------------------------------------------------------------- JSON

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, Any]) -> TopologyOptions:
        """Options from NServiceBus JSON; ``$type`` picks the class (default: topic-per-event)."""
        return parse_topology_options(data)

    def to_json_dict(self) -> dict[str, Any]:
        """The NServiceBus JSON shape, as its writer emits it."""
        out: dict[str, Any] = {"$type": TOPOLOGY_OPTIONS_TYPE}
        self._write_common(out)
        out["ThrowIfUnmappedEventTypes"] = self.throw_if_unmapped_event_types
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json_dict(), indent=indent)

    def _write_common(self, out: dict[str, Any]) -> None:
        out["PublishedEventToTopicsMap"] = {
            event: _entry_json(entry.topic, entry.routing_mode)
            for event, entry in self.published_event_to_topics_map.items()
        }
        subscribed: dict[str, Any] = {}
        for event, entries in self.subscribed_event_to_topics_map.items():
            items = [_entry_json(e.topic, e.routing_mode) for e in entries]
            subscribed[event] = items[0] if len(items) == 1 else items
        out["SubscribedEventToTopicsMap"] = subscribed
        out["QueueNameToSubscriptionNameMap"] = dict(self.queue_name_to_subscription_name_map)
        if self.fallback_topic is not None:
            out["FallbackTopic"] = {
                "TopicName": self.fallback_topic.topic_name,
                "RoutingMode": self.fallback_topic.routing_mode,
            }


class MigrationTopologyOptions(TopologyOptions):
    """Options of the (obsolete in NServiceBus 7) migration topology: a single "bundle" topic, or a
    hierarchy ``TopicToPublishTo`` -> ``TopicToSubscribeOn``, plus events already on their own topics.

    ``ThrowIfUnmappedEventTypes`` is always true here and not serialized."""

    topic_to_publish_to: str = DEFAULT_BUNDLE_TOPIC
    topic_to_subscribe_on: str = DEFAULT_BUNDLE_TOPIC
    events_to_migrate_map: tuple[str, ...] = ()
    subscribed_event_to_rule_name_map: dict[str, str] = Field(default_factory=dict)
    throw_if_unmapped_event_types: bool = True

    @property
    def is_migration(self) -> bool:
        return True

    @property
    def is_hierarchy(self) -> bool:
        """True when publishing and subscribing use different topics (compared case-insensitively)."""
        return self.topic_to_publish_to.lower() != self.topic_to_subscribe_on.lower()

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"$type": MIGRATION_TOPOLOGY_OPTIONS_TYPE}
        self._write_common(out)
        out["TopicToPublishTo"] = self.topic_to_publish_to
        out["TopicToSubscribeOn"] = self.topic_to_subscribe_on
        out["EventsToMigrateMap"] = list(self.events_to_migrate_map)
        out["SubscribedEventToRuleNameMap"] = dict(self.subscribed_event_to_rule_name_map)
        return out


def _entry_json(topic: str, mode: TopicRoutingMode | None) -> Any:
    if mode is None:
        return topic
    return {"Topic": topic, "RoutingMode": str(mode)}


# ------------------------------------------------------------------------------------------ parsing


class _Reader:
    """Case-insensitive property access (IConfiguration binds case-insensitively); collects errors."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._by_lower = {str(k).lower(): v for k, v in document.items()}
        self.errors: list[str] = []

    def get(self, key: str) -> Any:
        return self._by_lower.get(key.lower())

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.get(key)
        if value is None:
            return {}  # null collections become empty, as in NServiceBus
        if not isinstance(value, Mapping):
            self.errors.append(f"{key}: expected an object, got {json.dumps(value)}")
            return {}
        return {str(k): v for k, v in value.items()}

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.errors.append(f"{key}: expected a string, got {json.dumps(value)}")
            return default
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"  # app settings carry booleans as text
        self.errors.append(f"{key}: expected true or false, got {json.dumps(value)}")
        return default


def _entry(raw: Any, where: str, errors: list[str]) -> tuple[str, TopicRoutingMode | None] | None:
    if isinstance(raw, str):
        return raw, None
    if isinstance(raw, Mapping):
        reader = _Reader(raw)
        topic = reader.get("Topic")
        if not isinstance(topic, str):
            errors.append(f"{where}: Topic is required")
            return None
        try:
            mode = parse_routing_mode(reader.get("RoutingMode"), where)
        except TopologyValidationError as exc:
            errors.extend(exc.errors)
            return None
        return topic, mode
    errors.append(f"{where}: expected a topic name or an object with 'Topic', got {json.dumps(raw)}")
    return None


def parse_topology_options(data: str | bytes | Mapping[str, Any]) -> TopologyOptions:
    """Topology options from NServiceBus JSON (text or parsed). Every shape problem is reported at once as
    :class:`TopologyValidationError`; name and consistency rules are :func:`validate`'s job."""
    if isinstance(data, str | bytes):
        try:
            document = json.loads(data)
        except json.JSONDecodeError as exc:
            raise TopologyValidationError([f"topology options are not valid JSON: {exc}"]) from None
    else:
        document = data
    if not isinstance(document, Mapping):
        raise TopologyValidationError(["topology options must be a JSON object"])
    reader = _Reader(document)
    kind = reader.text("$type", TOPOLOGY_OPTIONS_TYPE)
    if kind not in (TOPOLOGY_OPTIONS_TYPE, MIGRATION_TOPOLOGY_OPTIONS_TYPE):
        reader.errors.append(
            f"$type: '{kind}' is neither '{TOPOLOGY_OPTIONS_TYPE}' nor '{MIGRATION_TOPOLOGY_OPTIONS_TYPE}'"
        )
    errors = reader.errors
    published: dict[str, PublishEntry] = {}
    for event, raw in reader.mapping("PublishedEventToTopicsMap").items():
        parsed = _entry(raw, f"PublishedEventToTopicsMap[{event}]", errors)
        if parsed is not None:
            published[event] = PublishEntry(topic=parsed[0], routing_mode=parsed[1])
    subscribed: dict[str, tuple[SubscriptionEntry, ...]] = {}
    for event, raw in reader.mapping("SubscribedEventToTopicsMap").items():
        items = raw if isinstance(raw, list) else [raw]
        entries: list[SubscriptionEntry] = []
        for item in items:
            parsed = _entry(item, f"SubscribedEventToTopicsMap[{event}]", errors)
            if parsed is not None:
                entry = SubscriptionEntry(topic=parsed[0], routing_mode=parsed[1])
                if entry not in entries:  # a HashSet in NServiceBus
                    entries.append(entry)
        subscribed[event] = tuple(entries)
    queue_map: dict[str, str] = {}
    for queue, name in reader.mapping("QueueNameToSubscriptionNameMap").items():
        if isinstance(name, str):
            queue_map[queue] = name
        else:
            errors.append(f"QueueNameToSubscriptionNameMap[{queue}]: expected a string")
    fallback: FallbackTopicOptions | None = None
    raw_fallback = reader.get("FallbackTopic")
    if isinstance(raw_fallback, Mapping):
        fallback_reader = _Reader(raw_fallback)
        name = fallback_reader.text("TopicName")
        errors.extend(f"FallbackTopic.{e}" for e in fallback_reader.errors)
        try:
            mode = parse_routing_mode(fallback_reader.get("RoutingMode"), "FallbackTopic.RoutingMode")
        except TopologyValidationError as exc:
            errors.extend(exc.errors)
            mode = None
        fallback = FallbackTopicOptions(topic_name=name or "", routing_mode=mode)
    elif raw_fallback is not None:
        errors.append("FallbackTopic: expected an object with 'TopicName' and 'RoutingMode'")
    common: dict[str, Any] = {
        "published_event_to_topics_map": published,
        "subscribed_event_to_topics_map": subscribed,
        "queue_name_to_subscription_name_map": queue_map,
        "fallback_topic": fallback,
    }
    if kind == MIGRATION_TOPOLOGY_OPTIONS_TYPE:
        to_migrate = reader.get("EventsToMigrateMap") or []
        if not isinstance(to_migrate, list) or not all(isinstance(e, str) for e in to_migrate):
            errors.append("EventsToMigrateMap: expected an array of event names")
            to_migrate = []
        rule_names = {
            k: v for k, v in reader.mapping("SubscribedEventToRuleNameMap").items() if isinstance(v, str)
        }
        publish_to = reader.text("TopicToPublishTo")
        subscribe_on = reader.text("TopicToSubscribeOn")
        for key, value in (("TopicToPublishTo", publish_to), ("TopicToSubscribeOn", subscribe_on)):
            if not value:
                errors.append(f"{key}: The {key} field is required.")
        if errors:
            raise TopologyValidationError(errors)
        return MigrationTopologyOptions(
            **common,
            topic_to_publish_to=publish_to or "",
            topic_to_subscribe_on=subscribe_on or "",
            events_to_migrate_map=tuple(dict.fromkeys(to_migrate)),
            subscribed_event_to_rule_name_map=rule_names,
        )
    throw = reader.boolean("ThrowIfUnmappedEventTypes", False)
    if errors:
        raise TopologyValidationError(errors)
    return TopologyOptions(**common, throw_if_unmapped_event_types=throw)


# ------------------------------------------------------------------------------------------ app settings

TOPOLOGY_OPTIONS_SETTING = AppSetting(
    "AzureServiceBus__TopologyOptions",
    "Topology options as NServiceBus TopologyOptions JSON ($type topology-options or "
    "migration-topology-options). Unset: topic-per-event with no mappings.",
)
FALLBACK_TOPIC_SETTING = AppSetting(
    "BUSBAR_FALLBACK_TOPIC",
    "Overrides FallbackTopic.TopicName of the topology options: unmapped events are published to and "
    "subscribed on this topic.",
)
FALLBACK_ROUTING_MODE_SETTING = AppSetting(
    "BUSBAR_FALLBACK_ROUTING_MODE",
    "Routing mode of the fallback topic: CorrelationFilter or SqlLikeFilter.",
    default="CorrelationFilter",
)
HIERARCHY_NAMESPACE_SETTING = AppSetting(
    "BUSBAR_HIERARCHY_NAMESPACE",
    "Optional entity-path prefix (NServiceBus HierarchyNamespace): queues and topics become <ns>/<name>, "
    "the triggers included.",
)

SETTINGS: tuple[AppSetting, ...] = (
    TOPOLOGY_OPTIONS_SETTING,
    FALLBACK_TOPIC_SETTING,
    FALLBACK_ROUTING_MODE_SETTING,
    HIERARCHY_NAMESPACE_SETTING,
)


def load_topology_options(env: Mapping[str, str] | None = None) -> TopologyOptions:
    """Options from app settings: ``AzureServiceBus__TopologyOptions`` (JSON), then the overrides
    ``BUSBAR_FALLBACK_TOPIC`` / ``BUSBAR_FALLBACK_ROUTING_MODE`` and ``BUSBAR_HIERARCHY_NAMESPACE``.

    The routing-mode override applies only with a fallback topic (from either place); an explicit
    ``BUSBAR_FALLBACK_ROUTING_MODE`` replaces the JSON's mode. Raises :class:`TopologyValidationError`
    for malformed JSON or an unknown mode; call :func:`shared.topology.validate` for the name rules."""
    values = os.environ if env is None else env
    raw = read(TOPOLOGY_OPTIONS_SETTING, values)
    options = parse_topology_options(raw) if raw else TopologyOptions()
    update: dict[str, Any] = {}
    fallback_topic = read(FALLBACK_TOPIC_SETTING, values)
    explicit_mode = (values.get(FALLBACK_ROUTING_MODE_SETTING.name) or "").strip() or None
    if fallback_topic is not None or (explicit_mode is not None and options.fallback_topic is not None):
        current = options.fallback_topic
        name = fallback_topic or (current.topic_name if current else "")
        if explicit_mode is not None:
            mode = parse_routing_mode(explicit_mode, FALLBACK_ROUTING_MODE_SETTING.name)
        elif current is not None and current.routing_mode is not None:
            mode = current.routing_mode
        else:
            mode = parse_routing_mode(
                FALLBACK_ROUTING_MODE_SETTING.default, FALLBACK_ROUTING_MODE_SETTING.name
            )
        update["fallback_topic"] = FallbackTopicOptions(topic_name=name, routing_mode=mode)
    hierarchy = read(HIERARCHY_NAMESPACE_SETTING, values)
    if hierarchy is not None:
        update["hierarchy_namespace"] = hierarchy
    return options.model_copy(update=update) if update else options
