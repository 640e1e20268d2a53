"""python-qpid-proton's typed AMQP values as Busbar's one typed-value model
(:mod:`shared.envelope.properties`).

proton decodes every AMQP type to a class of its own public API (``proton.byte``, ``proton.ulong``,
``proton.timestamp``, ``proton.char``, ``proton.decimal128``, ``proton.Described``, ...; a plain ``int`` is an
AMQP long, a plain ``float`` a double). Busbar holds each value with the class it sends that type with again:

=========================================  ===================================================
byte, short, long (proton's plain int)     :class:`Byte`, :class:`Short`, :class:`Long`
ubyte, ushort, uint, ulong                 :class:`UByte`, :class:`UShort`, :class:`UInt`, :class:`ULong`
int, double, boolean, string, uuid, null   ``int``, ``float``, ``bool``, ``str``, ``UUID``, ``None``
float                                      :class:`Float32`
timestamp                                  a UTC ``datetime`` (its ``int`` of milliseconds past the years
                                           1..9999, the value intact)
binary                                     :class:`Binary` (``bytes``, told apart from a string)
symbol, char                               :class:`Symbol` (a ``str`` if a peer sent it non-ASCII),
                                           :class:`Char`
decimal32/64/128                           ``Decimal``
described (symbol or ulong descriptor)     :class:`Described` over the value, typed as above
=========================================  ===================================================

A list, a map or an array (never an application property a Service Bus client sends: Azure refuses them)
is kept as plain Python containers of typed values. Pure.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import proton

from shared.envelope.properties import (
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
    timestamp_from_ms,
)
from shared.envelope.sdk_codec import decode_bid


def _timestamp(value: proton.timestamp) -> Any:
    try:
        return timestamp_from_ms(int(value))
    except OverflowError:  # past a datetime's years: the milliseconds, intact
        return int(value)


def _decimal(width: int) -> Callable[[int], Decimal]:
    def decode(bits: int) -> Decimal:
        return decode_bid(int(bits).to_bytes(width, "big"))

    return decode


# Order matters where proton's classes subclass each other's bases (int, str, bytes): the specific first.
_TYPED: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (bool, bool),
    (proton.byte, Byte),
    (proton.short, Short),
    (proton.int32, int),
    (proton.ubyte, UByte),
    (proton.ushort, UShort),
    (proton.uint, UInt),
    (proton.ulong, ULong),
    (proton.timestamp, _timestamp),
    (proton.decimal32, _decimal(4)),
    (proton.decimal64, _decimal(8)),
    (proton.decimal128, lambda raw: decode_bid(bytes(raw))),
    (int, Long),  # proton's plain int is an AMQP long
    (proton.float32, Float32),
    (float, float),
    (proton.char, Char),
    (proton.symbol, lambda text: Symbol(str(text)) if text.isascii() else str(text)),
    (str, str),
    (bytes, lambda raw: Binary(bytes(raw))),
    (memoryview, lambda raw: Binary(bytes(raw))),  # proton hands binaries out as views of a reused buffer
    (uuid.UUID, lambda value: value),
)


def typed_value(value: Any) -> Any:
    """One value proton decoded, as Busbar's typed-value model holds it."""
    if value is None:
        return None
    if isinstance(value, proton.Described):
        return _described(value)
    if isinstance(value, dict):
        return {typed_value(key): typed_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [typed_value(item) for item in value]
    if isinstance(value, proton.Array):
        return [typed_value(item) for item in value.elements]
    for kind, convert in _TYPED:
        if isinstance(value, kind):
            return convert(value)
    raise PropertyTypeError(f"an AMQP value Busbar has no model for: {type(value).__name__} {value!r}")


def _described(value: proton.Described) -> Any:
    descriptor = value.descriptor
    inner = typed_value(value.value)
    if isinstance(descriptor, proton.symbol | proton.ulong):
        try:
            return Described(str(descriptor) if isinstance(descriptor, str) else int(descriptor), inner)
        except PropertyTypeError:  # a list or a map described: the value it describes
            pass
    return inner


def typed_properties(properties: dict[Any, Any] | None) -> dict[str, Any]:
    """A message's application properties (proton's) with ``str`` keys and Busbar's typed values."""
    return {str(name): typed_value(value) for name, value in (properties or {}).items()}


__all__ = ["typed_properties", "typed_value"]
