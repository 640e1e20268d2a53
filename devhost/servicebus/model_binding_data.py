"""Trigger data for SDK-type parameters, as the Functions host sends it to the Python worker.

The host's Service Bus extension hands an SDK-type trigger to the worker as ``model_binding_data``: version
``1.0``, source ``AzureServiceBusReceivedMessage``, content type ``application/octet-stream`` and content =
the lock token's GUID bytes (.NET ``Guid.ToByteArray``, i.e. little-endian fields) + ``x-opt-lock-token`` +
the message's raw AMQP bytes. This module builds that content on the host's side; in the worker process
``azure_functions_runtime`` calls the converter that ``azurefunctions-extensions-bindings-servicebus``
registered, so a function runs the extension's decoding locally as it does in Azure.

A char or decimal application property (readable here through :mod:`devhost.servicebus.sdk_codec`, which the
listeners install) is written back as the host's SDK writes it: a char as a char, a decimal (``System.
Decimal`` to .NET, whatever its AMQP width was) as a decimal128 when the bytes were not kept. The
extension's uamqp cannot decode either, so such a message fails its invocation in Azure and here alike.

The host's .NET SDK counts the current delivery in the header's delivery count (the broker's count + 1), so
a function sees 1 on a first delivery where the Python SDK alone sees 0. Otherwise the content carries the
message's sections as they arrived (:mod:`devhost.servicebus.amqp_payload` keeps a trigger receiver's
bytes): every
application property keeps its AMQP type (a long stays a long, a timestamp a timestamp, a binary a binary),
as the .NET SDK's ``ToBytes()`` keeps them. Only a message whose bytes were not kept (one received by a
receiver devhost did not mark) is re-encoded from the SDK's decoded values, with the AMQP types the broker
used where the Python form loses them (timestamps in the message annotations, 64-bit integers). Both are
written with Busbar's AMQP codec (:mod:`shared.amqp.encoding`), the second from the SDK's public
``raw_amqp_message``, each section's fields with the AMQP types the sections define (AMQP 1.0 part 3).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.amqp import AmqpMessageBodyType

from devhost.servicebus.amqp_payload import take_payload
from shared.amqp.encoding.codec import decode_value, skip_value
from shared.amqp.encoding.sections import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    DATA,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    section,
)
from shared.amqp.encoding.types import Long, Symbol, Timestamp, UByte, UInt, ULong

LOCK_TOKEN_MARKER = b"x-opt-lock-token"
# Service Bus message annotations whose AMQP type is timestamp; the SDK decodes them to epoch milliseconds.
_TIMESTAMP_ANNOTATIONS = frozenset(
    {b"x-opt-enqueued-time", b"x-opt-locked-until", b"x-opt-scheduled-enqueue-time"}
)
_HEADER_SECTION = bytes((0x00, 0x53, HEADER))
_INT32 = range(-(2**31), 2**31)
_INT64 = range(-(2**63), 2**63)


def _typed(value: Any) -> Any:
    # An int past a long's range can only have been a ulong (the broker sent it so; the host's .NET SDK
    # keeps it one): encoding it as a long would fail the whole delivery.
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    # int(value): ``in range(...)`` has a fast path for an exact int only; for an int subclass (the SDK's
    # DescribedInt, Busbar's typed Long) CPython walks the range, billions of steps.
    number = int(value)
    if number in _INT32:
        return number
    return Long(number) if number in _INT64 else ULong(number)


def _host_header(fields: list[Any]) -> bytes:
    """The header section with the host's delivery count: its SDK (AmqpMessageConverter) counts this delivery
    too (broker's count + 1), and GetRawAmqpMessage().ToBytes() sends that header to the worker."""
    durable, priority, ttl, first_acquirer, count = [*fields, None, None, None, None, None][:5]
    return section(
        HEADER,
        [
            durable,
            None if priority is None else UByte(priority),
            None if ttl is None else UInt(ttl),
            first_acquirer,
            None if count is None else UInt(count + 1),
        ],
    )


def _after_header(payload: bytes) -> bytes:
    """``payload`` without its header section (the sections are ``0x00 0x53 <code>`` then a value)."""
    if len(payload) < 4 or payload[2] != HEADER:
        return payload
    return payload[skip_value(payload, 3) :]


def _kept(payload: bytes) -> bytes:
    if payload[:3] != _HEADER_SECTION:
        return payload
    fields, _ = decode_value(payload, 3)
    return _host_header(fields or []) + _after_header(payload)


def _text(value: Any) -> Any:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def _symbol(value: Any) -> Any:
    text = value.decode("ascii", errors="backslashreplace") if isinstance(value, bytes) else value
    return None if text is None else Symbol.as_sent(str(text))


def _message_id(value: Any) -> Any:
    # The message-id types: ulong, uuid, binary, string (a bytes id as the SDK's encoder writes it: binary).
    return ULong(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _properties_fields(properties: Any) -> list[Any]:
    def timestamp(value: Any) -> Any:
        return None if value is None else Timestamp(value)

    return [
        _message_id(properties.message_id),
        properties.user_id,
        _text(properties.to),
        _text(properties.subject),
        _text(properties.reply_to),
        _message_id(properties.correlation_id),
        _symbol(properties.content_type),
        _symbol(properties.content_encoding),
        timestamp(properties.absolute_expiry_time),
        timestamp(properties.creation_time),
        _text(properties.group_id),
        None if properties.group_sequence is None else UInt(properties.group_sequence),
        _text(properties.reply_to_group_id),
    ]


def _annotations(annotations: Mapping[Any, Any]) -> dict[Any, Any]:
    typed: dict[Any, Any] = {}
    for key, value in annotations.items():
        # Annotation keys are symbols (or ulong codes).
        name = ULong(key) if isinstance(key, int) else _symbol(key)
        if key in _TIMESTAMP_ANNOTATIONS and isinstance(value, int):
            typed[name] = Timestamp(value)
        else:
            typed[name] = _typed(value)
    return typed


def _reencoded(message: ServiceBusReceivedMessage) -> bytes:
    """The message's sections re-encoded from the SDK's public ``raw_amqp_message`` (no delivery
    annotations, no footer: the worker reads neither)."""
    amqp = message.raw_amqp_message
    encoded = bytearray()
    header = amqp.header
    if header is not None:
        fields = [header.durable, header.priority, header.time_to_live, header.first_acquirer]
        encoded += _host_header([*fields, header.delivery_count])
    if amqp.annotations:
        encoded += section(MESSAGE_ANNOTATIONS, _annotations(amqp.annotations))
    if amqp.properties is not None:
        encoded += section(PROPERTIES, _properties_fields(amqp.properties))
    if amqp.application_properties:
        properties = {_text(k): _typed(v) for k, v in amqp.application_properties.items()}
        encoded += section(APPLICATION_PROPERTIES, properties)
    if amqp.body_type == AmqpMessageBodyType.DATA:
        for data in amqp.body:
            encoded += section(DATA, bytes(data))
    elif amqp.body_type == AmqpMessageBodyType.SEQUENCE:
        for sequence in amqp.body:
            encoded += section(AMQP_SEQUENCE, list(sequence))
    elif amqp.body is not None:
        encoded += section(AMQP_VALUE, amqp.body)
    return bytes(encoded)


def raw_amqp_bytes(message: ServiceBusReceivedMessage) -> bytes:
    """The message's AMQP sections (header, annotations, properties, application properties, body): as
    they arrived, with the host's header, when devhost kept its bytes; else re-encoded."""
    payload = take_payload(message)
    return _reencoded(message) if payload is None else _kept(payload)


def model_binding_content(message: ServiceBusReceivedMessage) -> bytes:
    """The ``model_binding_data`` content the host's Service Bus extension sends the worker for ``message``:
    the lock token's GUID bytes, the marker, and the raw AMQP bytes."""
    lock_token = uuid.UUID(str(message.lock_token))
    return lock_token.bytes_le + LOCK_TOKEN_MARKER + raw_amqp_bytes(message)
