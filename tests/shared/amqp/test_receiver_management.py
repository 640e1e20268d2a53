"""A message's lock renewed, and a session's state and lock, through Busbar's receiver's ``$management``
requests (shared/amqp/receiver.py) against the emulator, as azure-servicebus 7.15 sends them
(``_servicebus_receiver.py`` ``_renew_locks``: ``com.microsoft:renew-lock`` with ``lock-tokens``;
``_servicebus_session.py``: ``com.microsoft:get-session-state`` / ``set-session-state`` /
``renew-session-lock`` with ``session-id``). What one receiver holds is its own: a message another
receiver received is neither renewed nor settled by it."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from shared.amqp.connection import WireError
from shared.amqp.receiver import EntityReceiver
from tests.shared.amqp.sdk_send import emulator_namespace, send

pytestmark = pytest.mark.timeout(60)


def test_renewing_a_message_lock_extends_it_and_fails_once_the_message_is_completed(emulator: Any) -> None:
    queue = emulator.create_queue(lock_duration=timedelta(seconds=30))
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="r-1"))
    with EntityReceiver(emulator_namespace(emulator), queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert message.locked_until_utc is not None
        time.sleep(0.05)  # so that "now + lock duration" is a later millisecond than at the delivery
        renewed = receiver.renew_message_lock(message)
        assert renewed > message.locked_until_utc
        receiver.complete_message(message)
        with pytest.raises(WireError, match="not held locked"):
            receiver.renew_message_lock(message)
    assert message.message_id == "r-1"


def test_a_message_another_receiver_received_is_neither_renewed_nor_settled_by_this_one(
    emulator: Any,
) -> None:
    queue = emulator.create_queue(lock_duration=timedelta(minutes=1))
    send(
        emulator.connection_string,
        queue,
        ServiceBusMessage(b"1", message_id="o-1"),
        ServiceBusMessage(b"2", message_id="o-2"),
    )
    with (
        EntityReceiver(emulator_namespace(emulator), queue) as first,
        EntityReceiver(emulator_namespace(emulator), queue) as other,
    ):
        [mine] = first.receive_messages(max_message_count=1, max_wait_time=5)
        [theirs] = other.receive_messages(max_message_count=1, max_wait_time=5)
        with pytest.raises(WireError, match="not held locked"):
            first.renew_message_lock(theirs)
        with pytest.raises(WireError, match="not received locked by this receiver"):
            first.complete_message(theirs)
        # Each is still locked by its own receiver, which settles it.
        first.complete_message(mine)
        other.complete_message(theirs)
        assert first.receive_messages(max_message_count=1, max_wait_time=0.5) == []
    assert {mine.message_id, theirs.message_id} == {"o-1", "o-2"}


def test_a_session_state_is_set_read_back_and_cleared_and_the_sdk_reads_the_same_state(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True)
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="st-1", session_id="st"))
    with EntityReceiver(emulator_namespace(emulator), queue, session_id="st") as receiver:
        assert receiver.get_session_state() is None
        receiver.set_session_state(b"\x00step-2\xff")
        assert receiver.get_session_state() == b"\x00step-2\xff"
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue, session_id="st") as sdk_receiver,
    ):
        assert sdk_receiver.session.get_state() == b"\x00step-2\xff"
    with EntityReceiver(emulator_namespace(emulator), queue, session_id="st") as receiver:
        receiver.set_session_state(None)
        assert receiver.get_session_state() is None


def test_renewing_the_session_lock_returns_a_later_expiry(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True, lock_duration=timedelta(seconds=30))
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="sl-1", session_id="sl"))
    with EntityReceiver(emulator_namespace(emulator), queue, session_id="sl") as receiver:
        assert receiver.session is not None
        taken_until = receiver.session.locked_until
        time.sleep(0.05)  # so that "now + lock duration" is a later millisecond than at the attach
        renewed = receiver.renew_session_lock()
        assert renewed > taken_until
        assert receiver.session.locked_until == renewed


def test_session_operations_on_a_receiver_without_a_session_are_refused(emulator: Any) -> None:
    queue = emulator.create_queue()
    with EntityReceiver(emulator_namespace(emulator), queue) as receiver:
        with pytest.raises(WireError, match="holds no session"):
            receiver.get_session_state()
        with pytest.raises(WireError, match="holds no session"):
            receiver.set_session_state(b"x")
        with pytest.raises(WireError, match="holds no session"):
            receiver.renew_session_lock()
