"""Busbar's codec reads the application properties of a message's AMQP encoding with the AMQP type each value
was sent with (shared/amqp/encoding/application_properties.py): the trigger edge and devhost's host side read
the bytes the Functions host hands over with it. The same typing azure-servicebus's receive hook once gave
(its byte reader, which this replaced), on no SDK internals,
and tolerant of uamqp's re-encoding of a message it decoded."""

from __future__ import annotations

import struct
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import proton
import pytest

from shared.amqp.encoding.application_properties import (
    application_properties_of,
    decode_application_properties,
)
from shared.amqp.encoding.codec import DecodeError, encode
from shared.amqp.encoding.sections import APPLICATION_PROPERTIES, DATA, HEADER, MESSAGE_ANNOTATIONS, section
from shared.amqp.encoding.types import Described as AnyDescribed
from shared.amqp.encoding.types import Timestamp
from shared.envelope.properties import (
    DATETIME_OFFSET,
    URI,
    Binary,
    Byte,
    Char,
    Described,
    Float32,
    Long,
    PropertyTypeError,
    Short,
    Symbol,
    UByte,
    UInt,
    ULong,
    UShort,
)
from shared.envelope.sdk import normalise_received, sdk_application_properties

pytestmark = pytest.mark.timeout(30)


def _map(entries: bytes, count: int) -> bytes:
    return bytes([0xC1, len(entries) + 1, count * 2]) + entries


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
        # Past a datetime's years (no .NET DateTime is): the milliseconds, the value intact.
        (b"\x83" + struct.pack(">q", 2**62), 2**62),
        (b"\xa0\x02\x00\xff", Binary(b"\x00\xff")),
        (b"\xb0\x00\x00\x00\x01a", Binary(b"a")),
        (b"\xa1\x02hi", b"hi"),  # a string as azure-servicebus hands one back
        (b"\xa1\x01\xff", b"\xff"),  # not UTF-8: still read, as the SDK reads it
        (b"\xa3\x03sym", Symbol("sym")),
        (b"\xa3\x02\xc3\xa9", b"\xc3\xa9"),  # not ASCII, so not a symbol: bytes
        (b"\x73\x00\x00\x00\x41", Char("A")),
        (b"\x74\x32\x00\x00\x0f", Decimal("1.5")),  # decimal32
        (b"\x94" + bytes.fromhex("303c00000000000000000000000007cf"), Decimal("19.99")),  # decimal128
        (b"\x98" + uuid.UUID(int=5).bytes, uuid.UUID(int=5)),
        (b"\x40", None),
        (b"\x41", True),
        (b"\x56\x00", False),
    ],
)
def test_each_amqp_encoding_is_decoded_as_its_type(encoded: bytes, expected: Any) -> None:
    [(key, value)] = decode_application_properties(_map(b"\xa1\x01k" + encoded, 1)).items()
    assert key == b"k" and value == expected and type(value) is type(expected)


def test_a_large_map_and_a_data_body_after_it_are_read() -> None:
    properties = {f"p{i}": Long(i) for i in range(300)}
    payload = section(APPLICATION_PROPERTIES, properties) + section(DATA, b"x" * 300)
    typed = application_properties_of(payload)
    assert typed == {f"p{i}".encode(): Long(i) for i in range(300)}
    assert typed is not None and {type(v) for v in typed.values()} == {Long}


def test_a_message_without_application_properties_has_none() -> None:
    assert application_properties_of(section(HEADER, [True]) + section(DATA, b"{}")) is None


def test_the_last_application_properties_section_counts() -> None:
    payload = section(APPLICATION_PROPERTIES, {"n": 1}) + section(APPLICATION_PROPERTIES, {"n": Long(2)})
    assert application_properties_of(payload) == {b"n": Long(2)}


def test_uamqps_re_encoding_is_read_past_a_bare_annotations_map_and_a_section_described_twice() -> None:
    # uamqp re-encodes a message it decoded with the message annotations as a bare map (no section
    # descriptor) and the application-properties section's descriptor written twice.
    annotations = encode(
        {Symbol("x-opt-enqueued-time"): Timestamp(1), Symbol("x-opt-sequence-number"): Long(3)}
    )
    twice = b"\x00\x53\x74" + section(APPLICATION_PROPERTIES, {"long": Long(5), "text": "t"})
    payload = section(HEADER, [True]) + annotations + twice + section(DATA, b"{}")
    assert application_properties_of(payload) == {b"long": Long(5), b"text": b"t"}
    assert application_properties_of(section(MESSAGE_ANNOTATIONS, {}) + twice) == {b"long": 5, b"text": b"t"}


def test_every_type_proton_writes_is_read_with_its_type_and_normalises_as_busbar_sends_it() -> None:
    message = proton.Message(
        body="{}",
        properties={
            "long": 5,  # proton writes a Python int as a long
            "timestamp": proton.timestamp(1_700_000_000_123),
            "binary": b"\x00\xff",
            "symbol": proton.symbol("gold"),
            "char": proton.char("A"),
            "ubyte": proton.ubyte(7),
            "float": proton.float32(0.5),
            "text": "hello",
        },
    )
    typed = application_properties_of(message.encode())
    assert typed is not None
    assert normalise_received(typed) == {
        "long": Long(5),
        "timestamp": datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC),
        "binary": b"\x00\xff",
        "symbol": Symbol("gold"),
        "char": Char("A"),
        "ubyte": UByte(7),
        "float": Float32(0.5),
        "text": "hello",
    }


def test_a_described_value_keeps_its_descriptor_and_the_described_values_type() -> None:
    data = proton.Data()
    data.put_object(
        {
            "uri": proton.Described(proton.symbol(URI), "https://example.com/a"),
            "offset": proton.Described(proton.symbol(DATETIME_OFFSET), 630_822_816_000_000_000),
            "code": proton.Described(proton.ulong(9), proton.uint(7)),
            "nested": proton.Described(
                proton.ulong(9), proton.Described(proton.symbol("a:b"), proton.int32(5))
            ),
        }
    )
    typed = decode_application_properties(data.encode())
    assert typed == {
        b"uri": Described(URI, "https://example.com/a"),
        b"offset": Described(DATETIME_OFFSET, Long(630_822_816_000_000_000)),
        b"code": Described(9, UInt(7)),
        b"nested": Described(9, Described("a:b", 5)),
    }
    assert type(typed[b"code"].value) is UInt and type(typed[b"offset"].value) is Long


@pytest.mark.parametrize(
    "described",
    [
        proton.Described(proton.symbol("example:list"), [1, 2]),  # a list described: no scalar
        proton.Described("a string descriptor", 1),  # neither a symbol nor a ulong
    ],
    ids=["list", "string descriptor"],
)
def test_a_described_value_busbars_model_cannot_hold_is_the_codecs_and_a_copy_of_it_is_refused_by_name(
    described: proton.Described,
) -> None:
    data = proton.Data()
    data.put_object({"odd": described})
    [(_, value)] = decode_application_properties(data.encode()).items()
    assert type(value) is AnyDescribed  # not the envelope's Described, which Busbar sends
    with pytest.raises(PropertyTypeError, match=r"application property 'odd' cannot be sent"):
        sdk_application_properties(normalise_received({b"odd": value}))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\x00\x53\x74\x45", "not a map"),  # an empty list where the map belongs
        (b"\x00\x53\x74\xc1\x05\x02\xa1\x01k", "truncated"),  # a key without its value
        (b"\x00\x53\x74\xc1\x06\x02\xa1\x01k\xa1\x09", "truncated"),  # a string longer than the bytes
        (b"\x00\x53\x75\xa0\x09ab", "truncated"),  # a data section longer than the bytes
    ],
)
def test_bytes_that_are_not_a_message_raise_a_decode_error(payload: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        application_properties_of(payload)
