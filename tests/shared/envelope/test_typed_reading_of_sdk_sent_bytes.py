"""The typed reading of the bytes azure-servicebus encodes a message to, by Busbar's codec
(shared/amqp/encoding/application_properties.py, the trigger edge's and devhost's reader): a property of
every AMQP type a .NET sender uses is read as its type and normalises to what Busbar sent; typed values
still behave as the ints, floats and strings they are; and an azure-servicebus receiver in the same process
gets the SDK's plain values (nothing is installed into the SDK). (The codec's reading of each encoding:
tests/shared/amqp/test_application_properties.py; Busbar's own receivers read typed values through
python-qpid-proton: tests/shared/amqp, tests/shared/ordering/test_parking.py.)"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
)
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import Message
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from emulator.testing import EmulatorHandle
from shared.amqp.encoding.application_properties import application_properties_of
from shared.envelope.properties import (
    Binary,
    Byte,
    Char,
    Float32,
    Long,
    Short,
    Symbol,
    TypedInt,
    UByte,
    UInt,
    ULong,
    UShort,
    amqp_type,
)
from shared.envelope.sdk import normalise_received, sdk_application_properties
from tests.shared.envelope.wire_types import EXACT, SENT

EVERY_TYPE: dict[str, Any] = {**SENT, "price": Decimal("19.99")}
"""A property of every AMQP type azure-servicebus sends (a char it is never given: Busbar sends copies through
shared.amqp; the codec's reading of a char: tests/shared/amqp/test_application_properties.py)."""
EVERY_EXACT = {**EXACT, "price": "decimal128"}
CLASSES: dict[str, type] = {
    "text": bytes,  # the SDK's own reading of a string, kept: it reads DeadLetterReason so
    "flag": bool,
    "byte": Byte,
    "short": Short,
    "int": int,
    "long": Long,
    "small_long": Long,
    "ubyte": UByte,
    "ushort": UShort,
    "uint": UInt,
    "ulong": ULong,
    "float": Float32,
    "double": float,
    "timestamp": datetime,
    "uuid": type(SENT["uuid"]),
    "binary": Binary,
    "utf8_binary": Binary,
    "symbol": Symbol,
    "null": type(None),
    "price": Decimal,
}
"""The class the reader gives each of :data:`EVERY_TYPE` (a plain ``int``/``float`` is an AMQP int/double)."""


def _message(message_id: str = "typed", **options: Any) -> ServiceBusMessage:
    # No decimal: azure-servicebus's own decimal128 decoder cannot read what its encoder wrote past 2^32
    # (devhost's listeners and Busbar's receivers receive through shared.amqp, which reads every decimal).
    properties: Any = sdk_application_properties(SENT)
    return ServiceBusMessage(b"{}", message_id=message_id, application_properties=properties, **options)


def test_a_message_of_every_type_is_read_with_each_propertys_class_and_value() -> None:
    properties: Any = sdk_application_properties(EVERY_TYPE)  # as Busbar sends them
    encoded = bytes(encode_payload(bytearray(), Message(application_properties=properties, data=[b"{}"])))
    typed = application_properties_of(encoded) or {}
    named = {key.decode(): value for key, value in typed.items()}
    assert {name: type(named[name]) for name in EVERY_TYPE} == CLASSES
    normalised = normalise_received(typed)  # what Busbar's hops read
    assert {name: normalised[name] for name in EVERY_TYPE} == EVERY_TYPE
    assert {name: amqp_type(normalised[name]).value for name in EVERY_TYPE} == EVERY_EXACT


def test_typed_values_behave_as_the_ints_floats_strings_and_bytes_they_are() -> None:
    values = {"long": Long(5), "ubyte": UByte(250), "float": Float32(1.5), "symbol": Symbol("s")}
    assert json.dumps(values) == '{"long": 5, "ubyte": 250, "float": 1.5, "symbol": "s"}'
    assert Long(5) == 5 and hash(Long(5)) == hash(5) and Long(5) + 1 == 6 and {5: "x"}[Long(5)] == "x"
    assert UInt(7) * 2 == 14 and Float32(1.5) * 2 == 3.0 and Binary(b"ab") == b"ab"


def test_an_azure_servicebus_receiver_gets_the_sdks_plain_values(emulator: EmulatorHandle) -> None:
    # devhost's host and a function's own receivers run in the same process as Busbar's code: untouched
    # (nothing is installed into the SDK's receive links).
    queue = emulator.create_queue()
    plain = (TypedInt, Float32, Char, Symbol, Binary, datetime)

    def assert_plain(message: ServiceBusReceivedMessage) -> None:
        properties = message.application_properties or {}
        assert type(properties[b"long"]) is int and type(properties[b"timestamp"]) is int
        assert not [value for value in properties.values() if isinstance(value, plain)]

    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages([_message(), _message()])
        with client.get_queue_receiver(queue) as queue_receiver:
            [peeked] = queue_receiver.peek_messages()
            [received] = queue_receiver.receive_messages(max_wait_time=5)
            for message in (peeked, received):
                assert_plain(message)
            queue_receiver.complete_message(received)

    async def scenario() -> ServiceBusReceivedMessage:
        client = AsyncServiceBusClient.from_connection_string(emulator.connection_string)
        async with client, client.get_queue_receiver(queue) as queue_receiver:
            [message] = await queue_receiver.receive_messages(max_wait_time=5)
            await queue_receiver.complete_message(message)
            return message

    assert_plain(asyncio.run(asyncio.wait_for(scenario(), 60)))
