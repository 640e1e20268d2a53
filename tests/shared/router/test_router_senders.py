"""The router decides once per message and keeps one sender per destination (issue 39, item 5): a burst of
events bridged to one topic goes out on one sender, a sender closed by ``close`` is opened again on the next
event, and an event declared unrouted is never decided twice on the same namespace snapshot."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from azure.mgmt.servicebus.models import SBSubscription, SBTopic
from azure.servicebus import ServiceBusClient, ServiceBusMessage

import shared.router.service as router_service
from app.endpoints.sample.events import sample_registry
from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace as WireNamespace
from shared.contracts import ENCLOSED_MESSAGE_TYPES
from shared.envelope.sdk import readable_from_received
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings
from shared.messages import IncomingMessage
from shared.router.decision import decide
from shared.router.service import ArchivingRecorder, FallbackRouter
from shared.topology import FallbackTopicOptions, TopicRoutingMode, TopologyOptions

pytestmark = pytest.mark.timeout(120)

UPDATED = "Tenant.CustomerUpdated;Tenant.ICustomerLifecycleEvent"


@dataclass(frozen=True, slots=True)
class Namespace:
    router: FallbackRouter
    client: ServiceBusClient
    management: ManagementClient
    name: str

    @property
    def fallback(self) -> str:
        return f"{self.name}/fallback"

    def watch(self, contract: str) -> str:
        topic = f"{self.name}/{contract}"
        self.management.topics.create_or_update(*self.management.scope, topic, SBTopic())
        self.management.subscriptions.create_or_update(
            *self.management.scope, topic, "watch", SBSubscription()
        )
        return topic

    def publish(self, *messages: ServiceBusMessage) -> list[IncomingMessage]:
        """Publish ``messages`` on the fallback topic; what the router's subscription reads, completed."""
        with self.client.get_topic_sender(self.fallback) as sender:
            sender.send_messages(list(messages))
        read: list[IncomingMessage] = []
        with self.client.get_subscription_receiver(self.fallback, "busbar-router") as receiver:
            while len(read) < len(messages):
                batch = receiver.receive_messages(max_message_count=len(messages), max_wait_time=10)
                assert batch, f"the router's subscription held {len(read)} of {len(messages)} events"
                for received in batch:
                    read.append(readable_from_received(received, IncomingMessage))
                    receiver.complete_message(received)
        return read

    def bridged_ids(self, topic: str, count: int) -> set[str]:
        ids: set[str] = set()
        with self.client.get_subscription_receiver(topic, "watch") as receiver:
            while len(ids) < count:
                batch = receiver.receive_messages(max_message_count=count, max_wait_time=10)
                assert batch, f"{topic} got {len(ids)} of {count} bridged copies"
                for copy in batch:
                    ids.add(str(copy.message_id))
                    receiver.complete_message(copy)
        return ids


@pytest.fixture
def namespace(emulator: EmulatorHandle) -> Iterator[Namespace]:
    name = f"t{uuid.uuid4().hex[:10]}"
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
        fallback = f"{name}/fallback"
        management.topics.create_or_update(*management.scope, fallback, SBTopic())
        management.subscriptions.create_or_update(
            *management.scope, fallback, "busbar-router", SBSubscription()
        )
        router = FallbackRouter(
            management=management,
            namespace=WireNamespace.from_connection_string(emulator.connection_string),
            options=TopologyOptions(
                hierarchy_namespace=name,
                fallback_topic=FallbackTopicOptions(
                    topic_name="fallback", routing_mode=TopicRoutingMode.CorrelationFilter
                ),
            ),
            contracts=sample_registry(),
            fallback_topic=fallback,
            router_subscription="busbar-router",
            recorder=ArchivingRecorder(None),
        )
        try:
            yield Namespace(router, client, management, name)
        finally:
            router.close()


def event(customer: str, header: str = UPDATED) -> ServiceBusMessage:
    return ServiceBusMessage(
        json.dumps({"customer_id": customer, "name": "Ada"}),
        message_id=f"m-{uuid.uuid4().hex[:10]}",
        content_type="application/json",
        application_properties={ENCLOSED_MESSAGE_TYPES: header},
    )


def test_events_bridged_to_one_topic_go_out_on_one_sender_kept_until_close(namespace: Namespace) -> None:
    topic = namespace.watch("Tenant.CustomerUpdated")
    sent = [event(f"c-{n}") for n in range(3)]

    for incoming in namespace.publish(*sent):
        assert namespace.router.route(incoming).bridge_to == topic

    assert namespace.bridged_ids(topic, 3) == {str(m.message_id) for m in sent}
    assert namespace.router.senders.open_count() == 1
    namespace.router.close()
    assert namespace.router.senders.open_count() == 0

    # Closed is not broken: the next event opens a sender again.
    again = event("c-9")
    [incoming] = namespace.publish(again)
    namespace.router.route(incoming)
    assert namespace.bridged_ids(topic, 1) == {str(again.message_id)}
    assert namespace.router.senders.open_count() == 1


def test_an_unrouted_event_is_never_decided_twice_on_one_snapshot(
    namespace: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    decided_on: list[Any] = []

    def noting(message: IncomingMessage, snapshot: Any, dedicated: Any) -> Any:
        decided_on.append(snapshot)
        return decide(message, snapshot, dedicated)

    monkeypatch.setattr(router_service, "decide", noting)
    [incoming] = namespace.publish(event("c-1", header="Tenant.SomethingNobodyWants"))

    decision = namespace.router.route(incoming)

    assert decision.unrouted
    # Checked again on a fresh read when the cached snapshot was too old, but never twice on the same one.
    assert decided_on
    assert len({id(snapshot) for snapshot in decided_on}) == len(decided_on)
