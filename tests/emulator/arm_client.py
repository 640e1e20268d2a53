"""ARM test helpers: a client factory (with the app's static-token credential and plain-HTTP wrapper), and
small data-plane helpers (send, receive) that prove a management change is live.

Every ServiceBusManagementClient call against the emulator's plain-HTTP port needs ``enforce_https=False``
(azure-core refuses to send a bearer token over http otherwise); :func:`arm` returns a client whose
operations pass it on every call, so tests read like production code.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.mgmt.servicebus import ServiceBusManagementClient
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)

from shared.management import PlainHttpOperations, StaticTokenCredential
from tests.emulator import sdk_helpers

SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000000"
RESOURCE_GROUP = "busbar-tests"
WAIT = 0.5  # seconds a receiver waits on an empty entity (local deliveries take milliseconds)


class Arm:
    """A ServiceBusManagementClient bound to one resource group and namespace, over plain HTTP."""

    def __init__(self, client: ServiceBusManagementClient, namespace: str, resource_group: str) -> None:
        self.client = client
        self.namespace = namespace
        self.resource_group = resource_group
        self.queues = PlainHttpOperations(client.queues)
        self.topics = PlainHttpOperations(client.topics)
        self.subscriptions = PlainHttpOperations(client.subscriptions)
        self.rules = PlainHttpOperations(client.rules)
        self.namespaces = PlainHttpOperations(client.namespaces)

    @property
    def scope(self) -> tuple[str, str]:
        """``(resource_group, namespace)``, the first two arguments of every entity operation."""
        return self.resource_group, self.namespace

    def close(self) -> None:
        self.client.close()


def make_client(
    base_url: str, token: str, subscription_id: str = SUBSCRIPTION_ID, **kwargs: Any
) -> ServiceBusManagementClient:
    """The unmodified SDK client pointed at the emulator, with retries off so errors surface at once."""
    kwargs.setdefault("retry_total", 0)
    return ServiceBusManagementClient(
        credential=StaticTokenCredential(token), subscription_id=subscription_id, base_url=base_url, **kwargs
    )


def arm(
    port: int,
    token: str,
    namespace: str = "sbemulatorns",
    resource_group: str = RESOURCE_GROUP,
    subscription_id: str = SUBSCRIPTION_ID,
) -> Arm:
    client = make_client(f"http://127.0.0.1:{port}", token, subscription_id)
    return Arm(client, namespace, resource_group)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def refusal(call: Callable[[], object]) -> HttpResponseError:
    """The HttpResponseError ``call`` raises (fails the test if it succeeds)."""
    try:
        call()
    except HttpResponseError as exc:
        return exc
    raise AssertionError("the call succeeded but was expected to be refused")


# ---------------------------------------------------------------------------------------------- data plane


def send(connection_string: str, entity: str, *messages: ServiceBusMessage) -> None:
    with (
        ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client,
        client.get_queue_sender(entity) as sender,
    ):
        sender.send_messages(list(messages))


def drain(receiver: ServiceBusReceiver, expected: int | None = None) -> list[ServiceBusReceivedMessage]:
    """Receive and complete messages until ``expected`` arrived, or until a receive comes back empty."""
    return sdk_helpers.drain(receiver, expected, WAIT)


def receive_queue(
    connection_string: str,
    queue: str,
    expected: int | None = None,
    sub_queue: ServiceBusSubQueue | None = None,
) -> list[ServiceBusReceivedMessage]:
    with (
        ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client,
        client.get_queue_receiver(queue, sub_queue=sub_queue, max_wait_time=WAIT) as receiver,
    ):
        return drain(receiver, expected)


def receive_subscription(
    connection_string: str,
    topic: str,
    subscription: str,
    expected: int | None = None,
    sub_queue: ServiceBusSubQueue | None = None,
) -> list[ServiceBusReceivedMessage]:
    with (
        ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client,
        client.get_subscription_receiver(
            topic, subscription, sub_queue=sub_queue, max_wait_time=WAIT
        ) as receiver,
    ):
        return drain(receiver, expected)
