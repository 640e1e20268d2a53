"""The host's side of a received message: what it reads from the SDK's ``ServiceBusReceivedMessage`` and
hands the worker as plain data (body, the typed fields by trigger-metadata name, application properties).

``devhost.channel.trigger_data`` makes the FunctionRpc trigger data of it, which the runtime binds
(``func.ServiceBusMessage`` and its metadata, ``str``, ``bytes``).

Application properties are the host's .NET SDK's reading of them (``AmqpMessageConverter
.TryGetNetObjectFromAmqpObject``, azure-sdk-for-net ``sdk/servicebus/Azure.Messaging.ServiceBus/src/Amqp/
AmqpMessageConverter.cs``), which the host writes with Json.NET: an AMQP described value with the descriptor
``com.microsoft:uri`` is a ``Uri`` (its text), ``com.microsoft:datetime-offset`` a ``DateTimeOffset``
(ISO 8601 with the offset), ``com.microsoft:timespan`` a ``TimeSpan`` (``d.hh:mm:ss.fffffff``); the SDK leaves
a property with any other descriptor out of ``ApplicationProperties``, and so does devhost. The values and
their descriptors are read from the message's AMQP bytes (which devhost keeps for every trigger receiver,
:mod:`devhost.servicebus.amqp_payload`) with Busbar's codec
(:mod:`shared.amqp.encoding.application_properties`); a message whose bytes were not kept has only
azure-servicebus's plain values, without descriptors.
"""

from __future__ import annotations

import json
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage

from devhost.channel.protocol import ServiceBusMessageData
from devhost.dotnet.values import plain, property_json_value
from devhost.servicebus.amqp_payload import take_payload
from shared.amqp.encoding.application_properties import application_properties_of
from shared.amqp.encoding.types import Described as AnyDescribed
from shared.envelope.properties import DATETIME_OFFSET, TIMESPAN, URI, datetime_offset_text, timespan_text
from shared.envelope.properties import Described as TypedDescribed


def message_body(message: ServiceBusReceivedMessage) -> bytes:
    """The payload as bytes (data sections joined; a value or sequence body JSON-encoded)."""
    raw = message.raw_amqp_message
    body_type = str(getattr(raw.body_type, "value", raw.body_type))
    if body_type == "data":
        return b"".join(bytes(section) for section in raw.body)
    value = raw.body
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(plain(value)).encode("utf-8")


_LEFT_OUT = object()


def _dotnet_described(descriptor: Any, value: Any) -> Any:
    """What the host's SDK makes of a described value (:data:`_LEFT_OUT`: it leaves the property out)."""
    if isinstance(descriptor, bytes):
        descriptor = descriptor.decode("ascii", errors="replace")
    if descriptor == URI and isinstance(value, bytes | str):
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    if descriptor in (DATETIME_OFFSET, TIMESPAN) and isinstance(value, int) and not isinstance(value, bool):
        if descriptor == TIMESPAN:
            return timespan_text(int(value))
        try:
            return datetime_offset_text(int(value))
        except OverflowError:  # no DateTimeOffset (the host's SDK would fail the receive): the ticks
            return int(value)
    return _LEFT_OUT


def _as_dotnet(value: Any) -> Any:
    # A described value Busbar's property model holds, or one it cannot (a list described, say): both read
    # from the AMQP bytes.
    if isinstance(value, TypedDescribed | AnyDescribed):
        return _dotnet_described(value.descriptor, value.value)
    return value


def application_properties(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """User properties with str keys and the JSON values the host's Json.NET writes for what its .NET SDK
    decoded: typed from the message's AMQP bytes when the receiver kept them (a timestamp is a ``DateTime``
    there, a binary a ``byte[]``, a described value its .NET type), else from the SDK's values (a timestamp
    an ``int`` to azure-servicebus)."""
    plain_properties = message.application_properties
    if not plain_properties:  # the SDK found none: nothing to read typed (and no payload walk to pay)
        return {}
    payload = take_payload(message)
    typed = application_properties_of(payload) if payload is not None else None
    result: dict[str, Any] = {}
    for key, value in (typed if typed is not None else plain_properties).items():
        dotnet = _as_dotnet(value)
        if dotnet is not _LEFT_OUT:
            result[str(plain(key))] = property_json_value(dotnet)
    return result


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


# The SDK's text properties and the AMQP ``properties`` field each reads (``ServiceBusReceivedMessage``).
_TEXT_PROPERTIES = {
    "ContentType": "content_type",
    "CorrelationId": "correlation_id",
    "MessageId": "message_id",
    "ReplyTo": "reply_to",
    "ReplyToSessionId": "reply_to_group_id",
    "SessionId": "group_id",
    "Subject": "subject",
    "To": "to",
}


def _sdk_text(value: Any) -> Any:
    """An AMQP properties field as the SDK's property reads it: bytes decoded as UTF-8, else as it is."""
    if value is None or type(value) is str:  # most fields are unset: no exception to raise and catch
        return value
    try:
        return value.decode("UTF-8")
    except (AttributeError, UnicodeDecodeError):
        return value


def message_fields(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """The typed fields the host's binding data is made of (``devhost.channel.trigger_data``'s
    ``HOST_SINGLE_KEYS`` and ``HOST_BATCH_ARRAYS`` read them), keyed by trigger-metadata name, each read once:
    the SDK's properties decode their section again on every access. Fields the host does not send (the
    lock's expiry, the state, the time to live, the dead-letter reason...) are not read. The text fields
    come from the AMQP ``properties`` section as the SDK's properties read them (each of those tests the
    section's length first, which lists its keys: a dozen listings per message otherwise)."""
    properties = message.raw_amqp_message.properties
    texts: dict[str, Any] = dict.fromkeys(_TEXT_PROPERTIES)
    if properties:
        for name, field in _TEXT_PROPERTIES.items():
            texts[name] = _sdk_text(getattr(properties, field))
    enqueued = message.enqueued_time_utc
    time_to_live = message.time_to_live
    delivery_count = message.delivery_count
    return {
        "ContentType": texts["ContentType"],
        "CorrelationId": _optional_str(texts["CorrelationId"]),
        "DeadLetterSource": message.dead_letter_source,
        # The host's .NET SDK counts the current delivery (first delivery = 1); the AMQP header and the
        # Python SDK count earlier ones (first = 0).
        "DeliveryCount": None if delivery_count is None else delivery_count + 1,
        # A .NET ServiceBusReceivedMessage's EnqueuedSequenceNumber is a long, 0 when the broker set no
        # x-opt-enqueue-sequence-number (a message sent straight to the entity); the Python SDK says None.
        "EnqueuedSequenceNumber": message.enqueued_sequence_number or 0,
        "EnqueuedTimeUtc": enqueued,
        # The SDK's expires_at_utc, from the two values already read.
        "ExpiresAtUtc": enqueued + time_to_live if enqueued and time_to_live else None,
        "Subject": texts["Subject"],
        "LockToken": _optional_str(message.lock_token),
        "MessageId": _optional_str(texts["MessageId"]),
        "PartitionKey": message.partition_key,
        "ReplyTo": texts["ReplyTo"],
        "ReplyToSessionId": texts["ReplyToSessionId"],
        "SequenceNumber": message.sequence_number,
        "SessionId": texts["SessionId"],
        "To": _optional_str(texts["To"]),
    }


def message_data(message: ServiceBusReceivedMessage) -> ServiceBusMessageData:
    """What the host sends for ``message`` (not an SDK type): the body, and the fields and properties of
    its trigger metadata (the host sends its binding data whatever the parameter's type)."""
    return ServiceBusMessageData(
        message_body(message), message_fields(message), application_properties(message)
    )
