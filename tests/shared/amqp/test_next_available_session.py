"""Busbar's receiver of the next available session (shared/amqp/receiver.py with
``NEXT_AVAILABLE_SESSION``) against the emulator: it attaches as azure-servicebus 7.15 does for
``session_id=NEXT_AVAILABLE_SESSION`` (``_transport/_pyamqp_transport.py`` ``create_source``: the session
filter with a null value; ``_servicebus_receiver.py``: the link property ``com.microsoft:timeout`` in
milliseconds), learns the session granted from the filter of the attach's answer, gets a session no other
receiver holds, and is refused with ``com.microsoft:timeout`` (the SDK's ``OperationTimeoutError``) when no
session comes free within its wait. A receiver asked to renew its session's lock for a limited time lets
it expire after that (``lock_renewal_seconds``, as the SDK's ``AutoLockRenewer`` stops at its
``max_lock_renewal_duration``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusMessage

from shared.amqp.receiver import NEXT_AVAILABLE_SESSION, EntityReceiver, NoSessionAvailable
from shared.amqp.session_lock import SessionLockLost
from tests.shared.amqp.sdk_send import emulator_namespace, send

pytestmark = pytest.mark.timeout(60)


def _receive_all(receiver: EntityReceiver) -> list[tuple[str, str | None]]:
    received = receiver.receive_messages(max_message_count=10, max_wait_time=5)
    for message in received:
        receiver.complete_message(message)
    return [(str(message.message_id), message.session_id) for message in received]


def test_two_receivers_of_the_next_available_session_get_different_sessions_each_its_messages_in_order(
    emulator: Any,
) -> None:
    queue = emulator.create_queue(requires_session=True)
    send(
        emulator.connection_string,
        queue,
        ServiceBusMessage(b"1", message_id="a-1", session_id="a"),
        ServiceBusMessage(b"1", message_id="b-1", session_id="b"),
        ServiceBusMessage(b"2", message_id="a-2", session_id="a"),
        ServiceBusMessage(b"2", message_id="b-2", session_id="b"),
        ServiceBusMessage(b"3", message_id="a-3", session_id="a"),
    )
    namespace = emulator_namespace(emulator)
    with (
        EntityReceiver(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=5) as first,
        EntityReceiver(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=5) as second,
    ):
        assert {first.session_id, second.session_id} == {"a", "b"}
        by_session = {first.session_id: _receive_all(first), second.session_id: _receive_all(second)}
    assert by_session == {
        "a": [("a-1", "a"), ("a-2", "a"), ("a-3", "a")],
        "b": [("b-1", "b"), ("b-2", "b")],
    }


def test_with_no_session_free_the_next_available_session_is_refused_after_the_wait(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True)
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="only-1", session_id="only"))
    namespace = emulator_namespace(emulator)
    with EntityReceiver(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=5) as holder:
        assert holder.session_id == "only"
        with pytest.raises(NoSessionAvailable, match="cannot be taken") as refused:
            EntityReceiver(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=1)
        assert refused.value.condition == "com.microsoft:timeout"
    # An empty queue has no session to give either.
    with pytest.raises(NoSessionAvailable):
        EntityReceiver(
            namespace, emulator.create_queue(requires_session=True), NEXT_AVAILABLE_SESSION, session_wait=1
        )


def test_a_session_lock_is_renewed_only_for_lock_renewal_seconds_and_then_lost(emulator: Any) -> None:
    lock = timedelta(seconds=5)  # Azure's minimum LockDuration: renewed 3.75 s before it expires
    queue = emulator.create_queue(requires_session=True, lock_duration=lock)
    send(
        emulator.connection_string,
        queue,
        ServiceBusMessage(b"1", message_id="l-1", session_id="l"),
        ServiceBusMessage(b"2", message_id="l-2", session_id="l"),
    )
    namespace = emulator_namespace(emulator)
    with EntityReceiver(
        namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=5, lock_renewal_seconds=3
    ) as receiver:
        assert receiver.session is not None
        taken_until = receiver.session.locked_until
        [first] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(first)
        # Wait until the lock as last renewed has run out (it is read again: it moves while renewed); a
        # lock renewed past 3 s plus 3 lock durations is not waited for: the receive below then fails.
        give_up = time.monotonic() + 3 + 3 * lock.total_seconds()
        while datetime.now(UTC) <= receiver.session.locked_until + timedelta(seconds=1):
            if time.monotonic() > give_up:
                break
            time.sleep(0.2)
        assert receiver.session.locked_until > taken_until  # it was renewed, for a while
        assert receiver.session.error is None  # and then let expire, not failed
        with pytest.raises(SessionLockLost):
            receiver.receive_messages(max_message_count=1, max_wait_time=1)
    # The session is free again, its second message still there.
    with EntityReceiver(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=5) as again:
        assert _receive_all(again) == [("l-2", "l")]
    assert first.message_id == "l-1"
