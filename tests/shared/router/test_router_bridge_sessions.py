"""The router's bridge and the SessionId, on the wire: an event read from the fallback topic is copied to its
dedicated topic with the SessionId it arrived with, or, when it arrived without one (a .NET or NServiceBus
publisher that did not set it), with its contract's ordering key read from the body; a body whose key cannot
be read is bridged exactly as it arrived, and the router says so in a log line."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.mgmt.servicebus.models import SBSubscription, SBTopic
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

UPDATED = "Tenant.CustomerUpdated;Tenant.ICustomerLifecycleEvent"
ROUTER_LOG = "shared.router.service"


@dataclass(frozen=True, slots=True)
class Bridge:
    """A fallback topic with the router's subscription, and a router over it that bridges to the
    dedicated topics ``watch`` subscribes to."""

    router: FallbackRouter
    client: ServiceBusClient
    management: ManagementClient
    namespace: str

    @property
    def fallback(self) -> str:
        return f"{self.namespace}/fallback"

    def watch(self, contract: str) -> str:
        """Create ``contract``'s dedicated topic with a catch-all subscription; return the topic."""
        topic = f"{self.namespace}/{contract}"
        self.management.topics.create_or_update(*self.management.scope, topic, SBTopic())
        self.management.subscriptions.create_or_update(
            *self.management.scope, topic, "watch", SBSubscription()
        )
        return topic

    def publish_and_route(self, message: ServiceBusMessage) -> None:
        """Publish ``message`` on the fallback topic and route what the router's subscription reads."""
        with self.client.get_topic_sender(self.fallback) as sender:
            sender.send_messages(message)
        with self.client.get_subscription_receiver(self.fallback, "busbar-router") as receiver:
            [received] = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            self.router.route(from_received(received, IncomingMessage, body=readable_body(received)))
            receiver.complete_message(received)

    def bridged(self, topic: str) -> ServiceBusReceivedMessage:
        with self.client.get_subscription_receiver(topic, "watch") as receiver:
            [copy] = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            receiver.complete_message(copy)
        return copy


@pytest.fixture
def bridge(emulator: EmulatorHandle) -> Iterator[Bridge]:
    namespace = f"t{uuid.uuid4().hex[:10]}"
    settings = ManagementSettings(
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="busbar-tests",
        namespace=EMULATOR_NAMESPACE,
        endpoint=f"http://127.0.0.1:{emulator.management_port}",
        token=emulator.emulator.management_token,
    )
    with (
        ManagementClient(settings, retry_total=0) as management,
        ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as client,
    ):
        fallback = f"{namespace}/fallback"
        management.topics.create_or_update(*management.scope, fallback, SBTopic())
        management.subscriptions.create_or_update(
            *management.scope, fallback, "busbar-router", SBSubscription()
        )
        options = TopologyOptions(
            hierarchy_namespace=namespace,
            fallback_topic=FallbackTopicOptions(
                topic_name="fallback", routing_mode=TopicRoutingMode.CorrelationFilter
            ),
        )
        router = FallbackRouter(
            management=management,
            namespace=WireNamespace.from_connection_string(emulator.connection_string),
            options=options,
            contracts=sample_registry(),
            fallback_topic=fallback,
            router_subscription="busbar-router",
            recorder=ArchivingRecorder(None),
        )
        yield Bridge(router, client, management, namespace)


def dotnet_published(contract_header: str, body: Any, session_id: str | None = None) -> ServiceBusMessage:
    """An event as a .NET publisher puts it on the fallback topic (SessionId only when it sets one)."""
    return ServiceBusMessage(
        json.dumps(body),
        message_id=f"m-{uuid.uuid4().hex[:10]}",
        session_id=session_id,
        content_type="application/json",
        application_properties={ENCLOSED_MESSAGE_TYPES: contract_header, "tenant": "acme"},
    )


def router_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == ROUTER_LOG and r.levelno == logging.WARNING]


def test_a_bridged_copy_keeps_the_session_id_the_event_arrived_with(
    bridge: Bridge, caplog: pytest.LogCaptureFixture
) -> None:
    topic = bridge.watch("Tenant.CustomerUpdated")
    # The publisher chose its SessionId: the copy keeps it, even where the body's key says otherwise.
    original = dotnet_published(
        UPDATED, {"customer_id": "c-1", "name": "Ada"}, session_id="chosen-by-publisher"
    )

    bridge.publish_and_route(original)

    copy = bridge.bridged(topic)
    assert copy.message_id == original.message_id
    assert copy.session_id == "chosen-by-publisher"
    assert router_warnings(caplog) == []


def test_an_event_that_arrived_without_a_session_id_is_bridged_with_its_contracts_ordering_key(
    bridge: Bridge, caplog: pytest.LogCaptureFixture
) -> None:
    topic = bridge.watch("Tenant.CustomerUpdated")
    original = dotnet_published(UPDATED, {"customer_id": "c-42", "name": "Ada"})

    bridge.publish_and_route(original)

    copy = bridge.bridged(topic)
    assert copy.message_id == original.message_id
    assert copy.session_id == "c-42"
    assert json.loads(str(copy)) == {"customer_id": "c-42", "name": "Ada"}
    assert router_warnings(caplog) == []


def test_an_event_of_a_contract_only_known_by_its_interface_gets_the_interfaces_key(bridge: Bridge) -> None:
    # A newer publisher's OrderAcceptedV3, unknown here, encloses IOrderAccepted: keyed by order_id.
    topic = bridge.watch("Shipping.OrderAcceptedV3")
    header = "Shipping.OrderAcceptedV3;Shipping.IOrderAccepted;Shipping.IOrderStatusChanged"

    bridge.publish_and_route(dotnet_published(header, {"order_id": "o-7", "amount": 1}))

    assert bridge.bridged(topic).session_id == "o-7"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"name": "Ada"}, "does not validate as Tenant.CustomerUpdated"),
        ({"customer_id": "", "name": "Ada"}, "ordering key field 'customer_id' is empty"),
        ("not an object", "does not validate as Tenant.CustomerUpdated"),
    ],
)
def test_an_event_whose_key_cannot_be_read_is_bridged_as_it_arrived_and_the_router_says_so(
    bridge: Bridge, caplog: pytest.LogCaptureFixture, body: Any, problem: str
) -> None:
    topic = bridge.watch("Tenant.CustomerUpdated")
    original = dotnet_published(UPDATED, body)

    with caplog.at_level(logging.WARNING, logger=ROUTER_LOG):
        bridge.publish_and_route(original)

    # Nothing withheld, nothing changed: the endpoints dead-letter it with the precise reason.
    copy = bridge.bridged(topic)
    assert copy.message_id == original.message_id
    assert copy.session_id is None
    assert json.loads(str(copy)) == body
    [warning] = router_warnings(caplog)
    assert f"message {original.message_id}" in warning
    assert "as it arrived, without a SessionId" in warning
    assert problem in warning


def test_an_event_of_a_contract_the_app_does_not_know_is_bridged_without_a_session_id(
    bridge: Bridge, caplog: pytest.LogCaptureFixture
) -> None:
    topic = bridge.watch("Sales.OrderPlaced")

    bridge.publish_and_route(dotnet_published("Sales.OrderPlaced", {"order_id": "o-1"}))

    assert bridge.bridged(topic).session_id is None
    assert router_warnings(caplog) == []
