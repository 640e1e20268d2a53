"""What Busbar's receiver keeps of each delivery (shared/amqp/receiver.py, shared/amqp/received.py) against
the emulator: the delivery's AMQP encoding as it arrived (``amqp_bytes``, which a trigger hands on), read
back to the same message by Busbar's own codec and by proton, and the lock token, read from the delivery
tag (else the delivery annotation ``x-opt-lock-token``) as a ``uuid.UUID``: the GUID azure-servicebus 7.15
reports as ``lock_token`` (``_common/message.py``: ``uuid.UUID(bytes_le=delivery_tag)`` or the same delivery
annotation) and the one ``com.microsoft:renew-lock`` takes, while the same 16 bytes read in the other byte
order are refused."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from typing import Any

import proton
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from shared.amqp.connection import Namespace, WireError
from shared.amqp.encoding.application_properties import application_properties_of
from shared.amqp.encoding.sections import PropertiesField, parse_message
from shared.amqp.outgoing import OutgoingMessage
from shared.amqp.received import received_message
from shared.amqp.receiver import EntityReceiver
from shared.envelope.properties import Long
from tests.shared.amqp.typed_send import send_typed

pytestmark = pytest.mark.timeout(60)

BIG = 2**40  # only an AMQP long holds it (azure-servicebus cannot send one: it encodes an int as int32)


def test_the_amqp_bytes_of_a_delivery_decode_to_the_message_received(emulator: Any) -> None:
    queue = emulator.create_queue()
    sent = OutgoingMessage(
        body=b"payload-1",
        message_id="m-1",
        subject="Orders.Placed",
        application_properties={"count": Long(BIG), "small": 7, "name": "x"},
    )
    send_typed(emulator.connection_string, queue, sent)
    with EntityReceiver(Namespace.from_connection_string(emulator.connection_string), queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        receiver.complete_message(message)
    assert message.amqp_bytes is not None
    # Busbar's own codec (what devhost and the trigger edge read the host's bytes with).
    parsed = parse_message(message.amqp_bytes)
    assert parsed.prop(PropertiesField.MESSAGE_ID) == "m-1"
    assert parsed.body_raw.endswith(b"payload-1")
    typed = application_properties_of(message.amqp_bytes)
    assert typed is not None
    assert typed[b"count"] == BIG and type(typed[b"count"]) is Long
    assert typed[b"small"] == 7
    # The lock token travels in the bytes too, as the delivery annotation the receiver read it from.
    assert {str(key): value for key, value in parsed.delivery_annotations.items()}[
        "x-opt-lock-token"
    ] == message.lock_token
    # proton reads the same message from them.
    decoded = proton.Message()
    decoded.decode(message.amqp_bytes)
    assert (decoded.id, decoded.subject, decoded.body) == ("m-1", "Orders.Placed", b"payload-1")
    properties: dict[Any, Any] = decoded.properties or {}
    assert properties["count"] == BIG and type(properties["count"]) is int  # proton's long
    assert (message.message_id, message.body, message.application_properties["count"]) == (
        "m-1",
        b"payload-1",
        Long(BIG),
    )


def test_the_lock_token_is_the_guid_renew_lock_takes_and_not_its_other_byte_order(emulator: Any) -> None:
    queue = emulator.create_queue(lock_duration=timedelta(minutes=1))
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_sender(queue) as sender,
    ):
        sender.send_messages(
            [ServiceBusMessage(b"a", message_id="a"), ServiceBusMessage(b"b", message_id="b")]
        )
        with client.get_queue_receiver(queue) as sdk_receiver:
            [by_sdk] = sdk_receiver.receive_messages(max_message_count=1, max_wait_time=5)
            sdk_token = by_sdk.lock_token
            sdk_receiver.complete_message(by_sdk)
    # The SDK reports a delivery's lock token as a uuid.UUID; Busbar's receiver reads the same kind of value.
    assert isinstance(sdk_token, uuid.UUID)
    with EntityReceiver(Namespace.from_connection_string(emulator.connection_string), queue) as receiver:
        [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert isinstance(message.lock_token, uuid.UUID) and message.lock_token != sdk_token
        assert receiver.renew_message_lock(message) >= message.locked_until_utc  # type: ignore[operator]
        swapped = uuid.UUID(bytes=message.lock_token.bytes_le)  # the tag's bytes read as a big-endian uuid
        assert swapped != message.lock_token
        with pytest.raises(WireError, match="refused"):
            receiver.renew_message_lock(dataclasses.replace(message, lock_token=swapped))
        receiver.complete_message(message)
    assert (by_sdk.message_id, message.message_id) == ("a", "b")


def test_the_lock_token_is_read_from_the_delivery_tag_first_as_every_service_bus_sdk_reads_it() -> None:
    """Azure names a peek-lock delivery's lock token in its delivery tag (a .NET Guid's bytes), which every
    Service Bus SDK reads; the ``x-opt-lock-token`` delivery annotation is the fallback."""
    token, other = uuid.uuid4(), uuid.uuid4()
    message = proton.Message(body=b"x")
    message.instructions = {proton.symbol("x-opt-lock-token"): other}  # type: ignore[dict-item]  # a uuid: AMQP allows it
    assert received_message(message, delivery_tag=token.bytes_le).lock_token == token
    assert received_message(message, delivery_tag=b"").lock_token == other  # receive-and-delete: no tag
    assert received_message(proton.Message(body=b"x")).lock_token is None
