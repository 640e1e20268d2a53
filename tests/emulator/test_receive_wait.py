"""``receive_messages(max_wait_time=...)`` and iterator receive with ``max_wait_time`` return when the wait
ends on an empty or drained entity, and the receiver stays usable afterwards (sync and async), through the
unmodified azure-servicebus SDK (its pyamqp receive loop drains link credit with a drain flow)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from azure.servicebus import ServiceBusMessage

from tests.emulator.sdk_helpers import async_sdk_client, sdk_client

if TYPE_CHECKING:
    from tests.emulator.backends import Backend


WAIT = 1.0


def _send(backend: Backend, queue: str, *bodies: str) -> None:
    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(b) for b in bodies])


def test_receive_messages_on_an_empty_queue_returns_nothing_and_the_receiver_keeps_receiving(
    backend: Backend,
) -> None:
    queue = backend.create_queue()
    with sdk_client(backend) as client, client.get_queue_receiver(queue) as receiver:
        for _ in range(3):
            assert receiver.receive_messages(max_message_count=10, max_wait_time=WAIT) == []
        _send(backend, queue, "after-empty-waits")
        got = receiver.receive_messages(max_message_count=10, max_wait_time=5)
        assert [str(m) for m in got] == ["after-empty-waits"]
        receiver.complete_message(got[0])


def test_iterator_with_max_wait_time_ends_on_a_drained_queue_and_the_receiver_is_reusable(
    backend: Backend,
) -> None:
    queue = backend.create_queue()
    _send(backend, queue, "one", "two", "three")
    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver,
    ):
        seen = []
        for message in receiver:
            seen.append(str(message))
            receiver.complete_message(message)
        assert seen == ["one", "two", "three"]
        assert list(receiver) == []
        _send(backend, queue, "four")
        again = [str(m) for m in receiver]
        assert again == ["four"]


def test_async_receive_and_iterator_return_when_the_wait_ends_and_the_receiver_stays_usable(
    backend: Backend,
) -> None:
    queue = backend.create_queue()

    async def scenario() -> list[str]:
        async with (
            async_sdk_client(backend) as client,
            client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver,
        ):
            assert await receiver.receive_messages(max_message_count=5, max_wait_time=WAIT) == []
            assert [m async for m in receiver] == []
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
            seen = []
            async for message in receiver:
                seen.append(str(message))
                await receiver.complete_message(message)
            assert await receiver.receive_messages(max_message_count=5, max_wait_time=WAIT) == []
            return seen

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == ["a", "b"]
