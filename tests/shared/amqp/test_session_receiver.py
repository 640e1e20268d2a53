"""Busbar's own AMQP receiver of one session (shared/amqp/receiver.py with a session id,
shared/amqp/session_lock.py) against the emulator: it attaches with the source filter azure-servicebus uses
for a named session (``com.microsoft:session-filter``, azure-servicebus 7.15
``_transport/_pyamqp_transport.py`` ``create_source``), takes only that session, is refused while another
receiver holds it (``com.microsoft:session-cannot-be-locked``, what the SDK raises as
``SessionCannotBeLockedError``), and keeps it locked past the entity's lock duration with
``com.microsoft:renew-session-lock`` as the SDK's ``AutoLockRenewer`` does."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import SessionCannotBeLockedError

from shared.amqp.connection import Namespace, WireError
from shared.amqp.receiver import EntityReceiver
from shared.amqp.session_lock import SessionCannotBeLocked, SessionLockLost, renew_period
from tests.shared.amqp.sdk_send import send

pytestmark = pytest.mark.timeout(90)


def _sdk_session_ids(connection_string: str, queue: str, session_id: str) -> list[str]:
    """The message ids azure-servicebus's own session receiver receives from ``session_id`` (completed);
    a refusal is raised at once (no retries)."""
    with (
        ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client,
        client.get_queue_receiver(queue, session_id=session_id, max_wait_time=2) as receiver,
    ):
        received = receiver.receive_messages(max_message_count=10, max_wait_time=2)
        for message in received:
            receiver.complete_message(message)
        return [str(message.message_id) for message in received]


def test_a_session_receiver_takes_only_its_session_in_order(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True)
    send(
        emulator.connection_string,
        queue,
        ServiceBusMessage(b"1", message_id="b-1", session_id="b"),
        ServiceBusMessage(b"1", message_id="a-1", session_id="a"),
        ServiceBusMessage(b"2", message_id="b-2", session_id="b"),
        ServiceBusMessage(b"2", message_id="a-2", session_id="a"),
    )
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue, session_id="a") as receiver:
        received = receiver.receive_messages(max_message_count=10, max_wait_time=5)
        for message in received:
            receiver.complete_message(message)
        assert receiver.receive_messages(max_message_count=10, max_wait_time=0.5) == []
    assert [(m.message_id, m.session_id) for m in received] == [("a-1", "a"), ("a-2", "a")]
    assert _sdk_session_ids(emulator.connection_string, queue, "b") == ["b-1", "b-2"]
    assert _sdk_session_ids(emulator.connection_string, queue, "a") == []


def test_a_held_session_cannot_be_taken_by_another_receiver_until_it_is_closed(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True)
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="k-1", session_id="k"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue, session_id="k"):
        with pytest.raises(SessionCannotBeLocked, match="'k'"):
            EntityReceiver(namespace, queue, session_id="k")
        # The SDK's own session receiver is refused alike: the session is locked on the broker.
        with pytest.raises(SessionCannotBeLockedError):
            _sdk_session_ids(emulator.connection_string, queue, "k")
    with EntityReceiver(namespace, queue, session_id="k") as again:
        [message] = again.receive_messages(max_message_count=1, max_wait_time=5)
        again.complete_message(message)
    assert message.message_id == "k-1"


def test_a_session_is_kept_locked_past_its_lock_duration_so_a_message_received_first_completes_late(
    emulator: Any,
) -> None:
    lock = timedelta(seconds=5)  # Azure's minimum LockDuration
    queue = emulator.create_queue(requires_session=True, lock_duration=lock)
    send(
        emulator.connection_string,
        queue,
        ServiceBusMessage(b"1", message_id="s-1", session_id="s"),
        ServiceBusMessage(b"2", message_id="s-2", session_id="s"),
    )
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue, session_id="s") as receiver:
        assert receiver.session is not None
        first_expiry = receiver.session.locked_until
        [first] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert first.locked_until_utc is not None
        # Past two lock durations after the first lock would have expired (no timing is asserted).
        while datetime.now(UTC) <= first.locked_until_utc + 2 * lock:
            time.sleep(0.2)
        assert receiver.session.error is None
        assert receiver.session.locked_until > max(first_expiry, first.locked_until_utc) + lock
        with pytest.raises(SessionCannotBeLockedError):
            _sdk_session_ids(emulator.connection_string, queue, "s")
        receiver.complete_message(first)
        [second] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(second)
    assert (first.message_id, first.delivery_count, second.message_id) == ("s-1", 0, "s-2")
    assert _sdk_session_ids(emulator.connection_string, queue, "s") == []


def test_the_renew_period_is_the_sdks_ten_seconds_or_three_quarters_of_a_short_lock() -> None:
    # azure-servicebus 7.15, _common/auto_lock_renewer.py: _renew_period = 10; register() scales a lock of
    # 10.5 s or less by SHORT_RENEW_SCALING_FACTOR (0.75) of its whole seconds; _auto_lock_renew_task takes
    # ``renew_period_override or self._renew_period``, so a lock under a second left is renewed at 10 s.
    assert renew_period(timedelta(seconds=60)) == 10.0
    assert renew_period(timedelta(seconds=5)) == 3.75
    assert renew_period(timedelta(seconds=4, milliseconds=900)) == 3.0
    assert renew_period(timedelta(milliseconds=900)) == 10.0
    assert renew_period(timedelta(seconds=-1)) == 10.0


def test_after_the_session_lock_expired_a_renewal_is_refused_and_a_receive_says_the_lock_is_lost(
    emulator: Any,
) -> None:
    queue = emulator.create_queue(requires_session=True, lock_duration=timedelta(seconds=5))
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="e-1", session_id="e"))
    namespace = Namespace.from_connection_string(emulator.connection_string)
    with EntityReceiver(namespace, queue, session_id="e") as receiver:
        assert receiver.session is not None
        receiver.session.stop()  # nobody renews: the lock runs out
        expiry = receiver.session.renew()  # renewed once more by hand, to know when it ends
        while datetime.now(UTC) <= expiry + timedelta(seconds=1):
            time.sleep(0.2)
        with pytest.raises(WireError, match="refused"):
            receiver.session.renew()
        # Service Bus closed the session's link when the lock expired: the receiver says so.
        with pytest.raises(SessionLockLost, match="session-lock-lost"):
            receiver.receive_messages(max_message_count=1, max_wait_time=1)
    # Another receiver takes the session now, its message still there.
    assert _sdk_session_ids(emulator.connection_string, queue, "e") == ["e-1"]
