"""Option validation with NServiceBus's exact messages, every violation at once."""

from __future__ import annotations

import pytest

from shared.topology import (
    FallbackTopicOptions,
    MigrationTopologyOptions,
    PublishEntry,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
    TopologyValidationError,
    validate,
    validation_errors,
)


def test_invalid_names_are_listed_per_member_with_the_nservicebus_messages() -> None:
    options = TopologyOptions(
        published_event_to_topics_map={"A": PublishEntry(topic="bad?topic"), "B": PublishEntry(topic="ok")},
        subscribed_event_to_topics_map={
            "C": (SubscriptionEntry(topic="-bad"), SubscriptionEntry(topic="x#y"))
        },
        queue_name_to_subscription_name_map={"bad?queue": "x" * 51},
    )
    assert validation_errors(options) == [
        "PublishedEventToTopicsMap: The following topic name(s) do not comply with the Azure Service Bus "
        "topic "
        "limits: bad?topic",
        "SubscribedEventToTopicsMap: The following topic name(s) do not comply with the Azure Service Bus "
        "topic "
        "limits: -bad, x#y",
        "QueueNameToSubscriptionNameMap: The following queue name(s) do not comply with the Azure Service "
        "Bus "
        "queue limits: bad?queue",
        "QueueNameToSubscriptionNameMap: The following subscription name(s) do not comply with the Azure "
        "Service "
        f"Bus subscription limits: {'x' * 51}",
    ]
    with pytest.raises(TopologyValidationError) as raised:
        validate(options)
    assert raised.value.errors == validation_errors(options)
    assert str(raised.value) == "; ".join(raised.value.errors)


@pytest.mark.parametrize("mode", [None, TopicRoutingMode.NotMultiplexed])
def test_fallback_topic_mode_must_be_a_filter_mode(mode: TopicRoutingMode | None) -> None:
    options = TopologyOptions(fallback_topic=FallbackTopicOptions(topic_name="Shared", routing_mode=mode))
    assert validation_errors(options) == [
        "FallbackTopic.RoutingMode: 'RoutingMode' must be either 'CorrelationFilter' or 'SqlLikeFilter'."
    ]


def test_fallback_topic_name_is_checked_for_length_and_characters() -> None:
    too_long = TopologyOptions(
        fallback_topic=FallbackTopicOptions(topic_name="a" * 261, routing_mode=TopicRoutingMode.SqlLikeFilter)
    )
    assert validation_errors(too_long)[0].startswith("FallbackTopic.TopicName: The following topic name(s)")
    bad = TopologyOptions(
        fallback_topic=FallbackTopicOptions(
            topic_name="bad?name", routing_mode=TopicRoutingMode.SqlLikeFilter
        )
    )
    assert validation_errors(bad) == [
        "FallbackTopic.TopicName: The following topic name(s) do not comply with the Azure Service Bus topic "
        "limits: bad?name"
    ]


def test_names_are_checked_after_the_hierarchy_prefix_is_added() -> None:
    options = TopologyOptions(
        hierarchy_namespace="h" * 200,
        fallback_topic=FallbackTopicOptions(
            topic_name="t" * 60, routing_mode=TopicRoutingMode.CorrelationFilter
        ),
    )
    assert validation_errors(options) == [
        "FallbackTopic.TopicName: The following topic name(s) do not comply with the Azure Service Bus topic "
        f"limits: {'h' * 200}/{'t' * 60}"
    ]


def test_a_hierarchy_namespace_with_invalid_characters_is_refused() -> None:
    assert validation_errors(TopologyOptions(hierarchy_namespace="bad?prefix")) == [
        "HierarchyNamespace: The following topic name(s) do not comply with the Azure Service Bus topic "
        "limits: "
        "bad?prefix"
    ]


def test_valid_options_validate_to_themselves() -> None:
    options = TopologyOptions(
        published_event_to_topics_map={
            "Shipping.OrderAccepted": PublishEntry(topic="Shipping.IOrderStatusChanged")
        },
        fallback_topic=FallbackTopicOptions(
            topic_name="Shared", routing_mode=TopicRoutingMode.CorrelationFilter
        ),
    )
    assert validate(options) is options


def test_migration_cross_rules_have_the_nservicebus_messages() -> None:
    options = MigrationTopologyOptions(
        topic_to_publish_to="bundle-1",
        topic_to_subscribe_on="bundle-2",
        events_to_migrate_map=("Ev.A", "Ev.B"),
        published_event_to_topics_map={
            "Ev.A": PublishEntry(topic="a"),
            "Ev.C": PublishEntry(topic="Bundle-1"),
        },
        subscribed_event_to_topics_map={
            "Ev.B": (SubscriptionEntry(topic="b"),),
            "Ev.D": (
                SubscriptionEntry(topic="bundle-2"),
                SubscriptionEntry(topic="d", routing_mode=TopicRoutingMode.CorrelationFilter),
            ),
        },
        subscribed_event_to_rule_name_map={"Ev.A": "bad/rule"},
    )
    assert validation_errors(options) == [
        "SubscribedEventToRuleNameMap: The following rule name(s) do not comply with the Azure Service Bus "
        "rule "
        "limits: bad/rule",
        "Event 'Ev.A' is in the migration map and in the published event to topics map. An event type "
        "cannot be "
        "marked for migration and mapped to a topic at the same time.",
        "The topic to publish 'Bundle-1' for 'Ev.C' cannot be the same as the topic to publish to "
        "'bundle-1' for "
        "the migration topology.",
        "Event 'Ev.B' is in the migration map and in the subscribed event to topics map. An event type "
        "cannot be "
        "marked for migration and mapped to a topic at the same time.",
        "The topic to subscribe 'bundle-2' for 'Ev.D' cannot be the same as the topic to subscribe on "
        "'bundle-2' "
        "for the migration topology.",
        "Subscription entry for event 'Ev.D' has a routing mode of 'CorrelationFilter' but the migration "
        "topology "
        "does not support explicit routing modes. Use the topic-per-event topology instead.",
    ]


def test_migration_topics_are_required_and_valid() -> None:
    options = MigrationTopologyOptions(topic_to_publish_to="", topic_to_subscribe_on="bad?topic")
    assert validation_errors(options) == [
        "TopicToPublishTo: The TopicToPublishTo field is required.",
        "TopicToSubscribeOn: The following topic name(s) do not comply with the Azure Service Bus topic "
        "limits: "
        "bad?topic",
    ]
