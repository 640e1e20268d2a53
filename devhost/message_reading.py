"""The host's side of a received message: what it reads from the SDK's ``ServiceBusReceivedMessage`` and
hands the worker as plain data (body, the typed fields by trigger-metadata name, application properties).

``devhost.rpc.trigger_data`` makes the FunctionRpc trigger data of it, which the runtime binds
(``func.ServiceBusMessage`` and its metadata, ``str``, ``bytes``).
"""

from __future__ import annotations

import json
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage

from devhost.dotnet_values import plain
from devhost.worker_protocol import ServiceBusMessageData


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


def application_properties(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """User properties with str keys and JSON-friendly values."""
    props = message.application_properties or {}
    return {str(plain(key)): plain(value) for key, value in props.items()}


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def message_fields(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """The typed fields, keyed by trigger-metadata name, read once (the SDK's properties decode the AMQP
    annotations on every access)."""
    subject = message.subject  # Label and Subject: each SDK property read decodes the AMQP section again
    return {
        "ContentType": message.content_type,
        "CorrelationId": _optional_str(message.correlation_id),
        "DeadLetterErrorDescription": message.dead_letter_error_description,
        "DeadLetterReason": message.dead_letter_reason,
        "DeadLetterSource": message.dead_letter_source,
        # The host's .NET SDK counts the current delivery (first delivery = 1); the AMQP header and the
        # Python SDK count earlier ones (first = 0).
        "DeliveryCount": None if message.delivery_count is None else message.delivery_count + 1,
        # A .NET ServiceBusReceivedMessage's EnqueuedSequenceNumber is a long, 0 when the broker set no
        # x-opt-enqueue-sequence-number (a message sent straight to the entity); the Python SDK says None.
        "EnqueuedSequenceNumber": message.enqueued_sequence_number or 0,
        "EnqueuedTimeUtc": message.enqueued_time_utc,
        "ExpiresAtUtc": message.expires_at_utc,
        "Label": subject,
        "Subject": subject,
        "LockedUntil": message.locked_until_utc,
        "LockToken": _optional_str(message.lock_token),
        "MessageId": _optional_str(message.message_id),
        "PartitionKey": message.partition_key,
        "ReplyTo": message.reply_to,
        "ReplyToSessionId": message.reply_to_session_id,
        "ScheduledEnqueueTimeUtc": message.scheduled_enqueue_time_utc,
        "SequenceNumber": message.sequence_number,
        "SessionId": message.session_id,
        "State": int(getattr(message.state, "value", message.state or 0)),
        "TimeToLive": message.time_to_live,
        "To": _optional_str(message.to),
    }


def message_data(message: ServiceBusReceivedMessage) -> ServiceBusMessageData:
    """What the host sends for ``message`` (not an SDK type): the body, and the fields and properties of
    its trigger metadata (the host sends its binding data whatever the parameter's type)."""
    return ServiceBusMessageData(
        message_body(message), message_fields(message), application_properties(message)
    )
