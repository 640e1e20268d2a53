"""Behaviour specs for peek-lock settlement on a queue, through the real azure-servicebus SDK.

Complete, abandon, dead-letter and defer; lock expiry and lock renewal (AutoLockRenewer: test_seed_verify.py);
MaxDeliveryCount; message expiry; the dead-letter queue and dead-letter forwarding; settlement through
``$management`` when the receiver link is gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import MessageAlreadySettled, MessageLockLostError

from tests.emulator.sdk_helpers import peek, peek_queue, receive, sdk_client

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

WAIT = 0.5  # seconds a receiver waits on an empty queue (local deliveries take milliseconds)
LOCK = timedelta(seconds=5)  # the shortest lock duration Azure accepts
DLQ = ServiceBusSubQueue.DEAD_LETTER


def _send(backend: Backend, queue: str, *messages: ServiceBusMessage) -> None:
    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(list(messages))


def _receive_one(receiver: ServiceBusReceiver) -> ServiceBusReceivedMessage:
    received = receive(receiver, 1, WAIT)
    assert len(received) == 1, "expected a message, the queue had none to deliver"
    return received[0]


def _nothing_receivable(backend: Backend, queue: str, sub_queue: ServiceBusSubQueue | None = None) -> bool:
    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, sub_queue=sub_queue, max_wait_time=WAIT) as receiver,
    ):
        return receiver.receive_messages(max_message_count=1, max_wait_time=WAIT) == []


# --- complete / abandon


def test_completed_message_is_removed_from_the_queue(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("done"), ServiceBusMessage("kept"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        done = _receive_one(receiver)
        receiver.complete_message(done)
        remaining = peek(receiver)

    assert str(done) == "done"
    assert [str(m) for m in remaining] == ["kept"]


def test_abandoned_message_is_redelivered_with_delivery_count_incremented(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("retry me", message_id="m-1"))

    deliveries: list[ServiceBusReceivedMessage] = []
    lock_tokens: set[Any] = set()
    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        for _ in range(3):
            message = _receive_one(receiver)
            deliveries.append(message)
            lock_tokens.add(message.lock_token)
            receiver.abandon_message(message)
        last = _receive_one(receiver)
        lock_tokens.add(last.lock_token)
        receiver.complete_message(last)
        assert peek(receiver) == []
    deliveries.append(last)

    assert [m.delivery_count for m in deliveries] == [0, 1, 2, 3]
    assert {m.message_id for m in deliveries} == {"m-1"}
    assert {m.sequence_number for m in deliveries} == {1}
    assert len(lock_tokens) == 4  # every delivery gets a fresh lock


def test_abandoned_message_keeps_its_place_at_the_head_of_the_queue(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("first"), ServiceBusMessage("second"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        first = _receive_one(receiver)
        receiver.abandon_message(first)
        again = receive(receiver, 2, WAIT)
        for message in again:
            receiver.complete_message(message)

    assert str(first) == "first"
    assert [(str(m), m.delivery_count) for m in again] == [("first", 1), ("second", 0)]


def test_settling_a_message_twice_raises(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("once"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        message = _receive_one(receiver)
        receiver.complete_message(message)
        with pytest.raises(MessageAlreadySettled):
            receiver.complete_message(message)
        with pytest.raises(MessageAlreadySettled):
            receiver.abandon_message(message)
        assert peek(receiver) == []


# --- dead-letter


def test_dead_lettered_message_moves_to_the_dead_letter_queue_with_reason_and_description(
    backend: Backend,
) -> None:
    queue = backend.create_queue()
    _send(
        backend,
        queue,
        ServiceBusMessage("poison", message_id="p-1", subject="order", application_properties={"k": "v"}),
    )

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        message = _receive_one(receiver)
        receiver.dead_letter_message(message, reason="ValidationFailed", error_description="amount < 0")
        assert peek(receiver) == []

    (dead,) = peek_queue(backend, queue, DLQ)
    assert str(dead) == "poison"
    assert dead.message_id == "p-1"
    assert dead.subject == "order"
    assert dead.dead_letter_reason == "ValidationFailed"
    assert dead.dead_letter_error_description == "amount < 0"
    props = dead.application_properties
    assert props is not None
    assert props[b"k"] == b"v"  # the message's own properties survive
    assert props[b"DeadLetterReason"] == b"ValidationFailed"
    assert props[b"DeadLetterErrorDescription"] == b"amount < 0"


def test_dead_letter_queue_is_receivable_like_any_queue(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("a"), ServiceBusMessage("b"))
    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        for message in receive(receiver, 2, WAIT):
            receiver.dead_letter_message(message, reason="r", error_description="d")
        assert peek(receiver) == []

    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, sub_queue=DLQ, max_wait_time=WAIT) as dlq,
    ):
        first, second = receive(dlq, 2, WAIT)
        assert first.lock_token is not None
        assert first.delivery_count == 0
        dlq.abandon_message(first)
        dlq.complete_message(second)
        redelivered = _receive_one(dlq)
        dlq.complete_message(redelivered)
        assert peek(dlq) == []

    assert [str(first), str(second)] == ["a", "b"]
    assert (str(redelivered), redelivered.delivery_count) == ("a", 1)
    assert redelivered.dead_letter_reason == "r"


def test_dead_lettered_messages_are_forwarded_when_forward_dead_lettered_messages_to_is_set(
    backend: Backend,
) -> None:
    target = backend.create_queue()
    source = backend.create_queue(forward_dead_lettered_messages_to=target)
    _send(backend, source, ServiceBusMessage("bad", message_id="f-1"))

    with sdk_client(backend) as client, client.get_queue_receiver(source, max_wait_time=WAIT) as receiver:
        receiver.dead_letter_message(
            _receive_one(receiver), reason="Broken", error_description="cannot parse"
        )
        assert peek(receiver) == []

    assert peek_queue(backend, source, DLQ) == []
    with sdk_client(backend) as client, client.get_queue_receiver(target, max_wait_time=WAIT) as receiver:
        forwarded = _receive_one(receiver)
        receiver.complete_message(forwarded)
    assert str(forwarded) == "bad"
    assert forwarded.message_id == "f-1"
    assert forwarded.dead_letter_reason == "Broken"
    assert forwarded.dead_letter_error_description == "cannot parse"
    assert forwarded.sequence_number == 1  # a new message in the target queue
    assert forwarded.delivery_count == 0


@pytest.mark.also_over_arm
def test_max_delivery_count_dead_letters_are_forwarded_too(backend: Backend) -> None:
    target = backend.create_queue()
    source = backend.create_queue(max_delivery_count=1, forward_dead_lettered_messages_to=target)
    _send(backend, source, ServiceBusMessage("fails once"))

    with sdk_client(backend) as client, client.get_queue_receiver(source, max_wait_time=WAIT) as receiver:
        receiver.abandon_message(_receive_one(receiver))

    assert peek_queue(backend, source, DLQ) == []
    (forwarded,) = peek_queue(backend, target)
    assert str(forwarded) == "fails once"
    assert forwarded.dead_letter_reason == "MaxDeliveryCountExceeded"


# --- defer


def test_deferred_message_is_hidden_from_receivers_but_peeks_as_deferred(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("later"), ServiceBusMessage("now"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        deferred = _receive_one(receiver)
        receiver.defer_message(deferred)
        rest = receive(receiver, 2, WAIT)  # only "now" is deliverable
        for message in rest:
            receiver.complete_message(message)
        peeked = peek(receiver)

    assert str(deferred) == "later"
    assert [str(m) for m in rest] == ["now"]
    assert [(m.sequence_number, m.state) for m in peeked] == [(1, ServiceBusMessageState.DEFERRED)]


# --- locks


def test_expired_lock_loses_the_lock_and_redelivers_with_delivery_count_incremented(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK, max_delivery_count=2)
    _send(backend, queue, ServiceBusMessage("slow", message_id="slow-1"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as first:
        held = _receive_one(first)
        held_token = held.lock_token
        assert held.delivery_count == 0
        assert held.locked_until_utc is not None
        lock_left = (held.locked_until_utc - datetime.now(UTC)).total_seconds()
        assert 3.5 < lock_left <= 5.5
        time.sleep(lock_left + 0.5)

        with pytest.raises(MessageLockLostError):
            first.renew_message_lock(held)  # answered by the broker: the lock is gone
        with pytest.raises(MessageLockLostError):
            first.complete_message(held)

        with client.get_queue_receiver(queue, max_wait_time=WAIT) as second:
            again = _receive_one(second)
            assert (again.message_id, again.delivery_count) == ("slow-1", 1)
            assert again.lock_token != held_token
            # MaxDeliveryCount 2: this second failed delivery dead-letters the message.
            second.abandon_message(again)
        assert peek(first) == []

    (dead,) = peek_queue(backend, queue, DLQ)
    assert dead.message_id == "slow-1"
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"


def test_renew_message_lock_extends_the_lock(backend: Backend) -> None:
    queue = backend.create_queue(lock_duration=LOCK)
    _send(backend, queue, ServiceBusMessage("long job"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        message = _receive_one(receiver)
        original = message.locked_until_utc
        assert original is not None
        time.sleep(3)
        renewed = receiver.renew_message_lock(message)
        assert renewed > original
        assert renewed - datetime.now(UTC) > timedelta(seconds=4)
        assert message.locked_until_utc == renewed
        time.sleep(max(0.0, (original - datetime.now(UTC)).total_seconds()) + 0.5)
        # Past the original expiry: had the broker not extended the lock, it would refuse this with
        # MessageLockLostError (and have redelivered the message).
        receiver.complete_message(message)
        assert peek(receiver) == []


# --- MaxDeliveryCount


def test_message_is_dead_lettered_after_max_delivery_count_failed_deliveries(
    backend: Backend,
) -> None:
    queue = backend.create_queue(max_delivery_count=3)
    _send(backend, queue, ServiceBusMessage("poison", message_id="md-1"))

    counts: list[int | None] = []
    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        for _ in range(4):
            batch = receive(receiver, 1, WAIT)
            if not batch:
                break
            counts.append(batch[0].delivery_count)
            receiver.abandon_message(batch[0])
        assert peek(receiver) == []

    assert counts == [0, 1, 2]
    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, sub_queue=DLQ, max_wait_time=WAIT) as dlq,
    ):
        dead = _receive_one(dlq)
        dlq.complete_message(dead)
    assert dead.message_id == "md-1"
    assert str(dead) == "poison"
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert dead.dead_letter_error_description


# --- expiry


def test_expired_message_is_dropped_when_dead_lettering_on_expiration_is_off(
    backend: Backend,
) -> None:
    queue = backend.create_queue(dead_lettering_on_message_expiration=False)
    _send(
        backend,
        queue,
        ServiceBusMessage("short-lived", time_to_live=timedelta(seconds=1)),
        ServiceBusMessage("durable"),
    )
    time.sleep(1.5)

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        received = receive(receiver, 2, WAIT)
        for message in received:
            receiver.complete_message(message)
        assert peek(receiver) == []

    assert [str(m) for m in received] == ["durable"]
    assert peek_queue(backend, queue, DLQ) == []


def test_expired_message_is_dead_lettered_when_dead_lettering_on_expiration_is_on(
    backend: Backend,
) -> None:
    queue = backend.create_queue(dead_lettering_on_message_expiration=True)
    _send(
        backend,
        queue,
        ServiceBusMessage("short-lived", message_id="ttl-1", time_to_live=timedelta(seconds=1)),
    )
    time.sleep(1.5)

    assert _nothing_receivable(backend, queue)
    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, sub_queue=DLQ, max_wait_time=WAIT) as dlq,
    ):
        dead = _receive_one(dlq)
        dlq.complete_message(dead)
    assert dead.message_id == "ttl-1"
    assert dead.dead_letter_reason == "TTLExpiredException"


def test_dead_letter_queue_does_not_expire_messages_whose_ttl_has_passed(backend: Backend) -> None:
    queue = backend.create_queue()
    sent_at = time.monotonic()
    _send(backend, queue, ServiceBusMessage("dead", message_id="dl-ttl", time_to_live=timedelta(seconds=3)))
    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        receiver.dead_letter_message(_receive_one(receiver), reason="r", error_description="d")
    time.sleep(max(0.0, 3.5 - (time.monotonic() - sent_at)))

    # Azure does not observe TTL in the dead-letter queue.
    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, sub_queue=DLQ, max_wait_time=WAIT) as dlq,
    ):
        peeked = peek(dlq)
        received = receive(dlq, 1, WAIT)
        for message in received:
            dlq.complete_message(message)
    assert [m.message_id for m in peeked] == ["dl-ttl"]
    assert [m.message_id for m in received] == ["dl-ttl"]


def test_entity_default_ttl_caps_a_longer_message_ttl(backend: Backend) -> None:
    queue = backend.create_queue(default_message_time_to_live=timedelta(seconds=2))
    sent_at = time.monotonic()
    _send(
        backend,
        queue,
        ServiceBusMessage("long ttl", time_to_live=timedelta(hours=1)),
        ServiceBusMessage("no ttl"),
    )

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        long_ttl, no_ttl = peek(receiver)
        time.sleep(max(0.0, 2.5 - (time.monotonic() - sent_at)))
        # Both messages expired after the entity's 2 s, the one sent with a 1 h TTL included.
        assert receiver.receive_messages(max_message_count=1, max_wait_time=WAIT) == []
        assert peek(receiver) == []

    # Azure silently lowers a message TTL above the entity's DefaultMessageTimeToLive to that default,
    # and the message reports the TTL it was given.
    assert str(long_ttl) == "long ttl"
    assert str(no_ttl) == "no ttl"
    assert long_ttl.enqueued_time_utc is not None
    assert long_ttl.expires_at_utc == long_ttl.enqueued_time_utc + timedelta(seconds=2)
    assert long_ttl.time_to_live == timedelta(seconds=2)


# --- $management


@pytest.mark.emulator_only
def test_settlement_falls_back_to_management_after_the_connection_drops(
    make_emulator: Callable[..., EmulatorHandle],
) -> None:
    private = make_emulator()
    queue = private.create_queue()
    _send(private, queue, *(ServiceBusMessage(name) for name in ("complete", "abandon", "dead-letter")))

    def drop_connections() -> None:
        for connection in list(private.emulator.amqp.connections):
            connection.close_with_error("amqp:connection:forced", "connection dropped by the test")

    with sdk_client(private) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        complete, abandon, dead_letter = receive(receiver, 3, WAIT)
        private.call(drop_connections)
        # The deliveries belonged to the dropped link: the SDK settles them by lock token over $management.
        receiver.complete_message(complete)
        receiver.abandon_message(abandon)
        receiver.dead_letter_message(dead_letter, reason="Fallback", error_description="via management")
        redelivered = _receive_one(receiver)
        receiver.complete_message(redelivered)

    assert (str(redelivered), redelivered.delivery_count) == ("abandon", 1)
    assert peek_queue(private, queue) == []
    (dead,) = peek_queue(private, queue, DLQ)
    assert str(dead) == "dead-letter"
    assert dead.dead_letter_reason == "Fallback"
    assert dead.dead_letter_error_description == "via management"
