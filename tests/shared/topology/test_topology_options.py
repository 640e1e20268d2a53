"""TopologyOptions in NServiceBus's JSON shape, and loading them from app settings."""

from __future__ import annotations

import json

import pytest

from shared.topology import (
    FallbackTopicOptions,
    MigrationTopologyOptions,
    PublishEntry,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
    TopologyValidationError,
    load_topology_options,
    parse_topology_options,
)
from shared.topology.options import SETTINGS

TOPOLOGY_JSON = {
    "$type": "topology-options",
    "PublishedEventToTopicsMap": {
        "Shipping.OrderAccepted": "Shipping.IOrderStatusChanged",
        "Tenant.CustomerCreated": {"Topic": "Tenant.CustomerLifecycle", "RoutingMode": "CorrelationFilter"},
    },
    "SubscribedEventToTopicsMap": {
        "Shipping.IOrderStatusChanged": ["Shipping.OrderAccepted", "Shipping.OrderDeclined"],
        "Tenant.CustomerCreated": {"Topic": "Tenant.CustomerLifecycle", "RoutingMode": "SqlLikeFilter"},
        "Billing.InvoiceIssued": "Billing.Invoices",
        "Mixed": ["a", {"Topic": "b", "RoutingMode": "NotMultiplexed"}],
    },
    "QueueNameToSubscriptionNameMap": {"billing": "billing-sub"},
    "FallbackTopic": {"TopicName": "SharedEvents", "RoutingMode": "SqlLikeFilter"},
    "ThrowIfUnmappedEventTypes": True,
}


def test_topic_per_event_options_read_every_entry_shape() -> None:
    options = parse_topology_options(json.dumps(TOPOLOGY_JSON))
    assert type(options) is TopologyOptions
    assert options.published_event_to_topics_map["Shipping.OrderAccepted"] == PublishEntry(
        topic="Shipping.IOrderStatusChanged"
    )
    assert options.published_event_to_topics_map["Tenant.CustomerCreated"].routing_mode is (
        TopicRoutingMode.CorrelationFilter
    )
    subscribed = options.subscribed_event_to_topics_map
    assert [e.topic for e in subscribed["Shipping.IOrderStatusChanged"]] == [
        "Shipping.OrderAccepted",
        "Shipping.OrderDeclined",
    ]
    assert subscribed["Tenant.CustomerCreated"] == (
        SubscriptionEntry(topic="Tenant.CustomerLifecycle", routing_mode=TopicRoutingMode.SqlLikeFilter),
    )
    assert subscribed["Mixed"][1].routing_mode is TopicRoutingMode.NotMultiplexed
    assert options.queue_name_to_subscription_name_map == {"billing": "billing-sub"}
    assert options.fallback_topic == FallbackTopicOptions(
        topic_name="SharedEvents", routing_mode=TopicRoutingMode.SqlLikeFilter
    )
    assert options.throw_if_unmapped_event_types


def test_writing_emits_strings_for_entries_without_mode_and_scalars_for_single_entries() -> None:
    written = parse_topology_options(TOPOLOGY_JSON).to_json_dict()
    assert written == TOPOLOGY_JSON
    assert parse_topology_options(
        json.loads(parse_topology_options(written).to_json())
    ) == parse_topology_options(TOPOLOGY_JSON)


def test_missing_type_means_topic_per_event_and_missing_collections_are_empty() -> None:
    options = parse_topology_options("{}")
    assert type(options) is TopologyOptions
    assert options.published_event_to_topics_map == {} and options.subscribed_event_to_topics_map == {}
    assert options.fallback_topic is None and not options.throw_if_unmapped_event_types


def test_migration_options_read_and_round_trip() -> None:
    document = {
        "$type": "migration-topology-options",
        "TopicToPublishTo": "bundle-1",
        "TopicToSubscribeOn": "bundle-2",
        "EventsToMigrateMap": ["Shipping.OrderAccepted"],
        "SubscribedEventToRuleNameMap": {"Shipping.OrderAccepted": "OrderAcceptedRule"},
        "PublishedEventToTopicsMap": {"Tenant.CustomerCreated": "Tenant.CustomerCreated"},
        "SubscribedEventToTopicsMap": {"Tenant.CustomerCreated": "Tenant.CustomerCreated"},
    }
    options = parse_topology_options(document)
    assert isinstance(options, MigrationTopologyOptions)
    assert options.is_hierarchy and options.throw_if_unmapped_event_types
    assert options.events_to_migrate_map == ("Shipping.OrderAccepted",)
    written = options.to_json_dict()
    assert "ThrowIfUnmappedEventTypes" not in written  # [JsonIgnore] on migration options
    assert parse_topology_options(written) == options


def test_migration_options_require_both_topics() -> None:
    with pytest.raises(TopologyValidationError) as raised:
        parse_topology_options({"$type": "migration-topology-options"})
    assert raised.value.errors == [
        "TopicToPublishTo: The TopicToPublishTo field is required.",
        "TopicToSubscribeOn: The TopicToSubscribeOn field is required.",
    ]


def test_every_shape_problem_is_reported_at_once() -> None:
    with pytest.raises(TopologyValidationError) as raised:
        parse_topology_options(
            {
                "PublishedEventToTopicsMap": {"A": {"RoutingMode": "CorrelationFilter"}, "B": 5},
                "SubscribedEventToTopicsMap": {"C": {"Topic": "c", "RoutingMode": "correlationfilter"}},
                "FallbackTopic": {"TopicName": "f", "RoutingMode": "Bogus"},
            }
        )
    assert raised.value.errors == [
        "PublishedEventToTopicsMap[A]: Topic is required",
        "PublishedEventToTopicsMap[B]: expected a topic name or an object with 'Topic', got 5",
        # Enum names are case-sensitive, as Enum.Parse in NServiceBus.
        "SubscribedEventToTopicsMap[C]: 'RoutingMode' has value 'correlationfilter' which is not a "
        "recognized "
        "TopicRoutingMode.",
        "FallbackTopic.RoutingMode: 'RoutingMode' has value 'Bogus' which is not a recognized "
        "TopicRoutingMode.",
    ]
    assert str(raised.value).count("; ") == 3


def test_malformed_json_is_a_validation_error() -> None:
    with pytest.raises(TopologyValidationError, match="not valid JSON"):
        parse_topology_options("{")
    with pytest.raises(TopologyValidationError, match="must be a JSON object"):
        parse_topology_options("[]")


def test_app_settings_give_json_options_with_fallback_and_hierarchy_overrides() -> None:
    env = {
        "AzureServiceBus__TopologyOptions": json.dumps(TOPOLOGY_JSON),
        "BUSBAR_FALLBACK_TOPIC": "Busbar.Fallback",
        "BUSBAR_HIERARCHY_NAMESPACE": "dev",
    }
    options = load_topology_options(env)
    assert options.fallback_topic == FallbackTopicOptions(
        topic_name="Busbar.Fallback", routing_mode=TopicRoutingMode.SqlLikeFilter
    )
    assert options.hierarchy_namespace == "dev"
    assert (
        options.published_event_to_topics_map
        == parse_topology_options(TOPOLOGY_JSON).published_event_to_topics_map
    )


def test_app_settings_fallback_topic_alone_defaults_to_correlation_filter() -> None:
    options = load_topology_options({"BUSBAR_FALLBACK_TOPIC": "Shared"})
    assert options.fallback_topic == FallbackTopicOptions(
        topic_name="Shared", routing_mode=TopicRoutingMode.CorrelationFilter
    )
    explicit = load_topology_options(
        {"BUSBAR_FALLBACK_TOPIC": "Shared", "BUSBAR_FALLBACK_ROUTING_MODE": "SqlLikeFilter"}
    )
    assert explicit.fallback_topic is not None
    assert explicit.fallback_topic.routing_mode is TopicRoutingMode.SqlLikeFilter


def test_no_app_settings_mean_default_topic_per_event_options() -> None:
    assert load_topology_options({}) == TopologyOptions()


def test_an_unknown_fallback_mode_in_app_settings_is_refused_with_the_setting_name() -> None:
    with pytest.raises(
        TopologyValidationError, match="BUSBAR_FALLBACK_ROUTING_MODE: 'RoutingMode' has value 'Sql'"
    ):
        load_topology_options({"BUSBAR_FALLBACK_TOPIC": "Shared", "BUSBAR_FALLBACK_ROUTING_MODE": "Sql"})


def test_every_setting_read_is_declared() -> None:
    assert {s.name for s in SETTINGS} == {
        "AzureServiceBus__TopologyOptions",
        "BUSBAR_FALLBACK_TOPIC",
        "BUSBAR_FALLBACK_ROUTING_MODE",
        "BUSBAR_HIERARCHY_NAMESPACE",
    }
