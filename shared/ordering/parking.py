"""The hold queue of an ordered endpoint: where a held key's later messages wait, in order.

``<queue>.held`` (:func:`shared.topology.names.held_queue`) requires sessions and duplicate detection. A
parked message is a copy of the original (same ``MessageId``, ``SessionId``, properties and body) sent there
before the original is completed, so a crash between the two parks it twice and duplicate detection drops
the second copy: nothing is lost and nothing doubles. Only the invocation that holds the key's session on
the endpoint queue parks or drains the key, so the hold queue's session of a key has one user at a time.

A **resume signal** is a message to the endpoint queue, in the key's session, that asks the trigger to
handle the parked messages: the console and the re-drive send one when they archive a blocker, and a
release interrupted by a transient failure sends one to carry on.

A release receives a key's parked messages with Busbar's own session receiver (:mod:`shared.amqp.receiver`,
python-qpid-proton's public API): every application property keeps its AMQP type (a .NET ``long`` stays a
long when the handlers' copies go on), and the key's session stays locked (renewed, up to 10 minutes, as
azure-servicebus's ``AutoLockRenewer`` renewed it before) while the handlers run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from shared.envelope import PartitionKeyPolicy
from shared.envelope.sdk import readable_from_received
from shared.messages import IncomingMessage

if TYPE_CHECKING:
    from shared.amqp.connection import Namespace
    from shared.amqp.received import ReceivedMessage
    from shared.amqp.receiver import EntityReceiver

RESUME_PROPERTY = "busbar.hold.resume"
"""Application property of a resume signal: the ``MessageId`` of the blocker it resolves ("" for any)."""

RECEIVE_WAIT_SECONDS = 2.0
"""How long a release waits for the next parked message before it takes the key's queue as drained."""


def resume_signal(key: str, blocker_message_id: str | None) -> ServiceBusMessage:
    """The resume signal of ``key`` (in its session), naming the blocker it resolves."""
    return ServiceBusMessage(
        b"",
        session_id=key,
        message_id=f"busbar-resume-{uuid.uuid4()}",
        subject="busbar.hold.resume",
        application_properties={RESUME_PROPERTY: blocker_message_id or ""},
    )


def resume_target(message: IncomingMessage) -> str | None:
    """The blocker a resume signal resolves ("" for any), or None when ``message`` is no signal."""
    if RESUME_PROPERTY not in message.application_properties:
        return None
    return message.property_text(RESUME_PROPERTY) or ""


def send_resume(client: ServiceBusClient, queue: str, key: str, blocker_message_id: str | None) -> None:
    """Ask the trigger of ``queue`` to handle ``key``'s parked messages."""
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(resume_signal(key, blocker_message_id))


def park(namespace: Namespace, held_queue: str, message: IncomingMessage) -> None:
    """Send a copy of ``message`` to the end of its key's session in ``held_queue`` through Busbar's own
    AMQP sender (every application property keeps its AMQP type); raises what says why it was not taken
    (:class:`~shared.amqp.connection.WireError`), so the original is not completed."""
    from shared.amqp.outgoing import outgoing_message  # proton loads its C library only when it is needed
    from shared.amqp.sender import EntitySender

    copy = outgoing_message(message, PartitionKeyPolicy.SESSION_WINS)
    with EntitySender(namespace, held_queue) as sender:
        sender.send(copy)


class ParkedMessages:
    """The parked messages of one key, received one at a time in order (a session receiver)."""

    def __init__(self, receiver: EntityReceiver) -> None:
        self._receiver = receiver

    def next(self) -> tuple[ReceivedMessage, IncomingMessage] | None:
        """The oldest parked message, locked, or None when the key has none left."""
        received = self._receiver.receive_messages(max_message_count=1, max_wait_time=RECEIVE_WAIT_SECONDS)
        if not received:
            return None
        message = received[0]
        return message, readable_from_received(message, IncomingMessage)

    def complete(self, message: ReceivedMessage) -> None:
        """The parked message was handled."""
        self._receiver.complete_message(message)

    def abandon(self, message: ReceivedMessage) -> None:
        """Put the parked message back at the head of its key (a transient failure)."""
        self._receiver.abandon_message(message)

    def dead_letter(self, message: ReceivedMessage, reason: str, description: str) -> None:
        """The parked message can never succeed: it becomes the key's blocker, in the hold queue's
        dead-letter queue (the re-drive sends it back to the endpoint queue)."""
        self._receiver.dead_letter_message(message, reason=reason, error_description=description)


@contextmanager
def parked_messages(namespace: Namespace, held_queue: str, key: str) -> Iterator[ParkedMessages]:
    """The parked messages of ``key`` in ``held_queue``, its session locked (and renewed) meanwhile; raises
    :class:`~shared.amqp.session_lock.SessionCannotBeLocked` when another receiver holds it."""
    from shared.amqp.receiver import EntityReceiver  # proton loads its C library only when one is opened

    with EntityReceiver(namespace, held_queue, session_id=key) as receiver:
        yield ParkedMessages(receiver)
