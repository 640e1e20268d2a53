"""Behaviour specs for deferral and peeking, through the real azure-servicebus SDK (sync and ``aio``).

``defer_message``, ``receive_deferred_messages`` (the ``$management`` receive-by-sequence-number operation)
and the settlement of deferred messages, which the SDK always sends as ``update-disposition``; deferral in a
session; deferred messages whose time-to-live has passed; and ``peek_messages`` over active, locked, deferred
and scheduled messages.

Azure (message-deferral.md): "Deferred messages aren't expired and automatically moved to a dead-letter
queue until a client app attempts to receive them using an API and the sequence number. [...] When a client
tries to retrieve a deferred message, it's checked for expired condition and moved to a dead-letter queue if
it's already expired. An expired message is moved to a deadletter subqueue only when the dead-letter feature
is enabled for the entity." Receiving a sequence number that is not deferred, or a deferred message that is
already locked, fails with "Failed to lock one or more specified messages. Either the message is already
locked or does not exist." (MessageNotFound).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import MessageNotFoundError

from tests.emulator.sdk_helpers import (
    no_retry_client,
    receive,
    seconds_from_now,
    sequence_number,
    sleep_until,
)

if TYPE_CHECKING:
    from tests.emulator.backends import Backend


WAIT = 1  # seconds a receiver waits on an empty queue
LOCK = timedelta(seconds=5)
DLQ = ServiceBusSubQueue.DEAD_LETTER


def _send(backend: Backend, queue: str, *messages: ServiceBusMessage) -> None:
    with no_retry_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(list(messages))


def _defer_all(receiver: ServiceBusReceiver, count: int) -> list[int]:
    """Receive ``count`` messages, defer them and return their sequence numbers."""
    received = receive(receiver, count, WAIT)
    assert len(received) == count
    for message in received:
        receiver.defer_message(message)
    return [m.sequence_number for m in received]  # type: ignore[misc]


def test_deferred_message_is_set_aside_and_received_locked_by_its_sequence_number(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK)
    _send(backend, queue, ServiceBusMessage("payment", message_id="pay-1"), ServiceBusMessage("order"))

    with no_retry_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
        (payment_seq,) = _defer_all(rx, 1)
        # Invisible to normal receives: the next receive gets the message behind it ...
        (order,) = receive(rx, 1, WAIT)
        assert str(order) == "order"
        rx.complete_message(order)
        assert rx.receive_messages(max_message_count=1, max_wait_time=WAIT) == []
        # ... but browsable, as DEFERRED.
        (peeked,) = rx.peek_messages(max_message_count=10, sequence_number=1)
        assert (peeked.sequence_number, peeked.state, str(peeked)) == (
            payment_seq,
            ServiceBusMessageState.DEFERRED,
            "payment",
        )

        (deferred,) = rx.receive_deferred_messages([payment_seq])
        assert (str(deferred), deferred.message_id, deferred.sequence_number) == (
            "payment",
            "pay-1",
            payment_seq,
        )
        assert deferred.state == ServiceBusMessageState.DEFERRED
        assert deferred.lock_token is not None
        assert 3 < seconds_from_now(deferred.locked_until_utc) <= LOCK.total_seconds() + 1
        # A deferred message that is locked cannot be received again by sequence number.
        with pytest.raises(MessageNotFoundError):
            rx.receive_deferred_messages([payment_seq])

        rx.complete_message(deferred)  # sent as update-disposition "completed"
        assert rx.peek_messages(max_message_count=10, sequence_number=1) == []
        with pytest.raises(MessageNotFoundError):
            rx.receive_deferred_messages([payment_seq])


def test_abandoned_deferred_message_stays_deferred_and_dead_lettering_moves_it_to_the_dlq(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK)
    _send(backend, queue, ServiceBusMessage("poison"), ServiceBusMessage("renewable"))

    with no_retry_client(backend) as client:
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            poison_seq, renewable_seq = _defer_all(rx, 2)

            (poison,) = rx.receive_deferred_messages(poison_seq)  # a single int works too
            rx.abandon_message(poison)  # update-disposition "abandoned": back to the deferred set
            assert rx.receive_messages(max_message_count=1, max_wait_time=WAIT) == []
            peeked = rx.peek_messages(max_message_count=10, sequence_number=1)
            assert [(m.sequence_number, m.state) for m in peeked] == [
                (poison_seq, ServiceBusMessageState.DEFERRED),
                (renewable_seq, ServiceBusMessageState.DEFERRED),
            ]
            assert poison.delivery_count is not None
            assert peeked[0].delivery_count == poison.delivery_count + 1  # the abandon counted a delivery

            (poison_again,) = rx.receive_deferred_messages([poison_seq])
            rx.dead_letter_message(poison_again, reason="Unprocessable", error_description="bad schema")

            (renewable,) = rx.receive_deferred_messages([renewable_seq])
            before = renewable.locked_until_utc
            time.sleep(0.2)
            renewed = rx.renew_message_lock(renewable)
            assert before is not None and renewed > before
            rx.defer_message(renewable)  # a deferred message can be deferred again
            assert [m.sequence_number for m in rx.peek_messages(max_message_count=10, sequence_number=1)] == [
                renewable_seq
            ]

        with client.get_queue_receiver(queue, sub_queue=DLQ, max_wait_time=WAIT) as dlq:
            (dead,) = receive(dlq, 1, WAIT)
            assert str(dead) == "poison"
            assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
                "Unprocessable",
                "bad schema",
            )
            dlq.complete_message(dead)


def test_async_defer_receive_deferred_and_complete(backend: Backend) -> None:
    queue = backend.create_queue(lock_duration=LOCK)
    _send(backend, queue, ServiceBusMessage("later"), ServiceBusMessage("now"))

    async def scenario() -> dict[str, Any]:
        async with (
            AsyncServiceBusClient.from_connection_string(backend.connection_string, retry_total=0) as client,
            client.get_queue_receiver(queue, max_wait_time=WAIT) as rx,
        ):
            (later,) = await rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
            await rx.defer_message(later)
            (now,) = await rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
            await rx.complete_message(now)
            peeked = await rx.peek_messages(max_message_count=10, sequence_number=1)
            (deferred,) = await rx.receive_deferred_messages([sequence_number(later)])
            await rx.complete_message(deferred)
            try:
                await rx.receive_deferred_messages([sequence_number(later)])
                again: type[BaseException] | None = None
            except Exception as exc:  # the type is the assertion
                again = type(exc)
            return {
                "order": [str(now)],
                "peeked": [(str(m), m.state) for m in peeked],
                "deferred": (str(deferred), deferred.sequence_number == later.sequence_number),
                "again": again,
                "left": await rx.peek_messages(max_message_count=10, sequence_number=1),
            }

    outcome = asyncio.run(scenario())
    assert outcome["order"] == ["now"]
    assert outcome["peeked"] == [("later", ServiceBusMessageState.DEFERRED)]
    assert outcome["deferred"] == ("later", True)
    assert outcome["again"] is MessageNotFoundError
    assert outcome["left"] == []


def test_deferred_session_message_is_received_through_its_session(backend: Backend) -> None:
    queue = backend.create_queue(requires_session=True, lock_duration=timedelta(seconds=30))
    _send(
        backend,
        queue,
        ServiceBusMessage("payment", session_id="order-1"),
        ServiceBusMessage("purchase-order", session_id="order-1"),
    )

    with no_retry_client(backend) as client:
        with client.get_queue_receiver(queue, session_id="order-1", max_wait_time=WAIT) as rx:
            (payment_seq,) = _defer_all(rx, 1)  # arrived too early: set aside
            rx.session.set_state(str(payment_seq))  # the seed's advice: keep the number in session state
            (purchase,) = receive(rx, 1, WAIT)
            assert str(purchase) == "purchase-order"
            rx.complete_message(purchase)
        with client.get_queue_receiver(queue, session_id="order-1", max_wait_time=WAIT) as rx:
            state = rx.session.get_state()
            assert state is not None
            (payment,) = rx.receive_deferred_messages([int(state)])
            assert (str(payment), payment.session_id) == ("payment", "order-1")
            rx.complete_message(payment)
            assert rx.peek_messages(max_message_count=10, sequence_number=1) == []


TTL = timedelta(seconds=3)  # long enough to receive and defer the message before it expires


def _defer_and_get_expiry(receiver: ServiceBusReceiver) -> tuple[int, datetime]:
    """Receive and defer one message; return its sequence number and when its time-to-live ends."""
    (message,) = receive(receiver, 1, WAIT)
    assert message.expires_at_utc is not None and message.expires_at_utc > datetime.now(UTC)
    receiver.defer_message(message)
    return message.sequence_number, message.expires_at_utc + timedelta(milliseconds=300)  # type: ignore[return-value]


def _receive_expired_deferred(receiver: ServiceBusReceiver, sequence_number: int) -> list[Any]:
    """Attempt to receive an expired deferred message: Azure checks it for expiry at this point and does not
    hand it out. What the attempt itself returns is not documented (an empty result or MessageNotFound)."""
    try:
        return receiver.receive_deferred_messages([sequence_number])
    except MessageNotFoundError:
        return []


def test_expired_deferred_message_is_dead_lettered_when_receive_deferred_finds_it_expired(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK, dead_lettering_on_message_expiration=True)
    _send(backend, queue, ServiceBusMessage("short-lived", time_to_live=TTL))

    with no_retry_client(backend) as client:
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            seq, expires = _defer_and_get_expiry(rx)
            sleep_until(expires)  # the TTL passes while the message is deferred
        with client.get_queue_receiver(queue, sub_queue=DLQ, max_wait_time=WAIT) as dlq:
            # Not moved on its own: only the attempt to receive it checks the expiry.
            assert dlq.peek_messages(max_message_count=10, sequence_number=1) == []
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            assert _receive_expired_deferred(rx, seq) == []
            with pytest.raises(MessageNotFoundError):
                rx.receive_deferred_messages([seq])
            assert rx.peek_messages(max_message_count=10, sequence_number=1) == []
        with client.get_queue_receiver(queue, sub_queue=DLQ, max_wait_time=WAIT) as dlq:
            (dead,) = receive(dlq, 1, WAIT)
            assert str(dead) == "short-lived"
            assert dead.dead_letter_reason == "TTLExpiredException"
            dlq.complete_message(dead)


def test_expired_deferred_message_is_dropped_without_dead_lettering_on_expiration(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK)
    _send(backend, queue, ServiceBusMessage("short-lived", time_to_live=TTL))

    with no_retry_client(backend) as client:
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            seq, expires = _defer_and_get_expiry(rx)
            sleep_until(expires)
            assert _receive_expired_deferred(rx, seq) == []
            with pytest.raises(MessageNotFoundError):
                rx.receive_deferred_messages([seq])
            assert rx.peek_messages(max_message_count=10, sequence_number=1) == []
        with client.get_queue_receiver(queue, sub_queue=DLQ, max_wait_time=WAIT) as dlq:
            assert dlq.peek_messages(max_message_count=10, sequence_number=1) == []


# ---------------------------------------------------------------------------------------------- peek


def test_peek_from_a_sequence_number_shows_active_locked_deferred_and_scheduled_messages_untouched(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=timedelta(seconds=30))
    with no_retry_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([ServiceBusMessage("to-lock"), ServiceBusMessage("to-defer")])
            sender.send_messages(ServiceBusMessage("active"))
            (scheduled_seq,) = sender.schedule_messages(
                ServiceBusMessage("scheduled"), datetime.now(UTC) + timedelta(minutes=10)
            )
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            locked, to_defer = receive(rx, 2, WAIT)
            rx.defer_message(to_defer)
            lock_until = locked.locked_until_utc

            with client.get_queue_receiver(queue, max_wait_time=WAIT) as browser:
                everything = browser.peek_messages(max_message_count=10, sequence_number=1)
                tail = browser.peek_messages(max_message_count=10, sequence_number=sequence_number(to_defer))
                first_two = browser.peek_messages(max_message_count=2, sequence_number=1)
                # Without a sequence number the SDK continues after the last message it saw.
                following = browser.peek_messages(max_message_count=10)

            assert [(str(m), m.state) for m in everything] == [
                ("to-lock", ServiceBusMessageState.ACTIVE),
                ("to-defer", ServiceBusMessageState.DEFERRED),
                ("active", ServiceBusMessageState.ACTIVE),
                ("scheduled", ServiceBusMessageState.SCHEDULED),
            ]
            assert everything[3].sequence_number == scheduled_seq
            assert [m.sequence_number for m in everything] == sorted(sequence_number(m) for m in everything)
            assert [str(m) for m in tail] == ["to-defer", "active", "scheduled"]
            assert [str(m) for m in first_two] == ["to-lock", "to-defer"]
            assert [str(m) for m in following] == ["active", "scheduled"]
            assert all(m.delivery_count == 0 for m in everything)

            # Peeking took no lock and counted no delivery: the holder's lock is intact ...
            rx.complete_message(locked)
            assert lock_until is not None and seconds_from_now(lock_until) > 20
            # ... and the active message is delivered for the first time.
            (active,) = receive(rx, 1, WAIT)
            assert (str(active), active.delivery_count) == ("active", 0)
            rx.complete_message(active)
            with pytest.raises(ValueError):  # a peeked message cannot be settled (SDK check)
                rx.complete_message(everything[2])
