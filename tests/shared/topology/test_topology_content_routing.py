"""Routing by content on the emulator: a filtered subscription holds its condition's rule and no match-all
rule, in every routing mode the condition is AND-ed with the event's type condition, a changed condition
rewrites the rule in place, and adding a condition to an unfiltered subscription stops its match-all rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from azure.servicebus import ServiceBusClient

from app.bootstrap import provision_endpoints
from app.endpoints.sample import sample_catalog
from app.endpoints.sample.events import OrderAccepted, OrderDeclined
from shared.contracts import Event
from shared.management import ManagementClient
from shared.topology import Provisioner, Publisher, TopologyOptions, desired_state, parse_topology_options
from shared.topology.arm import filter_of
from shared.topology.names import HierarchyNamespace
from shared.topology.plan import EntityDefaults
from tests.emulator.sdk_helpers import drain
from tests.shared.topology.topology_helpers import provision

OA = "Shipping.OrderAccepted"


def _rules(management: ManagementClient, topic: str, subscription: str) -> dict[str, str]:
    """``{rule name (lower case): its filter as SQL or correlation text}`` of one subscription."""
    found = management.rules.list_by_subscriptions(*management.scope, topic, subscription)
    return {r.name.lower(): filter_of(r).expression for r in found}


def _orders(
    sb_client: ServiceBusClient, options: TopologyOptions, queue: str, events: Sequence[Event]
) -> list[str]:
    """Publish ``events`` and return the order ids ``queue`` received, sorted."""
    with Publisher(sb_client, options, endpoint_name="shipping") as publisher:
        publisher.publish(list(events))
    with sb_client.get_queue_receiver(
        HierarchyNamespace(options.hierarchy_namespace).apply(queue)
    ) as receiver:
        return sorted(OrderAccepted.model_validate_json(str(m)).order_id for m in drain(receiver, None, 1))


def test_the_sample_sales_endpoint_receives_only_high_value_orders_and_billing_all_of_them(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    catalog = sample_catalog()
    settings = {"BUSBAR_SALES_QUEUE": f"sales-{ns}", "BUSBAR_BILLING_QUEUE": f"billing-{ns}"}
    endpoints = [catalog.get("sales"), catalog.get("billing")]
    provision_endpoints(
        management, options, EntityDefaults(), settings, [e for e in endpoints if e is not None]
    )
    topic = HierarchyNamespace(ns).apply(OA)

    events = [OrderAccepted(order_id="big", amount=5000), OrderAccepted(order_id="small", amount=10)]
    with Publisher(sb_client, options, endpoint_name="shipping") as publisher:
        publisher.publish(list(events))

    received: dict[str, list[str]] = {}
    for queue in settings.values():
        with sb_client.get_queue_receiver(HierarchyNamespace(ns).apply(queue)) as receiver:
            received[queue] = sorted(
                OrderAccepted.model_validate_json(str(m)).order_id for m in drain(receiver, None, 1)
            )
    assert received == {f"sales-{ns}": ["big"], f"billing-{ns}": ["big", "small"]}
    sales_rules = _rules(management, topic, f"sales-{ns}")
    assert sales_rules == {"$default": "1=0", OA.lower(): "amount >= 1000"}  # no 1=1 rule
    assert _rules(management, topic, f"billing-{ns}") == {"$default": "1=1"}


def test_in_the_correlation_filter_mode_a_correlation_condition_joins_the_events_stamp_in_one_filter(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    orders = f"orders-{ns}"  # a mapped topic is named as given: fresh per test
    options = parse_topology_options(
        {
            "HierarchyNamespace": ns,
            "PublishedEventToTopicsMap": {
                OA: {"Topic": orders, "RoutingMode": "CorrelationFilter"},
                "Shipping.OrderDeclined": {"Topic": orders, "RoutingMode": "CorrelationFilter"},
            },
        }
    )
    entry: dict[str, Any] = {"type": OA, "topic": orders, "routingMode": "CorrelationFilter"}
    provision(management, options, "analytics", [{**entry, "filter": {"region": "emea"}}])

    received = _orders(
        sb_client,
        options,
        "analytics",
        [
            OrderAccepted(order_id="eu", region="emea"),
            OrderAccepted(order_id="us", region="amer"),
            OrderDeclined(order_id="declined"),
        ],
    )

    assert received == ["eu"]
    rules = _rules(management, orders, "analytics")
    assert rules == {"$default": "1=0", OA.lower(): "[Shipping.OrderAccepted] = TRUE AND [region] = 'emea'"}


def test_in_the_sql_like_filter_mode_a_sql_condition_is_anded_with_the_enclosed_types_like(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    orders = f"orders-{ns}"  # a mapped topic is named as given: fresh per test
    options = parse_topology_options(
        {
            "HierarchyNamespace": ns,
            "PublishedEventToTopicsMap": {
                OA: {"Topic": orders, "RoutingMode": "SqlLikeFilter"},
                "Shipping.OrderDeclined": {"Topic": orders, "RoutingMode": "SqlLikeFilter"},
            },
        }
    )
    entry = {"type": OA, "topic": orders, "routingMode": "SqlLikeFilter", "filter": "amount >= 1000"}
    provision(management, options, "sales", [entry])

    received = _orders(
        sb_client,
        options,
        "sales",
        [
            OrderAccepted(order_id="big", amount=5000),
            OrderAccepted(order_id="small", amount=10),
            OrderDeclined(order_id="d"),
        ],
    )

    assert received == ["big"]
    rules = _rules(management, orders, "sales")
    assert rules[OA.lower()] == f"[NServiceBus.EnclosedMessageTypes] LIKE '%{OA}%' AND (amount >= 1000)"


def test_a_changed_condition_rewrites_the_rule_in_place(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    provision(management, options, "sales", [{"type": OA, "filter": "amount >= 1000"}])
    provisioner = Provisioner(management)

    plan = provisioner.plan(desired_state(options, "sales", [{"type": OA, "filter": "amount >= 100"}]))
    result = provisioner.apply(plan)

    topic = HierarchyNamespace(ns).apply(OA)
    [update] = [i for i in plan.items if i.action == "update"]
    assert (update.kind, update.path) == ("rule", f"{topic}/Subscriptions/sales/Rules/{OA}")
    assert update.details["existing"]["sqlExpression"] == "amount >= 1000"
    assert update.details["desired"]["sqlExpression"] == "amount >= 100"
    assert result.updated == [update.path] and result.created == []
    assert _rules(management, topic, "sales") == {"$default": "1=0", OA.lower(): "amount >= 100"}
    assert _orders(sb_client, options, "sales", [OrderAccepted(order_id="mid", amount=500)]) == ["mid"]


def test_a_condition_added_to_an_unfiltered_subscription_ends_its_match_all_rule(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    provision(management, options, "sales", [OA])
    topic = HierarchyNamespace(ns).apply(OA)
    assert _rules(management, topic, "sales") == {"$default": "1=1"}
    provisioner = Provisioner(management)

    plan = provisioner.plan(desired_state(options, "sales", [{"type": OA, "filter": "amount >= 1000"}]))
    provisioner.apply(plan)

    actions = {(i.action, i.path.rsplit("/", 1)[-1].lower()) for i in plan.items if i.kind == "rule"}
    assert actions == {("create", OA.lower()), ("update", "$default")}
    assert _rules(management, topic, "sales") == {"$default": "1=0", OA.lower(): "amount >= 1000"}
    received = _orders(
        sb_client,
        options,
        "sales",
        [OrderAccepted(order_id="big", amount=5000), OrderAccepted(order_id="small")],
    )
    assert received == ["big"]


def test_without_the_false_default_rule_the_match_all_default_is_deleted_after_the_condition_is_in(
    management: ManagementClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    provision(management, options, "sales", [OA])
    provisioner = Provisioner(management)
    wanted = desired_state(
        options, "sales", [{"type": OA, "filter": "amount >= 1000"}], false_default_rule=False
    )

    plan = provisioner.plan(wanted)
    provisioner.apply(plan)

    [delete] = [i for i in plan.items if i.action == "delete"]
    assert delete.name == "$Default" and delete.after_creates
    assert _rules(management, HierarchyNamespace(ns).apply(OA), "sales") == {OA.lower(): "amount >= 1000"}


def test_dropping_the_condition_gives_the_match_all_default_back_in_place_before_anything_goes(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    provision(management, options, "sales", [{"type": OA, "filter": "amount >= 1000"}])
    provisioner = Provisioner(management)

    plan = provisioner.plan(desired_state(options, "sales", [OA]))
    provisioner.apply(plan)

    topic = HierarchyNamespace(ns).apply(OA)
    [update] = [i for i in plan.items if i.action == "update"]
    assert update.name.lower() == "$default" and update.details["desired"]["sqlExpression"] == "1=1"
    # plan/apply never delete: the condition's rule stays, OR-ed with 1=1 (a PUT deletes it, after this).
    assert _rules(management, topic, "sales") == {"$default": "1=1", OA.lower(): "amount >= 1000"}
    assert _orders(sb_client, options, "sales", [OrderAccepted(order_id="small", amount=10)]) == ["small"]
