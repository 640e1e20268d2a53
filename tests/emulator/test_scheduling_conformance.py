"""Scheduling as the unmodified SDK sees it on entities configured as real ones are.

Every Azure entity has a ``DefaultMessageTimeToLive`` (14 days unless set), so the sequence numbers
``schedule_messages`` returns must be the scheduled messages' own on such entities too, and
``cancel_scheduled_messages`` must find them: on queues, session queues and topics, whether the message has
no TTL, a shorter one or a longer one (which Azure silently lowers to the entity default). And a scheduled
message reaches its receiver once due, a session receiver included.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage, ServiceBusMessageState

from tests.emulator.arm_client import arm
from tests.emulator.sdk_helpers import (
    create_subscription,
    create_topic,
    no_retry_client,
    opened,
    receive,
    sleep_until,
)

if TYPE_CHECKING:
    from emulator.testing import EmulatorHandle
    from tests.emulator.backends import Backend

FOURTEEN_DAYS = timedelta(days=14)  # Azure's default DefaultMessageTimeToLive
WAIT = 1  # seconds a receiver waits on an empty entity
LEAD = timedelta(seconds=2)  # how far ahead the tests schedule (their handlers are open already)


def _due() -> datetime:
    return datetime.now(UTC) + LEAD


def _ttl_mix(prefix: str) -> list[ServiceBusMessage]:
    """One message without a TTL, one with a shorter TTL and one with a longer TTL than 14 days."""
    return [
        ServiceBusMessage(f"{prefix}-no-ttl"),
        ServiceBusMessage(f"{prefix}-short-ttl", time_to_live=timedelta(hours=1)),
        ServiceBusMessage(f"{prefix}-long-ttl", time_to_live=timedelta(days=30)),
    ]


def test_scheduling_on_a_queue_with_a_default_ttl_returns_each_message_its_own_sequence_number(
    backend: Backend,
) -> None:
    queue = backend.create_queue(default_message_time_to_live=FOURTEEN_DAYS)
    with no_retry_client(backend) as client:
        sender, receiver = client.get_queue_sender(queue), client.get_queue_receiver(queue)
        with opened(sender, receiver):
            numbers = sender.schedule_messages(_ttl_mix("q"), _due())
            peeked = receiver.peek_messages(max_message_count=10, sequence_number=1)
            assert 0 not in numbers
            assert [(str(m), m.sequence_number, m.state) for m in peeked] == [
                ("q-no-ttl", numbers[0], ServiceBusMessageState.SCHEDULED),
                ("q-short-ttl", numbers[1], ServiceBusMessageState.SCHEDULED),
                ("q-long-ttl", numbers[2], ServiceBusMessageState.SCHEDULED),
            ]
            sender.cancel_scheduled_messages(numbers)
            assert receiver.peek_messages(max_message_count=10, sequence_number=1) == []


def test_scheduled_messages_on_a_session_queue_with_a_default_ttl_are_cancellable_and_delivered_when_due(
    backend: Backend,
) -> None:
    queue = backend.create_queue(
        requires_session=True, default_message_time_to_live=FOURTEEN_DAYS, lock_duration=timedelta(seconds=30)
    )
    with no_retry_client(backend) as client:
        sender = client.get_queue_sender(queue)
        with sender:
            due = _due()
            messages = _ttl_mix("s")
            for message in messages:
                message.session_id = "cart-7"
            numbers = sender.schedule_messages(messages, due)
            assert 0 not in numbers
            sender.cancel_scheduled_messages(numbers[1])
            sleep_until(due)
            # A receiver for the next available session finds the session once its messages are due.
            with client.get_queue_receiver(
                queue, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5
            ) as receiver:
                received = receive(receiver, 3, wait=3)
                for message in received:
                    receiver.complete_message(message)
    assert [(str(m), m.session_id) for m in received] == [("s-no-ttl", "cart-7"), ("s-long-ttl", "cart-7")]


def test_scheduled_messages_on_a_topic_with_a_default_ttl_are_cancellable_and_routed_with_their_own_ttl(
    backend: Backend,
) -> None:
    topic = create_topic(backend, default_message_time_to_live=FOURTEEN_DAYS)
    subscription = create_subscription(backend, topic, "all", default_message_time_to_live=timedelta(days=7))
    with no_retry_client(backend) as client:
        sender = client.get_topic_sender(topic)
        receiver = client.get_subscription_receiver(topic, subscription, max_wait_time=WAIT)
        with opened(sender, receiver):
            due = _due()
            numbers = sender.schedule_messages(_ttl_mix("t"), due)
            assert 0 not in numbers and len(set(numbers)) == 3
            sender.cancel_scheduled_messages(numbers[1])
            sleep_until(due)
            received = receive(receiver, 3, wait=3)
            for message in received:
                receiver.complete_message(message)
    assert [(str(m), m.time_to_live) for m in received] == [
        ("t-no-ttl", None),  # the defaults govern its expiry; its header stays as sent
        ("t-long-ttl", timedelta(days=7)),  # silently lowered to the subscription's default
    ]


@pytest.mark.emulator_only
def test_messages_scheduled_on_a_topic_are_counted_in_its_count_details_until_due(
    emulator: EmulatorHandle,
) -> None:
    topic = create_topic(emulator)
    create_subscription(emulator, topic, "all")
    api = arm(emulator.management_port, emulator.emulator.management_token)
    try:
        with no_retry_client(emulator) as client, client.get_topic_sender(topic) as sender:
            numbers = sender.schedule_messages(_ttl_mix("counted"), datetime.now(UTC) + timedelta(hours=1))
            sender.cancel_scheduled_messages(numbers[0])
        details = api.topics.get(*api.scope, topic).count_details
    finally:
        api.close()
    assert details is not None
    assert (details.scheduled_message_count, details.active_message_count) == (2, 0)
