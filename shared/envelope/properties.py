"""Application property values with their AMQP types: what Busbar reads, archives and sends again.

An application property is an AMQP scalar. Python has one ``int`` for AMQP's eight integer types, one
``float`` for ``float`` and ``double``, one ``str`` for ``string``, ``symbol`` and ``char``, so a value
whose AMQP type is not the default for its Python type is held as one of the subclasses below
(:class:`Long`, :class:`UInt`, :class:`Float32`, :class:`Char`, ...). They *are* ints, floats and strings,
so code that only reads a property's value (dispatch, routing, the console) does not care; the copy
Busbar sends (:mod:`shared.envelope.sdk`) and the archive (:mod:`shared.archive.properties`) read the type.

The default AMQP type of each plain Python value (:func:`amqp_type`):

=================  ===========================================================================
``None``           null
``bool``           boolean
``int``            int when it fits 32 bits, else long, else ulong (azure-servicebus alone decodes
                   every integer type *and* timestamp to a plain ``int``; Busbar's readers get the
                   types below back: :mod:`shared.amqp.values`,
                   :mod:`shared.amqp.encoding.application_properties`)
``float``          double
``str``            string
``bytes``          binary (:class:`Binary` too: a binary as Busbar's receivers decode it)
``datetime``       timestamp (milliseconds; a naive value is taken as UTC)
``uuid.UUID``      uuid
``Decimal``        decimal128
=================  ===========================================================================

An AMQP *described* value (a descriptor, then the value it describes) is held as :class:`Described`, whose
value is one of the above. The .NET Service Bus SDKs send three .NET types that way (Microsoft, "AMQP 1.0 in
Service Bus: .NET type mapping"): ``Uri`` (:data:`URI` over a string), ``DateTimeOffset``
(:data:`DATETIME_OFFSET` over a long of UTC ticks) and ``TimeSpan`` (:data:`TIMESPAN` over a long of ticks);
any other descriptor is kept the same way.

Busbar's own stamps have a fixed type (:data:`KNOWN_TYPES`): a Functions trigger's message (decoded with
uamqp) and an archive row written before types were recorded hand ``busbar.redrive.at`` back as an ``int``
of epoch milliseconds, and :func:`with_known_types` makes it a timestamp again. Pure.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any


class AmqpType(StrEnum):
    """The AMQP 1.0 primitive types an application property can have (AMQP 1.0 part 1, 1.6)."""

    NULL = "null"
    BOOLEAN = "boolean"
    UBYTE = "ubyte"
    USHORT = "ushort"
    UINT = "uint"
    ULONG = "ulong"
    BYTE = "byte"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    FLOAT = "float"
    DOUBLE = "double"
    DECIMAL32 = "decimal32"
    DECIMAL64 = "decimal64"
    DECIMAL128 = "decimal128"
    CHAR = "char"
    TIMESTAMP = "timestamp"
    UUID = "uuid"
    BINARY = "binary"
    STRING = "string"
    SYMBOL = "symbol"
    DESCRIBED = "described"  # not a primitive type: a descriptor and a value of one of the types above


class PropertyTypeError(ValueError):
    """A property value cannot be held by, or sent as, the AMQP type it is given."""


class TypedInt(int):
    """An integer whose AMQP type is not the default one (:attr:`amqp` says which)."""

    __slots__ = ()
    amqp: AmqpType = AmqpType.INT
    low: int = -(2**31)
    high: int = 2**31 - 1

    def __new__(cls, value: int) -> TypedInt:
        number = int(value)
        if not cls.low <= number <= cls.high:
            raise PropertyTypeError(
                f"{number} is outside the range of an AMQP {cls.amqp} ({cls.low}..{cls.high})"
            )
        return super().__new__(cls, number)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"

    def __str__(self) -> str:  # the number, as for any int (int's str() would give the repr above)
        return int.__repr__(self)


class Byte(TypedInt):
    __slots__ = ()
    amqp, low, high = AmqpType.BYTE, -(2**7), 2**7 - 1


class Short(TypedInt):
    __slots__ = ()
    amqp, low, high = AmqpType.SHORT, -(2**15), 2**15 - 1


class Int(TypedInt):
    __slots__ = ()
    amqp, low, high = AmqpType.INT, -(2**31), 2**31 - 1


class Long(TypedInt):
    __slots__ = ()
    amqp, low, high = AmqpType.LONG, -(2**63), 2**63 - 1


class UByte(TypedInt):
    __slots__ = ()
    amqp, low, high = AmqpType.UBYTE, 0, 2**8 - 1


class UShort(TypedInt):
    __slots__ = ()
    amqp, low, high = AmqpType.USHORT, 0, 2**16 - 1


class UInt(TypedInt):
    __slots__ = ()
    amqp, low, high = AmqpType.UINT, 0, 2**32 - 1


class ULong(TypedInt):
    __slots__ = ()
    amqp, low, high = AmqpType.ULONG, 0, 2**64 - 1


class Float32(float):
    """An AMQP ``float`` (IEEE 754 binary32); a plain ``float`` is a ``double``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float32({float(self)!r})"

    def __str__(self) -> str:
        return float.__repr__(self)


class Char(str):
    """An AMQP ``char``: one Unicode code point (.NET ``char``)."""

    __slots__ = ()

    def __new__(cls, value: str) -> Char:
        if len(value) != 1:
            raise PropertyTypeError(f"an AMQP char is one character, got {value!r}")
        return super().__new__(cls, value)


class Binary(bytes):
    """An AMQP ``binary`` as Busbar's readers decode it (:mod:`shared.amqp.values`,
    :mod:`shared.amqp.encoding.application_properties`).

    azure-servicebus hands back an AMQP string as ``bytes`` as well (and reads its own strings, such as
    ``DeadLetterReason``, that way), so a received binary is marked to be told apart from a received string.
    Anywhere else a plain ``bytes`` is a binary too."""

    __slots__ = ()


class Symbol(str):
    """An AMQP ``symbol`` (ASCII)."""

    __slots__ = ()

    def __new__(cls, value: str) -> Symbol:
        if not value.isascii():
            raise PropertyTypeError(f"an AMQP symbol is ASCII, got {value!r}")
        return super().__new__(cls, value)

    @classmethod
    def as_sent(cls, value: str) -> Symbol:
        """A symbol as a peer sent it, ASCII or not: the emulator's decoder keeps what arrived (an SDK that
        sends a non-ASCII content type as a symbol) rather than failing the whole transfer over it."""
        return str.__new__(cls, value)


TYPED_INTS: dict[AmqpType, type[TypedInt]] = {
    cls.amqp: cls for cls in (Byte, Short, Int, Long, UByte, UShort, UInt, ULong)
}
"""The integer wrapper of each AMQP integer type."""

URI = "com.microsoft:uri"
"""The descriptor of a .NET ``Uri`` (over a string: ``Uri.AbsoluteUri``)."""
DATETIME_OFFSET = "com.microsoft:datetime-offset"
"""The descriptor of a .NET ``DateTimeOffset`` (over a long: ``DateTimeOffset.UtcTicks``)."""
TIMESPAN = "com.microsoft:timespan"
"""The descriptor of a .NET ``TimeSpan`` (over a long: ``TimeSpan.Ticks``)."""

_TICKS_PER_SECOND = 10_000_000
_DOTNET_EPOCH = datetime(1, 1, 1, tzinfo=UTC)  # tick 0 of a .NET DateTime


@dataclass(frozen=True, slots=True)
class Described:
    """An AMQP described value: ``descriptor`` (a symbol, given as ``str``, or a ulong code, given as
    ``int``) and the application-property ``value`` it describes, sent again with both types.

    It is no ``int`` or ``str``: code that reads a property gets this object, whose ``str()`` is readable
    (the text a .NET consumer's value has for :data:`URI`, :data:`DATETIME_OFFSET` and :data:`TIMESPAN`,
    as the Functions host's Json.NET writes it; the described value's own text for any other descriptor)."""

    descriptor: str | int
    value: PropertyValue

    def __post_init__(self) -> None:
        descriptor = self.descriptor
        try:
            if isinstance(descriptor, str):
                object.__setattr__(self, "descriptor", str(Symbol(descriptor)))
            elif isinstance(descriptor, int) and not isinstance(descriptor, bool):
                object.__setattr__(self, "descriptor", int(ULong(descriptor)))
            else:
                raise PropertyTypeError(f"got a {type(descriptor).__name__}")
        except PropertyTypeError as error:
            raise PropertyTypeError(
                f"an AMQP descriptor is a symbol (ASCII str) or a ulong code, {descriptor!r} is not: {error}"
            ) from None
        try:
            amqp_type(self.value)
        except PropertyTypeError as error:
            raise PropertyTypeError(f"a described value must be a scalar: {error}") from None

    def __str__(self) -> str:
        value = self.value
        ticks = int(value) if isinstance(value, int) and not isinstance(value, bool) else None
        if self.descriptor == DATETIME_OFFSET and ticks is not None:
            with contextlib.suppress(OverflowError):  # past a datetime's years: the ticks themselves
                return datetime_offset_text(ticks)
        if self.descriptor == TIMESPAN and ticks is not None:
            return timespan_text(ticks)
        return str(value)  # a Uri's text, or the value any other descriptor describes


def as_text(value: object) -> str | None:
    """A system or application property as text: None stays None, bytes (as the SDK hands strings back,
    or a view of them, as proton hands binaries out) are decoded as UTF-8, anything else is ``str()``-ed."""
    if value is None:
        return None
    if isinstance(value, bytes | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def datetime_offset_text(utc_ticks: int) -> str:
    """A .NET ``DateTimeOffset`` (UTC ticks, offset zero, as the SDK decodes it) as Json.NET writes it:
    ISO 8601, up to seven fraction digits without trailing zeros, ``+00:00``. Raises ``OverflowError``
    outside the years 1..9999."""
    seconds, ticks = divmod(utc_ticks, _TICKS_PER_SECOND)
    if seconds < 0:
        raise OverflowError(f"{utc_ticks} ticks is before the year 1")
    moment = _DOTNET_EPOCH + timedelta(seconds=seconds)
    text = f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}"
    fraction = f"{ticks:07d}".rstrip("0")
    return f"{text}.{fraction}+00:00" if fraction else f"{text}+00:00"


def timespan_text(ticks: int) -> str:
    """A .NET ``TimeSpan`` (ticks) as ``TimeSpan.ToString()`` (and Json.NET) writes it:
    ``[-][d.]hh:mm:ss[.fffffff]``."""
    seconds, fraction = divmod(abs(ticks), _TICKS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    text = f"{hour:02d}:{minute:02d}:{second:02d}"
    if days:
        text = f"{days}.{text}"
    if fraction:
        text = f"{text}.{fraction:07d}"
    return f"-{text}" if ticks < 0 else text


PropertyValue = str | bool | int | float | bytes | datetime | uuid.UUID | Decimal | Described | None
"""A value an application property can hold (the subclasses above included)."""


def default_int_type(value: int) -> AmqpType:
    """The AMQP type a plain ``int`` of unknown type is sent as: int, else long, else ulong."""
    if Int.low <= value <= Int.high:
        return AmqpType.INT
    if Long.low <= value <= Long.high:
        return AmqpType.LONG
    if 0 <= value <= ULong.high:
        return AmqpType.ULONG
    raise PropertyTypeError(f"{value} does not fit any AMQP integer type (at most 64 bits)")


def amqp_type(value: object) -> AmqpType:
    """The AMQP type ``value`` is sent and archived as; raises :class:`PropertyTypeError` for a value no
    application property can hold."""
    # Order matters: bool is an int, the wrappers are ints, floats and strings.
    if value is None:
        return AmqpType.NULL
    if isinstance(value, bool):
        return AmqpType.BOOLEAN
    if isinstance(value, TypedInt):
        return value.amqp
    if isinstance(value, int):
        return default_int_type(value)
    if isinstance(value, Float32):
        return AmqpType.FLOAT
    if isinstance(value, float):
        return AmqpType.DOUBLE
    if isinstance(value, Char):
        return AmqpType.CHAR
    if isinstance(value, Symbol):
        return AmqpType.SYMBOL
    if isinstance(value, str):
        return AmqpType.STRING
    if isinstance(value, bytes | bytearray | memoryview):
        return AmqpType.BINARY
    if isinstance(value, datetime):
        return AmqpType.TIMESTAMP
    if isinstance(value, uuid.UUID):
        return AmqpType.UUID
    if isinstance(value, Decimal):
        return AmqpType.DECIMAL128
    if isinstance(value, Described):
        return AmqpType.DESCRIBED
    raise PropertyTypeError(f"a value of type {type(value).__name__} is not an AMQP scalar: {value!r}")


def check_decimal128(value: Decimal) -> Decimal:
    """``value`` if IEEE 754 decimal128 can hold it exactly (finite, at most 34 digits, exponent in range)."""
    if not value.is_finite():
        raise PropertyTypeError(f"{value} is not a finite decimal (Busbar sends only finite decimal128)")
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    if len(digits) > 34 or not -6176 <= exponent <= 6111:
        raise PropertyTypeError(f"{value} does not fit an AMQP decimal128 (34 digits, exponent -6176..6111)")
    return value


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def timestamp_from_ms(milliseconds: int) -> datetime:
    """An AMQP timestamp (epoch milliseconds) as a timezone-aware ``datetime``, exactly; raises
    ``OverflowError`` outside the years 1..9999 a ``datetime`` holds (every .NET ``DateTime`` is inside)."""
    return _EPOCH + timedelta(milliseconds=milliseconds)


def timestamp_ms(moment: datetime) -> int:
    """A ``datetime`` as AMQP timestamp milliseconds (a naive value is taken as UTC)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    delta = aware - _EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


KNOWN_TYPES: dict[str, AmqpType] = {
    "busbar.redrive.at": AmqpType.TIMESTAMP,
    "busbar.redrive.count": AmqpType.INT,
    "busbar.redrive.sequence_number": AmqpType.LONG,
}
"""Busbar's own stamps and their AMQP types: where they arrive as plain ints, Busbar re-types them."""


def with_known_types(properties: Mapping[str, Any]) -> dict[str, Any]:
    """``properties`` with Busbar's own stamps (:data:`KNOWN_TYPES`) given back their AMQP type when they
    arrive as plain ints (from a Functions trigger, or from an archive row written before types were
    recorded)."""
    result = dict(properties)
    for name, kind in KNOWN_TYPES.items():
        value = result.get(name)
        if not isinstance(value, int) or isinstance(value, bool | TypedInt):
            continue
        # Out of range: not the stamp Busbar wrote, so the value is kept as it came.
        with contextlib.suppress(PropertyTypeError, ValueError, OverflowError):
            result[name] = timestamp_from_ms(value) if kind is AmqpType.TIMESTAMP else TYPED_INTS[kind](value)
    return result
