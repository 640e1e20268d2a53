"""The Publisher on the emulator: batching per topic, the missing-topic behaviour, and unmapped events."""

from __future__ import annotations

import logging

import pytest
from azure.servicebus import ServiceBusClient
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from app.endpoints.sample.events import CustomerCreated, OrderAccepted
from shared.management import ManagementClient
from shared.servicebus_errors import is_entity_not_found
from shared.topology import Publisher, TopologyOptions, UnmappedEventError
from tests.shared.topology.topology_helpers import OA, provision, publish_and_collect


def test_many_events_to_one_topic_go_out_in_batches_and_all_arrive(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    provision(management, options, "sales", [OA])
    events = [OrderAccepted(order_id=str(i), amount=float(i)) for i in range(120)]
    received, result = publish_and_collect(sb_client, options, ["sales"], events)
    assert received == {"sales": [OA] * 120}
    assert len(result.sent) == 120 and len({m.message_id for m in result.sent}) == 120


def test_publishing_to_a_missing_topic_warns_and_drops(
    sb_client: ServiceBusClient, ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    with (
        caplog.at_level(logging.WARNING),
        Publisher(sb_client, options, endpoint_name="shipping") as publisher,
    ):
        single = publisher.publish([OrderAccepted(order_id="1")])
        batch = publisher.publish([CustomerCreated(customer_id="1"), CustomerCreated(customer_id="2")])
    assert single.sent == [] and [m.event for m in single.dropped] == [OA]
    assert single.missing_topics == [f"{ns}/{OA}"]
    assert len(batch.dropped) == 2
    messages = [r.getMessage() for r in caplog.records]
    assert (
        f"Publishing message with message ID '{single.dropped[0].message_id}' to topic {ns}/{OA} failed "
        "because "
        "the destination does not exist."
    ) in messages
    assert (
        f"Skipping publishing messages to topic {ns}/Tenant.CustomerCreated because the destination does "
        "not exist." in messages
    )


def test_publishing_to_a_missing_topic_raises_when_configured(sb_client: ServiceBusClient, ns: str) -> None:
    options = TopologyOptions(hierarchy_namespace=ns)
    with (
        Publisher(sb_client, options, endpoint_name="shipping", throw_on_missing_topic=True) as publisher,
        pytest.raises(ServiceBusAuthenticationError) as refused,
    ):
        publisher.publish([OrderAccepted(order_id="1")])
    # What Azure raises for a topic that does not exist (its put-token is refused with 404).
    assert is_entity_not_found(refused.value)


def test_an_unmapped_event_fails_before_anything_is_sent(
    management: ManagementClient, sb_client: ServiceBusClient, ns: str
) -> None:
    provision(management, TopologyOptions(hierarchy_namespace=ns), "sales", [OA])
    strict = TopologyOptions(hierarchy_namespace=ns, throw_if_unmapped_event_types=True)
    with (
        Publisher(sb_client, strict, endpoint_name="shipping") as publisher,
        pytest.raises(UnmappedEventError),
    ):
        publisher.publish([CustomerCreated(customer_id="1"), OrderAccepted(order_id="1")])
    received, _ = publish_and_collect(sb_client, TopologyOptions(hierarchy_namespace=ns), ["sales"], [])
    assert received == {"sales": []}
