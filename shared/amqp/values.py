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
is kept as plain Python containers of typed values.

The other direction, :func:`proton_value`, gives each value of the model back as the proton class that
encodes its AMQP type (a copy of a received message sends every property with the type it arrived with), a
decimal as decimal128 in IEEE 754-2008 BID, the encoding .NET (Microsoft.Azure.Amqp) and azure-servicebus
(``_pyamqp/_encode.py``, ``encode_decimal128``) write. Pure.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import proton

from shared.amqp.encoding.types import decode_bid
from shared.envelope.properties import (
    AmqpType,
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
    amqp_type,
    check_decimal128,
    timestamp_from_ms,
    timestamp_ms,
)


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


# ------------------------------------------------------------------------------- model -> proton

_DECIMAL128_BIAS = 6176
_COEFFICIENT_BITS = 113  # decimal128's coefficient field; 34 digits always fit below 2**113, no "11" form


def encode_bid(value: Decimal) -> bytes:
    """A finite ``value`` of at most 34 digits as IEEE 754-2008 decimal128 in BID (16 bytes, big-endian):
    sign, 14-bit biased exponent, 113-bit coefficient, as the SDK's ``encode_decimal128`` writes it.
    Raises :class:`PropertyTypeError` for a value decimal128 cannot hold."""
    sign, digits, exponent = check_decimal128(value).as_tuple()
    assert isinstance(exponent, int)  # finite: checked
    coefficient = int("".join(map(str, digits)) or "0")
    bits = (sign << 127) | ((exponent + _DECIMAL128_BIAS) << _COEFFICIENT_BITS) | coefficient
    return bits.to_bytes(16, "big")


_PROTON: dict[AmqpType, Callable[[Any], Any]] = {
    AmqpType.NULL: lambda value: None,
    AmqpType.BOOLEAN: bool,
    AmqpType.BYTE: lambda value: proton.byte(int(value)),
    AmqpType.SHORT: lambda value: proton.short(int(value)),
    AmqpType.INT: lambda value: proton.int32(int(value)),
    AmqpType.LONG: int,  # proton encodes a plain int as an AMQP long
    AmqpType.UBYTE: lambda value: proton.ubyte(int(value)),
    AmqpType.USHORT: lambda value: proton.ushort(int(value)),
    AmqpType.UINT: lambda value: proton.uint(int(value)),
    AmqpType.ULONG: lambda value: proton.ulong(int(value)),
    AmqpType.FLOAT: lambda value: proton.float32(float(value)),
    AmqpType.DOUBLE: float,
    AmqpType.DECIMAL128: lambda value: proton.decimal128(encode_bid(value)),
    AmqpType.CHAR: lambda value: proton.char(str(value)),
    AmqpType.TIMESTAMP: lambda value: proton.timestamp(timestamp_ms(value)),
    AmqpType.UUID: lambda value: value,
    AmqpType.BINARY: bytes,
    AmqpType.STRING: str,
    AmqpType.SYMBOL: lambda value: proton.symbol(str(value)),
}


def proton_value(value: Any) -> Any:
    """One value of Busbar's typed-value model as the proton value that encodes its AMQP type
    (:func:`~shared.envelope.properties.amqp_type`). Raises :class:`PropertyTypeError` for a value that
    cannot be sent (not an AMQP scalar, a decimal out of decimal128's range)."""
    kind = amqp_type(value)
    if kind is AmqpType.DESCRIBED:
        descriptor = value.descriptor
        return proton.Described(
            proton.symbol(descriptor) if isinstance(descriptor, str) else proton.ulong(descriptor),
            proton_value(value.value),
        )
    convert = _PROTON.get(kind)
    if convert is None:  # decimal32/64: the model reads them as Decimal, which is sent as decimal128
        raise PropertyTypeError(f"Busbar sends no AMQP {kind} (value {value!r})")
    return convert(value)


def proton_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """Application properties for a proton ``Message``, each with its AMQP type. Raises
    :class:`PropertyTypeError` naming the first property that cannot be sent, and why."""
    result: dict[str, Any] = {}
    for name, value in properties.items():
        try:
            result[str(name)] = proton_value(value)
        except PropertyTypeError as error:
            raise PropertyTypeError(f"application property {name!r} cannot be sent: {error}") from None
    return result


__all__ = ["encode_bid", "proton_properties", "proton_value", "typed_properties", "typed_value"]
