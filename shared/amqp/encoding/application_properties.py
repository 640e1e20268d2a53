"""The application properties of a message's AMQP encoding, each value as the class Busbar sends with its AMQP
type again: what the trigger edge (:mod:`functions.trigger_properties`) and devhost's host side read from the
bytes the Functions host hands over, on Busbar's own codec (no SDK's private decoder).

=========================================  ===================================================
byte, short, long                          :class:`Byte`, :class:`Short`, :class:`Long`
ubyte, ushort, uint, ulong                 :class:`UByte`, :class:`UShort`, :class:`UInt`, :class:`ULong`
int, double, boolean, uuid, null           ``int``, ``float``, ``bool``, ``UUID``, ``None``
float                                      :class:`Float32`
timestamp                                  a UTC ``datetime`` (an ``int`` of milliseconds past the
                                           years 1..9999)
string                                     ``bytes`` (as azure-servicebus hands a string back)
binary                                     :class:`Binary` (``bytes``, told apart from a string)
symbol                                     :class:`Symbol` (``bytes`` if it is not ASCII)
char, decimal32/64/128                     :class:`Char`, ``Decimal``
described (symbol or ulong descriptor)     :class:`~shared.envelope.properties.Described`: the
                                           descriptor and the value it describes, typed as above
                                           (a string as ``str``)
=========================================  ===================================================

Keys are read as azure-servicebus reads them (a string or symbol key as ``bytes``), so a caller normalises
either reading alike (:func:`shared.envelope.sdk.normalise_received`). A described value Busbar's property
model cannot hold (a descriptor neither a symbol nor a ulong, a list or map described, a described string
that is not UTF-8) is the codec's own :class:`~shared.amqp.encoding.types.Described`: a copy of it is
refused by name, and devhost leaves it out as the host's .NET SDK does. A list, map or array value (not an
application property AMQP allows) is read as azure-servicebus reads one: plain values, strings as ``bytes``.

Tolerant of uamqp's re-encoding of a message it decoded (the trigger edge's bytes): it writes the message
annotations as a bare map (no section descriptor), stepped over as one value, and the application
properties described twice, read through. Bytes it cannot read raise
:class:`~shared.amqp.encoding.codec.DecodeError` (a ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.amqp.encoding.codec import DecodeError, decode_value, skip_value
from shared.amqp.encoding.sections import APPLICATION_PROPERTIES
from shared.amqp.encoding.types import Array, Char, Timestamp
from shared.amqp.encoding.types import Decimal as EncodedDecimal
from shared.amqp.encoding.types import Described as AnyDescribed
from shared.envelope.properties import (
    Binary,
    Byte,
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
    timestamp_from_ms,
)

_DESCRIBED, _SMALLULONG = 0x00, 0x53
_SECTION = bytes((_DESCRIBED, _SMALLULONG, APPLICATION_PROPERTIES))
_MAP8, _MAP32 = 0xC1, 0xD1
# Variable-width constructors and the width of their size: read as raw bytes here, not through the codec,
# whose string and symbol decoding would refuse what azure-servicebus reads (bytes that are not UTF-8).
_BINARY, _STRING, _SYMBOL = {0xA0: 1, 0xB0: 4}, {0xA1: 1, 0xB1: 4}, {0xA3: 1, 0xB3: 4}


def _timestamp(milliseconds: Any) -> Any:
    try:
        return timestamp_from_ms(int(milliseconds))
    except OverflowError:  # past a datetime's years: the milliseconds, the value intact
        return int(milliseconds)


_TYPING: dict[int, Callable[[Any], Any]] = {
    0x51: Byte,
    0x61: Short,
    0x81: Long,
    0x55: Long,  # smalllong
    0x50: UByte,
    0x60: UShort,
    0x70: UInt,
    0x52: UInt,  # smalluint
    0x43: UInt,  # uint0
    0x80: ULong,
    0x53: ULong,  # smallulong
    0x44: ULong,  # ulong0
    0x72: Float32,
    0x83: _timestamp,
}
"""The class each fixed-width constructor's value is given (others are kept as :func:`_plain` reads them)."""


def _raw(buf: memoryview, pos: int, size_width: int) -> tuple[bytes, int]:
    start = pos + 1 + size_width
    if start > len(buf):
        raise DecodeError(f"truncated value at offset {pos}")
    end = start + int.from_bytes(buf[pos + 1 : start], "big")
    if end > len(buf):
        raise DecodeError(f"truncated value at offset {pos}: declares {end - start} bytes")
    return bytes(buf[start:end]), end


def _plain(value: Any) -> Any:
    """A value the codec decoded, as azure-servicebus decodes it (strings and symbols as ``bytes``, a
    timestamp as milliseconds, a described value as the value it describes)."""
    if isinstance(value, Char):
        return value
    if isinstance(value, str):  # a string or a symbol
        return value.encode("utf-8")
    if isinstance(value, Timestamp):
        return int(value)
    if isinstance(value, EncodedDecimal):
        return value.value()
    if isinstance(value, AnyDescribed):
        return _plain(value.value)
    if isinstance(value, Array):
        return [_plain(item) for item in value.items]
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    return value


def _typed_value(buf: memoryview, pos: int) -> tuple[Any, int]:
    code = buf[pos]
    if code == _DESCRIBED:
        return _described(buf, pos)
    if code in _BINARY:
        raw, end = _raw(buf, pos, _BINARY[code])
        return Binary(raw), end
    if code in _STRING:
        return _raw(buf, pos, _STRING[code])
    if code in _SYMBOL:
        raw, end = _raw(buf, pos, _SYMBOL[code])
        return (Symbol(raw.decode("ascii")) if raw.isascii() else raw), end
    value, end = decode_value(buf, pos)
    typing = _TYPING.get(code)
    return (_plain(value) if typing is None else typing(value)), end


def _described(buf: memoryview, pos: int) -> tuple[Any, int]:
    descriptor, value_pos = _typed_value(buf, pos + 1)
    value, end = _typed_value(buf, value_pos)
    if isinstance(descriptor, Symbol | ULong):
        try:
            if type(value) is bytes:  # a string, as read above (a binary is Binary)
                value = value.decode("utf-8")
            return Described(descriptor, value), end
        except (PropertyTypeError, UnicodeDecodeError):  # a list or a map described, say
            pass
    return AnyDescribed(descriptor, value), end


def decode_application_properties(section: bytes | memoryview, pos: int = 0) -> dict[Any, Any]:
    """The application-properties map at ``pos`` of ``section`` (its map constructor, after the section's
    descriptor), values typed as the table above says, keys as azure-servicebus reads them."""
    buf = memoryview(section)
    if pos >= len(buf):
        raise DecodeError(f"truncated input: expected application properties at offset {pos}")
    code = buf[pos]
    if code == _MAP8 and pos + 3 <= len(buf):
        count, pos = buf[pos + 2], pos + 3
    elif code == _MAP32 and pos + 9 <= len(buf):
        count, pos = int.from_bytes(buf[pos + 5 : pos + 9], "big"), pos + 9
    else:
        raise DecodeError(f"application properties at offset {pos} are not a map (constructor {code:#x})")
    result: dict[Any, Any] = {}
    for _ in range(count // 2):
        key, pos = decode_value(buf, pos)
        value, pos = _typed_value(buf, pos)
        try:
            result[_plain(key)] = value
        except TypeError as error:
            raise DecodeError(f"application properties have an unhashable key {key!r}") from error
    return result


def application_properties_section(payload: bytes | memoryview) -> int | None:
    """The offset of the application-properties map in a message's sections (``None`` when it has none);
    the last such section counts, as azure-servicebus reads them. uamqp's re-encoding is read too: a value
    that is not a section (its bare message-annotations map) is stepped over whole, and an
    application-properties section described twice is read through."""
    buf = memoryview(payload)
    found = None
    pos = 0
    while pos < len(buf):
        if buf[pos] == _DESCRIBED and bytes(buf[pos + 1 : pos + 2]) == bytes((_SMALLULONG,)):
            if bytes(buf[pos + 2 : pos + 3]) == bytes((APPLICATION_PROPERTIES,)):
                found = pos + 3
            pos = skip_value(buf, pos + 3)
        else:
            pos = skip_value(buf, pos)
    while found is not None and bytes(buf[found : found + 3]) == _SECTION:
        found += 3
    return found


def application_properties_of(payload: bytes | memoryview) -> dict[Any, Any] | None:
    """The application properties of a message's AMQP encoding ``payload``, typed as the table above says
    (``None`` when it has none)."""
    offset = application_properties_section(payload)
    return None if offset is None else decode_application_properties(payload, offset)


__all__ = ["application_properties_of", "application_properties_section", "decode_application_properties"]
