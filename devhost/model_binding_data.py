"""Trigger data for SDK-type parameters, as the Functions host sends it to the Python worker.

The host's Service Bus extension hands an SDK-type trigger to the worker as ``model_binding_data``: version
``1.0``, source ``AzureServiceBusReceivedMessage``, content type ``application/octet-stream`` and content =
the lock token's GUID bytes (.NET ``Guid.ToByteArray``, i.e. little-endian fields) + ``x-opt-lock-token`` +
the message's raw AMQP bytes. This module builds that content on the host's side; in the worker process
``azure_functions_runtime`` calls the converter that ``azurefunctions-extensions-bindings-servicebus``
registered, so a function runs the extension's decoding locally as it does in Azure.

A char or decimal application property (readable here through :mod:`shared.envelope.sdk_codec`, which the
listeners install) is written back as the host's SDK writes it: a char as a char, a decimal (``System.
Decimal`` to .NET, whatever its AMQP width was) as a decimal128. The extension's uamqp cannot decode either,
so such a message fails its invocation in Azure and here alike.

The host's .NET SDK counts the current delivery in the header's delivery count (the broker's count + 1), so
a function sees 1 on a first delivery where the Python SDK alone sees 0. Otherwise the content carries the
message's sections as they arrived (:mod:`devhost.amqp_payload` keeps a trigger receiver's bytes): every
application property keeps its AMQP type (a long stays a long, a timestamp a timestamp, a binary a binary),
as the .NET SDK's ``ToBytes()`` keeps them. Only a message whose bytes were not kept (one received by a
receiver devhost did not mark) is re-encoded from the SDK's decoded values, with the AMQP types the broker
used where the Python form loses them (timestamps in the message annotations, 64-bit integers).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp import _decode
from azure.servicebus._pyamqp._encode import describe_performative, encode_payload, encode_value
from azure.servicebus._pyamqp.message import Message
from azure.servicebus._pyamqp.types import (
    TYPE,
    VALUE,
    AMQPTypes,
)

from devhost.amqp_payload import take_payload
from shared.envelope.properties import Char

LOCK_TOKEN_MARKER = b"x-opt-lock-token"
# Service Bus message annotations whose AMQP type is timestamp; pyamqp decodes them to epoch milliseconds.
_TIMESTAMP_ANNOTATIONS = frozenset(
    {b"x-opt-enqueued-time", b"x-opt-locked-until", b"x-opt-scheduled-enqueue-time"}
)
_HEADER = 0x70
_CHAR, _MAP32 = 0x73, 0xD1
_APPLICATION_PROPERTIES = b"\x00\x53\x74"  # the section's descriptor: ulong 0x74, small
_INT32 = range(-(2**31), 2**31)
_INT64 = range(-(2**63), 2**63)


def _typed(value: Any) -> Any:
    # An int past a long's range can only have been a ulong (the broker sent it so; the host's .NET SDK
    # keeps it one): encoding it as a long would fail the whole delivery.
    if isinstance(value, bool) or not isinstance(value, int):
        return value  # the SDK's encoder writes it with its type (a decimal as a decimal128)
    # int(value): ``in range(...)`` has a fast path for an exact int only; for an int subclass (the SDK's
    # DescribedInt, Busbar's typed Long) CPython walks the range, billions of steps.
    number = int(value)
    if number in _INT32:
        return {TYPE: AMQPTypes.int, VALUE: number}
    return {TYPE: AMQPTypes.long if number in _INT64 else AMQPTypes.ulong, VALUE: number}


def _annotations(annotations: Mapping[Any, Any] | None) -> dict[Any, Any] | None:
    if not annotations:
        return None
    typed: dict[Any, Any] = {}
    for key, value in annotations.items():
        if key in _TIMESTAMP_ANNOTATIONS and isinstance(value, int):
            typed[key] = {TYPE: AMQPTypes.timestamp, VALUE: value}
        else:
            typed[key] = _typed(value)
    return typed


def _host_header(amqp: Message) -> Any:
    header = amqp.header
    if header is not None and header.delivery_count is not None:
        # The host's SDK (AmqpMessageConverter) makes a received message's header count this delivery too
        # (broker's count + 1); GetRawAmqpMessage().ToBytes() sends that header to the worker.
        header = header._replace(delivery_count=header.delivery_count + 1)
    return header


def _after_header(payload: bytes) -> bytes:
    # Sections are ``0x00 0x53 <code>`` then a value, as the SDK's decode_payload reads them.
    if len(payload) < 4 or payload[2] != _HEADER:
        return payload
    rest: memoryview = _decode._DECODE_BY_CONSTRUCTOR[payload[3]](memoryview(payload)[4:])[0]
    return bytes(rest)


def raw_amqp_bytes(message: ServiceBusReceivedMessage) -> bytes:
    """The message's AMQP sections (header, annotations, properties, application properties, body): as
    they arrived, with the host's header, when devhost kept its bytes; else re-encoded."""
    amqp: Message = message._message  # the SDK's decoded pyamqp message
    header = _host_header(amqp)
    payload = take_payload(message)
    if payload is not None:
        encoded = bytearray()
        if header is not None:
            encode_value(encoded, describe_performative(header))
        return bytes(encoded) + _after_header(payload)
    # The sections in their order: those before the application properties, these, then the body.
    before = Message(
        header=header, message_annotations=_annotations(amqp.message_annotations), properties=amqp.properties
    )
    body = Message(data=amqp.data, sequence=amqp.sequence, value=amqp.value)
    return (
        bytes(encode_payload(bytearray(), before))
        + _application_properties(amqp.application_properties)
        + bytes(encode_payload(bytearray(), body))
    )


def _application_properties(properties: Mapping[Any, Any] | None) -> bytes:
    """The application-properties section (keys as strings, as the SDK writes them), each value with its
    type: the SDK's encoder writes the rest, a char is written here (the SDK has no char encoder)."""
    if not properties:
        return b""
    entries = bytearray()
    for key, value in properties.items():
        encode_value(entries, {TYPE: AMQPTypes.string, VALUE: key})
        if isinstance(value, Char):
            entries += struct.pack(">BI", _CHAR, ord(value))  # one UTF-32BE code point
        else:
            encode_value(entries, _typed(value))
    # map32: the size counts the count's four bytes and the entries; the count, keys and values both.
    return (
        _APPLICATION_PROPERTIES + struct.pack(">BII", _MAP32, len(entries) + 4, 2 * len(properties)) + entries
    )


def model_binding_content(message: ServiceBusReceivedMessage) -> bytes:
    """The ``model_binding_data`` content the host's Service Bus extension sends the worker for ``message``:
    the lock token's GUID bytes, the marker, and the raw AMQP bytes."""
    lock_token = uuid.UUID(str(message.lock_token))
    return lock_token.bytes_le + LOCK_TOKEN_MARKER + raw_amqp_bytes(message)
