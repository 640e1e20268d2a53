"""Publish destinations and routing modes (TopicPerEventTopology / MigrationTopology)."""

from __future__ import annotations

import pytest

from app.endpoints.sample.events import CustomerCreated, IOrderStatusChanged, OrderAccepted, OrderDeclined
from shared.contracts import ContractError
from shared.topology import (
    FallbackTopicOptions,
    MigrationTopologyOptions,
    PublishEntry,
    PublishRoute,
    TopicRoutingMode,
    TopologyOptions,
    UnmappedEventError,
    publish_route,
)

NM, CF, SQL = (
    TopicRoutingMode.NotMultiplexed,
    TopicRoutingMode.CorrelationFilter,
    TopicRoutingMode.SqlLikeFilter,
)


def test_mapped_events_are_published_to_the_mapped_topic() -> None:
    options = TopologyOptions(
        published_event_to_topics_map={
            "Shipping.OrderAccepted": PublishEntry(topic="Shipping.IOrderStatusChanged")
        }
    )
    assert publish_route(options, OrderAccepted) == PublishRoute("Shipping.IOrderStatusChanged", NM)


def test_unmapped_events_default_to_a_topic_named_after_the_contract() -> None:
    assert publish_route(TopologyOptions(), OrderDeclined) == PublishRoute("Shipping.OrderDeclined", NM)


def test_unmapped_events_throw_when_instructed_to() -> None:
    with pytest.raises(UnmappedEventError) as raised:
        publish_route(TopologyOptions(throw_if_unmapped_event_types=True), OrderAccepted)
    assert str(raised.value) == (
        "Unmapped event type 'Shipping.OrderAccepted'. All events must be mapped in "
        "`PublishedEventToTopicsMap` "
        "when `ThrowIfUnmappedEventTypes` is set"
    )


def test_unmapped_events_go_to_the_fallback_topic_with_its_mode_even_when_throwing_is_on() -> None:
    options = TopologyOptions(
        throw_if_unmapped_event_types=True,
        fallback_topic=FallbackTopicOptions(topic_name="Shared", routing_mode=CF),
    )
    assert publish_route(options, CustomerCreated) == PublishRoute("Shared", CF)


@pytest.mark.parametrize("fallback_mode", [CF, SQL])
def test_a_mapped_event_pointing_at_the_fallback_topic_inherits_its_mode(
    fallback_mode: TopicRoutingMode,
) -> None:
    options = TopologyOptions(
        published_event_to_topics_map={"Shipping.OrderAccepted": PublishEntry(topic="Shared")},
        fallback_topic=FallbackTopicOptions(topic_name="Shared", routing_mode=fallback_mode),
    )
    assert publish_route(options, OrderAccepted) == PublishRoute("Shared", fallback_mode)


def test_the_fallback_comparison_is_ordinal() -> None:
    options = TopologyOptions(
        published_event_to_topics_map={"Shipping.OrderAccepted": PublishEntry(topic="shared")},
        fallback_topic=FallbackTopicOptions(topic_name="Shared", routing_mode=CF),
    )
    assert publish_route(options, OrderAccepted) == PublishRoute("shared", NM)


def test_an_explicit_mode_wins_over_the_fallback_mode() -> None:
    options = TopologyOptions(
        published_event_to_topics_map={
            "Shipping.OrderAccepted": PublishEntry(topic="Shared", routing_mode=SQL)
        },
        fallback_topic=FallbackTopicOptions(topic_name="Shared", routing_mode=CF),
    )
    assert publish_route(options, OrderAccepted).routing_mode is SQL


def test_a_mapped_event_on_an_unrelated_topic_is_not_multiplexed() -> None:
    options = TopologyOptions(
        published_event_to_topics_map={"Shipping.OrderAccepted": PublishEntry(topic="Other")},
        fallback_topic=FallbackTopicOptions(topic_name="Shared", routing_mode=CF),
    )
    assert publish_route(options, OrderAccepted) == PublishRoute("Other", NM)


def test_publish_topics_are_prefixed_with_the_hierarchy_namespace() -> None:
    options = TopologyOptions(
        hierarchy_namespace="dev",
        published_event_to_topics_map={"Shipping.OrderAccepted": PublishEntry(topic="dev/Mapped")},
    )
    assert publish_route(options, OrderAccepted).topic == "dev/Mapped"
    assert publish_route(options, OrderDeclined).topic == "dev/Shipping.OrderDeclined"


def test_interfaces_cannot_be_published() -> None:
    with pytest.raises(ContractError, match="cannot be published"):
        publish_route(TopologyOptions(), IOrderStatusChanged)


def test_migration_publishes_events_to_migrate_to_the_bundle_and_migrated_ones_to_their_topic() -> None:
    options = MigrationTopologyOptions(
        topic_to_publish_to="bundle-1",
        topic_to_subscribe_on="bundle-2",
        events_to_migrate_map=("Shipping.OrderAccepted",),
        published_event_to_topics_map={
            "Tenant.CustomerCreated": PublishEntry(topic="Tenant.CustomerCreated", routing_mode=CF)
        },
    )
    assert publish_route(options, OrderAccepted) == PublishRoute("bundle-1", NM)
    assert publish_route(options, CustomerCreated) == PublishRoute(
        "Tenant.CustomerCreated", NM
    )  # never stamped
    with pytest.raises(UnmappedEventError) as raised:
        publish_route(options, OrderDeclined)
    assert str(raised.value) == (
        "When using migration topology, every event needs to be marked either as migrated or pending "
        "migration to "
        "avoid message loss. In the topology configuration use either "
        "MigratedPublishedEvent<'Shipping.OrderDeclined'>() "
        "or EventToMigrate<'Shipping.OrderDeclined'>(), depending on the migration state of this event."
    )
