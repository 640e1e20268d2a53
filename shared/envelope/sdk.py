"""azure-servicebus messages <-> :class:`~shared.envelope.Envelope`: the one place that reads a
``ServiceBusReceivedMessage`` and builds a ``ServiceBusMessage``.

Received application properties are normalised as the archive needs them
(:func:`shared.archive.properties.normalise_received`: ``str`` keys, UTF-8 bytes as ``str``, other bytes kept
binary). Bodies come in two readings, chosen by the caller: :func:`data_body` (an AMQP data body, or None
for a value or sequence body, which is never re-sent) and :func:`readable_body` (any body as bytes, so
dispatch can dead-letter a foreign body with a precise reason instead of failing to read it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from azure.servicebus import ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus.amqp import AmqpMessageBodyType

from shared.archive.properties import normalise_received
from shared.envelope import Envelope, PartitionKeyPolicy, as_text, copy_partition_key


def body_type(message: ServiceBusReceivedMessage) -> str:
    """The AMQP body section: ``data``, ``value`` or ``sequence``."""
    return str(getattr(message.body_type, "value", message.body_type))


def data_body(message: ServiceBusReceivedMessage) -> bytes | None:
    """The body of an AMQP data message; None for a value or sequence body."""
    if message.body_type != AmqpMessageBodyType.DATA:
        return None
    raw: Any = message.body
    return raw if isinstance(raw, bytes) else b"".join(raw)


def readable_body(message: ServiceBusReceivedMessage) -> bytes:
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


def from_received[E: Envelope](
    message: ServiceBusReceivedMessage, into: Callable[..., E], *, body: bytes | None, **extra: Any
) -> E:
    """``message`` as an envelope of type ``into`` (an :class:`Envelope` subclass, given ``extra``), with
    ``body`` (:func:`data_body` or :func:`readable_body` of it)."""
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
        application_properties=normalise_received(message.application_properties),
        sequence_number=message.sequence_number,
        enqueued_time=message.enqueued_time_utc,
        delivery_count=message.delivery_count,
        dead_letter_reason=as_text(message.dead_letter_reason),
        dead_letter_description=as_text(message.dead_letter_error_description),
        dead_letter_source=as_text(message.dead_letter_source),
        **extra,
    )


def to_message(envelope: Envelope, partition_key: PartitionKeyPolicy) -> ServiceBusMessage:
    """A message to send carrying ``envelope``'s body and properties (the broker's stamps are not sent).

    ``partition_key`` decides a PartitionKey that conflicts with the SessionId (:func:`copy_partition_key`).
    A missing body is sent empty; a zero TimeToLive is left to the entity's default."""
    # The SDK's annotation omits datetime, which it does send (as an AMQP timestamp), and its dict is
    # invariant in the key type.
    properties: Any = dict(envelope.application_properties)
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


__all__ = ["body_type", "data_body", "from_received", "readable_body", "to_message"]
