"""The typed reading of a message's bytes (shared/envelope/sdk_property_types.py, the trigger edge's and
devhost's): every AMQP encoding of an application property is read as its type, a large map and the sections
after it as the SDK's decoder walks them, typed values still behave as the ints, floats and strings they
are, and an azure-servicebus receiver in the same process gets the SDK's plain values (nothing is hooked).
(Busbar's own receivers, the re-drive's, the console's and the hold queue's, read typed values through
python-qpid-proton: tests/shared/amqp, tests/shared/ordering/test_parking.py.)"""

from __future__ import annotations

import asyncio
import inspect
import json
import struct
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
)
from azure.servicebus._pyamqp import _decode
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.message import Message
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from emulator.testing import EmulatorHandle
from shared.envelope import sdk_property_types
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

EVERY_TYPE: dict[str, Any] = {**SENT, "grade": Char("A"), "price": Decimal("19.99")}
"""A property of every AMQP type a .NET sender puts on a message (char and System.Decimal included)."""
EVERY_EXACT = {**EXACT, "grade": "char", "price": "decimal128"}
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
    "grade": Char,
    "price": Decimal,
}
"""The class the reader gives each of :data:`EVERY_TYPE` (a plain ``int``/``float`` is an AMQP int/double)."""


def _message(message_id: str = "typed", **options: Any) -> ServiceBusMessage:
    properties: Any = sdk_application_properties(EVERY_TYPE)
    return ServiceBusMessage(b"{}", message_id=message_id, application_properties=properties, **options)


def test_a_message_of_every_type_is_read_with_each_propertys_class_and_value() -> None:
    properties: Any = sdk_application_properties(EVERY_TYPE)  # as Busbar sends them
    encoded = bytes(encode_payload(bytearray(), Message(application_properties=properties, data=[b"{}"])))
    typed = sdk_property_types.application_properties_of(encoded) or {}
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


def _section(entries: bytes, count: int) -> memoryview:
    return memoryview(bytes([0xC1, len(entries) + 1, count * 2]) + entries)


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        (b"\x51\xf9", Byte(-7)),
        (b"\x61\x8a\xd0", Short(-30000)),
        (b"\x71" + struct.pack(">i", 7), 7),
        (b"\x54\x07", 7),  # smallint
        (b"\x81" + struct.pack(">q", 5), Long(5)),
        (b"\x55\x05", Long(5)),  # smalllong
        (b"\x50\xfa", UByte(250)),
        (b"\x60\xfd\xe8", UShort(65000)),
        (b"\x70" + struct.pack(">I", 4_000_000_000), UInt(4_000_000_000)),
        (b"\x52\x07", UInt(7)),  # smalluint
        (b"\x43", UInt(0)),  # uint0
        (b"\x80" + b"\xff" * 8, ULong(2**64 - 1)),
        (b"\x53\x07", ULong(7)),  # smallulong
        (b"\x44", ULong(0)),  # ulong0
        (b"\x72" + struct.pack(">f", 1.5), Float32(1.5)),
        (b"\x82" + struct.pack(">d", 2.25), 2.25),
        (b"\x83" + struct.pack(">q", -62_135_596_800_000), datetime(1, 1, 1, tzinfo=UTC)),
        # Past a datetime's years (no .NET DateTime is): the SDK's int, the value intact.
        (b"\x83" + struct.pack(">q", 2**62), 2**62),
        (b"\xa0\x02\x00\xff", Binary(b"\x00\xff")),
        (b"\xb0\x00\x00\x00\x01a", Binary(b"a")),
        (b"\xa1\x02hi", b"hi"),
        (b"\xa3\x03sym", Symbol("sym")),
        (b"\xa3\x02\xc3\xa9", b"\xc3\xa9"),  # not ASCII, so not a symbol: the SDK's bytes
        (b"\x73\x00\x00\x00\x41", Char("A")),
        (b"\x40", None),
        (b"\x41", True),
    ],
)
def test_each_amqp_encoding_is_decoded_as_its_type(encoded: bytes, expected: Any) -> None:
    [(key, value)] = sdk_property_types.decode_application_properties(
        _section(b"\xa1\x01k" + encoded, 1)
    ).items()
    assert key == b"k" and value == expected and type(value) is type(expected)


def test_a_large_map_and_a_data_body_after_it_are_read_as_the_sdk_reads_them() -> None:
    properties: Any = {f"p{i}": {"TYPE": "LONG", "VALUE": i} for i in range(300)}
    encoded = bytes(
        encode_payload(bytearray(), Message(application_properties=properties, data=[b"x" * 300]))
    )
    typed = sdk_property_types.application_properties_of(encoded)
    assert typed == {f"p{i}".encode(): Long(i) for i in range(300)}
    assert {type(v) for v in typed.values()} == {Long}
    assert _decode.decode_payload(memoryview(encoded)).data == [b"x" * 300]  # the sections the reader walked


def test_the_sdks_decoder_still_reads_a_sections_value_at_its_fourth_byte() -> None:
    # The reader steps over a section as the SDK's decode_payload does (_section_end): a described section's
    # value at [3]. When this fails, re-read _pyamqp/_decode.py and follow it.
    assert "_DECODE_BY_CONSTRUCTOR[buffer[3]](buffer[4:])" in inspect.getsource(_decode.decode_payload)


def test_an_azure_servicebus_receiver_gets_the_sdks_plain_values(emulator: EmulatorHandle) -> None:
    # devhost's host and a function's own receivers run in the same process as Busbar's code: untouched
    # (nothing is installed into the SDK's receive links).
    queue = emulator.create_queue()
    plain = (TypedInt, Float32, Symbol, Binary, datetime)  # char and decimal: sdk_codec's, for everyone

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
