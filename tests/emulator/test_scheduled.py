"""Behaviour specs for scheduled messages, through the real azure-servicebus SDK (sync and ``aio``).

``schedule_messages`` (the ``$management`` schedule-message operation) and ``scheduled_enqueue_time_utc`` on
a normal send; invisibility until due, delivery in order once due, ``cancel_scheduled_messages``, peeking
scheduled messages, scheduling into a session, and survival across a restart.

Azure (message-sequencing.md, "Scheduled messages"): "The SequenceNumber for a scheduled message is only
valid while the message is in this state. As the message transitions to the active state, the message is
appended to the queue as if it had been enqueued at the current instant, which includes assigning a new
SequenceNumber." The tests hold the emulator to that.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import ServiceBusError

from tests.emulator.sdk_helpers import receive, sdk_client, sequence_number, single_queue_config, sleep_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

WAIT = 1  # seconds a receiver waits on an empty queue
LEAD = 2.0  # seconds ahead a test schedules for (its sender and receiver are open already)
SLACK = timedelta(milliseconds=50)  # clock and timestamp rounding tolerance


def _due(seconds: float = LEAD) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def _assert_nothing_before(receiver: ServiceBusReceiver, due: datetime) -> None:
    """A receive that ends before ``due`` gets nothing (the scheduled messages are not visible yet)."""
    wait = min(WAIT, (due - datetime.now(UTC)).total_seconds() - 0.3)
    assert wait > 0.1, "the test itself was too slow to look before the messages were due"
    assert receiver.receive_messages(max_message_count=10, max_wait_time=wait) == []
    assert datetime.now(UTC) < due


def _sender_and_receiver(client: ServiceBusClient, queue: str, **receiver_kwargs: Any) -> Any:
    """Open a sender and a receiver together, before anything is scheduled: the due time can then be close
    (opening and closing SDK handlers takes about a second each)."""
    return client.get_queue_sender(queue), client.get_queue_receiver(
        queue, max_wait_time=WAIT, **receiver_kwargs
    )


def _assert_same_instant(actual: datetime | None, expected: datetime) -> None:
    assert actual is not None
    assert abs(actual - expected) <= SLACK, f"{actual} != {expected}"


def test_scheduled_messages_are_invisible_until_due_then_delivered_in_order_with_new_sequence_numbers(
    backend: Backend,
) -> None:
    queue = backend.create_queue()
    sender, receiver = _sender_and_receiver(sdk_client(backend), queue)

    with sender, receiver as rx:
        due = _due()
        scheduled = sender.schedule_messages([ServiceBusMessage(f"reminder-{i}") for i in range(3)], due)
        assert isinstance(scheduled, list) and len(scheduled) == 3
        assert all(isinstance(n, int) for n in scheduled)
        assert scheduled == sorted(set(scheduled))

        peeked = rx.peek_messages(max_message_count=10, sequence_number=scheduled[0])
        assert [m.sequence_number for m in peeked] == scheduled
        assert [str(m) for m in peeked] == ["reminder-0", "reminder-1", "reminder-2"]
        assert {m.state for m in peeked} == {ServiceBusMessageState.SCHEDULED}
        for message in peeked:
            _assert_same_instant(message.scheduled_enqueue_time_utc, due)
        _assert_nothing_before(rx, due)

        sleep_until(due)
        received = receive(rx, 3, wait=3)
        arrived = datetime.now(UTC)
        for message in received:
            rx.complete_message(message)

    assert [str(m) for m in received] == ["reminder-0", "reminder-1", "reminder-2"]
    assert {m.state for m in received} == {ServiceBusMessageState.ACTIVE}
    new_numbers = [sequence_number(m) for m in received]
    assert new_numbers == sorted(new_numbers)
    assert min(new_numbers) > max(scheduled), f"activated as {new_numbers}, scheduled as {scheduled}"
    for message in received:
        _assert_same_instant(message.scheduled_enqueue_time_utc, due)
        assert message.enqueued_time_utc is not None
        assert due - SLACK <= message.enqueued_time_utc <= arrived  # enqueued "at the current instant"
    assert arrived - due < timedelta(seconds=1.5), f"delivered {arrived - due} after due"


def test_async_schedule_and_receive_after_due(backend: Backend) -> None:
    queue = backend.create_queue()

    async def scenario() -> dict[str, Any]:
        async with (
            AsyncServiceBusClient.from_connection_string(backend.connection_string) as client,
            client.get_queue_sender(queue) as sender,
            client.get_queue_receiver(queue, max_wait_time=WAIT) as rx,
        ):
            due = _due()
            numbers = await sender.schedule_messages([ServiceBusMessage("a"), ServiceBusMessage("b")], due)
            peeked = await rx.peek_messages(max_message_count=10, sequence_number=numbers[0])
            early = await rx.receive_messages(max_message_count=2, max_wait_time=0.5)
            early_enough = datetime.now(UTC) < due
            await asyncio.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()))
            received: list[ServiceBusReceivedMessage] = []
            while len(received) < 2:
                batch = await rx.receive_messages(max_message_count=2 - len(received), max_wait_time=3)
                if not batch:
                    break
                received.extend(batch)
            for message in received:
                await rx.complete_message(message)
        return {
            "numbers": numbers,
            "peeked": [(str(m), m.state, m.sequence_number) for m in peeked],
            "early": (early, early_enough),
            "received": [(str(m), m.state, m.sequence_number) for m in received],
        }

    outcome = asyncio.run(scenario())
    first, second = outcome["numbers"]
    assert outcome["peeked"] == [
        ("a", ServiceBusMessageState.SCHEDULED, first),
        ("b", ServiceBusMessageState.SCHEDULED, second),
    ]
    assert outcome["early"] == ([], True)
    assert [(body, state) for body, state, _ in outcome["received"]] == [
        ("a", ServiceBusMessageState.ACTIVE),
        ("b", ServiceBusMessageState.ACTIVE),
    ]
    assert all(number > second for _, _, number in outcome["received"])


def test_messages_scheduled_for_different_times_each_activate_at_their_own_time(
    backend: Backend,
) -> None:
    queue = backend.create_queue()
    sender, receiver = _sender_and_receiver(sdk_client(backend), queue)

    with sender, receiver as rx:
        late_due, early_due = _due(LEAD + 1.5), _due(LEAD)
        sender.schedule_messages(ServiceBusMessage("late"), late_due)  # scheduled first, due last
        sender.schedule_messages(ServiceBusMessage("early"), early_due)
        _assert_nothing_before(rx, early_due)
        sleep_until(early_due)
        (early,) = receive(rx, 1, wait=2)
        assert str(early) == "early"
        rx.complete_message(early)
        _assert_nothing_before(rx, late_due)
        sleep_until(late_due)
        late = receive(rx, 1, wait=3)
        assert [str(m) for m in late] == ["late"], "the later scheduled message was never activated"
        rx.complete_message(late[0])


def test_cancelled_scheduled_messages_are_never_delivered(backend: Backend) -> None:
    queue = backend.create_queue()
    sender, receiver = _sender_and_receiver(sdk_client(backend), queue)

    with sender, receiver as rx:
        due = _due()
        numbers = sender.schedule_messages([ServiceBusMessage(f"m{i}") for i in range(4)], due)
        sender.cancel_scheduled_messages(numbers[1])  # a single number ...
        sender.cancel_scheduled_messages([numbers[3]])  # ... or a list
        peeked = rx.peek_messages(max_message_count=10, sequence_number=1)
        assert [(str(m), m.sequence_number) for m in peeked] == [("m0", numbers[0]), ("m2", numbers[2])]
        sleep_until(due)
        received = receive(rx, 3, wait=2)  # one more than expected: a cancelled one must not come
        for message in received:
            rx.complete_message(message)
        assert [str(m) for m in received] == ["m0", "m2"]
        assert rx.peek_messages(max_message_count=10, sequence_number=1) == []


def test_scheduled_enqueue_time_on_a_normal_send_schedules_the_message(backend: Backend) -> None:
    queue = backend.create_queue()
    sender, receiver = _sender_and_receiver(sdk_client(backend), queue)

    with sender, receiver as rx:
        due = _due()
        sender.send_messages(ServiceBusMessage("single", scheduled_enqueue_time_utc=due))
        batch = sender.create_message_batch()
        batch.add_message(ServiceBusMessage("batched", scheduled_enqueue_time_utc=due))
        batch.add_message(ServiceBusMessage("now"))  # no schedule: active at once
        sender.send_messages(batch)
        sender.send_messages(ServiceBusMessage("past", scheduled_enqueue_time_utc=_due(-60)))  # due already

        peeked = rx.peek_messages(max_message_count=10, sequence_number=1)
        assert [(str(m), m.state) for m in peeked] == [
            ("single", ServiceBusMessageState.SCHEDULED),
            ("batched", ServiceBusMessageState.SCHEDULED),
            ("now", ServiceBusMessageState.ACTIVE),
            ("past", ServiceBusMessageState.ACTIVE),
        ]
        _assert_same_instant(peeked[0].scheduled_enqueue_time_utc, due)
        early = rx.receive_messages(max_message_count=2, max_wait_time=WAIT)
        assert [str(m) for m in early] == ["now", "past"]
        _assert_nothing_before(rx, due)
        sleep_until(due)
        late = receive(rx, 2, wait=3)
        assert [str(m) for m in late] == ["single", "batched"]
        assert min(sequence_number(m) for m in late) > max(sequence_number(m) for m in peeked)
        for message in early + late:
            rx.complete_message(message)


def test_scheduled_message_joins_its_session_in_order_when_due(backend: Backend) -> None:
    queue = backend.create_queue(requires_session=True, lock_duration=timedelta(seconds=30))
    sender, receiver = _sender_and_receiver(sdk_client(backend), queue, session_id="order-1")

    with sender, receiver as rx:
        due = _due()
        sender.schedule_messages(ServiceBusMessage("step-2", session_id="order-1"), due)
        sender.send_messages(ServiceBusMessage("step-1", session_id="order-1"))
        peeked = rx.peek_messages(max_message_count=10, sequence_number=1)
        assert [(str(m), m.state) for m in peeked] == [
            ("step-2", ServiceBusMessageState.SCHEDULED),
            ("step-1", ServiceBusMessageState.ACTIVE),
        ]
        (first,) = receive(rx, 1, WAIT)
        assert str(first) == "step-1"
        rx.complete_message(first)
        sleep_until(due)
        (second,) = receive(rx, 1, wait=3)
        assert (str(second), second.session_id) == ("step-2", "order-1")
        rx.complete_message(second)


@pytest.mark.emulator_only
def test_scheduled_messages_survive_a_restart_and_can_be_cancelled_after_it(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    config = single_queue_config("reminders")
    first = make_emulator(config=config, data_dir=data)
    with sdk_client(first) as client, client.get_queue_sender("reminders") as sender:
        due = _due(5.0)  # leaves time for the restart
        numbers = sender.schedule_messages([ServiceBusMessage("keep"), ServiceBusMessage("drop")], due)
    first.thread.stop()

    second = make_emulator(config=config, data_dir=data)
    sender, receiver = _sender_and_receiver(sdk_client(second), "reminders")
    with sender, receiver as rx:
        peeked = rx.peek_messages(max_message_count=10, sequence_number=1)
        assert [(str(m), m.state, m.sequence_number) for m in peeked] == [
            ("keep", ServiceBusMessageState.SCHEDULED, numbers[0]),
            ("drop", ServiceBusMessageState.SCHEDULED, numbers[1]),
        ]
        _assert_same_instant(peeked[0].scheduled_enqueue_time_utc, due)
        sender.cancel_scheduled_messages(numbers[1])
        _assert_nothing_before(rx, due)
        sleep_until(due)
        received = receive(rx, 2, wait=3)
        assert [(str(m), m.state) for m in received] == [("keep", ServiceBusMessageState.ACTIVE)]
        assert sequence_number(received[0]) > numbers[1]
        rx.complete_message(received[0])


def test_schedule_messages_to_a_session_queue_without_session_id_is_refused(backend: Backend) -> None:
    queue = backend.create_queue(requires_session=True)
    with sdk_client(backend, retry_total=0) as client:
        with client.get_queue_sender(queue) as sender, pytest.raises(ServiceBusError):
            sender.schedule_messages(ServiceBusMessage("no session"), _due())
        assert list(client.list_queue_sessions(queue)) == []
