"""AMQP 1.0 value types that have no exact Python counterpart.

Decoding maps AMQP values onto plain Python values wherever that loses nothing the broker needs
(all integer widths become ``int``, strings ``str``, binaries ``bytes``). The wrappers here carry an
AMQP type through encoding where the peer cares about the exact type: the SDK compares a
``uint`` header field, reads ``symbol`` annotation keys and ``timestamp`` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Symbol(str):
    """An AMQP ``symbol`` (ASCII string used for names and keys)."""

    __slots__ = ()


class UByte(int):
    """An AMQP ``ubyte``."""

    __slots__ = ()


class UShort(int):
    """An AMQP ``ushort``."""

    __slots__ = ()


class UInt(int):
    """An AMQP ``uint``."""

    __slots__ = ()


class ULong(int):
    """An AMQP ``ulong``."""

    __slots__ = ()


class Byte(int):
    """An AMQP ``byte`` (signed 8 bit)."""

    __slots__ = ()


class Short(int):
    """An AMQP ``short`` (signed 16 bit)."""

    __slots__ = ()


class Int(int):
    """An AMQP ``int`` (signed 32 bit)."""

    __slots__ = ()


class Long(int):
    """An AMQP ``long`` (signed 64 bit)."""

    __slots__ = ()


class Timestamp(int):
    """An AMQP ``timestamp``: milliseconds since the Unix epoch."""

    __slots__ = ()


class Float(float):
    """An AMQP ``float`` (32 bit)."""

    __slots__ = ()


class Char(str):
    """An AMQP ``char`` (one UTF-32 code point)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Decimal:
    """An AMQP decimal32/64/128, kept as its raw encoding (the broker never does decimal arithmetic)."""

    width: int
    raw: bytes


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
