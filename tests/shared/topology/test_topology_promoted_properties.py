"""Promoted properties on the wire: what the Publisher sends carries the contract's promoted fields as typed
application properties, and a subscription's SQL or correlation rule made with the management SDK, as Azure's
guide makes them, routes by them."""

from __future__ import annotations

from azure.mgmt.servicebus.models import (
    CorrelationFilter,
    Rule,
    Ruleproperties,
    SBSubscription,
    SBTopic,
    SqlFilter,
)
from azure.servicebus import ServiceBusClient

from app.endpoints.sample.events import OrderAccepted
from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace
from shared.amqp.receiver import EntityReceiver
from shared.contracts import Event
from shared.envelope.properties import AmqpType, amqp_type
from shared.envelope.sdk import from_received, readable_body
from shared.management import ManagementClient
from shared.messages import IncomingMessage
from shared.topology import Publisher, TopologyOptions
from shared.topology.names import HierarchyNamespace
from tests.emulator.sdk_helpers import drain


class Stocked(Event, contract="Tests.Wire.Stocked", promoted=("units", "warehouse")):
    sku: str
    units: int
    warehouse: str


def _topic_with_rule(management: ManagementClient, topic: str, rule: Rule | None) -> None:
    """``topic`` with one subscription ``watch``: filtered by ``rule`` alone (its $Default removed)."""
    scope = management.scope
    management.topics.create_or_update(*scope, topic, SBTopic())
    management.subscriptions.create_or_update(*scope, topic, "watch", SBSubscription())
    if rule is not None:
        management.rules.create_or_update(*scope, topic, "watch", "by-content", rule)
        management.rules.delete(*scope, topic, "watch", "$Default")


def test_published_events_carry_their_promoted_fields_as_typed_application_properties(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str, emulator: EmulatorHandle
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    topic = HierarchyNamespace(ns).apply("Tests.Wire.Stocked")
    _topic_with_rule(management, topic, None)

    with Publisher(sb_client, options, endpoint_name="stock") as publisher:
        publisher.publish([Stocked(sku="a", units=2**33, warehouse="north")])

    wire = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(wire, f"{topic}/subscriptions/watch") as receiver:  # typed: Busbar's own receiver
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=10)
        receiver.complete_message(message)
    props = from_received(message, IncomingMessage, body=readable_body(message)).application_properties
    assert props["units"] == 2**33 and amqp_type(props["units"]) is AmqpType.LONG
    assert props["warehouse"] == "north" and amqp_type(props["warehouse"]) is AmqpType.STRING
    assert "sku" not in props


def test_a_sql_rule_on_a_promoted_amount_admits_only_the_high_value_orders(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    topic = HierarchyNamespace(ns).apply("Shipping.OrderAccepted")
    high_value = Rule(
        properties=Ruleproperties(
            filter_type="SqlFilter", sql_filter=SqlFilter(sql_expression="amount >= 1000")
        )
    )
    _topic_with_rule(management, topic, high_value)

    with Publisher(sb_client, options, endpoint_name="shipping") as publisher:
        publisher.publish(
            [OrderAccepted(order_id="big", amount=5000), OrderAccepted(order_id="small", amount=10)]
        )

    with sb_client.get_subscription_receiver(topic, "watch") as receiver:
        received = [OrderAccepted.model_validate_json(str(m)).order_id for m in drain(receiver, None, 1)]
    assert received == ["big"]


def test_a_correlation_rule_on_a_promoted_region_admits_only_that_region(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    topic = HierarchyNamespace(ns).apply("Shipping.OrderAccepted")
    emea = Rule(
        properties=Ruleproperties(
            filter_type="CorrelationFilter",
            correlation_filter=CorrelationFilter(properties={"region": "emea"}),
        )
    )
    _topic_with_rule(management, topic, emea)

    with Publisher(sb_client, options, endpoint_name="shipping") as publisher:
        publisher.publish(
            [OrderAccepted(order_id="eu", region="emea"), OrderAccepted(order_id="us", region="amer")]
        )

    with sb_client.get_subscription_receiver(topic, "watch") as receiver:
        received = [OrderAccepted.model_validate_json(str(m)).order_id for m in drain(receiver, None, 1)]
    assert received == ["eu"]
