"""Typed JSON for application properties: the archive's ``application_properties`` column.

A Service Bus application property is an AMQP scalar. JSON holds strings, booleans, integers, floats and
null as they are; the other AMQP types get a one-key tagged object, so :func:`decode_properties` rebuilds
exactly the values :func:`encode_properties` was given:

``{"$bytes": "<base64>"}``
    binary
``{"$datetime": "<ISO 8601 with offset>"}``
    timestamp (a timezone-aware ``datetime``; a naive one is taken as UTC)
``{"$uuid": "<canonical string>"}``
    uuid
``{"$float": "nan" | "inf" | "-inf"}``
    a float JSON cannot spell

Received messages need normalising first (:func:`normalise_received`): azure-servicebus 7.x hands back
application property keys and *string values* as ``bytes`` (and AMQP timestamps as epoch milliseconds,
an ``int`` -- a loss the SDK makes before we see the value). Bytes that are valid UTF-8 are therefore
taken as the strings they almost always were; only bytes that are not UTF-8 stay binary.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

PropertyValue = str | bool | int | float | bytes | datetime | uuid.UUID | None
"""A value an application property can hold."""

_TAGS = ("$bytes", "$datetime", "$uuid", "$float")


class PropertyCodecError(ValueError):
    """An application property cannot be encoded, or stored JSON is not valid typed-property JSON."""


def normalise_received(raw: Mapping[Any, Any] | None) -> dict[str, PropertyValue]:
    """Application properties as received from the SDK, with ``str`` keys and UTF-8 bytes as ``str``."""
    result: dict[str, PropertyValue] = {}
    for key, value in (raw or {}).items():
        name = key.decode("utf-8", errors="replace") if isinstance(key, bytes) else str(key)
        if isinstance(value, bytes):
            with contextlib.suppress(UnicodeDecodeError):  # not UTF-8: genuinely binary, keep the bytes
                value = value.decode("utf-8")
        result[name] = value
    return result


def encode_value(value: Any) -> Any:
    """One property value as a JSON-ready value (scalar or tagged object)."""
    # bool before int: bool is a subclass of int.
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return {"$datetime": moment.isoformat()}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    raise PropertyCodecError(
        f"application property value of type {type(value).__name__} is not an AMQP scalar: {value!r}"
    )


def decode_value(value: Any) -> PropertyValue:
    """The property value a JSON value (scalar or tagged object) stands for."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((tag, text),) = value.items()
        if tag in _TAGS and isinstance(text, str):
            try:
                return _decode_tagged(tag, text)
            except ValueError as exc:
                raise PropertyCodecError(f"invalid {tag} value {text!r}: {exc}") from exc
    raise PropertyCodecError(f"not a typed property value: {value!r}")


def _decode_tagged(tag: str, text: str) -> PropertyValue:
    if tag == "$bytes":
        return base64.b64decode(text.encode("ascii"), validate=True)
    if tag == "$datetime":
        moment = datetime.fromisoformat(text)
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    if tag == "$uuid":
        return uuid.UUID(text)
    if text not in ("nan", "inf", "-inf"):
        raise ValueError("expected nan, inf or -inf")
    return float(text)


def encode_properties(properties: Mapping[str, Any] | None) -> str:
    """``properties`` as typed JSON text (keys sorted, so equal properties give equal text)."""
    encoded = {str(name): encode_value(value) for name, value in (properties or {}).items()}
    return json.dumps(encoded, sort_keys=True, ensure_ascii=False, allow_nan=False)


def decode_properties(text: str | None) -> dict[str, PropertyValue]:
    """The application properties typed JSON text stands for (``None`` or empty text: none)."""
    if text is None or not text.strip():
        return {}
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PropertyCodecError(f"application properties are not JSON: {exc}") from exc
    if not isinstance(loaded, dict):
        raise PropertyCodecError(f"application properties must be a JSON object, got {type(loaded).__name__}")
    return {str(name): decode_value(value) for name, value in loaded.items()}
