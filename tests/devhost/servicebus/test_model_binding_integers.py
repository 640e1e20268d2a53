"""The AMQP bytes devhost hands an SDK-type trigger keep every integer deliverable: the SDK the host reads
with decodes every integer type to ``int``, and the host re-encodes it as int, long, or (past a long's
range: only a ulong could carry it) ulong, where a long would fail the whole delivery."""

from __future__ import annotations

from typing import Any

import proton
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes

from devhost.servicebus.model_binding_data import LOCK_TOKEN_MARKER, _typed, model_binding_content
from emulator.testing import EmulatorHandle
from shared.amqp.encoding.codec import encode
from shared.envelope.properties import Long, ULong
from tests.shared.envelope.wire_types import wire_type


def test_integers_of_every_range_reach_the_worker_and_a_ulong_past_a_long_stays_a_ulong(
    emulator: EmulatorHandle,
) -> None:
    queue = emulator.create_queue()
    properties: Any = {
        "small": 5,
        "wide": {TYPE: AMQPTypes.long, VALUE: 2**40},
        "huge": {TYPE: AMQPTypes.ulong, VALUE: 2**64 - 1},
    }
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage(b"{}", application_properties=properties))
        with client.get_queue_receiver(queue) as receiver:
            [message] = receiver.receive_messages(max_wait_time=5)
            content = model_binding_content(message)
            receiver.complete_message(message)
    assert isinstance(message, ServiceBusReceivedMessage)
    encoded = content[content.index(LOCK_TOKEN_MARKER) + len(LOCK_TOKEN_MARKER) :]
    decoded = proton.Message()
    decoded.decode(encoded)
    raw: dict[Any, Any] = dict(decoded.properties or {})
    sent = {str(k): v for k, v in raw.items()}
    assert {name: wire_type(value) for name, value in sent.items()} == {
        "small": "int",
        "wide": "long",
        "huge": "ulong",
    }
    assert sent["huge"] == 2**64 - 1


class _DescribedInt(int):
    """An int subclass, as the SDK's DescribedInt or Busbar's typed Long."""


def test_an_int_subclass_property_is_typed_by_its_value_like_a_plain_int() -> None:
    # ``in range(...)`` walks the range for an int subclass: a long past 32 bits would never finish.
    # The classes Busbar's codec encodes as long, int (a plain int that fits 32 bits) and ulong.
    typed = [_typed(_DescribedInt(value)) for value in (2**40, -7, 2**63)]
    assert typed == [2**40, -7, 2**63]
    assert [type(value) for value in typed] == [Long, int, ULong]
    assert encode(typed) == encode([Long(2**40), -7, ULong(2**63)])
