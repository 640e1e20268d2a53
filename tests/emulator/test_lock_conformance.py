"""Conformance of message and session locks with Azure, through the unmodified azure-servicebus SDK.

Locks of non-session messages belong to the entity, not the receiver link (a detached link's messages are
still settled through ``$management`` by lock token); ``locked_until_utc`` is the broker's real expiry; a
lock that expired is reported as lost at once, for renewal and for settlement alike.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import MessageLockLostError, SessionLockLostError

from tests.emulator.sdk_helpers import (
    no_retry_async_client,
    no_retry_client,
    peek_queue,
    receive,
    sdk_client,
    seconds_from_now,
    sleep_until,
)

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

WAIT = 1.0
LOCK = timedelta(seconds=5)  # the shortest lock duration Azure accepts


def _send(backend: Backend, queue: str, *bodies: str, session_id: str | None = None) -> None:
    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(b, session_id=session_id) for b in bodies])


def _receive_one(receiver: ServiceBusReceiver) -> ServiceBusReceivedMessage:
    received = receive(receiver, 1, WAIT)
    assert len(received) == 1, "expected a message, the queue had none to deliver"
    return received[0]


def _detach_receiver_link(receiver: ServiceBusReceiver) -> None:
    """Detach the receiver's AMQP link only (its connection and $management link stay), as the SDK's own
    live test ``test_queue_message_settle_through_mgmt_link_due_to_broken_receiver_link`` does."""
    link = receiver._handler._link
    assert link is not None  # an open receiver has its link
    link.detach()


# --- point 6: locks belong to the entity


def test_message_of_a_detached_receiver_link_is_settled_through_management_until_its_lock_expires(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK, max_delivery_count=10)
    _send(backend, queue, "completed-after-detach", "dead-lettered-after-detach", "expired-after-detach")
    with no_retry_client(backend) as client, client.get_queue_receiver(queue, prefetch_count=0) as receiver:
        received = {str(m): m for m in receive(receiver, 3, WAIT)}
        assert len(received) == 3
        _detach_receiver_link(receiver)
        receiver.complete_message(received["completed-after-detach"])
        receiver.dead_letter_message(received["dead-lettered-after-detach"], reason="AfterDetach")
        late = received["expired-after-detach"]
        assert late.locked_until_utc is not None
        sleep_until(late.locked_until_utc)
        time.sleep(0.2)
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(late)
    left = peek_queue(backend, queue)
    assert [(str(m), m.delivery_count) for m in left] == [("expired-after-detach", 1)]
    dead = peek_queue(backend, queue, ServiceBusSubQueue.DEAD_LETTER)
    assert [(str(m), m.dead_letter_reason) for m in dead] == [("dead-lettered-after-detach", "AfterDetach")]


def test_async_message_of_a_detached_receiver_link_is_completed_through_management(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=timedelta(seconds=30))
    _send(backend, queue, "async-after-detach")

    async def scenario() -> None:
        async with (
            no_retry_async_client(backend) as client,
            client.get_queue_receiver(queue, prefetch_count=0) as receiver,
        ):
            received = await receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            assert [str(m) for m in received] == ["async-after-detach"]
            link = receiver._handler._link
            assert link is not None  # an open receiver has its link
            await link.detach()
            await receiver.complete_message(received[0])

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert peek_queue(backend, queue) == []


# --- point 7: renewal and expiry timing


def _broker_lock_expiry_ms(emulator: EmulatorHandle, queue: str, token: str) -> int:
    import uuid

    def read() -> int:
        mq = emulator.emulator.namespace.receive_queue(queue)[1]
        return mq.locks[uuid.UUID(token)].locked_until_ms

    result = emulator.call(read)
    assert isinstance(result, int)
    return result


@pytest.mark.emulator_only
def test_locked_until_utc_is_the_brokers_expiry_on_receipt_and_after_renewal(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue(lock_duration=LOCK)
    _send(emulator, queue, "timed")
    with no_retry_client(emulator) as client, client.get_queue_receiver(queue) as receiver:
        message = _receive_one(receiver)
        assert message.locked_until_utc is not None and message.lock_token is not None
        broker_ms = _broker_lock_expiry_ms(emulator, queue, str(message.lock_token))
        assert abs(message.locked_until_utc.timestamp() * 1000 - broker_ms) <= 1
        time.sleep(1)
        renewed = receiver.renew_message_lock(message)
        broker_ms = _broker_lock_expiry_ms(emulator, queue, str(message.lock_token))
        assert abs(renewed.timestamp() * 1000 - broker_ms) <= 1
        assert message.locked_until_utc == renewed
        receiver.complete_message(message)


def test_renewing_or_completing_an_expired_message_lock_fails_at_once_with_lock_lost(
    backend: Backend,
) -> None:
    queue = backend.create_queue(lock_duration=LOCK)
    _send(backend, queue, "expires", "expires-too")
    with no_retry_client(backend) as client, client.get_queue_receiver(queue, prefetch_count=0) as receiver:
        first, second = receive(receiver, 2, WAIT)
        assert first.locked_until_utc is not None
        sleep_until(first.locked_until_utc)
        time.sleep(0.2)
        assert first._lock_expired  # (the SDK's own view agrees with the broker's)
        with pytest.raises(MessageLockLostError):
            receiver.renew_message_lock(first)
        with pytest.raises(MessageLockLostError):
            receiver.complete_message(second)
    redelivered = peek_queue(backend, queue)
    assert sorted(m.delivery_count or 0 for m in redelivered) == [1, 1]


def test_renewing_an_expired_session_lock_fails_at_once_with_session_lock_lost(
    backend: Backend,
) -> None:
    queue = backend.create_queue(requires_session=True, lock_duration=LOCK)
    _send(backend, queue, "in-session", session_id="s-expiring")
    with (
        no_retry_client(backend) as client,
        client.get_queue_receiver(queue, session_id="s-expiring") as receiver,
    ):
        message = _receive_one(receiver)
        session = receiver.session
        assert session.locked_until_utc is not None
        assert abs(seconds_from_now(session.locked_until_utc) - LOCK.total_seconds()) < 2
        renewed = session.renew_lock()
        assert session.locked_until_utc == renewed
        sleep_until(renewed)
        time.sleep(0.2)
        with pytest.raises(SessionLockLostError):
            session.renew_lock()
        with pytest.raises(SessionLockLostError):
            receiver.complete_message(message)


def test_a_session_receiver_idle_past_its_session_lock_loses_the_session_in_receive_and_delete_too(
    backend: Backend,
) -> None:
    # Azure expires an unrenewed session lock and detaches the receive link with session-lock-lost ("the
    # service would send a detach frame once a session lock gets expired", azure-servicebus
    # _base_handler._check_live), in receive-and-delete as in peek-lock, even while the link holds credit
    # (Azure/azure-service-bus#694: the broker kept such locks until its 2026 fix). The SDK test
    # test_async_session_by_queue_client_conn_str_receive_handler_receiveanddelete idles exactly as long as
    # its lock lasts and relied on the old behaviour.
    queue = backend.create_queue(requires_session=True, lock_duration=LOCK)
    _send(backend, queue, "first", session_id="s-idle")
    with no_retry_client(backend) as client:
        with client.get_queue_receiver(
            queue, session_id="s-idle", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver:
            assert [str(m) for m in receive(receiver, 1, WAIT)] == ["first"]
            locked_until = receiver.session.locked_until_utc
            assert locked_until is not None
            with pytest.raises(SessionLockLostError):
                receiver.receive_messages(max_wait_time=seconds_from_now(locked_until) + 3 * WAIT)
        _send(backend, queue, "second", session_id="s-idle")
        with client.get_queue_receiver(
            queue, session_id="s-idle", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as successor:
            assert [str(m) for m in receive(successor, 1, WAIT)] == ["second"]
