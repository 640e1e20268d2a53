"""An SDK-type trigger gets the message's AMQP bytes as they arrived (the host's extension passes
``GetRawAmqpMessage().ToBytes()``, which keeps every value's type), with only the header's delivery count
made the host's (broker's count + 1): devhost keeps a marked receiver's payloads
(devhost/servicebus/amqp_payload.py)."""

from __future__ import annotations

import asyncio
import inspect
from functools import partial
from types import SimpleNamespace
from typing import Any

import proton
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus._pyamqp import receiver as sync_receiver
from azure.servicebus._pyamqp.aio import _receiver_async as async_receiver
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageHeader

from devhost.servicebus import amqp_payload
from devhost.servicebus.amqp_payload import keep_payloads, take_payload
from devhost.servicebus.model_binding_data import LOCK_TOKEN_MARKER, _after_header, model_binding_content
from emulator.testing import EmulatorHandle
from shared.envelope.sdk import sdk_application_properties
from tests.shared.envelope.wire_types import EXACT, MOMENT, SENT, wire_type

amqp_payload.install()


def _send(emulator: EmulatorHandle, queue: str, message: ServiceBusMessage) -> None:
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(message)


def _worker_bytes(content: bytes) -> proton.Message:
    decoded = proton.Message()
    decoded.decode(content[content.index(LOCK_TOKEN_MARKER) + len(LOCK_TOKEN_MARKER) :])
    return decoded


async def _content_via_marked_receiver(emulator: EmulatorHandle, queue: str) -> tuple[bytes, bytes | None]:
    async with (
        AsyncServiceBusClient.from_connection_string(emulator.connection_string) as client,
        keep_payloads(client.get_queue_receiver(queue)) as receiver,
    ):
        [message] = await receiver.receive_messages(max_wait_time=5)
        content = model_binding_content(message)
        again = take_payload(message)
        await receiver.complete_message(message)
    return content, again


def test_every_property_reaches_an_sdk_type_trigger_with_the_amqp_type_it_was_sent_with(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue()
    properties: Any = sdk_application_properties(SENT)
    _send(
        emulator,
        queue,
        ServiceBusMessage(b'{"order": 1}', application_properties=properties, message_id="m-1"),
    )
    content, again = asyncio.run(_content_via_marked_receiver(emulator, queue))
    decoded = _worker_bytes(content)
    raw: dict[Any, Any] = dict(decoded.properties or {})
    sent = {str(k): v for k, v in raw.items()}
    assert {name: wire_type(value) for name, value in sent.items()} == EXACT
    assert sent["timestamp"] == int(MOMENT.timestamp() * 1000) and bytes(sent["binary"]) == b"\x00\xff\x10"
    assert decoded.delivery_count == 1  # the host's count: this delivery included
    assert (decoded.id, decoded.body) == ("m-1", b'{"order": 1}')
    # Every reader of the message gets the same bytes (the trigger metadata and the model binding data).
    assert again is not None and content.endswith(_after_header(again))


def test_the_header_reaches_the_trigger_with_each_field_and_the_hosts_delivery_count(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue()
    header = AmqpMessageHeader(durable=True, priority=5, time_to_live=60_000)
    _send(emulator, queue, AmqpAnnotatedMessage(data_body=b"{}", header=header))  # type: ignore[arg-type]
    content, _ = asyncio.run(_content_via_marked_receiver(emulator, queue))
    decoded = _worker_bytes(content)
    assert (decoded.durable, decoded.priority, decoded.ttl, decoded.delivery_count) == (True, 5, 60.0, 1)
    assert decoded.body == b"{}"


def test_a_message_larger_than_a_frame_reaches_the_trigger_whole(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue()
    body = bytes(range(256)) * 800  # 200 KiB: several transfer frames
    _send(emulator, queue, ServiceBusMessage(body, application_properties={"n": 1}))
    content, _ = asyncio.run(_content_via_marked_receiver(emulator, queue))
    assert _worker_bytes(content).body == body


def test_a_sync_receiver_keeps_payloads_too_and_an_unmarked_one_keeps_none(emulator: EmulatorHandle) -> None:
    marked_queue, plain_queue = emulator.create_queue(), emulator.create_queue()
    for queue in (marked_queue, plain_queue):
        _send(emulator, queue, ServiceBusMessage(b"{}", application_properties={"n": 1}))
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with keep_payloads(client.get_queue_receiver(marked_queue)) as marked:
            [kept] = marked.receive_messages(max_wait_time=5)
            payload = take_payload(kept)
            marked.complete_message(kept)
        with client.get_queue_receiver(plain_queue) as plain:
            [unkept] = plain.receive_messages(max_wait_time=5)
            assert take_payload(unkept) is None
            # Without the bytes the content is re-encoded from the SDK's values: still a whole message.
            assert _worker_bytes(model_binding_content(unkept)).body == b"{}"
            plain.complete_message(unkept)
    assert payload is not None
    decoded = proton.Message()
    decoded.decode(payload)
    assert decoded.properties == {"n": 1}


def test_unclaimed_payloads_are_bounded_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(amqp_payload, "MAX_KEPT", 2)
    holder = keep_payloads(SimpleNamespace())
    link = SimpleNamespace(
        _on_transfer=partial(print, holder), _received_payload=bytearray(), _first_frame=None
    )
    for tag in (b"a", b"b", b"c"):
        # (handle, delivery_id, delivery_tag, format, settled, more, ..., payload at 11)
        amqp_payload._record(link, (0, 1, tag, 0, False, False, None, None, None, None, None, b"p" + tag))
    assert take_payload(SimpleNamespace(_receiver=holder, _delivery_tag=b"a")) is None
    assert take_payload(SimpleNamespace(_receiver=holder, _delivery_tag=b"c")) == b"pc"


@pytest.mark.parametrize("module", [sync_receiver, async_receiver], ids=["sync", "aio"])
def test_the_sdk_still_assembles_a_delivery_where_devhost_reads_it(module: Any) -> None:
    # What _record relies on: frame[5] is `more`, frame[11] the payload, frame[1] the delivery id, frame[2]
    # the tag; earlier frames accumulate in _received_payload; the first frame is kept as _first_frame.
    original = getattr(module.ReceiverLink._incoming_transfer, "__devhost_payload__", None)
    source = inspect.getsource(original or module.ReceiverLink._incoming_transfer)
    for fragment in (
        "self._received_payload.extend(frame[11])",
        "if not frame[5]:",
        "self._first_frame = frame",
        "self._received_delivery_tags.add(self._first_frame[2])",
        "decode_payload(frame[11])",
    ):
        assert fragment in source, fragment
