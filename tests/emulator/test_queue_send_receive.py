"""Behaviour specs for sending to and receiving from a queue, through the real azure-servicebus SDK.

Covers single and batched sends, sequence numbers and enqueue times, the round trip of every system
property, application property and body kind the SDK can send, the two receive modes, peeking and the
async client.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from azure.servicebus import (
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType

from tests.emulator.sdk_helpers import drain, sdk_client

if TYPE_CHECKING:
    from tests.emulator.backends import Backend


WAIT = 0.5  # seconds a receiver waits on an empty queue (local deliveries take milliseconds)


def _send(backend: Backend, queue: str, *messages: Any) -> None:
    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        for message in messages:
            sender.send_messages(message)


def _receive_all(
    backend: Backend,
    queue: str,
    count: int | None = None,
    *,
    sub_queue: ServiceBusSubQueue | None = None,
) -> list[ServiceBusReceivedMessage]:
    """Receive (peek-lock) and complete ``count`` messages, or every message until a receive comes back
    empty when ``count`` is None, and check that the queue holds nothing more. Asking for exactly what is
    expected leaves no credit to drain on close."""
    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, sub_queue=sub_queue, max_wait_time=WAIT) as receiver,
    ):
        received = drain(receiver, count, WAIT)
        leftover = receiver.peek_messages(max_message_count=50, sequence_number=1)
        assert leftover == [], f"the queue still holds {[m.sequence_number for m in leftover]}"
    return received


def _body_bytes(message: ServiceBusReceivedMessage) -> bytes:
    assert message.body_type == AmqpMessageBodyType.DATA
    return b"".join(message.body)


# --- sending


@pytest.mark.also_over_arm
def test_single_sends_are_received_in_order_with_sequence_numbers_from_one(backend: Backend) -> None:
    queue = backend.create_queue()
    before = datetime.now(UTC)

    _send(backend, queue, *(ServiceBusMessage(f"m{i}") for i in range(3)))

    received = _receive_all(backend, queue, 3)
    after = datetime.now(UTC)
    assert [str(m) for m in received] == ["m0", "m1", "m2"]
    assert [m.sequence_number for m in received] == [1, 2, 3]
    for message in received:
        assert message.enqueued_time_utc is not None
        assert before - timedelta(seconds=1) <= message.enqueued_time_utc <= after + timedelta(seconds=1)
    enqueued = [m.enqueued_time_utc for m in received]
    assert enqueued == sorted(enqueued)  # type: ignore[type-var]


def test_list_send_stores_each_message_separately_in_order(backend: Backend) -> None:
    queue = backend.create_queue()

    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"id-{i}") for i in range(4)])

    received = _receive_all(backend, queue, 4)
    assert [str(m) for m in received] == ["m0", "m1", "m2", "m3"]
    assert [m.message_id for m in received] == ["id-0", "id-1", "id-2", "id-3"]
    assert [m.sequence_number for m in received] == [1, 2, 3, 4]
    assert all(m.enqueued_time_utc is not None for m in received)


def test_message_batch_is_split_into_messages_that_continue_the_sequence(backend: Backend) -> None:
    queue = backend.create_queue()

    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("single"))
        batch = sender.create_message_batch()
        for i in range(5):
            batch.add_message(ServiceBusMessage(f"b{i}", application_properties={"index": i}))
        sender.send_messages(batch)
        sender.send_messages(ServiceBusMessage("after"))

    received = _receive_all(backend, queue, 7)
    assert [str(m) for m in received] == ["single", "b0", "b1", "b2", "b3", "b4", "after"]
    assert [m.sequence_number for m in received] == [1, 2, 3, 4, 5, 6, 7]
    assert [m.application_properties[b"index"] for m in received[1:6]] == [0, 1, 2, 3, 4]  # type: ignore[index]


def test_sequence_numbers_are_never_reused_after_messages_are_removed(backend: Backend) -> None:
    queue = backend.create_queue()

    with sdk_client(backend) as client, client.get_queue_sender(queue) as sender:
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        first = _receive_all(backend, queue, 2)
        sender.send_messages(ServiceBusMessage("c"))

    (later,) = _receive_all(backend, queue, 1)
    assert [m.sequence_number for m in first] == [1, 2]
    assert later.sequence_number == 3


def test_message_id_is_generated_by_the_sdk_when_not_given(backend: Backend) -> None:
    queue = backend.create_queue()

    _send(backend, queue, ServiceBusMessage("a"), ServiceBusMessage("b"))

    ids = [m.message_id for m in _receive_all(backend, queue, 2)]
    assert len(ids) == 2
    assert ids[0] != ids[1]
    for message_id in ids:
        assert message_id is not None
        uuid.UUID(message_id)


# --- round trips


def test_system_properties_round_trip(backend: Backend) -> None:
    queue = backend.create_queue()
    message = ServiceBusMessage(
        "payload",
        message_id="message-1",
        correlation_id="correlation-1",
        reply_to="reply-queue",
        reply_to_session_id="reply-session",
        to="destination",
        subject="order-created",
        content_type="application/json",
        time_to_live=timedelta(minutes=10),
        partition_key="partition-7",
    )

    _send(backend, queue, message)

    (received,) = _receive_all(backend, queue, 1)
    assert received.message_id == "message-1"
    assert received.correlation_id == "correlation-1"
    assert received.reply_to == "reply-queue"
    assert received.reply_to_session_id == "reply-session"
    assert received.to == "destination"
    assert received.subject == "order-created"
    assert received.content_type == "application/json"
    assert received.time_to_live == timedelta(minutes=10)
    assert received.partition_key == "partition-7"
    assert received.session_id is None
    assert received.enqueued_time_utc is not None
    assert received.expires_at_utc == received.enqueued_time_utc + timedelta(minutes=10)


def test_application_properties_round_trip_in_the_form_the_sdk_decodes(backend: Backend) -> None:
    queue = backend.create_queue()
    # Any: the SDK's annotation omits None (and datetime, below), which it sends as AMQP null (timestamp).
    properties: Any = {
        "text": "hello",
        "count": 42,
        "negative": -7,
        "ratio": 1.5,
        "flag": True,
        "off": False,
        "raw": b"bytes-value",
        "nothing": None,
    }
    message = ServiceBusMessage("x", application_properties=properties)

    _send(backend, queue, message)

    (received,) = _receive_all(backend, queue, 1)
    # azure-servicebus 7.15 hands back keys and string values as bytes; bytes are sent as strings.
    assert received.application_properties == {
        b"text": b"hello",
        b"count": 42,
        b"negative": -7,
        b"ratio": 1.5,
        b"flag": True,
        b"off": False,
        b"raw": b"bytes-value",
        b"nothing": None,
    }
    props = received.application_properties
    assert props is not None
    assert type(props[b"count"]) is int
    assert type(props[b"ratio"]) is float
    assert type(props[b"flag"]) is bool


def test_uuid_and_datetime_application_properties_round_trip(backend: Backend) -> None:
    queue = backend.create_queue()
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    when = datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)

    properties: Any = {"ident": ident, "when": when}  # the SDK's annotation omits datetime, which it sends
    _send(backend, queue, ServiceBusMessage("x", application_properties=properties))

    (received,) = _receive_all(backend, queue, 1)
    props = received.application_properties
    assert props is not None
    assert props[b"ident"] == ident
    # An AMQP timestamp comes back from the SDK's decoder as milliseconds since the Unix epoch.
    assert props[b"when"] == int(when.timestamp() * 1000)


def test_str_and_bytes_bodies_round_trip_as_data(backend: Backend) -> None:
    queue = backend.create_queue()
    binary = bytes(range(256))

    _send(backend, queue, ServiceBusMessage("text body é"), ServiceBusMessage(binary), ServiceBusMessage(""))

    text, raw, empty = _receive_all(backend, queue, 3)
    assert _body_bytes(text) == "text body é".encode()
    assert str(text) == "text body é"
    assert _body_bytes(raw) == binary
    assert _body_bytes(empty) == b""


def test_multiple_data_sections_round_trip(backend: Backend) -> None:
    queue = backend.create_queue()

    _send(backend, queue, AmqpAnnotatedMessage(data_body=[b"first", b"second"]))

    (received,) = _receive_all(backend, queue, 1)
    assert received.body_type == AmqpMessageBodyType.DATA
    assert list(received.body) == [b"first", b"second"]


def test_amqp_value_body_round_trips(backend: Backend) -> None:
    queue = backend.create_queue()

    _send(backend, queue, AmqpAnnotatedMessage(value_body={"key": "value", "n": 3, "items": [1, 2]}))

    (received,) = _receive_all(backend, queue, 1)
    assert received.body_type == AmqpMessageBodyType.VALUE
    assert received.body == {b"key": b"value", b"n": 3, b"items": [1, 2]}


def test_amqp_sequence_body_round_trips(backend: Backend) -> None:
    queue = backend.create_queue()

    _send(backend, queue, AmqpAnnotatedMessage(sequence_body=[[1, 2, 3], ["a", True]]))

    (received,) = _receive_all(backend, queue, 1)
    assert received.body_type == AmqpMessageBodyType.SEQUENCE
    assert list(received.body) == [[1, 2, 3], [b"a", True]]


def test_message_without_body_is_accepted_and_delivered_without_body(backend: Backend) -> None:
    queue = backend.create_queue()

    _send(backend, queue, ServiceBusMessage(None, message_id="empty", subject="no-body"))

    (received,) = _receive_all(backend, queue, 1)
    assert received.message_id == "empty"
    assert received.subject == "no-body"
    assert received.body is None


def test_custom_message_annotations_and_footer_round_trip(backend: Backend) -> None:
    queue = backend.create_queue()
    message = AmqpAnnotatedMessage(
        data_body=b"x",
        annotations={"x-custom-annotation": "annotated"},
        footer={"footer-key": "footer-value"},
    )

    _send(backend, queue, message)

    (received,) = _receive_all(backend, queue, 1)
    raw = received.raw_amqp_message
    assert raw.annotations is not None
    assert raw.annotations[b"x-custom-annotation"] == b"annotated"
    assert raw.footer == {b"footer-key": b"footer-value"}


def test_broker_annotations_set_by_the_client_are_replaced(backend: Backend) -> None:
    queue = backend.create_queue()
    message = AmqpAnnotatedMessage(data_body=b"x", annotations={"x-opt-sequence-number": 999})

    _send(backend, queue, message)

    (received,) = _receive_all(backend, queue, 1)
    assert received.sequence_number == 1


def test_large_message_round_trips_across_many_frames(backend: Backend) -> None:
    queue = backend.create_queue()
    body = bytes(i % 251 for i in range(250 * 1024))

    _send(backend, queue, ServiceBusMessage(body))

    (received,) = _receive_all(backend, queue, 1)
    assert _body_bytes(received) == body


# --- receive modes


def test_peek_lock_receive_locks_the_message_and_hides_it_from_other_receivers(
    backend: Backend,
) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("locked"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as first:
        (message,) = first.receive_messages(max_message_count=1, max_wait_time=WAIT)
        assert message.delivery_count == 0
        assert message.lock_token is not None
        assert message.locked_until_utc is not None
        assert message.locked_until_utc > datetime.now(UTC)

        with client.get_queue_receiver(queue, max_wait_time=WAIT) as second:
            assert second.receive_messages(max_message_count=1, max_wait_time=WAIT) == []

        first.complete_message(message)
        assert first.peek_messages(max_message_count=10, sequence_number=1) == []


def test_receive_and_delete_removes_messages_on_delivery(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, *(ServiceBusMessage(f"m{i}") for i in range(3)))

    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(
            queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=WAIT
        ) as receiver,
    ):
        received: list[ServiceBusReceivedMessage] = []
        while len(received) < 3:
            batch = receiver.receive_messages(max_message_count=3 - len(received), max_wait_time=WAIT)
            assert batch, "receive-and-delete receiver got fewer messages than were sent"
            received.extend(batch)

    assert [str(m) for m in received] == ["m0", "m1", "m2"]
    assert [m.sequence_number for m in received] == [1, 2, 3]
    assert all(m.lock_token is None for m in received)
    assert _receive_all(backend, queue) == []  # a second receiver finds nothing


def test_prefetched_messages_released_on_close_are_redelivered_at_once_without_counting(
    backend: Backend,
) -> None:
    queue = backend.create_queue()  # default 60 s lock: a message left locked would not come back in time
    _send(backend, queue, *(ServiceBusMessage(f"m{i}") for i in range(3)))

    with sdk_client(backend) as client:
        with client.get_queue_receiver(queue, prefetch_count=10, max_wait_time=WAIT) as prefetching:
            (first,) = prefetching.receive_messages(max_message_count=1, max_wait_time=WAIT)
            prefetching.complete_message(first)
        # Closing the receiver released the messages it had prefetched but not handed out.
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
            rest = receiver.receive_messages(max_message_count=2, max_wait_time=WAIT)
            for message in rest:
                receiver.complete_message(message)

    assert str(first) == "m0"
    assert [(str(m), m.delivery_count) for m in rest] == [("m1", 0), ("m2", 0)]


def test_competing_receivers_each_get_different_messages(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, *(ServiceBusMessage(f"m{i}") for i in range(4)))

    with (
        sdk_client(backend) as client,
        client.get_queue_receiver(queue, max_wait_time=WAIT) as first,
        client.get_queue_receiver(queue, max_wait_time=WAIT) as second,
    ):
        a = first.receive_messages(max_message_count=2, max_wait_time=WAIT)
        b = second.receive_messages(max_message_count=2, max_wait_time=WAIT)
        seqs = [m.sequence_number for m in a + b]
        for message in a:
            first.complete_message(message)
        for message in b:
            second.complete_message(message)

    assert sorted(seqs) == [1, 2, 3, 4]  # type: ignore[type-var]


# --- peek


def test_peek_does_not_lock_or_count_a_delivery(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("peeked"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        peeked = receiver.peek_messages(max_message_count=5)
        peeked_again = receiver.peek_messages(max_message_count=5, sequence_number=1)
        (received,) = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
        receiver.complete_message(received)

    assert [str(m) for m in peeked] == ["peeked"]
    assert peeked[0].sequence_number == 1
    assert peeked[0].delivery_count == 0
    assert peeked[0].state == ServiceBusMessageState.ACTIVE
    assert [m.delivery_count for m in peeked_again] == [0]
    assert received.delivery_count == 0  # peeking is not a delivery


def test_peek_shows_locked_messages_without_disturbing_the_lock(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, ServiceBusMessage("locked"))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
        peeked = receiver.peek_messages(max_message_count=5, sequence_number=1)
        with client.get_queue_receiver(queue, max_wait_time=WAIT) as other:
            assert other.receive_messages(max_message_count=1, max_wait_time=WAIT) == []
        receiver.complete_message(message)  # the lock is still ours
        assert receiver.peek_messages(max_message_count=10, sequence_number=1) == []

    assert [m.sequence_number for m in peeked] == [1]
    assert peeked[0].delivery_count == 0


def test_peek_pages_through_the_queue_by_sequence_number(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, *(ServiceBusMessage(f"m{i}") for i in range(1, 6)))

    with sdk_client(backend) as client, client.get_queue_receiver(queue) as receiver:
        page1 = receiver.peek_messages(max_message_count=2)
        page2 = receiver.peek_messages(max_message_count=2)  # continues after the last peeked message
        page3 = receiver.peek_messages(max_message_count=2)
        page4 = receiver.peek_messages(max_message_count=2)
        from_two = receiver.peek_messages(max_message_count=3, sequence_number=2)
        beyond = receiver.peek_messages(max_message_count=3, sequence_number=100)

    assert [m.sequence_number for m in page1] == [1, 2]
    assert [m.sequence_number for m in page2] == [3, 4]
    assert [m.sequence_number for m in page3] == [5]
    assert page4 == []
    assert [str(m) for m in from_two] == ["m2", "m3", "m4"]
    assert beyond == []


def test_peek_skips_messages_that_were_completed(backend: Backend) -> None:
    queue = backend.create_queue()
    _send(backend, queue, *(ServiceBusMessage(f"m{i}") for i in range(3)))

    with sdk_client(backend) as client, client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
        (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
        receiver.complete_message(first)
        peeked = receiver.peek_messages(max_message_count=10, sequence_number=1)

    assert [m.sequence_number for m in peeked] == [2, 3]


# --- async


def test_async_client_sends_receives_and_settles(backend: Backend) -> None:
    queue = backend.create_queue()

    async def scenario() -> dict[str, Any]:
        outcome: dict[str, Any] = {}
        async with AsyncServiceBusClient.from_connection_string(backend.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage("complete-me", message_id="c"))
                batch = await sender.create_message_batch()
                batch.add_message(ServiceBusMessage("abandon-me", message_id="a"))
                batch.add_message(ServiceBusMessage("dead-letter-me", message_id="d"))
                await sender.send_messages(batch)
            async with client.get_queue_receiver(queue, max_wait_time=WAIT) as receiver:
                first = await receiver.receive_messages(max_message_count=3, max_wait_time=WAIT)
                while len(first) < 3:
                    more = await receiver.receive_messages(max_message_count=3, max_wait_time=WAIT)
                    assert more, "async receiver got fewer messages than were sent"
                    first.extend(more)
                outcome["first"] = [(m.message_id, m.sequence_number, m.delivery_count) for m in first]
                by_id = {m.message_id: m for m in first}
                await receiver.complete_message(by_id["c"])
                await receiver.abandon_message(by_id["a"])
                await receiver.dead_letter_message(
                    by_id["d"], reason="async-reason", error_description="async description"
                )
                again = await receiver.receive_messages(max_message_count=3, max_wait_time=WAIT)
                outcome["again"] = [(m.message_id, m.delivery_count) for m in again]
                for message in again:
                    await receiver.complete_message(message)
                outcome["empty"] = await receiver.receive_messages(max_message_count=3, max_wait_time=WAIT)
                outcome["left"] = await receiver.peek_messages(max_message_count=10, sequence_number=1)
            async with client.get_queue_receiver(
                queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=WAIT
            ) as dlq:
                dead = await dlq.receive_messages(max_message_count=3, max_wait_time=WAIT)
                outcome["dead"] = [
                    (m.message_id, m.dead_letter_reason, m.dead_letter_error_description) for m in dead
                ]
                for message in dead:
                    await dlq.complete_message(message)
                outcome["dead_left"] = await dlq.peek_messages(max_message_count=10, sequence_number=1)
        return outcome

    outcome = asyncio.run(scenario())

    assert outcome["first"] == [("c", 1, 0), ("a", 2, 0), ("d", 3, 0)]
    assert outcome["again"] == [("a", 1)]
    assert outcome["empty"] == []
    assert outcome["dead"] == [("d", "async-reason", "async description")]
    assert outcome["left"] == []
    assert outcome["dead_left"] == []


def test_async_receive_and_delete_and_peek(backend: Backend) -> None:
    queue = backend.create_queue()

    async def scenario() -> tuple[list[int | None], list[str], list[Any]]:
        async with AsyncServiceBusClient.from_connection_string(backend.connection_string) as client:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
            async with client.get_queue_receiver(queue) as peeker:
                peeked = [m.sequence_number for m in await peeker.peek_messages(max_message_count=10)]
            async with client.get_queue_receiver(
                queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=WAIT
            ) as receiver:
                bodies: list[str] = []
                while len(bodies) < 3:
                    batch = await receiver.receive_messages(max_message_count=3, max_wait_time=WAIT)
                    assert batch, "async receive-and-delete got fewer messages than were sent"
                    bodies.extend(str(m) for m in batch)
                left = await receiver.peek_messages(max_message_count=10, sequence_number=1)
        return peeked, bodies, left

    peeked, bodies, left = asyncio.run(scenario())

    assert peeked == [1, 2, 3]
    assert bodies == ["m0", "m1", "m2"]
    assert left == []
