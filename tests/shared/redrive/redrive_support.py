"""Helpers for the re-drive tests: app settings for an emulator, ARM provisioning, dead-lettering."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from azure.mgmt.servicebus.models import SBQueue, SBSubscription, SBTopic
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusSubQueue,
)

from shared.amqp.connection import Namespace
from shared.amqp.outgoing import OutgoingMessage
from shared.amqp.receiver import EntityReceiver
from shared.management import ManagementClient, ManagementSettings
from tests.shared.amqp.typed_send import send_typed

WAIT = 0.5


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def management_settings(emulator: Any) -> ManagementSettings:
    return ManagementSettings(
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="busbar-tests",
        namespace="sbemulatorns",
        endpoint=f"http://127.0.0.1:{emulator.management_port}",
        token=emulator.emulator.management_token,
    )


def redrive_env(
    emulator: Any, archive: Path | str, entities: Iterable[str], **overrides: str
) -> dict[str, str]:
    """App settings for a re-drive run against ``emulator`` limited to ``entities``."""
    settings = management_settings(emulator)
    env = {
        "ServiceBusConnection": emulator.connection_string,
        "BUSBAR_SUBSCRIPTION_ID": settings.subscription_id,
        "BUSBAR_RESOURCE_GROUP": settings.resource_group,
        "BUSBAR_NAMESPACE": settings.namespace,
        "BUSBAR_MANAGEMENT_ENDPOINT": settings.endpoint,
        "BUSBAR_MANAGEMENT_TOKEN": settings.token or "",
        "BUSBAR_ARCHIVE_URL": str(archive),
        "BUSBAR_REDRIVE_ENTITIES": ",".join(entities),
        "BUSBAR_REDRIVE_RATE_PER_SECOND": "5000",
    }
    env.update(overrides)
    return env


class Provisioner:
    """Creates entities through the management plane, as the app does."""

    def __init__(self, emulator: Any) -> None:
        self.client = ManagementClient(management_settings(emulator))

    def queue(self, name: str | None = None, **properties: Any) -> str:
        name = name or unique("q")
        self.client.queues.create_or_update(*self.client.scope, name, SBQueue(**properties))
        return name

    def topic(self, name: str | None = None) -> str:
        name = name or unique("t")
        self.client.topics.create_or_update(*self.client.scope, name, SBTopic())
        return name

    def subscription(self, topic: str, name: str | None = None, **properties: Any) -> str:
        name = name or unique("s")
        self.client.subscriptions.create_or_update(
            *self.client.scope, topic, name, SBSubscription(**properties)
        )
        return name

    def close(self) -> None:
        self.client.close()


def message(body: bytes = b"{}", **fields: Any) -> ServiceBusMessage:
    fields.setdefault("message_id", uuid.uuid4().hex)
    return ServiceBusMessage(body, **fields)


def receive_all(receiver: Any, count: int) -> list[Any]:
    """Up to ``count`` messages from ``receiver`` (azure-servicebus's or Busbar's own)."""
    received: list[Any] = []
    while len(received) < count:
        batch = receiver.receive_messages(max_message_count=count - len(received), max_wait_time=2)
        if not batch:
            break
        received.extend(batch)
    return received


def dead_letter_queue_messages(
    connection_string: str,
    queue: str,
    messages: Sequence[ServiceBusMessage | OutgoingMessage],
    reason: str,
    description: str = "it failed",
    session_id: str | None = None,
) -> None:
    """Send ``messages`` to ``queue`` and dead-letter them (in order) with ``reason``. Messages given as
    :class:`OutgoingMessage` go out through Busbar's own AMQP sender (a .NET sender's char, say)."""
    typed = [message for message in messages if isinstance(message, OutgoingMessage)]
    if typed:
        assert len(typed) == len(messages), "one sender per call keeps the messages' order"
        send_typed(connection_string, queue, *typed)
        # Received back with Busbar's own receiver too: azure-servicebus cannot decode a char or a decimal.
        namespace = Namespace.from_connection_string(connection_string)
        with EntityReceiver(namespace, queue, session_id=session_id) as typed_receiver:
            received_typed = receive_all(typed_receiver, len(messages))
            assert len(received_typed) == len(messages)
            for item in received_typed:
                typed_receiver.dead_letter_message(item, reason=reason, error_description=description)
        return
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([m for m in messages if isinstance(m, ServiceBusMessage)])
        with client.get_queue_receiver(queue, session_id=session_id) as receiver:
            received = receive_all(receiver, len(messages))
            assert len(received) == len(messages)
            for item in received:
                receiver.dead_letter_message(item, reason=reason, error_description=description)


def dead_letter_subscription_messages(
    connection_string: str, topic: str, subscription: str, messages: Sequence[ServiceBusMessage], reason: str
) -> None:
    """Publish ``messages`` to ``topic`` and dead-letter the copies ``subscription`` received."""
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_topic_sender(topic) as sender:
            sender.send_messages(list(messages))
        with client.get_subscription_receiver(topic, subscription) as receiver:
            received = receive_all(receiver, len(messages))
            assert len(received) == len(messages)
            for item in received:
                receiver.dead_letter_message(item, reason=reason, error_description="handler failed")


def drain_queue(
    connection_string: str,
    queue: str,
    sub_queue: ServiceBusSubQueue | None = None,
    session_id: str | None = None,
) -> list[ServiceBusReceivedMessage]:
    """Receive and complete everything in ``queue`` (or its sub-queue)."""
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(
            queue, sub_queue=sub_queue, session_id=session_id, max_wait_time=WAIT
        ) as receiver,
    ):
        received: list[ServiceBusReceivedMessage] = []
        while batch := receiver.receive_messages(max_message_count=50, max_wait_time=WAIT):
            for item in batch:
                receiver.complete_message(item)
            received.extend(batch)
        return received


def peek_queue(
    connection_string: str, queue: str, sub_queue: ServiceBusSubQueue | None = None
) -> list[ServiceBusReceivedMessage]:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(queue, sub_queue=sub_queue) as receiver,
    ):
        return receiver.peek_messages(max_message_count=250, sequence_number=0)


def peek_subscription(
    connection_string: str, topic: str, subscription: str, sub_queue: ServiceBusSubQueue | None = None
) -> list[ServiceBusReceivedMessage]:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_subscription_receiver(topic, subscription, sub_queue=sub_queue) as receiver,
    ):
        return receiver.peek_messages(max_message_count=250, sequence_number=0)


def text_properties(received: ServiceBusReceivedMessage) -> dict[str, Any]:
    """Application properties with the SDK's bytes keys and string values decoded."""
    result = {}
    for key, value in (received.application_properties or {}).items():
        name = key.decode() if isinstance(key, bytes) else key
        result[name] = value.decode() if isinstance(value, bytes) else value
    return result
