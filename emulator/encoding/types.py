"""AMQP 1.0 value types that have no exact Python counterpart.

Decoding maps AMQP values onto plain Python values wherever that loses nothing the broker needs
(all integer widths become ``int``, strings ``str``, binaries ``bytes``). The wrappers carry an AMQP type
through encoding where the peer cares about the exact type: the SDK compares a ``uint`` header field, reads
``symbol`` annotation keys and ``timestamp`` values.

The scalar wrappers (the integer widths, ``float``, ``char``, ``symbol``) are Busbar's one typed-value model,
:mod:`shared.envelope.properties`, which the app's envelope, archive and sends use too (a stdlib-only module
that imports nothing else of Busbar, pinned by tests/test_layers.py). What stays here is the codec's own: a
timestamp as epoch milliseconds, a decimal as its raw encoding, a described value of any kind (a
performative's fields, not only a property's scalar) and an array.
"""

from __future__ import annotations

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
]
