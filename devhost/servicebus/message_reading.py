"""The host's side of a received message: what it reads from a message its listener received
(:class:`shared.amqp.received.ReceivedMessage`) and hands the worker as plain data (body, the typed fields
by trigger-metadata name, application properties).

``devhost.channel.trigger_data`` makes the FunctionRpc trigger data of it, which the runtime binds
(``func.ServiceBusMessage`` and its metadata, ``str``, ``bytes``).

Application properties are the host's .NET SDK's reading of them (``AmqpMessageConverter
.TryGetNetObjectFromAmqpObject``, azure-sdk-for-net ``sdk/servicebus/Azure.Messaging.ServiceBus/src/Amqp/
AmqpMessageConverter.cs``), which the host writes with Json.NET: an AMQP described value with the descriptor
``com.microsoft:uri`` is a ``Uri`` (its text), ``com.microsoft:datetime-offset`` a ``DateTimeOffset``
(ISO 8601 with the offset), ``com.microsoft:timespan`` a ``TimeSpan`` (``d.hh:mm:ss.fffffff``); the SDK leaves
a property with any other descriptor out of ``ApplicationProperties``, and so does devhost. The values and
their descriptors are read from the message's AMQP bytes as it arrived with Busbar's codec
(:mod:`shared.amqp.encoding.application_properties`).
"""

from __future__ import annotations

import json
from typing import Any

from azure.servicebus.amqp import AmqpMessageBodyType

from devhost.channel.protocol import ServiceBusMessageData
from devhost.dotnet.values import plain, property_json_value
from shared.amqp.encoding.application_properties import application_properties_of
from shared.amqp.encoding.types import Described as AnyDescribed
from shared.amqp.received import ReceivedMessage
from shared.envelope.properties import DATETIME_OFFSET, TIMESPAN, URI, datetime_offset_text, timespan_text
from shared.envelope.properties import Described as TypedDescribed


def message_body(message: ReceivedMessage) -> bytes:
    """The payload as bytes (a data body as it is; a value or sequence body JSON-encoded)."""
    value = message.body
    if message.body_type == AmqpMessageBodyType.DATA:
        return bytes(value)
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


def application_properties(message: ReceivedMessage) -> dict[str, Any]:
    """User properties with str keys and the JSON values the host's Json.NET writes for what its .NET SDK
    decoded, read from the message's AMQP bytes (a timestamp is a ``DateTime`` there, a binary a ``byte[]``,
    a described value its .NET type)."""
    if not message.application_properties:  # none: no payload walk to pay
        return {}
    payload = message.amqp_bytes
    typed = application_properties_of(payload) if payload is not None else None
    result: dict[str, Any] = {}
    for key, value in (typed if typed is not None else message.application_properties).items():
        dotnet = _as_dotnet(value)
        if dotnet is not _LEFT_OUT:
            result[str(plain(key))] = property_json_value(dotnet)
    return result


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _sdk_text(value: Any) -> Any:
    """An identifier (message or correlation id: a string, a binary, a uuid or a ulong) as the SDK's property
    reads it: a binary decoded as UTF-8 when it is text, else as it is."""
    if isinstance(value, bytes):
        try:
            return value.decode("UTF-8")
        except UnicodeDecodeError:
            return value
    return value


def message_fields(message: ReceivedMessage) -> dict[str, Any]:
    """The typed fields the host's binding data is made of (``devhost.channel.trigger_data``'s
    ``HOST_SINGLE_KEYS`` and ``HOST_BATCH_ARRAYS`` read them), keyed by trigger-metadata name. Fields the
    host does not send (the lock's expiry, the state, the time to live, the dead-letter reason...) are not
    read."""
    enqueued = message.enqueued_time_utc
    time_to_live = message.time_to_live
    delivery_count = message.delivery_count
    return {
        "ContentType": message.content_type,
        "CorrelationId": _optional_str(_sdk_text(message.correlation_id)),
        "DeadLetterSource": message.dead_letter_source,
        # The host's .NET SDK counts the current delivery (first delivery = 1); the AMQP header counts
        # earlier ones (first = 0).
        "DeliveryCount": None if delivery_count is None else delivery_count + 1,
        # A .NET ServiceBusReceivedMessage's EnqueuedSequenceNumber is a long, 0 when the broker set no
        # x-opt-enqueue-sequence-number (a message sent straight to the entity).
        "EnqueuedSequenceNumber": message.enqueued_sequence_number or 0,
        "EnqueuedTimeUtc": enqueued,
        # The SDK's expires_at_utc.
        "ExpiresAtUtc": enqueued + time_to_live if enqueued and time_to_live else None,
        "Subject": message.subject,
        "LockToken": _optional_str(message.lock_token),
        "MessageId": _optional_str(_sdk_text(message.message_id)),
        "PartitionKey": message.partition_key,
        "ReplyTo": message.reply_to,
        "ReplyToSessionId": message.reply_to_session_id,
        "SequenceNumber": message.sequence_number,
        "SessionId": message.session_id,
        "To": message.to,
    }


def message_data(message: ReceivedMessage) -> ServiceBusMessageData:
    """What the host sends for ``message`` (not an SDK type): the body, and the fields and properties of
    its trigger metadata (the host sends its binding data whatever the parameter's type)."""
    return ServiceBusMessageData(
        message_body(message), message_fields(message), application_properties(message)
    )
