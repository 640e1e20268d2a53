"""Validation of topology options with NServiceBus's rules and verbatim messages, every violation at once.

Messages are ``"<Member>: <message>"`` as NServiceBus's DataAnnotations validator produces them; the
migration cross-rules (``[ValidMigrationTopology]``, a class-level attribute) carry no member. Queue and
topic names are checked after the hierarchy prefix is added, as NServiceBus does.
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.topology.errors import TopologyValidationError
from shared.topology.names import HierarchyNamespace, invalid
from shared.topology.options import MigrationTopologyOptions, TopicRoutingMode, TopologyOptions

_LIMIT_MESSAGES = {
    "topic": "The following topic name(s) do not comply with the Azure Service Bus topic limits: ",
    "queue": "The following queue name(s) do not comply with the Azure Service Bus queue limits: ",
    "subscription": "The following subscription name(s) do not comply with the Azure Service Bus "
    "subscription limits: ",
    "rule": "The following rule name(s) do not comply with the Azure Service Bus rule limits: ",
}

FALLBACK_MODE_MESSAGE = "'RoutingMode' must be either 'CorrelationFilter' or 'SqlLikeFilter'."


def names_error(member: str, names: Iterable[str], kind: str) -> str | None:
    """The NServiceBus message for the invalid ``kind`` names among ``names``, or None."""
    bad = invalid(names, kind)
    if not bad:
        return None
    return f"{member}: {_LIMIT_MESSAGES[kind]}{', '.join(bad)}"


def validation_errors(options: TopologyOptions) -> list[str]:
    """Every rule ``options`` break (empty when valid)."""
    hierarchy = HierarchyNamespace(options.hierarchy_namespace)
    errors: list[str] = []

    def add(message: str | None) -> None:
        if message is not None:
            errors.append(message)

    add(
        names_error(
            "PublishedEventToTopicsMap",
            (hierarchy.apply(e.topic) for e in options.published_event_to_topics_map.values()),
            "topic",
        )
    )
    add(
        names_error(
            "SubscribedEventToTopicsMap",
            (
                hierarchy.apply(e.topic)
                for entries in options.subscribed_event_to_topics_map.values()
                for e in entries
            ),
            "topic",
        )
    )
    queue_map = options.queue_name_to_subscription_name_map
    add(names_error("QueueNameToSubscriptionNameMap", (hierarchy.apply(q) for q in queue_map), "queue"))
    add(
        names_error(
            "QueueNameToSubscriptionNameMap",
            (hierarchy.unprefixed(s) for s in queue_map.values()),
            "subscription",
        )
    )
    fallback = options.fallback_topic
    if fallback is not None:
        add(names_error("FallbackTopic.TopicName", [hierarchy.apply(fallback.topic_name)], "topic"))
        if fallback.routing_mode not in (TopicRoutingMode.CorrelationFilter, TopicRoutingMode.SqlLikeFilter):
            errors.append(f"FallbackTopic.RoutingMode: {FALLBACK_MODE_MESSAGE}")
    if options.hierarchy_namespace is not None and options.hierarchy_namespace.strip():
        # The prefix must itself form a valid path (NServiceBus rejects e.g. "bad?prefix").
        add(names_error("HierarchyNamespace", [options.hierarchy_namespace.rstrip("/")], "topic"))
    if isinstance(options, MigrationTopologyOptions):
        errors.extend(_migration_errors(options, hierarchy))
    return errors


def _migration_errors(options: MigrationTopologyOptions, hierarchy: HierarchyNamespace) -> list[str]:
    errors: list[str] = []
    for member, topic in (
        ("TopicToPublishTo", options.topic_to_publish_to),
        ("TopicToSubscribeOn", options.topic_to_subscribe_on),
    ):
        if not topic:
            errors.append(f"{member}: The {member} field is required.")
        else:
            message = names_error(member, [hierarchy.apply(topic)], "topic")
            if message is not None:
                errors.append(message)
    message = names_error(
        "SubscribedEventToRuleNameMap", options.subscribed_event_to_rule_name_map.values(), "rule"
    )
    if message is not None:
        errors.append(message)
    to_migrate = set(options.events_to_migrate_map)
    for event, entry in options.published_event_to_topics_map.items():
        if event in to_migrate:
            errors.append(
                f"Event '{event}' is in the migration map and in the published event to topics map. An event "
                "type cannot be marked for migration and mapped to a topic at the same time."
            )
        if entry.topic.lower() == options.topic_to_publish_to.lower():
            errors.append(
                f"The topic to publish '{entry.topic}' for '{event}' cannot be the same as the topic to "
                f"publish to '{options.topic_to_publish_to}' for the migration topology."
            )
    for event, entries in options.subscribed_event_to_topics_map.items():
        if event in to_migrate:
            errors.append(
                f"Event '{event}' is in the migration map and in the subscribed event to topics map. An "
                "event "
                "type cannot be marked for migration and mapped to a topic at the same time."
            )
        for sub_entry in entries:
            if sub_entry.topic.lower() == options.topic_to_subscribe_on.lower():
                errors.append(
                    f"The topic to subscribe '{sub_entry.topic}' for '{event}' cannot be the same as the "
                    "topic "
                    f"to subscribe on '{options.topic_to_subscribe_on}' for the migration topology."
                )
            if sub_entry.routing_mode is not None:
                errors.append(
                    f"Subscription entry for event '{event}' has a routing mode of "
                    f"'{sub_entry.routing_mode}' "
                    "but the migration topology does not support explicit routing modes. Use the "
                    "topic-per-event topology instead."
                )
    return errors


def validate(options: TopologyOptions) -> TopologyOptions:
    """``options`` unchanged when valid; otherwise :class:`TopologyValidationError` with every violation."""
    errors = validation_errors(options)
    if errors:
        raise TopologyValidationError(errors)
    return options
