"""Where events go: the publish destination and routing mode of an event, and the topics (with modes)
an event is subscribed on. Pure functions of the options (NServiceBus ``TopicPerEventTopology`` /
``MigrationTopology`` ``GetPublishDestinationCore`` and ``GetTopicRoutingMode``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shared.contracts import ContractError, Event
from shared.topology.errors import UnmappedEventError
from shared.topology.names import HierarchyNamespace
from shared.topology.options import (
    MigrationTopologyOptions,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
)


@dataclass(frozen=True, slots=True)
class PublishRoute:
    """The (hierarchy-prefixed) topic an event is published to and how it is stamped."""

    topic: str
    routing_mode: TopicRoutingMode


def unmapped_publish_message(event: str) -> str:
    return (
        f"Unmapped event type '{event}'. All events must be mapped in `PublishedEventToTopicsMap` when "
        "`ThrowIfUnmappedEventTypes` is set"
    )


def migration_unmapped_message(event: str, *, subscribe: bool) -> str:
    migrated = "MigratedSubscribedEvent" if subscribe else "MigratedPublishedEvent"
    return (
        "When using migration topology, every event needs to be marked either as migrated or pending "
        "migration "
        f"to avoid message loss. In the topology configuration use either {migrated}<'{event}'>() or "
        f"EventToMigrate<'{event}'>(), depending on the migration state of this event."
    )


def _contract(event: type[Event] | str) -> str:
    if isinstance(event, str):
        return event
    if event.is_abstract or not event.contract_name:
        raise ContractError(
            f"{event.__qualname__} is an interface (abstract contract) and cannot be published"
        )
    return event.contract_name


def publish_route(options: TopologyOptions, event_type: type[Event] | str) -> PublishRoute:
    """Destination topic and routing mode of ``event_type`` (a concrete event class or a contract name).

    Topic-per-event: the mapped topic, else the fallback topic, else :class:`UnmappedEventError` when
    ``ThrowIfUnmappedEventTypes`` is set, else the contract name. Mode: the entry's explicit mode, else the
    fallback mode for unmapped events and for mapped events whose raw topic is the fallback topic (ordinal,
    before prefixing), else NotMultiplexed. Migration: TopicToPublishTo for events to migrate, the mapped
    topic for migrated ones, never stamped."""
    name = _contract(event_type)
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    mapped = options.published_event_to_topics_map.get(name)
    if isinstance(options, MigrationTopologyOptions):
        if name in options.events_to_migrate_map:
            return PublishRoute(hierarchy.apply(options.topic_to_publish_to), TopicRoutingMode.NotMultiplexed)
        if mapped is not None:
            return PublishRoute(hierarchy.apply(mapped.topic), TopicRoutingMode.NotMultiplexed)
        raise UnmappedEventError(migration_unmapped_message(name, subscribe=False))
    fallback = options.fallback_topic
    if mapped is not None:
        mode = mapped.routing_mode
        if mode is None and fallback is not None and mapped.topic == fallback.topic_name:
            mode = fallback.routing_mode
        return PublishRoute(hierarchy.apply(mapped.topic), mode or TopicRoutingMode.NotMultiplexed)
    if fallback is not None:
        return PublishRoute(
            hierarchy.apply(fallback.topic_name), fallback.routing_mode or TopicRoutingMode.NotMultiplexed
        )
    if options.throw_if_unmapped_event_types:
        raise UnmappedEventError(unmapped_publish_message(name))
    return PublishRoute(hierarchy.apply(name), TopicRoutingMode.NotMultiplexed)


@dataclass(frozen=True, slots=True)
class SubscribeRoute:
    """One topic an event is subscribed on: raw (unprefixed) topic, prefixed topic, and resolved mode."""

    event: str
    raw_topic: str
    topic: str
    routing_mode: TopicRoutingMode


def subscribe_routes(
    options: TopologyOptions, event: str, explicit: Iterable[SubscriptionEntry] = ()
) -> list[SubscribeRoute]:
    """The topic-per-event subscription routes of ``event``: its mapped entries plus ``explicit`` ones
    (request-level ``SubscribeTo``), else the fallback topic, else the topic named after the event.

    A mapped entry without a mode whose raw topic equals the fallback topic inherits the fallback mode."""
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    entries: list[SubscriptionEntry] = list(options.subscribed_event_to_topics_map.get(event, ()))
    for entry in explicit:
        if entry not in entries:
            entries.append(entry)
    fallback = options.fallback_topic
    fallback_mode = fallback.routing_mode if fallback is not None else None
    if not entries:
        if fallback is not None:
            return [
                SubscribeRoute(
                    event,
                    fallback.topic_name,
                    hierarchy.apply(fallback.topic_name),
                    fallback_mode or TopicRoutingMode.NotMultiplexed,
                )
            ]
        return [SubscribeRoute(event, event, hierarchy.apply(event), TopicRoutingMode.NotMultiplexed)]
    routes: list[SubscribeRoute] = []
    for entry in entries:
        mode = entry.routing_mode
        if mode is None and fallback is not None and entry.topic == fallback.topic_name:
            mode = fallback_mode
        routes.append(
            SubscribeRoute(
                event, entry.topic, hierarchy.apply(entry.topic), mode or TopicRoutingMode.NotMultiplexed
            )
        )
    return routes
