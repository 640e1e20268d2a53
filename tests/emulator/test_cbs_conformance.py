"""CBS put-token as Azure answers it: a token for an entity that does not exist is refused (404, "could not
be found"), so the unmodified SDK fails the sender's or receiver's open with ServiceBusAuthenticationError at
once, instead of attaching a link to nothing and retrying."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from tests.emulator.backends import Backend
from tests.emulator.sdk_helpers import (
    create_subscription,
    create_topic,
    no_retry_async_client,
    no_retry_client,
)


def test_a_sender_or_receiver_for_a_missing_queue_fails_authentication_naming_the_entity(
    backend: Backend,
) -> None:
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    with no_retry_client(backend) as client:
        with (
            pytest.raises(ServiceBusAuthenticationError) as sending,
            client.get_queue_sender(missing) as sender,
        ):
            sender.send_messages(ServiceBusMessage("lost?"))
        with pytest.raises(ServiceBusAuthenticationError), client.get_queue_receiver(missing) as receiver:
            receiver.receive_messages(max_wait_time=1)
        with (
            pytest.raises(ServiceBusAuthenticationError),
            client.get_queue_receiver(missing, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters,
        ):
            dead_letters.peek_messages()
    detail = str(sending.value.inner_exception)  # the put-token's status, as the SDK keeps it
    assert "Status code: 404" in detail and f"/{missing}' could not be found" in detail


def test_a_receiver_for_a_missing_subscription_or_topic_fails_authentication(
    backend: Backend,
) -> None:
    topic = create_topic(backend)
    with no_retry_client(backend) as client:
        with (
            pytest.raises(ServiceBusAuthenticationError),
            client.get_subscription_receiver(topic, "no-such-subscription") as receiver,
        ):
            receiver.receive_messages(max_wait_time=1)
        with (
            pytest.raises(ServiceBusAuthenticationError),
            client.get_topic_sender(f"missing-{uuid.uuid4().hex[:8]}") as sender,
        ):
            sender.send_messages(ServiceBusMessage("x"))


def test_existing_entities_and_their_sub_queues_still_authenticate(backend: Backend) -> None:
    queue = backend.create_queue()
    topic = create_topic(backend)
    subscription = create_subscription(backend, topic, f"s-{uuid.uuid4().hex[:8]}")
    with no_retry_client(backend) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage("fine"))
        with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            assert dead_letters.peek_messages() == []
        with client.get_subscription_receiver(topic, subscription) as receiver:
            assert receiver.receive_messages(max_wait_time=0.5) == []


def test_the_async_client_fails_authentication_for_a_missing_queue(backend: Backend) -> None:
    async def scenario() -> type[BaseException] | None:
        async with no_retry_async_client(backend) as client:
            try:
                async with client.get_queue_sender(f"missing-{uuid.uuid4().hex[:8]}") as sender:
                    await sender.send_messages(ServiceBusMessage("x"))
            except ServiceBusAuthenticationError as error:
                return type(error)
        return None

    assert asyncio.run(scenario()) is ServiceBusAuthenticationError
