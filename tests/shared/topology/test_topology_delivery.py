"""End to end on the emulator: two endpoints per topology, provisioned through the Provisioner
(azure-mgmt-servicebus), the seeds' events published through the Publisher (azure-servicebus), and exactly
the expected events in each endpoint's queue."""

from __future__ import annotations

from azure.servicebus import ServiceBusClient

from shared.management import ManagementClient
from shared.topology import (
    FallbackTopicOptions,
    MigrationTopologyOptions,
    Provisioner,
    PublishEntry,
    SubscriptionEntry,
    TopicRoutingMode,
    TopologyOptions,
    desired_state,
)
from tests.shared.topology.topology_helpers import CC, CD, CU, OA, OAV2, OD, deliver, publish_and_collect

CF, SQL = TopicRoutingMode.CorrelationFilter, TopicRoutingMode.SqlLikeFilter
SHIPPING = ("Shipping.OrderAccepted", "Shipping.OrderDeclined", "Shipping.OrderAcceptedV2")
SHIPPING_CONTRACTS = (*SHIPPING, "Shipping.IOrderAccepted", "Shipping.IOrderStatusChanged")
CUSTOMERS = (CC, CU, CD)


def test_topic_per_event_delivers_each_event_to_the_endpoints_subscribed_to_its_topic(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    status_changes = [
        {"type": "Shipping.IOrderStatusChanged", "topic": "Shipping.OrderAccepted"},
        {"type": "Shipping.IOrderStatusChanged", "topic": "Shipping.OrderDeclined"},
    ]
    received, result = deliver(
        management,
        sb_client,
        options,
        {"sales": (options, [OA]), "billing": (options, [*status_changes, CC])},
    )
    assert received == {"sales": [OA], "billing": sorted([OA, OD, CC])}
    # Topics exist only where someone subscribed: the rest are dropped with a warning, as in NServiceBus.
    assert sorted(m.event for m in result.dropped) == sorted([OAV2, CU, CD])


def test_fallback_topic_with_correlation_filters_matches_exact_contracts(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(
        hierarchy_namespace=ns,
        fallback_topic=FallbackTopicOptions(topic_name="SharedEvents", routing_mode=CF),
    )
    received, result = deliver(
        management,
        sb_client,
        options,
        {
            "sales": (options, ["Shipping.IOrderAccepted"]),
            "crm": (options, [OA, "Tenant.ICustomerLifecycleEvent"]),
        },
    )
    assert received == {"sales": sorted([OA, OD, OAV2]), "crm": sorted([OA, CC, CU, CD])}
    assert {m.topic for m in result.sent} == {f"{ns}/SharedEvents"} and not result.dropped


def test_fallback_topic_with_sql_like_filters_also_matches_names_sharing_a_prefix(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(
        hierarchy_namespace=ns,
        fallback_topic=FallbackTopicOptions(topic_name="SharedEvents", routing_mode=SQL),
    )
    received, _ = deliver(
        management,
        sb_client,
        options,
        {
            "sales": (options, ["Shipping.IOrderAccepted"]),
            "crm": (options, [OA, "Tenant.ICustomerLifecycleEvent"]),
        },
    )
    # LIKE '%Shipping.OrderAccepted%' also matches Shipping.OrderAcceptedV2 (NServiceBus #509, by design).
    assert received == {"sales": sorted([OA, OD, OAV2]), "crm": sorted([OA, OAV2, CC, CU, CD])}


def test_multiplexed_topics_deliver_everything_on_catch_all_and_only_matches_on_correlation(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(
        hierarchy_namespace=ns,
        published_event_to_topics_map={
            **{e: PublishEntry(topic="Tenant.CustomerLifecycle") for e in CUSTOMERS},
            OA: PublishEntry(topic="Shipping.IOrderStatusChanged", routing_mode=CF),
            OD: PublishEntry(topic="Shipping.IOrderStatusChanged", routing_mode=CF),
        },
    )
    lifecycle = [{"type": e, "topic": "Tenant.CustomerLifecycle"} for e in CUSTOMERS]
    received, result = deliver(
        management,
        sb_client,
        options,
        {
            "crm": (options, lifecycle),
            "billing": (
                options,
                [
                    {"type": OD, "topic": "Shipping.IOrderStatusChanged", "routingMode": "CorrelationFilter"},
                    {"type": CU, "topic": "Tenant.CustomerLifecycle"},
                ],
            ),
        },
    )
    # A catch-all subscriber of a multiplexed topic gets every event on it, not only the one it asked for.
    assert received == {"crm": sorted(CUSTOMERS), "billing": sorted([OD, CC, CU, CD])}
    assert [m.event for m in result.dropped] == [OAV2]


def _bundle(ns: str, subscribe_on: str = "bundle-1") -> MigrationTopologyOptions:
    return MigrationTopologyOptions(
        hierarchy_namespace=ns,
        topic_to_publish_to="bundle-1",
        topic_to_subscribe_on=subscribe_on,
        events_to_migrate_map=(*SHIPPING_CONTRACTS, *CUSTOMERS, "Tenant.ICustomerLifecycleEvent"),
    )


def test_bundle_topic_routes_by_sql_rules_on_each_endpoint_subscription(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = _bundle(ns)
    received, result = deliver(
        management,
        sb_client,
        options,
        {"sales": (options, ["Shipping.IOrderStatusChanged"]), "crm": (options, [OA, CD])},
    )
    assert received == {"sales": sorted([OA, OD, OAV2]), "crm": sorted([OA, OAV2, CD])}
    assert {m.topic for m in result.sent} == {f"{ns}/bundle-1"}


def test_hierarchy_forwards_bundle_1_to_bundle_2_so_old_and_new_endpoints_both_receive(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    old, new = _bundle(ns), _bundle(ns, subscribe_on="bundle-2")
    received, _ = deliver(
        management,
        sb_client,
        old,
        {
            "legacy": (old, ["Shipping.IOrderAccepted"]),
            "newcomer": (new, [OD, "Tenant.ICustomerLifecycleEvent"]),
        },
    )
    assert received == {"legacy": sorted([OA, OD, OAV2]), "newcomer": sorted([OD, CC, CU, CD])}
    subscriptions = [
        s.name for s in management.subscriptions.list_by_topic(*management.scope, f"{ns}/bundle-1")
    ]
    assert sorted(subscriptions) == ["forwardTo-bundle-2", "legacy"]


def test_migration_serves_events_to_migrate_from_the_bundle_and_migrated_ones_from_their_topics(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = MigrationTopologyOptions(
        hierarchy_namespace=ns,
        events_to_migrate_map=SHIPPING_CONTRACTS,
        published_event_to_topics_map={e: PublishEntry(topic=e) for e in CUSTOMERS},
        subscribed_event_to_topics_map={e: (SubscriptionEntry(topic=e),) for e in CUSTOMERS},
    )
    received, result = deliver(
        management,
        sb_client,
        options,
        {"sales": (options, ["Shipping.IOrderAccepted", CC]), "crm": (options, [OD, CU, CD])},
    )
    assert received == {"sales": sorted([OA, OD, OAV2, CC]), "crm": sorted([OD, CU, CD])}
    assert {m.topic for m in result.sent} == {f"{ns}/bundle-1", *(f"{ns}/{e}" for e in CUSTOMERS)}


def test_a_bundle_without_false_default_rules_routes_the_same_with_one_rule_less_per_endpoint(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = _bundle(ns)
    provisioner = Provisioner(management)
    for queue, events in {"sales": ["Shipping.IOrderStatusChanged"], "crm": [OA, CD]}.items():
        plan = provisioner.plan(desired_state(options, queue, events, false_default_rule=False))
        provisioner.apply(plan)
    rules = {
        name: sorted(
            r.name for r in management.rules.list_by_subscriptions(*management.scope, f"{ns}/bundle-1", name)
        )
        for name in ("sales", "crm")
    }
    # ARM's automatic $Default 1=1 is gone and no $default 1=0 took its place.
    assert rules == {"sales": ["Shipping.IOrderStatusChanged"], "crm": sorted([OA, CD])}

    received, _ = publish_and_collect(sb_client, options, ["sales", "crm"])
    assert received == {"sales": sorted([OA, OD, OAV2]), "crm": sorted([OA, OAV2, CD])}
