"""What the seam's receiver tests share: messages sent with the unmodified azure-servicebus SDK, and the
emulator's namespace as Busbar's seam connects to it."""

from __future__ import annotations

from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from shared.amqp.connection import Namespace


def send(connection_string: str, queue: str, *messages: ServiceBusMessage) -> None:
    """Send ``messages`` to ``queue`` with the SDK, in one batch."""
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(list(messages))


def emulator_namespace(emulator: Any) -> Namespace:
    """The emulator's namespace, from its connection string."""
    return Namespace.from_connection_string(emulator.connection_string)
