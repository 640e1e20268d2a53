"""Values in the text forms the Functions host serialises them in (trigger metadata, binding data):
timestamps as ISO-8601 UTC, durations as .NET TimeSpan text, decimals as JSON numbers, anything else
JSON-friendly (a .NET ``DateTimeOffset`` or ``TimeSpan`` given in ticks: ``shared.envelope.properties``'s
``datetime_offset_text`` / ``timespan_text``).

Pure; both sides of the worker boundary use it (the host reads message properties into plain values, the
worker encodes trigger metadata from them)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from shared.envelope.properties import Binary


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


def net_datetime(value: datetime, zone: str) -> str:
    """Json.NET's default ISO text for a date (``yyyy-MM-ddTHH:mm:ss.FFFFFFFK``), in UTC: fractions of a
    second without trailing zeros (none when zero), then ``zone`` (``K``: ``Z`` for a UTC ``DateTime``,
    ``+00:00`` for a ``DateTimeOffset``, empty for kind Unspecified)."""
    utc = value.astimezone(UTC) if value.tzinfo is not None else value
    if utc.year >= 1000:  # isoformat's text, without strftime's cost (the host writes one per message)
        text = utc.replace(tzinfo=None, microsecond=0).isoformat()
    else:  # strftime's text for an early year, as before
        text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{utc.microsecond:06d}".rstrip("0")
    return (f"{text}.{fraction}" if fraction else text) + zone


def property_json_value(value: Any) -> Any:
    """An application property as the host's Json.NET writes what its .NET SDK decoded: an AMQP timestamp
    (a UTC ``DateTime``) as ISO text ending in ``Z``, a binary (``byte[]``) as base64, the rest as
    :func:`plain`."""
    if isinstance(value, datetime):
        return net_datetime(value, "Z")
    if isinstance(value, Binary):  # told apart from a string only when the AMQP bytes were read typed
        return base64.b64encode(bytes(value)).decode("ascii")
    return plain(value)
