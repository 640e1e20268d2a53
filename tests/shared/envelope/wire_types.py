"""Reading application properties as they are on the wire, AMQP types included, for the typed-property tests.

The emulator keeps each message's application-properties section as the bytes the sender sent; they are
decoded here with qpid-proton, an AMQP client independent of azure-servicebus and of Busbar's byte reader
(:mod:`shared.amqp.encoding.application_properties`), whose Python types name every AMQP type. ``SENT`` is the
".NET-shaped" message these tests start from: a property of every type a Functions trigger can decode
(char and decimal it cannot; Busbar's own receivers and devhost's listeners read them through shared.amqp,
python-qpid-proton: docs/operations.md). ``DESCRIBED`` is its sibling for AMQP described values: the three
.NET types the .NET Service Bus SDKs send described (``Uri``, ``DateTimeOffset``, ``TimeSpan``) and two
descriptors nobody knows, as Busbar holds them and (``DESCRIBED_BY_PROTON``) as a .NET sender puts them on
the wire.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import proton

from shared.envelope.properties import (
    DATETIME_OFFSET,
    TIMESPAN,
    URI,
    Byte,
    Described,
    Float32,
    Int,
    Long,
    Short,
    Symbol,
    UByte,
    UInt,
    ULong,
    UShort,
)

MOMENT = datetime(2026, 11, 26, 9, 30, 15, 123000, tzinfo=UTC)

SENT: dict[str, Any] = {
    "text": "hello",
    "flag": True,
    "byte": Byte(-7),
    "short": Short(-30000),
    "int": Int(2_000_000_000),
    "long": Long(1_795_749_929_335),
    "small_long": Long(5),
    "ubyte": UByte(250),
    "ushort": UShort(65000),
    "uint": UInt(4_000_000_000),
    "ulong": ULong(2**64 - 1),
    "float": Float32(1.5),
    "double": 2.25,
    "timestamp": MOMENT,
    "uuid": uuid.UUID("6f1c8e52-8a2f-4c55-9d0e-7a3f0c1b2a10"),
    "binary": b"\x00\xff\x10",
    "utf8_binary": b"abc",
    "symbol": Symbol("sym"),
    "null": None,
}
"""Properties of every type a Functions trigger can read, as a .NET sender would send them."""

EXACT = {
    "text": "string",
    "flag": "boolean",
    "byte": "byte",
    "short": "short",
    "int": "int",
    "long": "long",
    "small_long": "long",
    "ubyte": "ubyte",
    "ushort": "ushort",
    "uint": "uint",
    "ulong": "ulong",
    "float": "float",
    "double": "double",
    "timestamp": "timestamp",
    "uuid": "uuid",
    "binary": "binary",
    "utf8_binary": "binary",
    "symbol": "symbol",
    "null": "null",
}
"""The AMQP type of each of :data:`SENT` on the wire."""

MOMENT_TICKS = 639_312_822_151_234_567
"""``DateTimeOffset.UtcTicks`` of 2026-11-26T09:30:15.1234567+00:00 (100 ns past :data:`MOMENT`'s
milliseconds, which only ticks can say)."""
DURATION_TICKS = 937_845_000_001
"""``TimeSpan.Ticks`` of 1 day 2:03:04.5000001."""
CUSTOM_CODE = 0x0000_4689_0000_0001
"""A ulong descriptor nobody knows (domain 0x4689, code 1)."""

DESCRIBED: dict[str, Any] = {
    "uri": Described(URI, "https://example.com/orders/A-1?tenant=acme"),
    "offset": Described(DATETIME_OFFSET, Long(MOMENT_TICKS)),
    "duration": Described(TIMESPAN, Long(DURATION_TICKS)),
    "custom_symbol": Described("example:grade", Symbol("gold")),
    "custom_code": Described(CUSTOM_CODE, UInt(7)),
}
"""Described application properties, as Busbar holds them (:class:`Described`)."""

DESCRIBED_BY_PROTON: dict[str, Any] = {
    "uri": proton.Described(proton.symbol(URI), "https://example.com/orders/A-1?tenant=acme"),
    "offset": proton.Described(proton.symbol(DATETIME_OFFSET), MOMENT_TICKS),  # proton's int: a long
    "duration": proton.Described(proton.symbol(TIMESPAN), DURATION_TICKS),
    "custom_symbol": proton.Described(proton.symbol("example:grade"), proton.symbol("gold")),
    "custom_code": proton.Described(proton.ulong(CUSTOM_CODE), proton.uint(7)),
}
"""The same, as a .NET sender writes them (Microsoft.Azure.Amqp: ``DescribedType(AmqpSymbol, value)``)."""

DESCRIBED_EXACT = {
    "uri": "described(symbol com.microsoft:uri, string)",
    "offset": "described(symbol com.microsoft:datetime-offset, long)",
    "duration": "described(symbol com.microsoft:timespan, long)",
    "custom_symbol": "described(symbol example:grade, symbol)",
    "custom_code": f"described(ulong {CUSTOM_CODE}, uint)",
}
"""The wire type of each of :data:`DESCRIBED`: descriptor (type and value) and the described value's type."""

_PROTON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (proton.byte, "byte"),
    (proton.short, "short"),
    (proton.int32, "int"),
    (proton.ubyte, "ubyte"),
    (proton.ushort, "ushort"),
    (proton.uint, "uint"),
    (proton.ulong, "ulong"),
    (proton.timestamp, "timestamp"),
    (int, "long"),  # proton's plain int is an AMQP long
    (proton.float32, "float"),
    (float, "double"),
    (proton.decimal128, "decimal128"),
    (proton.char, "char"),
    (proton.symbol, "symbol"),
    (str, "string"),
    (bytes, "binary"),
    (memoryview, "binary"),
    (uuid.UUID, "uuid"),
    (type(None), "null"),
)


def wire_type(value: Any) -> str:
    """The AMQP type of a value proton decoded (a described value: ``described(<descriptor's type and
    value>, <described value's type>)``)."""
    if isinstance(value, proton.Described):
        descriptor: Any = value.descriptor
        text = str(descriptor) if isinstance(descriptor, str) else str(int(descriptor))
        return f"described({wire_type(descriptor)} {text}, {wire_type(value.value)})"
    for python_type, name in _PROTON_TYPES:
        if isinstance(value, python_type):
            return name
    raise AssertionError(f"no AMQP type known for {value!r}")


def decode_section(raw: bytes) -> dict[str, Any]:
    """An encoded application-properties section, decoded by proton (values keep proton's typed classes)."""
    data = proton.Data()
    data.decode(raw)
    data.rewind()
    data.next()
    described = data.get_object()
    assert described is not None
    return {str(key): value for key, value in described.value.items()}


def stored_properties(emulator: Any, queue: str) -> list[dict[str, Any]]:
    """The application properties of every message in the emulator's ``queue``, decoded by proton."""

    def read() -> list[bytes]:
        entity = emulator.emulator.namespace.queues[queue.lower()]
        return [stored.parsed.application_properties_raw for stored in entity.main.peek(0, 1000)]

    raws: Any = emulator.call(read)
    return [decode_section(raw) for raw in raws]


def types_of(properties: dict[str, Any], names: Any = None) -> dict[str, str]:
    """The wire type of each property (of ``names`` only, when given)."""
    return {name: wire_type(value) for name, value in properties.items() if names is None or name in names}
