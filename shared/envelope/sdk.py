"""azure-servicebus messages <-> :class:`~shared.envelope.Envelope`: the one place that reads a
``ServiceBusReceivedMessage`` and builds a ``ServiceBusMessage``.

Received application properties keep their AMQP types when they were read typed (Busbar's own receivers,
:mod:`shared.amqp`; the trigger edge's bytes, :mod:`shared.amqp.encoding.application_properties`) and are
normalised once, here, into what the envelope holds (:func:`normalise_received`: ``str`` keys, strings as
``str``, binaries as ``bytes``).
Bodies come in two readings: :func:`data_body` (an AMQP data body, or None for a value or sequence body,
which is never re-sent) and :func:`readable_body` (any body as bytes, so dispatch can dead-letter a foreign
body with a precise reason instead of failing to read it; :func:`readable_from_received` reads a message
so).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from azure.servicebus import ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes
from azure.servicebus.amqp import AmqpMessageBodyType

from shared.envelope import (
    Envelope,
    PartitionKeyPolicy,
    as_text,
    copy_partition_key,
)
from shared.envelope.properties import (
    AmqpType,
    Binary,
    Described,
    PropertyTypeError,
    PropertyValue,
    amqp_type,
    check_decimal128,
    with_known_types,
)

if TYPE_CHECKING:
    from shared.amqp.received import ReceivedMessage

    type Received = ServiceBusReceivedMessage | ReceivedMessage
    """A message from azure-servicebus (a trigger's, devhost's, parking's) or Busbar's own AMQP receiver
    (the re-drive's and the console's): read alike, attribute for attribute."""


def body_type(message: Received) -> str:
    """The AMQP body section: ``data``, ``value`` or ``sequence``."""
    return str(getattr(message.body_type, "value", message.body_type))


def data_body(message: Received) -> bytes | None:
    """The body of an AMQP data message; None for a value or sequence body."""
    if message.body_type != AmqpMessageBodyType.DATA:
        return None
    raw: Any = message.body
    return raw if isinstance(raw, bytes) else b"".join(raw)


def readable_body(message: Received) -> bytes:
    """Any body as bytes: a data body as it is, a value or sequence body as text or JSON."""
    # Busbar and NServiceBus send data bodies; another client may send an AMQP value or sequence body, which
    # must still reach dispatch (and be dead-lettered there with a precise reason) instead of failing here.
    data = data_body(message)
    if data is not None:
        return data
    value: Any = message.body
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(_jsonable(value), default=str).encode("utf-8")


def _jsonable(value: Any) -> Any:
    # AMQP maps and lists decode with bytes keys and strings.
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Mapping):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _received_value(value: Any) -> Any:
    if isinstance(value, Binary):
        return bytes(value)
    if isinstance(value, Described):
        return Described(value.descriptor, _received_value(value.value))
    if isinstance(value, bytes):
        with contextlib.suppress(UnicodeDecodeError):  # not UTF-8: genuinely binary, keep the bytes
            return value.decode("utf-8")
    return value


def normalise_received(raw: Mapping[Any, Any] | None) -> dict[str, PropertyValue]:
    """Application properties as received from the SDK, with ``str`` keys, a marked binary as ``bytes``,
    other UTF-8 bytes as ``str``, and Busbar's own stamps with their AMQP types.

    azure-servicebus 7.x hands back application property keys and *string values* as ``bytes``. A typed
    reading marks a binary (:class:`~shared.envelope.properties.Binary`: :mod:`shared.amqp.values`,
    :mod:`shared.amqp.encoding.application_properties`), so it stays binary and other bytes are strings;
    bytes that were not marked (a message read untyped: the Functions trigger's when its bytes cannot be had,
    whose extension decodes with uamqp) are taken as the strings they almost always were when they are valid
    UTF-8, and stay binary otherwise."""
    result: dict[str, PropertyValue] = {}
    for key, value in (raw or {}).items():
        name = key.decode("utf-8", errors="replace") if isinstance(key, bytes) else str(key)
        result[name] = _received_value(value)
    return with_known_types(result)


def from_received[E: Envelope](
    message: Received,
    into: Callable[..., E],
    *,
    body: bytes | None,
    application_properties: Mapping[str, Any] | None = None,
    **extra: Any,
) -> E:
    """``message`` as an envelope of type ``into`` (an :class:`Envelope` subclass, given ``extra``), with
    ``body`` (:func:`data_body` or :func:`readable_body` of it). ``application_properties``, as decoded from
    the message with their AMQP types, replace the SDK's decoded ones when given (typed when a Busbar
    receiver decoded the message, what uamqp keeps for a Functions trigger's); either is normalised here
    (:func:`normalise_received`)."""
    raw = message.application_properties if application_properties is None else application_properties
    properties = normalise_received(raw)
    return into(
        body=body,
        message_id=as_text(message.message_id),
        content_type=as_text(message.content_type),
        correlation_id=as_text(message.correlation_id),
        session_id=as_text(message.session_id),
        subject=as_text(message.subject),
        reply_to=as_text(message.reply_to),
        reply_to_session_id=as_text(message.reply_to_session_id),
        to=as_text(message.to),
        partition_key=as_text(message.partition_key),
        time_to_live=message.time_to_live,
        application_properties=properties,
        sequence_number=message.sequence_number,
        enqueued_time=message.enqueued_time_utc,
        delivery_count=message.delivery_count,
        dead_letter_reason=as_text(message.dead_letter_reason),
        dead_letter_description=as_text(message.dead_letter_error_description),
        dead_letter_source=as_text(message.dead_letter_source),
        **extra,
    )


def readable_from_received[E: Envelope](
    message: Received,
    into: Callable[..., E],
    *,
    application_properties: Mapping[Any, Any] | None = None,
    **extra: Any,
) -> E:
    """:func:`from_received` with any body readable as bytes (:func:`readable_body`): how a message to
    handle or route is read."""
    body = readable_body(message)
    return from_received(message, into, body=body, application_properties=application_properties, **extra)


def to_message(envelope: Envelope, partition_key: PartitionKeyPolicy) -> ServiceBusMessage:
    """A message to send with azure-servicebus carrying ``envelope``'s body and properties (the broker's
    stamps are not sent): Busbar's own new messages. A copy of a received message goes out through
    :mod:`shared.amqp.outgoing` instead, where every AMQP type (a char too) can be sent.

    ``partition_key`` decides a PartitionKey that conflicts with the SessionId (:func:`copy_partition_key`).
    A missing body is sent empty; a zero TimeToLive is left to the entity's default. Every application
    property keeps its AMQP type (:func:`sdk_application_properties`, which raises
    :class:`~shared.envelope.properties.PropertyTypeError` naming a property that cannot be sent)."""
    properties: Any = sdk_application_properties(envelope.application_properties)
    return ServiceBusMessage(
        envelope.body if envelope.body is not None else b"",
        application_properties=properties,
        session_id=envelope.session_id,
        message_id=envelope.message_id,
        content_type=envelope.content_type,
        correlation_id=envelope.correlation_id,
        subject=envelope.subject,
        partition_key=copy_partition_key(envelope, partition_key),
        to=envelope.to,
        reply_to=envelope.reply_to,
        reply_to_session_id=envelope.reply_to_session_id,
        time_to_live=envelope.time_to_live or None,
    )


# azure-servicebus (pyamqp) encodes an application property given as {TYPE: <AMQPTypes.x>, VALUE: v} with
# that AMQP type (_pyamqp/_encode.py: encode_value), the way the SDK itself sends longs and uints. A plain
# value goes through encode_unknown instead: every int as a 32-bit int (raising outside it) and every
# bytes value decoded as UTF-8 text first (_transport/_pyamqp_transport.py), so Busbar never sends plain
# ints or bytes. The SDK has no encoder for char (a Char is refused: only a copy of a received message carries
# one, and copies go out through shared.amqp), decimal32 and decimal64 (Busbar sends every decimal as
# decimal128). A described value is given as {TYPE: described,
# VALUE: (descriptor, value)}, each of the two in this same form (_encode.py: encode_described).
_SDK_TYPES: dict[AmqpType, str] = {
    AmqpType.BYTE: AMQPTypes.byte,
    AmqpType.SHORT: AMQPTypes.short,
    AmqpType.LONG: AMQPTypes.long,
    AmqpType.UBYTE: AMQPTypes.ubyte,
    AmqpType.USHORT: AMQPTypes.ushort,
    AmqpType.UINT: AMQPTypes.uint,
    AmqpType.ULONG: AMQPTypes.ulong,
    AmqpType.FLOAT: AMQPTypes.float,
    AmqpType.DECIMAL128: AMQPTypes.decimal128,
    AmqpType.BINARY: AMQPTypes.binary,
    AmqpType.SYMBOL: AMQPTypes.symbol,
}
_PLAIN = (AmqpType.NULL, AmqpType.BOOLEAN, AmqpType.STRING, AmqpType.UUID, AmqpType.TIMESTAMP)
"""Types the SDK sends right as plain values (None, bool, str, UUID, datetime; a 32-bit int and a double
are given as plain int and float)."""


def sdk_value(value: Any) -> Any:
    """One property value as azure-servicebus must be given it to send it with its AMQP type
    (:func:`~shared.envelope.properties.amqp_type`). Raises :class:`PropertyTypeError` for a value the SDK
    cannot send (a decimal128 out of range, a value that is not an AMQP scalar)."""
    kind = amqp_type(value)
    if kind is AmqpType.DESCRIBED:
        return _sdk_described(value)
    if kind in _PLAIN:
        return str(value) if kind is AmqpType.STRING else value
    if kind is AmqpType.INT:
        return int(value)
    if kind is AmqpType.DOUBLE:
        return float(value)
    sdk_type = _SDK_TYPES.get(kind)
    if sdk_type is None:
        raise PropertyTypeError(f"azure-servicebus has no encoding for an AMQP {kind} (value {value!r})")
    if kind is AmqpType.BINARY:
        value = bytes(value)
    elif kind is AmqpType.DECIMAL128:
        value = check_decimal128(value)
    elif kind is AmqpType.SYMBOL:
        value = str(value).encode("ascii")
    elif kind is AmqpType.FLOAT:
        value = float(value)
    else:
        value = int(value)  # an integer type: the plain int behind its wrapper
    return {TYPE: sdk_type, VALUE: value}


def _sdk_described(value: Described) -> dict[str, Any]:
    descriptor = value.descriptor
    sdk_descriptor = (
        {TYPE: AMQPTypes.symbol, VALUE: descriptor.encode("ascii")}
        if isinstance(descriptor, str)
        else {TYPE: AMQPTypes.ulong, VALUE: descriptor}
    )
    return {TYPE: AMQPTypes.described, VALUE: (sdk_descriptor, sdk_value(value.value))}


def sdk_application_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
    """``properties`` ready for ``ServiceBusMessage(application_properties=...)``, each with its AMQP type.
    Raises :class:`PropertyTypeError` naming the first property that cannot be sent, and why."""
    result: dict[str, Any] = {}
    for name, value in properties.items():
        try:
            result[str(name)] = sdk_value(value)
        except PropertyTypeError as error:
            raise PropertyTypeError(f"application property {name!r} cannot be sent: {error}") from None
    return result


__all__ = [
    "body_type",
    "data_body",
    "from_received",
    "normalise_received",
    "readable_body",
    "readable_from_received",
    "sdk_application_properties",
    "sdk_value",
    "to_message",
]
