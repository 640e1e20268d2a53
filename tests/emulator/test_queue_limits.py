"""Behaviour specs for a queue's limits and refusals, through the real azure-servicebus SDK.

Entity size quota, maximum message size (client-side from the link, and broker-side for batches),
missing entities and entity status (Disabled, SendDisabled, ReceiveDisabled).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    ServiceBusAuthenticationError,
    ServiceBusQuotaExceededError,
)

from emulator.broker.properties import EntityStatus
from tests.emulator.sdk_helpers import peek_queue, receive, sdk_client

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

WAIT = 0.5  # seconds a receiver waits on an empty queue (local deliveries take milliseconds)
KIB = 1024


def _set_status(emulator: EmulatorHandle, queue: str, status: EntityStatus) -> None:
    """Change a queue's status at run time, as an administrator would."""

    def change() -> None:
        entity = emulator.emulator.namespace.entity_for(queue)
        entity.props = replace(entity.props, status=status)

    emulator.call(change)


# --- entity size


def test_full_queue_refuses_sends_with_quota_exceeded_and_keeps_serving_receives(
    backend: Backend,
) -> None:
    queue = backend.create_queue(max_size_in_megabytes=1)
    body = b"x" * (200 * KIB)  # five of these fit in 1 MB, a sixth does not

    accepted = 0
    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        with pytest.raises(ServiceBusQuotaExceededError):
            for i in range(10):
                sender.send_messages(ServiceBusMessage(body, message_id=f"m{i}"))
                accepted += 1
        assert accepted == 5

        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            first = receive(receiver, 1, WAIT)
            assert [m.message_id for m in first] == ["m0"]
            receiver.complete_message(first[0])

        # Completing a message freed room for another one; the sender is still usable.
        sender.send_messages(ServiceBusMessage(body, message_id="m-after"))
        with pytest.raises(ServiceBusQuotaExceededError):
            sender.send_messages(ServiceBusMessage(body, message_id="m-over"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        rest = receive(receiver, 5, WAIT)
        for message in rest:
            receiver.complete_message(message)
    assert [m.message_id for m in rest] == ["m1", "m2", "m3", "m4", "m-after"]
    assert all(b"".join(m.body) == body for m in rest)


def test_dead_lettered_messages_count_against_the_queue_size(backend: Backend) -> None:
    queue = backend.create_queue(max_size_in_megabytes=1)
    body = b"y" * (200 * KIB)

    with sdk_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            for i in range(5):
                sender.send_messages(ServiceBusMessage(body, message_id=f"m{i}"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            for message in receive(receiver, 5, WAIT):
                receiver.dead_letter_message(message, reason="r", error_description="d")
        with client.get_queue_sender(queue) as sender, pytest.raises(ServiceBusQuotaExceededError):
            sender.send_messages(ServiceBusMessage(body, message_id="over"))

    assert peek_queue(backend, queue) == []
    assert len(peek_queue(backend, queue, ServiceBusSubQueue.DEAD_LETTER)) == 5


def test_batch_that_would_overflow_the_queue_is_refused_whole(backend: Backend) -> None:
    queue = backend.create_queue(max_size_in_megabytes=1)
    body = b"z" * (200 * KIB)

    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        for i in range(4):
            sender.send_messages(ServiceBusMessage(body, message_id=f"m{i}"))
        with pytest.raises(ServiceBusQuotaExceededError):
            # 800 KiB stored + 2 x 120 KiB does not fit in 1 MiB, although the first message alone would.
            sender.send_messages([ServiceBusMessage(body[: 120 * KIB], message_id=f"b{i}") for i in range(2)])

    assert [m.message_id for m in peek_queue(backend, queue)] == ["m0", "m1", "m2", "m3"]


# --- message size


def test_message_over_the_max_message_size_is_refused(backend: Backend) -> None:
    """A Standard namespace's queue takes messages up to 256 KB (fixed: the property is Premium-only)."""
    queue = backend.create_queue()

    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(ServiceBusMessage(b"x" * (300 * KIB)))
        sender.send_messages(ServiceBusMessage(b"x" * (250 * KIB), message_id="fits"))

    assert [m.message_id for m in peek_queue(backend, queue)] == ["fits"]


@pytest.mark.emulator_only
def test_batch_containing_a_message_over_the_max_message_size_is_refused_by_the_broker(
    emulator: EmulatorHandle,
) -> None:
    """Needs a limit below the SDK's 256 KB batch size, which only the emulator's config allows (Azure's
    smallest is Standard's 256 KB, and ARM refuses the property there): created on the emulator itself."""
    queue = emulator.create_queue(max_message_size_in_kilobytes=64)

    with sdk_client(emulator) as client, client.get_queue_sender(queue) as sender:
        # Below 1 MB of link max-message-size the SDK sizes batches at 256 KB, so this batch leaves the
        # client and the broker has to check every message in it.
        batch = sender.create_message_batch()
        batch.add_message(ServiceBusMessage(b"small", message_id="small"))
        batch.add_message(ServiceBusMessage(b"x" * (100 * KIB), message_id="big"))
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages(batch)
        with pytest.raises(MessageSizeExceededError):
            sender.send_messages([ServiceBusMessage(b"x" * (100 * KIB), message_id="big-list")])
        sender.send_messages(ServiceBusMessage(b"ok", message_id="ok"))

    # A refused batch stores nothing, not even its small message.
    assert [m.message_id for m in peek_queue(emulator, queue)] == ["ok"]


# --- missing entities


def test_send_to_a_missing_queue_fails_authentication_as_on_azure(backend: Backend) -> None:
    with sdk_client(backend) as client, pytest.raises(ServiceBusAuthenticationError):  # noqa: SIM117
        with client.get_queue_sender("no-such-queue") as sender:
            sender.send_messages(ServiceBusMessage("lost"))


def test_receive_from_a_missing_queue_fails_authentication_as_on_azure(backend: Backend) -> None:
    with sdk_client(backend) as client, pytest.raises(ServiceBusAuthenticationError):  # noqa: SIM117
        with client.get_queue_receiver("no-such-queue", max_wait_time=WAIT) as receiver:
            receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)


def test_receive_from_the_dead_letter_queue_of_a_missing_queue_fails_authentication_as_on_azure(
    backend: Backend,
) -> None:
    with sdk_client(backend) as client, pytest.raises(ServiceBusAuthenticationError):  # noqa: SIM117
        with client.get_queue_receiver(
            "no-such-queue", sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=WAIT
        ) as receiver:
            receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)


# --- entity status


def test_disabled_queue_refuses_sends_and_receives(backend: Backend) -> None:
    queue = backend.create_queue(status=EntityStatus.DISABLED)

    # entity-disabled is retryable in the SDK; retry_total=0 keeps the test fast.
    with sdk_client(backend, retry_total=0) as client:
        with pytest.raises(MessagingEntityDisabledError), client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("refused"))
        with pytest.raises(MessagingEntityDisabledError):  # noqa: SIM117
            with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
                receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)


@pytest.mark.emulator_only
def test_send_disabled_queue_refuses_sends_but_serves_receives(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue()
    with sdk_client(emulator) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("before", message_id="before"))
    _set_status(emulator, queue, EntityStatus.SEND_DISABLED)

    with sdk_client(emulator, retry_total=0) as client:
        with pytest.raises(MessagingEntityDisabledError), client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("refused"))
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            received = receive(receiver, 1, WAIT)
            for message in received:
                receiver.complete_message(message)

    assert [m.message_id for m in received] == ["before"]


@pytest.mark.emulator_only
def test_receive_disabled_queue_refuses_receives_but_accepts_sends(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue(status=EntityStatus.RECEIVE_DISABLED)

    with sdk_client(emulator, retry_total=0) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("accepted", message_id="accepted"))
        with pytest.raises(MessagingEntityDisabledError):  # noqa: SIM117
            with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
                receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)

    _set_status(emulator, queue, EntityStatus.ACTIVE)
    assert [m.message_id for m in peek_queue(emulator, queue)] == ["accepted"]
