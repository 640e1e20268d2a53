"""The router's bridge where every topic requires duplicate detection (as Busbar creates them): the copy
keeps the event's MessageId, so it is delivered (the dedicated topic never saw that id: the event was
published to the fallback topic), and a copy bridged again, by a router retried after its send, is
dropped by the dedicated topic (Azure: a message whose MessageId the entity saw inside its window "is
instantly ignored and dropped"; the emulator follows, tests/emulator/test_duplicate_detection.py).

Why the window of the bridge's target is no risk of loss: an entity drops the copy only when it accepted
the same MessageId inside its window, that is when it already holds (or held) this event; and a router
behind by more than the window bridges a copy that is delivered again (a duplicate the endpoint must
recognise, never a loss)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from azure.mgmt.servicebus.models import SBSubscription, SBTopic, SBTopicProperties
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from app.endpoints.sample.events import sample_registry
from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace as WireNamespace
from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.envelope.sdk import from_received, readable_body
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings
from shared.messages import IncomingMessage
from shared.router.service import ArchivingRecorder, FallbackRouter
from shared.topology import FallbackTopicOptions, TopicRoutingMode, TopologyOptions

WINDOW = timedelta(seconds=20)  # Azure's minimum; each test runs inside it
UPDATED = "Tenant.CustomerUpdated;Tenant.ICustomerLifecycleEvent"


def _topic(management: ManagementClient, name: str) -> None:
    properties = SBTopicProperties(
        requires_duplicate_detection=True, duplicate_detection_history_time_window=WINDOW
    )
    management.topics.create_or_update(*management.scope, name, SBTopic(properties=properties))


@pytest.fixture
def management(emulator: EmulatorHandle) -> Iterator[ManagementClient]:
    settings = ManagementSettings(
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="busbar-tests",
        namespace=EMULATOR_NAMESPACE,
        endpoint=f"http://127.0.0.1:{emulator.management_port}",
        token=emulator.emulator.management_token,
    )
    with ManagementClient(settings, retry_total=0) as client:
        yield client


@pytest.fixture
def client(emulator: EmulatorHandle) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as sdk:
        yield sdk


def _drain(client: ServiceBusClient, topic: str, subscription: str) -> list[ServiceBusReceivedMessage]:
    received: list[ServiceBusReceivedMessage] = []
    with client.get_subscription_receiver(topic, subscription) as receiver:
        while batch := receiver.receive_messages(max_message_count=10, max_wait_time=1):
            for message in batch:
                receiver.complete_message(message)
            received.extend(batch)
    return received


def test_a_bridged_copy_keeps_its_message_id_is_delivered_once_and_a_second_bridge_of_it_is_dropped(
    management: ManagementClient, client: ServiceBusClient, emulator: EmulatorHandle
) -> None:
    namespace = f"t{uuid.uuid4().hex[:10]}"
    fallback, dedicated = f"{namespace}/fallback", f"{namespace}/Tenant.CustomerUpdated"
    for topic in (fallback, dedicated):
        _topic(management, topic)
    management.subscriptions.create_or_update(*management.scope, fallback, "busbar-router", SBSubscription())
    management.subscriptions.create_or_update(*management.scope, dedicated, "watch", SBSubscription())
    router = FallbackRouter(
        management=management,
        namespace=WireNamespace.from_connection_string(emulator.connection_string),
        options=TopologyOptions(
            hierarchy_namespace=namespace,
            fallback_topic=FallbackTopicOptions(
                topic_name="fallback", routing_mode=TopicRoutingMode.CorrelationFilter
            ),
        ),
        contracts=sample_registry(),
        fallback_topic=fallback,
        router_subscription="busbar-router",
        recorder=ArchivingRecorder(None),
    )
    original = ServiceBusMessage(
        json.dumps({"customer_id": "c-1", "name": "Ada"}),
        message_id=f"m-{uuid.uuid4().hex[:10]}",
        session_id="c-1",
        content_type="application/json",
        application_properties={ENCLOSED_MESSAGE_TYPES: UPDATED},
    )
    with client.get_topic_sender(fallback) as sender:
        sender.send_messages(original)
    with client.get_subscription_receiver(fallback, "busbar-router") as receiver:
        [received] = receiver.receive_messages(max_message_count=1, max_wait_time=10)
        message = from_received(received, IncomingMessage, body=readable_body(received))
        router.route(message)
        router.route(message)  # the router retried after its send (its completion was lost)
        receiver.complete_message(received)

    copies = _drain(client, dedicated, "watch")

    assert [c.message_id for c in copies] == [original.message_id]
