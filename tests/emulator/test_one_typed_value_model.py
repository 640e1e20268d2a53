"""The emulator's codec and Busbar's envelope hold an AMQP type with the same classes (issue 39, item 2): a
property value the app types (:mod:`shared.envelope.properties`) is written by the emulator's codec with
that AMQP type, and what the codec decodes with a type of its own (char, symbol) is the app's class."""

from __future__ import annotations

import pytest

from shared.amqp.encoding.codec import decode_value, encode
from shared.envelope.properties import (
    AmqpType,
    Byte,
    Char,
    Float32,
    Int,
    Long,
    PropertyTypeError,
    Short,
    Symbol,
    UByte,
    UInt,
    ULong,
    UShort,
    amqp_type,
)

pytestmark = pytest.mark.timeout(30)

# AMQP 1.0 part 1, 1.6: each type's fixed-width constructor (small forms for uint/ulong, as the codec writes).
WIRE = [
    (Byte(-2), bytes([0x51, 0xFE])),
    (Short(-2), bytes([0x61, 0xFF, 0xFE])),
    (Int(7), bytes([0x71, 0, 0, 0, 7])),
    (Long(7), bytes([0x81, 0, 0, 0, 0, 0, 0, 0, 7])),
    (UByte(7), bytes([0x50, 7])),
    (UShort(7), bytes([0x60, 0, 7])),
    (UInt(7), bytes([0x52, 7])),
    (ULong(2**64 - 1), bytes([0x80]) + b"\xff" * 8),
    (Float32(1.5), bytes([0x72, 0x3F, 0xC0, 0, 0])),
    (Char("A"), bytes([0x73, 0, 0, 0, 0x41])),
    (Symbol("x-opt"), bytes([0xA3, 5]) + b"x-opt"),
]


@pytest.mark.parametrize(("value", "wire"), WIRE, ids=[type(value).__name__ for value, _ in WIRE])
def test_a_value_the_app_types_is_written_by_the_emulators_codec_with_that_amqp_type(
    value: object, wire: bytes
) -> None:
    assert encode(value) == wire


def test_the_codecs_own_typed_readings_are_the_apps_classes() -> None:
    char, _ = decode_value(encode(Char("Ω")), 0)
    symbol, _ = decode_value(encode(Symbol("com.microsoft:uri")), 0)

    assert type(char) is Char and amqp_type(char) is AmqpType.CHAR
    assert type(symbol) is Symbol and amqp_type(symbol) is AmqpType.SYMBOL


def test_a_non_ascii_symbol_a_peer_sends_is_kept_as_sent_where_the_app_refuses_to_build_one() -> None:
    # AMQP's symbol is ASCII; an SDK may still send a non-ASCII content type as one, and the broker keeps
    # what arrived rather than failing the transfer. Busbar itself never builds such a symbol.
    sent = bytes([0xA3, 2]) + "é".encode()

    value, _ = decode_value(sent, 0)

    assert value == "é" and isinstance(value, Symbol)
    with pytest.raises(PropertyTypeError, match="ASCII"):
        Symbol("é")
