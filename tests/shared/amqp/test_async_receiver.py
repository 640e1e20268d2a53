"""Busbar's receiver for asyncio callers (shared/amqp/async_receiver.py, one EntityReceiver on a thread of its
own) against the emulator: every settlement azure-servicebus's aio receiver offers, from a coroutine, with
the outcomes read back with the SDK (the abandoned message redelivered with its delivery count raised, the
dead letter's reason and description in the DLQ, the deferred message received by its sequence number); a
session's state and lock; and an open cancelled while it waits for the next available session leaves no
session locked (its receiver is closed once it opened), on a queue whose lock duration is far longer than
the test, so that only that close can free the session."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from shared.amqp.async_receiver import AsyncEntityReceiver
from shared.amqp.connection import WireError
from shared.amqp.receiver import NEXT_AVAILABLE_SESSION, EntityReceiver, NoSessionAvailable
from tests.shared.amqp.sdk_send import emulator_namespace, send

pytestmark = pytest.mark.timeout(60)


def test_messages_are_received_and_completed_abandoned_dead_lettered_and_deferred_from_asyncio(
    emulator: Any,
) -> None:
    queue = emulator.create_queue(lock_duration=timedelta(minutes=1))
    send(
        emulator.connection_string,
        queue,
        *(ServiceBusMessage(name.encode(), message_id=name) for name in ("done", "again", "poison", "later")),
    )

    async def settle_each() -> dict[str, Any]:
        outcomes: dict[str, Any] = {}
        async with await AsyncEntityReceiver.open(emulator_namespace(emulator), queue) as receiver:
            assert receiver.session is None
            received = {m.message_id: m for m in await receiver.receive_messages(4, max_wait_time=5)}
            while len(received) < 4:
                more = await receiver.receive_messages(4, max_wait_time=5)
                assert more, f"only {sorted(received)} arrived"
                received.update((m.message_id, m) for m in more)
            renewed = await receiver.renew_message_lock(received["done"])
            outcomes["renewed"] = renewed >= received["done"].locked_until_utc  # type: ignore[operator]
            await receiver.complete_message(received["done"])
            await receiver.abandon_message(received["again"])
            await receiver.dead_letter_message(received["poison"], "NotParsable", "the body is not JSON")
            await receiver.defer_message(received["later"])
            outcomes["later"] = received["later"].sequence_number
            outcomes["first delivery"] = received["again"].delivery_count
            [redelivered] = await receiver.receive_messages(1, max_wait_time=5)
            outcomes["redelivered"] = (redelivered.message_id, redelivered.delivery_count)
            await receiver.complete_message(redelivered)
            outcomes["left"] = await receiver.receive_messages(1, max_wait_time=0.5)
        return outcomes

    outcomes = asyncio.run(settle_each())
    assert outcomes["renewed"] is True
    assert outcomes["first delivery"] == 0
    assert outcomes["redelivered"] == ("again", 1)
    assert outcomes["left"] == []  # the deferred message is not delivered again
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            [dead] = dlq.receive_messages(max_message_count=1, max_wait_time=5)
            dlq.complete_message(dead)
        with client.get_queue_receiver(queue) as receiver:
            [deferred] = receiver.receive_deferred_messages([outcomes["later"]])
            receiver.complete_message(deferred)
    assert (dead.message_id, dead.dead_letter_reason, dead.dead_letter_error_description) == (
        "poison",
        "NotParsable",
        "the body is not JSON",
    )
    assert deferred.message_id == "later"


def test_a_session_state_and_lock_are_reached_through_the_async_receivers_session(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True, lock_duration=timedelta(seconds=30))
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="s-1", session_id="s"))

    async def use_session() -> tuple[str, bytes | None, bytes | None, bool, str]:
        async with await AsyncEntityReceiver.open(
            emulator_namespace(emulator), queue, NEXT_AVAILABLE_SESSION, session_wait=5
        ) as receiver:
            assert receiver.session is not None
            await receiver.session.set_state(b"checkpoint")
            state = await receiver.session.get_state()
            await receiver.session.set_state(None)
            cleared = await receiver.session.get_state()
            [message] = await receiver.receive_messages(1, max_wait_time=5)
            await asyncio.sleep(0.05)  # so that "now + lock duration" is a later millisecond
            later = await receiver.session.renew_lock() > message.locked_until_utc  # type: ignore[operator]
            await receiver.complete_message(message)
            return receiver.session.session_id, state, cleared, later, str(message.message_id)

    assert asyncio.run(use_session()) == ("s", b"checkpoint", None, True, "s-1")


def test_an_open_of_the_next_available_session_refused_after_its_wait_raises_no_session_available(
    emulator: Any,
) -> None:
    queue = emulator.create_queue(requires_session=True)

    async def open_one() -> None:
        await AsyncEntityReceiver.open(
            emulator_namespace(emulator), queue, NEXT_AVAILABLE_SESSION, session_wait=1
        )

    with pytest.raises(NoSessionAvailable):
        asyncio.run(open_one())


def test_a_cancelled_open_of_the_next_available_session_leaves_no_session_locked(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True, lock_duration=timedelta(minutes=5))
    namespace = emulator_namespace(emulator)

    async def cancel_while_waiting_for_a_session() -> None:
        opening = asyncio.create_task(
            AsyncEntityReceiver.open(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=30)
        )
        await asyncio.sleep(0.5)  # the attach waits at the broker: no session yet
        assert not opening.done()
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening

    asyncio.run(cancel_while_waiting_for_a_session())
    # The session arrives after the cancel: the abandoned attach is granted it, then closed again.
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="c-1", session_id="c"))
    with EntityReceiver(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=20) as receiver:
        assert receiver.session_id == "c"
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(message)
    assert message.message_id == "c-1"


def test_a_cancelled_open_of_an_available_session_leaves_it_free(emulator: Any) -> None:
    queue = emulator.create_queue(requires_session=True, lock_duration=timedelta(minutes=5))
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="d-1", session_id="d"))
    namespace = emulator_namespace(emulator)

    async def cancel_as_it_opens() -> None:
        opening = asyncio.create_task(
            AsyncEntityReceiver.open(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=5)
        )
        await asyncio.sleep(0)  # the open has started on its thread
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening

    asyncio.run(cancel_as_it_opens())
    with EntityReceiver(namespace, queue, NEXT_AVAILABLE_SESSION, session_wait=20) as receiver:
        assert receiver.session_id == "d"
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(message)
    # Not redelivered: the cancelled open never received it.
    assert (message.message_id, message.delivery_count) == ("d-1", 0)


def test_settlements_gathered_in_one_turn_go_together_and_each_gets_its_own_answer(emulator: Any) -> None:
    """Settlements asked for together (gathered tasks, as devhost's listener flushes finished invocations)
    are one call on the receiver's thread: every outcome is applied, and one refused (a message already
    settled) fails alone."""
    queue = emulator.create_queue(lock_duration=timedelta(minutes=1))
    names = ("a", "b", "c", "again", "poison")
    send(emulator.connection_string, queue, *(ServiceBusMessage(n.encode(), message_id=n) for n in names))

    async def settle_together() -> list[Any]:
        async with await AsyncEntityReceiver.open(emulator_namespace(emulator), queue) as receiver:
            received: dict[str, Any] = {}
            while len(received) < len(names):
                more = await receiver.receive_messages(len(names), max_wait_time=5)
                assert more, f"only {sorted(received)} arrived"
                received.update((m.message_id, m) for m in more)
            await receiver.complete_message(received["c"])  # settled already: its second settlement fails
            results = await asyncio.gather(
                receiver.complete_message(received["a"]),
                receiver.complete_message(received["b"]),
                receiver.complete_message(received["c"]),
                receiver.abandon_message(received["again"]),
                receiver.dead_letter_message(received["poison"], "NotParsable", "not JSON"),
                return_exceptions=True,
            )
            [redelivered] = await receiver.receive_messages(1, max_wait_time=5)
            await receiver.complete_message(redelivered)
            return [*results, (redelivered.message_id, redelivered.delivery_count)]

    *results, redelivered = asyncio.run(settle_together())
    assert [type(result).__name__ for result in results] == [
        "NoneType",
        "NoneType",
        "WireError",
        "NoneType",
        "NoneType",
    ]
    assert "was not received locked by this receiver" in str(results[2])
    assert redelivered == ("again", 1)
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            dead = dlq.receive_messages(max_message_count=5, max_wait_time=5)
            assert [(m.message_id, m.dead_letter_reason) for m in dead] == [("poison", "NotParsable")]
            for message in dead:
                dlq.complete_message(message)
        with client.get_queue_receiver(queue) as plain:
            assert plain.receive_messages(max_message_count=5, max_wait_time=1) == []


def test_a_settlement_asked_of_a_closed_receiver_fails_at_once_rather_than_waiting_forever(
    emulator: Any,
) -> None:
    """devhost's listener flushes the settlements queued before its receive loop failed on the receiver
    that loop had, closed by then: each must fail (the broker redelivers once the lock lapses), not hang."""
    queue = emulator.create_queue(lock_duration=timedelta(minutes=1))
    send(emulator.connection_string, queue, ServiceBusMessage(b"x", message_id="late"))

    async def settle_after_close() -> list[Any]:
        receiver = await AsyncEntityReceiver.open(emulator_namespace(emulator), queue)
        [message] = await receiver.receive_messages(1, max_wait_time=5)
        await receiver.close()
        settled = asyncio.gather(
            receiver.complete_message(message), receiver.abandon_message(message), return_exceptions=True
        )
        received = receiver.receive_messages(1, max_wait_time=1)
        return [*await asyncio.wait_for(settled, 10), *await asyncio.gather(received, return_exceptions=True)]

    results = asyncio.run(settle_after_close())
    assert [str(result) for result in results] == [f"the receiver of {queue} is closed"] * 3
    assert all(isinstance(result, WireError) for result in results)
