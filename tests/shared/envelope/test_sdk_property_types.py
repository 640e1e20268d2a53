"""The receiver shim (shared/envelope/sdk_property_types.py): a marked sync azure-servicebus receiver hands
back every application property with its AMQP type -- received, from a session and from the dead-letter
queue -- so a copy sent from it has the original's wire types; nothing else the SDK decodes changes
(annotations, management responses, peeks and aio receivers), typed values still behave as the ints, floats
and strings they are, and the shim says when the SDK no longer does what it hooks. (The re-drive's and the
console's receive and peek are Busbar's own AMQP receiver's: tests/shared/amqp.)"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusReceivedMessage,
    ServiceBusSubQueue,
)
from azure.servicebus._pyamqp import _decode, management_link, receiver
from azure.servicebus._pyamqp._encode import encode_payload
from azure.servicebus._pyamqp.aio import _management_link_async
from azure.servicebus._pyamqp.message import Message
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from emulator.testing import EmulatorHandle
from shared.amqp.outgoing import OutgoingMessage, outgoing_message
from shared.archive.properties import decode_properties, encode_properties
from shared.envelope import Envelope, PartitionKeyPolicy, sdk_property_types
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
from shared.envelope.sdk import from_received, normalise_received
from shared.envelope.sdk_property_types import typed_receiver
from tests.shared.amqp.typed_send import send_typed
from tests.shared.envelope.wire_types import EXACT, SENT, stored_properties, types_of

DEAD_LETTER = ServiceBusSubQueue.DEAD_LETTER
SDK = Path(_decode.__file__).resolve().parent.parent  # azure/servicebus
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
"""The class the hook gives each of :data:`EVERY_TYPE` (a plain ``int``/``float`` is an AMQP int/double)."""
TYPED_CLASSES = (TypedInt, Float32, Char, Symbol, Binary, datetime, Decimal)


def _message(message_id: str = "typed", **options: Any) -> OutgoingMessage:
    """A message with a property of every type, a char included, as a .NET sender sends it (through
    Busbar's own AMQP sender: azure-servicebus sends no char)."""
    return OutgoingMessage(body=b"{}", message_id=message_id, application_properties=EVERY_TYPE, **options)


def assert_typed(message: ServiceBusReceivedMessage) -> None:
    """Every property of :data:`EVERY_TYPE` has its class and its value; the SDK's own readings as before."""
    properties = message.application_properties or {}
    named = {key.decode(): value for key, value in properties.items() if isinstance(key, bytes)}
    assert {name: type(named[name]) for name in EVERY_TYPE} == CLASSES
    normalised = normalise_received(properties)  # what Busbar's receiver hops read
    assert {name: normalised[name] for name in EVERY_TYPE} == EVERY_TYPE
    assert {name: amqp_type(normalised[name]).value for name in EVERY_TYPE} == EVERY_EXACT
    annotations = message.raw_amqp_message.annotations or {}
    assert {type(annotations[key]) for key in (b"x-opt-sequence-number", b"x-opt-enqueued-time")} == {int}
    assert isinstance(message.sequence_number, int) and isinstance(message.enqueued_time_utc, datetime)


def _number(message: ServiceBusReceivedMessage) -> int:
    assert message.sequence_number is not None
    return message.sequence_number


@pytest.fixture
def management_responses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[Any, Any]]]:
    """The application properties of every management response the SDK reads (sync and aio)."""
    seen: list[dict[Any, Any]] = []
    typed: list[bool] = []
    for module in (management_link, _management_link_async):
        original = module.ManagementLink._on_message_received

        def spy(link: Any, frame: Any, message: Message, _original: Any = original) -> Any:
            # Whether the response's link was taken for one that carries messages (typed): it must not be.
            typed.append(sdk_property_types.wants_types(link._response_link))
            seen.append(dict(message.application_properties or {}))
            return _original(link, frame, message)

        monkeypatch.setattr(module.ManagementLink, "_on_message_received", spy)
    yield seen
    assert not any(typed), "a management response was decoded typed"
    # $cbs answers with status-code, $management with statusCode: both read by the SDK, both plain ints.
    assert {key for properties in seen for key in properties} >= {b"status-code", b"statusCode"}
    for properties in seen:
        assert not [v for v in properties.values() if isinstance(v, TYPED_CLASSES)], properties
        codes = [v for k, v in properties.items() if k in (b"statusCode", b"status-code")]
        assert [type(code) for code in codes] == [int], properties


def test_a_received_and_a_dead_lettered_message_keeps_every_type(
    emulator: EmulatorHandle, management_responses: list[dict[Any, Any]]
) -> None:
    queue = emulator.create_queue()
    send_typed(emulator.connection_string, queue, _message("received"), _message("dead"))
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with typed_receiver(client.get_queue_receiver(queue)) as queue_receiver:
            # A management call on a marked receiver: its response is read plain (the fixture checks).
            assert len(queue_receiver.peek_messages(max_message_count=2)) == 2
            received, dead = queue_receiver.receive_messages(max_message_count=2, max_wait_time=5)
            assert sdk_property_types.wants_types(queue_receiver._handler._link)
            assert_typed(received)
            assert_typed(dead)
            queue_receiver.complete_message(received)
            queue_receiver.dead_letter_message(dead, reason="HandlerFailed", error_description="boom")
        with typed_receiver(
            client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
        ) as dlq:
            [dead_lettered] = dlq.receive_messages(max_wait_time=5)
            assert_typed(dead_lettered)
            assert (dead_lettered.dead_letter_reason, dead_lettered.dead_letter_error_description) == (
                "HandlerFailed",
                "boom",
            )
            assert isinstance(dead_lettered.locked_until_utc, datetime)
            dlq.complete_message(dead_lettered)


def test_a_session_message_keeps_every_type(emulator: EmulatorHandle) -> None:
    queue = emulator.create_queue(requires_session=True)
    send_typed(emulator.connection_string, queue, _message(session_id="s-1"))
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        typed_receiver(client.get_queue_receiver(queue, session_id="s-1")) as session_receiver,
    ):
        [message] = session_receiver.receive_messages(max_wait_time=5)
        assert_typed(message)
        session_receiver.complete_message(message)


def test_a_copy_sent_from_a_received_message_has_the_originals_wire_types(emulator: EmulatorHandle) -> None:
    source, target = emulator.create_queue(), emulator.create_queue()
    send_typed(emulator.connection_string, source, _message())
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        typed_receiver(client.get_queue_receiver(source)) as source_receiver,
    ):
        [received] = source_receiver.receive_messages(max_wait_time=5)
        envelope = from_received(received, Envelope, body=b"{}")
        source_receiver.complete_message(received)
    # A copy goes out as Busbar sends copies: its own AMQP sender.
    send_typed(emulator.connection_string, target, outgoing_message(envelope, PartitionKeyPolicy.REFUSE))
    [stored] = stored_properties(emulator, target)
    assert types_of(stored) == EVERY_EXACT
    # ... and the archive's typed JSON records every one of them, exactly.
    archived = decode_properties(encode_properties(envelope.application_properties))
    assert {name: amqp_type(value).value for name, value in archived.items()} == EVERY_EXACT
    assert archived == envelope.application_properties


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
    decoded = sdk_property_types.typed_payload(_decode.decode_payload)(memoryview(encoded))
    assert decoded.application_properties == {f"p{i}".encode(): Long(i) for i in range(300)}
    assert {type(v) for v in decoded.application_properties.values()} == {Long}
    assert decoded.data == [b"x" * 300]


def test_a_section_that_cannot_be_typed_keeps_the_sdks_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    encoded = bytes(encode_payload(bytearray(), Message(application_properties={"n": 1})))

    def broken(_section: memoryview) -> dict[Any, Any]:
        raise ValueError("unexpected encoding")

    monkeypatch.setattr(sdk_property_types, "decode_application_properties", broken)
    decoded = sdk_property_types.typed_payload(_decode.decode_payload)(memoryview(encoded))
    assert decoded.application_properties == {b"n": 1}


def _sdk_sources() -> dict[str, str]:
    return {
        str(path.relative_to(SDK)): path.read_text(encoding="utf-8")
        for path in SDK.rglob("*.py")
        if "_vendor" not in path.parts
    }


def test_the_sdk_still_decodes_received_messages_where_the_shim_hooks() -> None:
    # When this fails, azure-servicebus decodes messages somewhere else (or no longer there): re-read
    # _pyamqp/_decode.py and its callers, and hook what the SDK does now (shared/envelope/sdk_property_types).
    callers = sorted(name for name, text in _sdk_sources().items() if "decode_payload(" in text)
    assert callers == [
        "_common/message.py",  # ServiceBusReceivedMessage.from_bytes: left as the SDK has it
        "_pyamqp/_decode.py",
        "_pyamqp/aio/_receiver_async.py",
        "_pyamqp/receiver.py",
        "_transport/_pyamqp_transport.py",
    ]
    link = receiver.ReceiverLink
    sdk_incoming_transfer = getattr(link._incoming_transfer, "__busbar_typed__", link._incoming_transfer)
    assert "decode_payload(" in inspect.getsource(sdk_incoming_transfer)
    # ... and it decodes the application-properties section as a map, like every section, at [3].
    assert "_DECODE_BY_CONSTRUCTOR[buffer[3]](buffer[4:])" in inspect.getsource(_decode.decode_payload)


def test_the_sdk_still_opens_receiver_links_only_for_receive_clients_and_management_links() -> None:
    # A receiver link of any other kind would have its messages' properties typed: look at what it carries.
    openers = sorted(
        name for name, text in _sdk_sources().items() if re.search(r"\.create_receiver_link\(", text)
    )
    assert openers == [
        "_pyamqp/aio/_client_async.py",  # ReceiveClientAsync
        "_pyamqp/aio/_management_link_async.py",
        "_pyamqp/client.py",  # ReceiveClient
        "_pyamqp/management_link.py",
    ]


def test_install_hooks_each_place_once() -> None:
    sdk_property_types.install()  # again, as every import of shared.envelope.sdk does
    places: tuple[tuple[Any, str], ...] = (
        (receiver, "decode_payload"),
        (receiver.ReceiverLink, "_incoming_transfer"),
    )
    for owner, name in places:
        hooked = getattr(owner, name)
        assert not hasattr(hooked.__busbar_typed__, "__busbar_typed__"), (owner, name)
    assert not hasattr(_decode.decode_payload, "__busbar_typed__")  # the SDK's own, for from_bytes


def test_a_receiver_busbar_did_not_mark_gets_the_sdks_plain_values(emulator: EmulatorHandle) -> None:
    # devhost's host and a function's own receivers run in the same process as Busbar's code: untouched.
    queue = emulator.create_queue()
    plain = (TypedInt, Float32, Symbol, Binary, datetime)  # char and decimal: sdk_codec's, for everyone

    def assert_plain(message: ServiceBusReceivedMessage) -> None:
        properties = message.application_properties or {}
        assert type(properties[b"long"]) is int and type(properties[b"timestamp"]) is int
        assert not [value for value in properties.values() if isinstance(value, plain)]

    send_typed(emulator.connection_string, queue, _message(), _message())
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as queue_receiver,
    ):
        [peeked] = queue_receiver.peek_messages()
        [received] = queue_receiver.receive_messages(max_wait_time=5)
        assert not sdk_property_types.wants_types(queue_receiver._handler._link)
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
