"""The errors the azure-servicebus SDK raises for session, scheduling and deferral operations, raised in the
same cases as on Azure (sync and ``aio``).

* Renewing a message lock that expired (the message went to another receiver): MessageLockLostError, from the
  broker (``com.microsoft:message-lock-lost``). Settling such a message: MessageLockLostError, from the SDK's
  own check of ``locked_until_utc``.
* Settling, renewing or receiving on a closed receiver: ValueError, from the SDK.
* Opening a receiver for a session another receiver holds: SessionCannotBeLockedError, from the broker
  (``com.microsoft:session-cannot-be-locked``).
* Cancelling an unknown, cancelled or no longer scheduled sequence number: MessageNotFoundError, from the
  broker (``com.microsoft:message-not-found``); so is receiving by sequence number what is not a deferred
  message, or a deferred message that is already locked.
* Any of these on an entity that does not exist: ServiceBusAuthenticationError (the put-token is refused).

Session lock loss (SessionLockLostError) is covered in test_sessions.py. ``MessageNotFoundError`` and
``SessionCannotBeLockedError`` are retryable in the SDK, so the clients here use ``retry_total=0``: the
exception is the same, it just arrives without seconds of back-off.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
)
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageNotFoundError,
    ServiceBusAuthenticationError,
    SessionCannotBeLockedError,
)

from tests.emulator.sdk_helpers import no_retry_async_client, no_retry_client, sequence_number

if TYPE_CHECKING:
    from tests.emulator.backends import Backend


WAIT = 1  # seconds a receiver waits on an empty queue
LOCK = timedelta(seconds=5)  # the shortest lock duration Azure accepts
UNKNOWN_SEQUENCE_NUMBER = 987_654_321


def _receive_one(receiver: ServiceBusReceiver, wait: float = WAIT) -> ServiceBusReceivedMessage:
    batch = receiver.receive_messages(max_message_count=1, max_wait_time=wait)
    assert len(batch) == 1, "expected a message, none was delivered"
    return batch[0]


def _sleep_until(moment: datetime | None, extra: float = 0.3) -> None:
    assert moment is not None
    time.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds() + extra))


async def _raised(call: Any) -> type[BaseException] | None:
    try:
        await call
    except Exception as exc:  # the type is what the tests compare
        return type(exc)
    return None


# ---------------------------------------------------------------------------------------------- locks


def test_lock_expired_and_taken_by_another_receiver_raises_message_lock_lost(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK)
    with no_retry_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("job"))
        with (
            client.get_queue_receiver(queue, max_wait_time=WAIT) as first,
            client.get_queue_receiver(queue, max_wait_time=WAIT) as second,
        ):
            stale = _receive_one(first)
            _sleep_until(stale.locked_until_utc)
            fresh = _receive_one(second, wait=3)  # redelivered to the other receiver
            assert (fresh.sequence_number, fresh.delivery_count) == (stale.sequence_number, 1)
            assert fresh.lock_token != stale.lock_token

            with pytest.raises(MessageLockLostError):  # the broker no longer knows the old lock token
                first.renew_message_lock(stale)
            with pytest.raises(MessageLockLostError):
                first.complete_message(stale)
            with pytest.raises(MessageLockLostError):
                first.dead_letter_message(stale, reason="too late")
            second.complete_message(fresh)  # the current holder is unaffected
            assert second.peek_messages(max_message_count=10, sequence_number=1) == []


def test_async_deferred_message_lock_lost_to_another_receiver_raises_message_lock_lost(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK)

    async def scenario() -> dict[str, Any]:
        async with no_retry_async_client(backend) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage("deferred"))
            async with (
                client.get_queue_receiver(queue, max_wait_time=WAIT) as first,
                client.get_queue_receiver(queue, max_wait_time=WAIT) as second,
            ):
                (message,) = await first.receive_messages(max_message_count=1, max_wait_time=WAIT)
                await first.defer_message(message)
                (stale,) = await first.receive_deferred_messages([sequence_number(message)])
                assert stale.locked_until_utc is not None
                await asyncio.sleep(
                    max(0.0, (stale.locked_until_utc - datetime.now(UTC)).total_seconds() + 0.3)
                )
                (fresh,) = await second.receive_deferred_messages([sequence_number(message)])
                outcome = {
                    "renew": await _raised(first.renew_message_lock(stale)),
                    "complete": await _raised(first.complete_message(stale)),
                    "fresh_completed": await _raised(second.complete_message(fresh)),
                    "left": await second.peek_messages(max_message_count=10, sequence_number=1),
                }
        return outcome

    outcome = asyncio.run(scenario())
    assert outcome == {
        "renew": MessageLockLostError,
        "complete": MessageLockLostError,
        "fresh_completed": None,
        "left": [],
    }


def test_settling_or_receiving_on_a_closed_receiver_raises_value_error(backend: Backend) -> None:
    queue = backend.create_queue(lock_duration=timedelta(seconds=30))
    with no_retry_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        receiver = client.get_queue_receiver(queue, max_wait_time=WAIT)
        with receiver:
            message = _receive_one(receiver)
        with pytest.raises(ValueError):
            receiver.complete_message(message)
        with pytest.raises(ValueError):
            receiver.renew_message_lock(message)
        with pytest.raises(ValueError):
            receiver.receive_deferred_messages([sequence_number(message)])


def test_async_settling_on_a_closed_receiver_raises_value_error(backend: Backend) -> None:
    queue = backend.create_queue(lock_duration=timedelta(seconds=30))

    async def scenario() -> tuple[type[BaseException] | None, type[BaseException] | None]:
        async with no_retry_async_client(backend) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage("a"))
            receiver = client.get_queue_receiver(queue, max_wait_time=WAIT)
            async with receiver:
                (message,) = await receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            return (
                await _raised(receiver.abandon_message(message)),
                await _raised(receiver.defer_message(message)),
            )

    assert asyncio.run(scenario()) == (ValueError, ValueError)


# ---------------------------------------------------------------------------------------------- sessions


def test_session_held_by_another_receiver_raises_session_cannot_be_locked(backend: Backend) -> None:
    queue = backend.create_queue(requires_session=True, lock_duration=timedelta(seconds=30))
    with no_retry_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("m", session_id="held"))
        with client.get_queue_receiver(
            queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
        ) as holder:
            assert holder.session.session_id == "held"
            second = client.get_queue_receiver(queue, session_id="held", max_wait_time=WAIT)
            with pytest.raises(SessionCannotBeLockedError):
                second.receive_messages(max_message_count=1, max_wait_time=WAIT)  # opens the link lazily
            second.close()
            # The refusal leaves the holder's lock alone.
            message = _receive_one(holder)
            holder.complete_message(message)


# ---------------------------------------------------------------------------------------------- numbers


def test_cancelling_a_sequence_number_that_is_not_scheduled_raises_message_not_found(
    backend: Backend,
) -> None:
    queue = backend.create_queue()
    with no_retry_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("active"))
        (scheduled,) = sender.schedule_messages(
            ServiceBusMessage("scheduled"), datetime.now(UTC) + timedelta(minutes=10)
        )
        with pytest.raises(MessageNotFoundError):
            sender.cancel_scheduled_messages(UNKNOWN_SEQUENCE_NUMBER)
        sender.cancel_scheduled_messages(scheduled)
        with pytest.raises(MessageNotFoundError):  # already cancelled
            sender.cancel_scheduled_messages(scheduled)
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            (peeked,) = rx.peek_messages(max_message_count=10, sequence_number=1)
        assert str(peeked) == "active"
        with pytest.raises(MessageNotFoundError):  # an active message is not a scheduled one
            sender.cancel_scheduled_messages(sequence_number(peeked))


def test_async_cancelling_an_activated_scheduled_message_raises_message_not_found(
    backend: Backend,
) -> None:
    queue = backend.create_queue()

    async def scenario() -> tuple[type[BaseException] | None, type[BaseException] | None, list[str]]:
        async with no_retry_async_client(backend) as client, client.get_queue_sender(queue) as sender:
            (number,) = await sender.schedule_messages(
                ServiceBusMessage("soon"), datetime.now(UTC) + timedelta(seconds=0.5)
            )
            await asyncio.sleep(1.0)
            after_activation = await _raised(sender.cancel_scheduled_messages(number))
            unknown = await _raised(sender.cancel_scheduled_messages([UNKNOWN_SEQUENCE_NUMBER]))
            async with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
                received = await rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
                for message in received:
                    await rx.complete_message(message)
        return after_activation, unknown, [str(m) for m in received]

    assert asyncio.run(scenario()) == (MessageNotFoundError, MessageNotFoundError, ["soon"])


def test_receiving_by_a_sequence_number_that_is_not_deferred_raises_message_not_found(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=timedelta(seconds=30))
    with no_retry_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([ServiceBusMessage("active"), ServiceBusMessage("to-defer")])
            (scheduled,) = sender.schedule_messages(
                ServiceBusMessage("scheduled"), datetime.now(UTC) + timedelta(minutes=10)
            )
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            peeked = rx.peek_messages(max_message_count=10, sequence_number=1)
            active_seq, deferred_seq = sequence_number(peeked[0]), sequence_number(peeked[1])
            with pytest.raises(MessageNotFoundError):
                rx.receive_deferred_messages([UNKNOWN_SEQUENCE_NUMBER])
            with pytest.raises(MessageNotFoundError):  # an active message
                rx.receive_deferred_messages([active_seq])
            with pytest.raises(MessageNotFoundError):  # a scheduled message
                rx.receive_deferred_messages([scheduled])

            first, second = rx.receive_messages(max_message_count=2, max_wait_time=WAIT)
            assert second.sequence_number == deferred_seq
            rx.defer_message(second)
            with pytest.raises(MessageNotFoundError):  # locked by a receive, even if it is this one
                rx.receive_deferred_messages([sequence_number(first)])
            rx.complete_message(first)
            (deferred,) = rx.receive_deferred_messages([deferred_seq])
            with (
                client.get_queue_receiver(queue, max_wait_time=WAIT) as other,
                pytest.raises(MessageNotFoundError),  # "already locked"
            ):
                other.receive_deferred_messages([deferred_seq])
            rx.complete_message(deferred)
            with pytest.raises(MessageNotFoundError):  # gone
                rx.receive_deferred_messages([deferred_seq])


def test_async_receiving_an_unknown_deferred_sequence_number_raises_message_not_found(
    backend: Backend,
) -> None:
    queue = backend.create_queue()

    async def scenario() -> type[BaseException] | None:
        async with (
            no_retry_async_client(backend) as client,
            client.get_queue_receiver(queue, max_wait_time=WAIT) as rx,
        ):
            return await _raised(rx.receive_deferred_messages([UNKNOWN_SEQUENCE_NUMBER]))

    assert asyncio.run(scenario()) is MessageNotFoundError


# ---------------------------------------------------------------------------------------------- entities


def test_operations_on_a_queue_that_does_not_exist_fail_authentication_as_on_azure(
    backend: Backend,
) -> None:
    # Azure refuses the put-token for a missing entity (404 "could not be found"), so the handler's open
    # fails with ServiceBusAuthenticationError before any operation (see test_cbs_conformance.py).
    missing = "no-such-queue"
    with no_retry_client(backend) as client:
        with pytest.raises(ServiceBusAuthenticationError), client.get_queue_sender(missing) as sender:
            sender.schedule_messages(ServiceBusMessage("x"), datetime.now(UTC) + timedelta(minutes=1))
        with (
            pytest.raises(ServiceBusAuthenticationError),
            client.get_queue_receiver(missing, session_id="s", max_wait_time=WAIT) as rx,
        ):
            rx.receive_deferred_messages([1])
