"""Typed JSON for application properties: the archive's ``application_properties`` column.

A Service Bus application property is an AMQP scalar with an AMQP type
(:mod:`shared.envelope.properties`). JSON holds strings, booleans, integers, doubles and null as they are;
every other type gets a one-key tagged object, so :func:`decode_properties` rebuilds exactly the values,
AMQP types included, :func:`encode_properties` was given:

``{"$bytes": "<base64>"}``
    binary
``{"$datetime": "<ISO 8601 with offset>"}``
    timestamp (a timezone-aware ``datetime``; a naive one is taken as UTC)
``{"$uuid": "<canonical string>"}``
    uuid
``{"$float": "nan" | "inf" | "-inf"}``
    a double JSON cannot spell
``{"$byte" | "$short" | "$int" | "$long" | "$ubyte" | "$ushort" | "$uint" | "$ulong": "<decimal digits>"}``
    an integer of that AMQP type (a plain JSON integer is an integer whose type is not known: what a
    receiver hands back; it is sent as an int, or a long when it does not fit 32 bits)
``{"$float32": "<repr>"}``
    an AMQP float (binary32), nan and infinities spelled ``nan``, ``inf``, ``-inf``
``{"$decimal": "<decimal text>"}``
    decimal128
``{"$char": "<one character>"}`` and ``{"$symbol": "<ASCII text>"}``
    char and symbol
``{"$described": {"descriptor": "<symbol>" | <ulong code>, "value": <the described value, encoded so>}}``
    an AMQP described value (:class:`~shared.envelope.properties.Described`): a JSON string is a symbol
    descriptor, a JSON integer a ulong code; a .NET ``DateTimeOffset``, say, is
    ``{"$described": {"descriptor": "com.microsoft:datetime-offset", "value": {"$long": "<UTC ticks>"}}}``

Rows written before the typed tags existed hold plain integers; they decode as before, and Busbar's own
stamps (``busbar.redrive.at``, ...) get their type back by name
(:func:`shared.envelope.properties.with_known_types`).

Received messages come here normalised by the envelope's SDK adapter
(:func:`shared.envelope.sdk.normalise_received`).
"""

from __future__ import annotations

import base64
import json
import math
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from shared.envelope.properties import (
    TYPED_INTS,
    AmqpType,
    Char,
    Described,
    Float32,
    PropertyTypeError,
    PropertyValue,
    Symbol,
    TypedInt,
    amqp_type,
    with_known_types,
)

__all__ = [
    "PropertyCodecError",
    "PropertyValue",
    "decode_properties",
    "decode_value",
    "encode_properties",
    "encode_value",
]

_INT_TAGS = {f"${kind}": cls for kind, cls in TYPED_INTS.items()}
_TAGS = ("$bytes", "$datetime", "$uuid", "$float", "$float32", "$decimal", "$char", "$symbol", *_INT_TAGS)


_DESCRIBED = "$described"


class PropertyCodecError(ValueError):
    """An application property cannot be encoded, or stored JSON is not valid typed-property JSON."""


def _float_text(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def encode_value(value: Any) -> Any:
    """One property value as a JSON-ready value (scalar or tagged object)."""
    try:
        kind = amqp_type(value)
    except PropertyTypeError as error:
        raise PropertyCodecError(f"application property value {error}") from None
    if isinstance(value, Described):
        return {_DESCRIBED: {"descriptor": value.descriptor, "value": encode_value(value.value)}}
    if isinstance(value, TypedInt):
        return {f"${kind}": str(int(value))}
    if kind in (AmqpType.NULL, AmqpType.BOOLEAN, AmqpType.STRING):
        return value
    if kind in (AmqpType.INT, AmqpType.LONG, AmqpType.ULONG):  # a plain int: its type is not known
        return int(value)
    if kind is AmqpType.FLOAT:
        return {"$float32": repr(float(value)) if math.isfinite(value) else _float_text(value)}
    if kind is AmqpType.DOUBLE:
        return float(value) if math.isfinite(value) else {"$float": _float_text(value)}
    if kind in (AmqpType.CHAR, AmqpType.SYMBOL):
        return {f"${kind}": str(value)}
    if kind is AmqpType.BINARY:
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if kind is AmqpType.TIMESTAMP:
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return {"$datetime": moment.isoformat()}
    if kind is AmqpType.UUID:
        return {"$uuid": str(value)}
    return {"$decimal": str(value)}  # decimal128


def decode_value(value: Any) -> PropertyValue:
    """The property value a JSON value (scalar or tagged object) stands for."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((tag, text),) = value.items()
        if tag == _DESCRIBED:
            return _decode_described(text)
        if tag in _TAGS and isinstance(text, str):
            try:
                return _decode_tagged(tag, text)
            except (ValueError, InvalidOperation) as exc:
                raise PropertyCodecError(f"invalid {tag} value {text!r}: {exc}") from exc
    raise PropertyCodecError(f"not a typed property value: {value!r}")


def _decode_described(fields: Any) -> Described:
    shape = '{"descriptor": <symbol text or ulong code>, "value": <typed property value>}'
    if not isinstance(fields, dict) or set(fields) != {"descriptor", "value"}:
        raise PropertyCodecError(f"invalid {_DESCRIBED} value {fields!r}: expected {shape}")
    descriptor = fields["descriptor"]
    if not isinstance(descriptor, str | int) or isinstance(descriptor, bool):
        raise PropertyCodecError(f"invalid {_DESCRIBED} descriptor {descriptor!r}: expected {shape}")
    try:
        inner = decode_value(fields["value"])
    except PropertyCodecError as error:
        raise PropertyCodecError(f"invalid {_DESCRIBED} value: {error}") from None
    try:
        return Described(descriptor, inner)
    except PropertyTypeError as error:
        raise PropertyCodecError(f"invalid {_DESCRIBED} value {fields!r}: {error}") from None


def _decode_tagged(tag: str, text: str) -> PropertyValue:
    if tag in _INT_TAGS:
        return _INT_TAGS[tag](int(text))
    if tag == "$bytes":
        return base64.b64decode(text.encode("ascii"), validate=True)
    if tag == "$datetime":
        moment = datetime.fromisoformat(text)
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    if tag == "$uuid":
        return uuid.UUID(text)
    if tag == "$float32":
        return Float32(float(text))
    if tag == "$decimal":
        return Decimal(text)
    if tag == "$char":
        return Char(text)
    if tag == "$symbol":
        return Symbol(text)
    if text not in ("nan", "inf", "-inf"):
        raise ValueError("expected nan, inf or -inf")
    return float(text)


def encode_properties(properties: Mapping[str, Any] | None) -> str:
    """``properties`` as typed JSON text (keys sorted, so equal properties give equal text)."""
    encoded = {str(name): encode_value(value) for name, value in (properties or {}).items()}
    return json.dumps(encoded, sort_keys=True, ensure_ascii=False, allow_nan=False)


def decode_properties(text: str | None) -> dict[str, PropertyValue]:
    """The application properties typed JSON text stands for (``None`` or empty text: none); raises
    :class:`PropertyCodecError` naming the first property whose JSON is not a typed value, and why."""
    if text is None or not text.strip():
        return {}
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PropertyCodecError(f"application properties are not JSON: {exc}") from exc
    if not isinstance(loaded, dict):
        raise PropertyCodecError(f"application properties must be a JSON object, got {type(loaded).__name__}")
    decoded: dict[str, PropertyValue] = {}
    for name, value in loaded.items():
        try:
            decoded[str(name)] = decode_value(value)
        except PropertyCodecError as error:
            raise PropertyCodecError(f"application property {name!r}: {error}") from None
    return with_known_types(decoded)
