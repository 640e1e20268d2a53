"""Behaviour specs for duplicate detection, through the real azure-servicebus SDK (sync and ``aio``).

Azure (duplicate-detection.md): with RequiresDuplicateDetection, the queue remembers every MessageId it
accepted for DuplicateDetectionHistoryTimeWindow (20 s minimum); a message whose MessageId is in that
history "is accepted (the send operation succeeds), but the duplicate message is instantly ignored and
dropped". Once the window has passed for an id, a message with that id is enqueued again.
Seed 004 "Verify": "send the same MessageId twice inside the window; assert exactly one delivery".
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from tests.emulator.sdk_helpers import sdk_client, single_queue_config

if TYPE_CHECKING:
    from collections.abc import Callable

    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

WAIT = 1  # seconds a receiver waits on an empty queue
WINDOW = timedelta(seconds=20)  # the shortest history window Azure accepts
DRAIN_WAIT = 0.5  # stored messages are delivered at once; an empty receive this long means none is left


def _dedup_queue(backend: Backend, **properties: Any) -> str:
    return backend.create_queue(
        requires_duplicate_detection=True, duplicate_detection_history_time_window=WINDOW, **properties
    )


def _drain(receiver: ServiceBusReceiver) -> list[ServiceBusReceivedMessage]:
    """Receive and complete until a receive comes back empty."""
    received: list[ServiceBusReceivedMessage] = []
    while batch := receiver.receive_messages(max_message_count=50, max_wait_time=DRAIN_WAIT):
        for message in batch:
            receiver.complete_message(message)
        received.extend(batch)
    return received


def _bodies(messages: list[ServiceBusReceivedMessage]) -> list[str]:
    return [str(m) for m in messages]


def test_same_message_id_twice_inside_the_window_is_delivered_exactly_once(backend: Backend) -> None:
    queue = _dedup_queue(backend)

    with sdk_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("debit 10", message_id="tx-1"))
            sender.send_messages(ServiceBusMessage("debit 10 (gateway retry)", message_id="tx-1"))  # no error
            sender.send_messages(ServiceBusMessage("debit 20", message_id="tx-2"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            received = _drain(rx)
        # The history is about ids seen, not messages present: consumed ids are still duplicates.
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("debit 10 (late retry)", message_id="tx-1"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            assert rx.peek_messages(max_message_count=10, sequence_number=1) == []

    assert _bodies(received) == ["debit 10", "debit 20"]
    assert [m.message_id for m in received] == ["tx-1", "tx-2"]


def test_async_duplicate_send_is_accepted_and_dropped(backend: Backend) -> None:
    queue = _dedup_queue(backend)

    async def scenario() -> list[str]:
        async with AsyncServiceBusClient.from_connection_string(backend.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                for body in ("first", "second", "third"):
                    await sender.send_messages(ServiceBusMessage(body, message_id="same-id"))
            async with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
                received: list[ServiceBusReceivedMessage] = []
                while batch := await rx.receive_messages(max_message_count=10, max_wait_time=WAIT):
                    for message in batch:
                        await rx.complete_message(message)
                    received.extend(batch)
        return _bodies(received)

    assert asyncio.run(scenario()) == ["first"]


def test_duplicates_inside_one_batch_are_dropped_too(backend: Backend) -> None:
    queue = _dedup_queue(backend)

    with sdk_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            batch = sender.create_message_batch()
            for body, message_id in (("a1", "a"), ("b1", "b"), ("a2", "a"), ("c1", "c"), ("b2", "b")):
                batch.add_message(ServiceBusMessage(body, message_id=message_id))
            sender.send_messages(batch)
            sender.send_messages(  # a list is sent as one batch as well
                [ServiceBusMessage("c2", message_id="c"), ServiceBusMessage("d1", message_id="d")]
            )
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            received = _drain(rx)

    assert _bodies(received) == ["a1", "b1", "c1", "d1"]


def test_without_duplicate_detection_the_same_message_id_is_enqueued_every_time(
    backend: Backend,
) -> None:
    queue = backend.create_queue()

    with sdk_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("one", message_id="same"))
            sender.send_messages(
                [ServiceBusMessage("two", message_id="same"), ServiceBusMessage("three", message_id="same")]
            )
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            received = _drain(rx)

    assert _bodies(received) == ["one", "two", "three"]


def test_duplicate_detection_applies_across_sessions_of_a_session_queue(backend: Backend) -> None:
    queue = _dedup_queue(backend, requires_session=True)

    with sdk_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("first", message_id="tx-9", session_id="wallet-1"))
            sender.send_messages(ServiceBusMessage("again", message_id="tx-9", session_id="wallet-1"))
            sender.send_messages(ServiceBusMessage("elsewhere", message_id="tx-9", session_id="wallet-2"))
        assert list(client.list_queue_sessions(queue)) == ["wallet-1"]
        with client.get_queue_receiver(queue, session_id="wallet-1", max_wait_time=WAIT) as rx:
            assert _bodies(_drain(rx)) == ["first"]


def test_message_id_is_enqueued_again_once_the_window_has_passed(backend: Backend) -> None:
    """The one slow test of this file: the shortest window Azure allows is 20 seconds."""
    queue = _dedup_queue(backend)

    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("original", message_id="tx-1"))
        first_seen = time.monotonic()
        sender.send_messages(ServiceBusMessage("inside the window", message_id="tx-1"))
        time.sleep(max(0.0, first_seen + WINDOW.total_seconds() + 0.5 - time.monotonic()))
        sender.send_messages(ServiceBusMessage("after the window", message_id="tx-1"))
        sender.send_messages(ServiceBusMessage("inside the new window", message_id="tx-1"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as rx:
            received = _drain(rx)

    assert _bodies(received) == ["original", "after the window"]


@pytest.mark.emulator_only
def test_duplicate_detection_history_survives_a_restart(
    make_emulator: Callable[..., EmulatorHandle], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    config = single_queue_config(
        "payments",
        requires_duplicate_detection=True,
        duplicate_detection_history_time_window=timedelta(minutes=10),
    )
    first = make_emulator(config=config, data_dir=data)
    with sdk_client(first) as client:
        with client.get_queue_sender("payments") as sender:
            sender.send_messages(
                [ServiceBusMessage("tx-1", message_id="tx-1"), ServiceBusMessage("tx-2", message_id="tx-2")]
            )
        with client.get_queue_receiver("payments", max_wait_time=WAIT) as rx:
            (consumed,) = rx.receive_messages(max_message_count=1, max_wait_time=WAIT)
            rx.complete_message(consumed)
    first.thread.stop()

    second = make_emulator(config=config, data_dir=data)
    with sdk_client(second) as client:
        with client.get_queue_sender("payments") as sender:
            sender.send_messages(
                ServiceBusMessage("tx-1 resent", message_id="tx-1")
            )  # consumed before the restart
            sender.send_messages(ServiceBusMessage("tx-2 resent", message_id="tx-2"))  # still queued
            sender.send_messages(ServiceBusMessage("tx-3", message_id="tx-3"))
        with client.get_queue_receiver("payments", max_wait_time=WAIT) as rx:
            received = _drain(rx)

    assert str(consumed) == "tx-1"
    assert _bodies(received) == ["tx-2", "tx-3"]
