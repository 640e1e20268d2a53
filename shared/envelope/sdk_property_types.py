"""Reading a message's AMQP encoding for its application properties, each with its AMQP type, so a copy
Busbar sends again (the router's bridge, re-drive, archive and replay) carries the types the original had.

Its users are the paths that hold a message's bytes but no typed values: the trigger edge
(:mod:`functions.trigger_properties`, the bytes of the message the binding extension decoded, as uamqp
re-encodes it) and devhost's host side (``devhost.message_reading``, the bytes it keeps for the worker).
Busbar's own receivers (the re-drive's, the console's, the hold queue's: :mod:`shared.amqp`) read typed
values from python-qpid-proton instead and need nothing here; no azure-servicebus receiver is hooked any more
(docs/architecture.md, "The seam to the AMQP wire").

azure-servicebus 7.15's AMQP stack (``_pyamqp``) decodes byte, short, int, long and their unsigned kinds, and
a timestamp, all to a plain ``int``, a float to the same ``float`` as a double, and a string, a symbol and a
binary all to ``bytes``. A copy made from that cannot know that a .NET ``long`` 5 was a long (it goes out as
an AMQP int, and a .NET consumer's ``(long)props["x"]`` throws) or that a ``DateTime`` was a timestamp.
:func:`application_properties_of` walks the sections with the SDK's decoders (``_pyamqp/_decode.py``,
``_DECODE_BY_CONSTRUCTOR``) and gives each application property as the class
:mod:`shared.envelope.properties` sends with that type again:

=========================================  ===================================================
byte, short, long                          :class:`Byte`, :class:`Short`, :class:`Long`
ubyte, ushort, uint, ulong                 :class:`UByte`, :class:`UShort`, :class:`UInt`, :class:`ULong`
int, double, boolean, uuid, null           ``int``, ``float``, ``bool``, ``UUID``, ``None`` (as the SDK)
float                                      :class:`Float32`
timestamp                                  a UTC ``datetime`` (the SDK's ``int`` past the years 1..9999)
string                                     ``bytes`` (as the SDK: it reads ``DeadLetterReason`` so)
binary                                     :class:`Binary` (``bytes``, told apart from a string)
symbol                                     :class:`Symbol` (the SDK's ``bytes`` if it is not ASCII)
char, decimal32/64/128                     :class:`Char`, ``Decimal`` (:mod:`shared.envelope.sdk_codec`)
described (symbol or ulong descriptor)     :class:`Described`: the descriptor and the value it
                                           describes, typed as above (a string as ``str``)
=========================================  ===================================================

The SDK itself decodes a described value to the value it describes and keeps the descriptor only as an
attribute of its ``Described*`` classes (``_pyamqp/_decode.py``: ``_decode_described``), so a copy made from
it would go out without the descriptor: a .NET ``DateTimeOffset`` (``com.microsoft:datetime-offset`` over a
long) as a plain long. A described value whose descriptor is neither a symbol nor a ulong, or that describes
a list or a map, is kept as the SDK decodes it (a copy then goes out as Busbar sends that value, or is
refused).

A timestamp is a ``datetime``, not an ``int`` subclass: a ``datetime`` is what Busbar already sends and
archives as a timestamp (``{"$datetime": ...}``, its own ``busbar.redrive.at``), what a .NET consumer reads
(``DateTime``) and what the console shows; every .NET ``DateTime`` fits and its milliseconds come back
exactly. Typed ints and floats *are* ints and floats (==, hash, arithmetic, ``json.dumps``; only
``in range(...)`` loses its fast path).

It reads private names of the SDK's decoder (listed and justified in tests/test_no_private_internals.py);
tests/shared/envelope/test_sdk_property_types.py pins the readings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from azure.servicebus._pyamqp import _decode

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

_APPLICATION_PROPERTIES = 0x74  # the section's descriptor code (AMQP 1.0 part 3, 3.2.5)
_MAP8, _MAP32 = 0xC1, 0xD1
_DESCRIBED, _SMALLULONG = 0x00, 0x53
_BINARY8, _BINARY32 = 0xA0, 0xB0


def _timestamp(milliseconds: int) -> Any:
    try:
        return timestamp_from_ms(milliseconds)
    except OverflowError:  # past a datetime's years: the SDK's int, the value intact
        return milliseconds


def _symbol(raw: bytes) -> Any:
    return Symbol(raw.decode("ascii")) if raw.isascii() else raw


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
    _BINARY8: Binary,
    _BINARY32: Binary,
    0xA3: _symbol,
    0xB3: _symbol,
}
"""How the SDK's decoding of each scalar constructor is typed (other constructors are kept as decoded)."""


def _typed_value(buffer: memoryview) -> tuple[memoryview, Any]:
    code = buffer[0]
    if code == _DESCRIBED:
        return _described(buffer)
    rest, value = _decode._DECODE_BY_CONSTRUCTOR[code](buffer[1:], 0)
    typing = _TYPING.get(code)
    return rest, (value if typing is None else typing(value))


def _described(buffer: memoryview) -> tuple[memoryview, Any]:
    rest, descriptor = _typed_value(buffer[1:])
    rest, value = _typed_value(rest)
    if isinstance(descriptor, Symbol | ULong):
        try:
            if type(value) is bytes:  # a string, as the SDK decodes one (a binary is Binary)
                value = value.decode("utf-8")
            return rest, Described(descriptor, value)
        except (PropertyTypeError, UnicodeDecodeError):  # a list or a map described, say: the SDK's reading
            pass
    sdk_rest, sdk_value = _decode._DECODE_BY_CONSTRUCTOR[_DESCRIBED](buffer[1:], 0)
    return sdk_rest, sdk_value


def decode_application_properties(section: memoryview) -> dict[Any, Any]:
    """An application-properties map (``section`` starts at its map constructor) with typed values; keys
    as the SDK decodes them (``bytes``)."""
    if section[0] == _MAP8:
        count, buffer = section[2], section[3:]
    elif section[0] == _MAP32:
        count, buffer = int.from_bytes(section[5:9], "big"), section[9:]
    else:
        raise ValueError(f"application properties are not a map (constructor {section[0]:#x})")
    result: dict[Any, Any] = {}
    for _ in range(count // 2):
        buffer, key = _decode._DECODE_BY_CONSTRUCTOR[buffer[0]](buffer[1:], 0)
        buffer, result[key] = _typed_value(buffer)
    return result


def _section_end(buffer: memoryview) -> memoryview:
    # A section is 0x00, a descriptor (the SDK reads the code at [2]), then its value from [3].
    if buffer[3] in (_BINARY8, _BINARY32):  # a data section: skipped by its length, not copied
        size, start = (buffer[4], 5) if buffer[3] == _BINARY8 else (int.from_bytes(buffer[4:8], "big"), 8)
        return buffer[start + size :]
    rest: memoryview = _decode._DECODE_BY_CONSTRUCTOR[buffer[3]](buffer[4:])[0]
    return rest


def _application_properties_section(buffer: memoryview) -> memoryview | None:
    """The application-properties map of a message's sections (``None`` when it has none), walked as the
    SDK's decode_payload walks them: the last such section counts.

    Tolerant of uamqp's re-encoding of a message it decoded (:func:`application_properties_of`): it writes
    the message annotations as a bare map (no section descriptor), stepped over as one value, and the
    application properties described twice, read through."""
    found = None
    while buffer:
        if buffer[0] == _DESCRIBED and buffer[1] == _SMALLULONG:
            if buffer[2] == _APPLICATION_PROPERTIES:
                found = buffer[3:]
            buffer = _section_end(buffer)
        else:
            buffer = _decode._DECODE_BY_CONSTRUCTOR[buffer[0]](buffer[1:])[0]
    while found is not None and found[:3] == bytes((_DESCRIBED, _SMALLULONG, _APPLICATION_PROPERTIES)):
        found = found[3:]
    return found


def application_properties_of(payload: bytes) -> dict[Any, Any] | None:
    """The application properties of a message's AMQP encoding ``payload``, typed (``None`` when it has
    none); uamqp's re-encoding of a message is read too (see :func:`_application_properties_section`)."""
    section = _application_properties_section(memoryview(payload))
    return None if section is None else decode_application_properties(section)


__all__ = ["application_properties_of", "decode_application_properties"]
