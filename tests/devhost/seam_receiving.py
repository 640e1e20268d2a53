"""Receiving a queue's messages as devhost's trigger listeners do: through Busbar's AMQP seam
(:class:`shared.amqp.receiver.EntityReceiver`, which the listeners' ``AsyncEntityReceiver`` runs on a thread),
each message a :class:`shared.amqp.received.ReceivedMessage` with its AMQP bytes and lock token, for the
tests that hand a received message to devhost's host-side readers (``message_data``,
``model_binding_content``)."""

from __future__ import annotations

from shared.amqp.connection import Namespace
from shared.amqp.received import ReceivedMessage
from shared.amqp.receiver import EntityReceiver


def receive_as_the_listeners_do(
    connection_string: str, queue: str, count: int, *, complete: bool = True
) -> list[ReceivedMessage]:
    """``count`` messages of ``queue``, in order, completed once received (else left locked until their lock
    expires: the receiver closes without settling them)."""
    received: list[ReceivedMessage] = []
    with EntityReceiver(Namespace.from_connection_string(connection_string), queue) as receiver:
        while len(received) < count:
            batch = receiver.receive_messages(count - len(received), max_wait_time=5)
            assert batch, f"{queue}: {len(received)} of {count} messages arrived"
            received += batch
        if complete:
            for message in received:
                receiver.complete_message(message)
    return received
