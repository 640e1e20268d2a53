"""The router's bridge and promoted properties, on the wire: an event read from the fallback topic is copied
to its dedicated topic with its promoted properties and their AMQP types, so a subscription there that
routes by content (a SQL rule on ``amount``) sees the copy as it would have seen the original."""

from __future__ import annotations

from azure.mgmt.servicebus.models import (
    CorrelationFilter,
    Rule,
    Ruleproperties,
    SBQueue,
    SBSubscription,
    SBSubscriptionProperties,
    SBTopic,
    SqlFilter,
)
from azure.servicebus import ServiceBusReceivedMessage

from app.endpoints.sample.events import OrderAccepted
from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace
from shared.amqp.receiver import EntityReceiver
from shared.envelope.properties import AmqpType, amqp_type
from shared.envelope.sdk import from_received, readable_body
from shared.messages import IncomingMessage
from shared.topology import TopicRoutingMode, build_message
from tests.emulator.sdk_helpers import drain
from tests.shared.router.test_router_bridge_sessions import Bridge, bridge  # noqa: F401  (the fixture)


def _route_all(through: Bridge, wire: Namespace, count: int) -> None:
    # Read as the router's trigger reads it: with the properties' AMQP types (Busbar's own receiver).
    with EntityReceiver(wire, f"{through.fallback}/subscriptions/busbar-router") as receiver:
        routed = 0
        while routed < count:
            for received in receiver.receive_messages(max_message_count=count - routed, max_wait_time=10):
                through.router.route(from_received(received, IncomingMessage, body=readable_body(received)))
                receiver.complete_message(received)
                routed += 1


def test_a_bridged_copy_keeps_the_promoted_properties_a_filtered_subscription_routes_by(
    bridge: Bridge,  # noqa: F811
    emulator: EmulatorHandle,
) -> None:
    wire = Namespace.from_connection_string(emulator.connection_string)
    topic = bridge.watch("Shipping.OrderAccepted")
    scope = bridge.management.scope
    bridge.management.subscriptions.create_or_update(*scope, topic, "sales", SBSubscription())
    high_value = SqlFilter(sql_expression="amount >= 1000")
    rule = Rule(properties=Ruleproperties(filter_type="SqlFilter", sql_filter=high_value))
    bridge.management.rules.create_or_update(*scope, topic, "sales", "high-value", rule)
    bridge.management.rules.delete(*scope, topic, "sales", "$Default")
    with bridge.client.get_topic_sender(bridge.fallback) as sender:
        for order_id, amount in (("big", 5000.0), ("small", 10.0)):
            event = OrderAccepted(order_id=order_id, amount=amount, region="emea")
            sender.send_messages(build_message(event, TopicRoutingMode.CorrelationFilter, endpoint_name="s"))

    _route_all(bridge, wire, 2)

    with EntityReceiver(wire, f"{topic}/subscriptions/sales") as receiver:
        copies = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        copies += receiver.receive_messages(max_message_count=2, max_wait_time=1)
        for copy in copies:
            receiver.complete_message(copy)
    assert [OrderAccepted.model_validate_json(readable_body(c)).order_id for c in copies] == ["big"]
    props = from_received(copies[0], IncomingMessage, body=readable_body(copies[0])).application_properties
    assert props["amount"] == 5000.0 and amqp_type(props["amount"]) is AmqpType.DOUBLE
    assert props["region"] == "emea"
    # Every copy reached the dedicated topic: the catch-all watcher got both.
    assert sorted(
        OrderAccepted.model_validate_json(str(m)).order_id for m in _drain_watch(bridge, topic)
    ) == [
        "big",
        "small",
    ]


def _drain_watch(through: Bridge, topic: str) -> list[ServiceBusReceivedMessage]:
    with through.client.get_subscription_receiver(topic, "watch") as receiver:
        received = list(receiver.receive_messages(max_message_count=2, max_wait_time=5))
        if len(received) < 2:
            received += receiver.receive_messages(max_message_count=2, max_wait_time=5)
        for message in received:
            receiver.complete_message(message)
    return received


def test_a_copy_sent_around_the_topic_never_skips_a_subscribers_content_filter(
    bridge: Bridge,  # noqa: F811
    emulator: EmulatorHandle,
) -> None:
    wire = Namespace.from_connection_string(emulator.connection_string)
    # billing gets orders on the fallback topic already; sales only on the dedicated topic, filtered. The
    # router cannot evaluate sales' SQL, so it must not put a copy straight into sales' queue: only the
    # topic applies the filter.
    m, scope = bridge.management, bridge.management.scope
    billing, sales = f"{bridge.namespace}/billing", f"{bridge.namespace}/sales"
    for queue in (billing, sales):
        m.queues.create_or_update(*scope, queue, SBQueue())
    on_fallback = _forwarding(billing)
    m.subscriptions.create_or_update(*scope, bridge.fallback, "billing", on_fallback)
    stamp = Rule(
        properties=Ruleproperties(
            filter_type="CorrelationFilter",
            correlation_filter=CorrelationFilter(properties={"Shipping.OrderAccepted": True}),  # type: ignore[dict-item]
        )
    )
    m.rules.create_or_update(*scope, bridge.fallback, "billing", "Shipping.OrderAccepted", stamp)
    m.rules.delete(*scope, bridge.fallback, "billing", "$Default")
    topic = f"{bridge.namespace}/Shipping.OrderAccepted"  # every subscriber forwards: no "watch" here
    m.topics.create_or_update(*scope, topic, SBTopic())
    m.subscriptions.create_or_update(*scope, topic, "billing", _forwarding(billing))
    m.subscriptions.create_or_update(*scope, topic, "sales", _forwarding(sales))
    high_value = SqlFilter(sql_expression="amount >= 1000")
    m.rules.create_or_update(
        *scope,
        topic,
        "sales",
        "high-value",
        Rule(properties=Ruleproperties(filter_type="SqlFilter", sql_filter=high_value)),
    )
    m.rules.delete(*scope, topic, "sales", "$Default")
    with bridge.client.get_topic_sender(bridge.fallback) as sender:
        for order_id, amount in (("big", 5000.0), ("small", 10.0)):
            event = OrderAccepted(order_id=order_id, amount=amount)
            sender.send_messages(build_message(event, TopicRoutingMode.CorrelationFilter, endpoint_name="s"))

    _route_all(bridge, wire, 2)

    with bridge.client.get_queue_receiver(sales) as receiver:
        got = [OrderAccepted.model_validate_json(str(m)).order_id for m in drain(receiver, None, 2)]
    assert got == ["big"]


def _forwarding(queue: str) -> SBSubscription:
    return SBSubscription(properties=SBSubscriptionProperties(forward_to=queue))
