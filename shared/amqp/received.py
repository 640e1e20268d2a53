"""One message received or peeked over AMQP, read from proton's public ``Message``: the system properties,
the broker's annotations, the body section and the application properties with their AMQP types.

Its attributes are named as azure-servicebus's ``ServiceBusReceivedMessage`` names them, so the envelope's
reading (:func:`shared.envelope.sdk.from_received`) and everything after it reads either the same way. Where
Service Bus keeps a value (AMQP 1.0 in Azure Service Bus, "Message annotations"; the SDK's
``ServiceBusReceivedMessage`` reads the same places):

=============================  ==================================================================
sequence_number                message annotation ``x-opt-sequence-number``
enqueued_time_utc              message annotation ``x-opt-enqueued-time`` (a timestamp)
enqueued_sequence_number       message annotation ``x-opt-enqueue-sequence-number`` (forwarded messages)
lock_token                     the delivery tag (a .NET Guid's 16 bytes), else the delivery annotation
                               ``x-opt-lock-token``
locked_until_utc               message annotation ``x-opt-locked-until``
partition_key                  message annotation ``x-opt-partition-key``
dead_letter_source             message annotation ``x-opt-deadletter-source``
dead_letter_reason,            application properties ``DeadLetterReason`` and
dead_letter_error_description  ``DeadLetterErrorDescription``
session_id, reply_to_session   properties ``group-id``, ``reply-to-group-id``
time_to_live                   header ``ttl`` (milliseconds; ``None`` when not set, as the SDK)
delivery_count                 header ``delivery-count``
=============================  ==================================================================
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import proton
from azure.servicebus.amqp import AmqpMessageBodyType

from shared.amqp.values import typed_properties, typed_value
from shared.envelope.properties import as_text, timestamp_from_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivedMessage:
    """A message as Busbar's own receivers read it (application properties typed: :mod:`shared.amqp.values`).
    ``receipt`` names its locked delivery to the receiver that received it (``None`` for a peeked one)."""

    body_type: AmqpMessageBodyType
    body: Any
    message_id: Any
    content_type: str | None
    correlation_id: Any
    session_id: str | None
    subject: str | None
    reply_to: str | None
    reply_to_session_id: str | None
    to: str | None
    partition_key: str | None
    time_to_live: timedelta | None
    application_properties: dict[str, Any]
    sequence_number: int
    enqueued_time_utc: datetime | None
    locked_until_utc: datetime | None
    delivery_count: int | None
    dead_letter_reason: str | None
    dead_letter_error_description: str | None
    dead_letter_source: str | None
    enqueued_sequence_number: int | None = None
    lock_token: uuid.UUID | None = None
    amqp_bytes: bytes | None = field(default=None, repr=False)
    """The message's AMQP encoding as it arrived (a received delivery's; None for a peeked one)."""
    receipt: int | None = field(default=None, repr=False)


def _owned(value: Any) -> Any:
    # proton hands binaries out as views of a buffer it reuses: copied now.
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, list):
        return [_owned(item) for item in value]
    return value


def _moment(value: Any) -> datetime | None:
    return None if value is None else timestamp_from_ms(int(value))


def _body(message: proton.Message) -> tuple[AmqpMessageBodyType, Any]:
    body = message.body
    if message.inferred and isinstance(body, bytes | memoryview):
        return AmqpMessageBodyType.DATA, bytes(body)
    if message.inferred and isinstance(body, list):
        return AmqpMessageBodyType.SEQUENCE, _owned(body)
    return AmqpMessageBodyType.VALUE, typed_value(body)


def _content_type(message: proton.Message) -> str | None:
    # proton reads an absent content-type as symbol(None), i.e. the text "None" (python-qpid-proton's
    # Message.content_type returns ``symbol(pn_message_get_content_type(...))`` whatever the C call gave);
    # "None" is no MIME type (RFC 2046: type "/" subtype), so it can only mean the field was not set.
    text = as_text(message.content_type)
    return None if text == "None" else text


def _lock_token(message: proton.Message, delivery_tag: bytes | None) -> uuid.UUID | None:
    # The delivery tag first, as every Service Bus SDK reads it (azure-servicebus's ``lock_token``: the tag
    # as a .NET Guid's bytes, then the delivery annotation), then ``x-opt-lock-token``.
    if delivery_tag is not None and len(delivery_tag) == 16:
        return uuid.UUID(bytes_le=delivery_tag)
    instructions: dict[Any, Any] = {str(key): value for key, value in (message.instructions or {}).items()}
    token = instructions.get("x-opt-lock-token")
    if isinstance(token, uuid.UUID):
        return token
    if isinstance(token, bytes | memoryview) and len(token) == 16:
        return uuid.UUID(bytes_le=bytes(token))  # a .NET Guid's bytes
    return None


def received_message(
    message: proton.Message,
    receipt: int | None = None,
    amqp_bytes: bytes | None = None,
    delivery_tag: bytes | None = None,
) -> ReceivedMessage:
    """``message`` (decoded by proton from ``amqp_bytes`` when given; its delivery's tag) as Busbar reads
    it."""
    annotations: dict[Any, Any] = {str(key): value for key, value in (message.annotations or {}).items()}
    forwarded = annotations.get("x-opt-enqueue-sequence-number")
    properties = typed_properties(message.properties)
    body_type, body = _body(message)
    ttl = message.ttl  # seconds, as proton gives the header's milliseconds
    return ReceivedMessage(
        body_type=body_type,
        body=body,
        message_id=_owned(message.id),
        content_type=_content_type(message),
        correlation_id=_owned(message.correlation_id),
        session_id=as_text(message.group_id),
        subject=as_text(message.subject),
        reply_to=as_text(message.reply_to),
        reply_to_session_id=as_text(message.reply_to_group_id),
        to=as_text(message.address),
        partition_key=as_text(annotations.get("x-opt-partition-key")),
        time_to_live=timedelta(milliseconds=round(ttl * 1000)) if ttl else None,
        application_properties=properties,
        sequence_number=int(annotations.get("x-opt-sequence-number", 0)),
        enqueued_time_utc=_moment(annotations.get("x-opt-enqueued-time")),
        locked_until_utc=_moment(annotations.get("x-opt-locked-until")),
        delivery_count=message.delivery_count,
        dead_letter_reason=as_text(properties.get("DeadLetterReason")),
        dead_letter_error_description=as_text(properties.get("DeadLetterErrorDescription")),
        dead_letter_source=as_text(annotations.get("x-opt-deadletter-source")),
        enqueued_sequence_number=None if forwarded is None else int(forwarded),
        lock_token=_lock_token(message, delivery_tag),
        amqp_bytes=amqp_bytes,
        receipt=receipt,
    )


__all__ = ["ReceivedMessage", "received_message"]
