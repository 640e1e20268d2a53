"""Values in the text forms the Functions host serialises them in (trigger metadata, binding data):
timestamps as ISO-8601 UTC, durations as .NET TimeSpan text, decimals as JSON numbers, a .NET
``DateTimeOffset`` or ``TimeSpan`` given in ticks as Json.NET writes it, anything else JSON-friendly.

Pure; both sides of the worker boundary use it (the host reads message properties into plain values, the
worker encodes trigger metadata from them)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any


def iso(value: datetime) -> str:
    """ISO-8601 in UTC (a naive value is taken as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def timespan(value: timedelta) -> str:
    """.NET TimeSpan text: ``[d.]hh:mm:ss[.fffffff]``."""
    total = int(value.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if value.microseconds:
        text += f".{value.microseconds:06d}0"
    return f"{days}.{text}" if days else text


_TICKS_PER_SECOND = 10_000_000
_DOTNET_EPOCH = datetime(1, 1, 1, tzinfo=UTC)  # tick 0 of a .NET DateTime


def timespan_ticks(ticks: int) -> str:
    """A .NET ``TimeSpan`` of ``ticks`` as Json.NET writes it (``TimeSpan.ToString()``, the constant
    format): ``[-][d.]hh:mm:ss[.fffffff]``."""
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


def datetime_offset_ticks(utc_ticks: int) -> str:
    """A .NET ``DateTimeOffset`` of ``utc_ticks`` at offset zero as Json.NET writes it: ISO 8601, up to
    seven fraction digits without trailing zeros, ``+00:00``. Raises ``OverflowError`` outside the years
    1..9999 (no ``DateTimeOffset`` is)."""
    seconds, ticks = divmod(utc_ticks, _TICKS_PER_SECOND)
    if seconds < 0:
        raise OverflowError(f"{utc_ticks} ticks is before the year 1")
    moment = _DOTNET_EPOCH + timedelta(seconds=seconds)
    fraction = f"{ticks:07d}".rstrip("0")
    text = f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}"
    return f"{text}.{fraction}+00:00" if fraction else f"{text}+00:00"


def plain(value: Any) -> Any:
    """An application-property value the JSON metadata can carry."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, timedelta):
        return timespan(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        # Json.NET writes a System.Decimal as a JSON number, which the worker's json module reads as a float.
        return float(value)
    if isinstance(value, str):
        # A char (decoded as a str subclass) is a JSON string, as Json.NET writes it; a plain str crosses to
        # a worker process without its class.
        return str(value)
    if isinstance(value, Mapping):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
