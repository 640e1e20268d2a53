"""Trigger data for SDK-type parameters, as the Functions host sends it to the Python worker.

The host's Service Bus extension hands an SDK-type trigger to the worker as ``model_binding_data``: version
``1.0``, source ``AzureServiceBusReceivedMessage``, content type ``application/octet-stream`` and content =
the lock token's GUID bytes (.NET ``Guid.ToByteArray``, i.e. little-endian fields) + ``x-opt-lock-token`` +
the message's raw AMQP bytes. This module builds that content on the host's side; in the worker process
``azure_functions_runtime`` calls the converter that ``azurefunctions-extensions-bindings-servicebus``
registered, so a function runs the extension's decoding locally as it does in Azure.

The content carries the message's sections as they arrived (devhost's listeners receive through Busbar's
seam, :mod:`shared.amqp`, which keeps each delivery's bytes): every application property keeps its AMQP type
(a long stays a long, a timestamp a timestamp, a char a char, a decimal its width), as the .NET SDK's
``ToBytes()`` keeps them. The extension's uamqp cannot decode a char or a decimal, so such a message fails its
invocation in Azure and here alike. One change, the host's: its .NET SDK counts the current delivery in the
header's delivery count (the broker's count + 1), so a function sees 1 on a first delivery where the broker
says 0; the header is written again with Busbar's AMQP codec (:mod:`shared.amqp.encoding`).
"""

from __future__ import annotations

from typing import Any

from shared.amqp.encoding.codec import decode_value, skip_value
from shared.amqp.encoding.sections import HEADER, section
from shared.amqp.encoding.types import UByte, UInt
from shared.amqp.received import ReceivedMessage

LOCK_TOKEN_MARKER = b"x-opt-lock-token"
_HEADER_SECTION = bytes((0x00, 0x53, HEADER))


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


def raw_amqp_bytes(message: ReceivedMessage) -> bytes:
    """The message's AMQP sections as they arrived, with the host's header."""
    if message.amqp_bytes is None:
        raise ValueError(f"message {message.sequence_number} was not received: it has no AMQP bytes")
    return _kept(message.amqp_bytes)


def model_binding_content(message: ReceivedMessage) -> bytes:
    """The ``model_binding_data`` content the host's Service Bus extension sends the worker for ``message``:
    the lock token's GUID bytes, the marker, and the raw AMQP bytes."""
    if message.lock_token is None:
        raise ValueError(f"message {message.sequence_number} has no lock token: it was not received locked")
    return message.lock_token.bytes_le + LOCK_TOKEN_MARKER + raw_amqp_bytes(message)
