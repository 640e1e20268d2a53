"""AMQP 1.0 value types that have no exact Python counterpart.

Decoding maps AMQP values onto plain Python values wherever that loses nothing the broker needs
(all integer widths become ``int``, strings ``str``, binaries ``bytes``). The wrappers carry an AMQP type
through encoding where the peer cares about the exact type: the SDK compares a ``uint`` header field, reads
``symbol`` annotation keys and ``timestamp`` values.

The scalar wrappers (the integer widths, ``float``, ``char``, ``symbol``) are Busbar's one typed-value model,
:mod:`shared.envelope.properties`, which the app's envelope, archive and sends use too (a stdlib-only module
that imports nothing else of Busbar, pinned by tests/test_layers.py). What is defined here is the codec's own:
a timestamp as epoch milliseconds, a decimal as its raw encoding (:func:`decode_bid` reads its value,
:func:`encode_bid128` writes a ``decimal.Decimal``), a
described value of any kind (a performative's fields, not only a property's scalar) and an array.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Any

from shared.envelope.properties import (
    Byte,
    Char,
    Int,
    Long,
    Short,
    Symbol,
    UByte,
    UInt,
    ULong,
    UShort,
)
from shared.envelope.properties import Float32 as Float


class Timestamp(int):
    """An AMQP ``timestamp``: milliseconds since the Unix epoch."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Decimal:
    """An AMQP decimal32/64/128, kept as its raw encoding (the broker never does decimal arithmetic)."""

    width: int
    raw: bytes

    def value(self) -> decimal.Decimal:
        """The number it encodes (:func:`decode_bid`)."""
        return decode_bid(self.raw)


def encode_bid128(value: decimal.Decimal) -> bytes:
    """``value`` as an IEEE 754-2008 decimal128 in BID encoding (what .NET writes for a ``System.Decimal``);
    raises ``ValueError`` for a finite value decimal128 cannot hold exactly (over 34 digits, or an exponent
    outside -6176..6111)."""
    sign, digits, exponent = value.as_tuple()
    if not value.is_finite():  # 11110: infinity, 11111: NaN, after the sign
        return ((sign << 127) | ((0b11111 if value.is_nan() else 0b11110) << 122)).to_bytes(16, "big")
    assert isinstance(exponent, int)
    coefficient = int("".join(map(str, digits)) or "0")
    biased = exponent + 6176
    if coefficient >= 10**34 or not 0 <= biased < 3 << 12:
        raise ValueError(f"{value} does not fit an AMQP decimal128 (34 digits, exponent -6176..6111)")
    return ((sign << 127) | (biased << 113) | coefficient).to_bytes(16, "big")


# IEEE 754-2008 BID layouts by width in bytes: (exponent bits, exponent bias, coefficient digits).
_BID_LAYOUTS = {4: (8, 101, 7), 8: (10, 398, 16), 16: (14, 6176, 34)}


def decode_bid(raw: bytes) -> decimal.Decimal:
    """An IEEE 754-2008 decimal32/64/128 in binary integer decimal (BID) encoding, the encoding .NET
    (Microsoft.Azure.Amqp) and azure-servicebus write, as a ``Decimal``."""
    width = len(raw)
    exponent_bits, bias, digits = _BID_LAYOUTS[width]
    bits = int.from_bytes(raw, "big")
    total = width * 8
    sign = bits >> (total - 1)
    coefficient_bits = total - 1 - exponent_bits
    if (bits >> (total - 3)) & 0b11 != 0b11:
        exponent = (bits >> coefficient_bits) & ((1 << exponent_bits) - 1)
        coefficient = bits & ((1 << coefficient_bits) - 1)
    elif (bits >> (total - 5)) & 0b11 == 0b11:  # 11 11: infinity or NaN
        if (bits >> (total - 6)) & 1:
            return decimal.Decimal("NaN")
        return decimal.Decimal("-Infinity" if sign else "Infinity")
    else:  # 11 then the exponent: the coefficient has an implicit 100 in front of its low bits
        exponent = (bits >> (coefficient_bits - 2)) & ((1 << exponent_bits) - 1)
        coefficient = (0b100 << (coefficient_bits - 2)) | (bits & ((1 << (coefficient_bits - 2)) - 1))
    if coefficient >= 10**digits:
        coefficient = 0  # non-canonical: IEEE 754 reads it as zero
    return decimal.Decimal((sign, tuple(int(d) for d in str(coefficient)), exponent - bias))


@dataclass(frozen=True, slots=True)
class Described:
    """A described value: ``descriptor`` (ulong code or symbol) and the value it describes."""

    descriptor: Any
    value: Any


@dataclass(frozen=True, slots=True)
class Array:
    """An AMQP array: every element has the same type, given by the constructor byte ``code``."""

    code: int
    items: tuple[Any, ...]


__all__ = [
    "Array",
    "Byte",
    "Char",
    "Decimal",
    "Described",
    "Float",
    "Int",
    "Long",
    "Short",
    "Symbol",
    "Timestamp",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
    "decode_bid",
    "encode_bid128",
]
