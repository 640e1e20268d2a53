"""SDK ``ServiceBusReceivedMessage`` -> ``azure.functions.ServiceBusMessage``, with the trigger metadata the
host passes the worker (``metadata`` on the message: ``MessageId``, ``DeliveryCount``, ``UserProperties``,
... as ``meta.Datum`` values, like the gRPC payload decodes to).

Timestamps are ISO-8601 UTC strings and the time-to-live a TimeSpan string in the metadata, as the host
serialises them; the typed properties carry datetime/timedelta values.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func
from azure.functions import meta
from azure.functions.servicebus import ServiceBusMessage as WorkerServiceBusMessage
from azure.servicebus import ServiceBusReceivedMessage


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
    return json.dumps(_plain(value)).encode("utf-8")


def _plain(value: Any) -> Any:
    """An application-property value the JSON metadata can carry."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, timedelta):
        return _timespan(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def application_properties(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """User properties with str keys and JSON-friendly values."""
    props = message.application_properties or {}
    return {str(_plain(key)): _plain(value) for key, value in props.items()}


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def _timespan(value: timedelta) -> str:
    """.NET TimeSpan text: ``[d.]hh:mm:ss[.fffffff]``."""
    total = int(value.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if value.microseconds:
        text += f".{value.microseconds:06d}0"
    return f"{days}.{text}" if days else text


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _fields(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """The typed fields, keyed by trigger-metadata name."""
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
        "EnqueuedSequenceNumber": message.enqueued_sequence_number,
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


def _datum(value: Any) -> meta.Datum:
    if isinstance(value, bool):
        return meta.Datum(json.dumps(value), "json")
    if isinstance(value, int):
        return meta.Datum(value, "int")
    if isinstance(value, datetime):
        return meta.Datum(_iso(value), "string")
    if isinstance(value, timedelta):
        return meta.Datum(_timespan(value), "string")
    if isinstance(value, str):
        return meta.Datum(value, "string")
    return meta.Datum(json.dumps(_plain(value)), "json")


def _sys_metadata(function_name: str, utc_now: datetime | None = None) -> meta.Datum:
    return _datum(
        {
            "MethodName": function_name,
            "UtcNow": _iso(utc_now or datetime.now(UTC)),
            "RandGuid": str(uuid.uuid4()),
        }
    )


@dataclass(frozen=True, slots=True)
class _Extracted:
    """A message's fields, read once (the SDK's properties decode AMQP annotations on every access)."""

    fields: dict[str, Any]
    props: dict[str, Any]


def _extract(message: ServiceBusReceivedMessage) -> _Extracted:
    return _Extracted(_fields(message), application_properties(message))


def _single_metadata(
    extracted: _Extracted,
    function_name: str,
    utc_now: datetime | None = None,
    props: meta.Datum | None = None,
) -> dict[str, meta.Datum]:
    metadata = {key: _datum(value) for key, value in extracted.fields.items() if value is not None}
    metadata["UserProperties"] = metadata["ApplicationProperties"] = props or _datum(extracted.props)
    metadata["sys"] = _sys_metadata(function_name, utc_now)
    return metadata


class _LazySingleMetadata(Mapping[str, meta.Datum]):
    """Single-message trigger metadata, encoded on first use.

    Most functions never read ``msg.metadata``, and encoding it is a good share of the conversion cost
    on every message. What could change before first use is taken at conversion: the trigger time
    (``sys.UtcNow``) and the user properties (a function may mutate ``msg.user_properties``, this dict)."""

    __slots__ = ("_extracted", "_function_name", "_metadata", "_props", "_utc_now")

    def __init__(self, extracted: _Extracted, function_name: str) -> None:
        self._extracted = extracted
        self._function_name = function_name
        self._utc_now = datetime.now(UTC)
        self._props = _datum(extracted.props)
        self._metadata: dict[str, meta.Datum] | None = None

    def _encoded(self) -> dict[str, meta.Datum]:
        if self._metadata is None:
            self._metadata = _single_metadata(
                self._extracted, self._function_name, self._utc_now, self._props
            )
        return self._metadata

    def __getitem__(self, key: str) -> meta.Datum:
        return self._encoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._encoded())

    def __len__(self) -> int:
        return len(self._encoded())


def trigger_metadata(message: ServiceBusReceivedMessage, function_name: str) -> dict[str, meta.Datum]:
    """Single-message trigger metadata (``UserProperties`` present marks cardinality one)."""
    return _single_metadata(_extract(message), function_name)


# The arrays the host's Service Bus extension puts in a batch's binding data (ServiceBusTriggerBindingStrategy
# .AddBindingData for ServiceBusReceivedMessage[]), each from the message field named: nothing else reaches
# the worker, so a batch message's other properties (LockedUntil, DeadLetterReason, TimeToLive, ...) are None
# in Azure. TransactionPartitionKeyArray carries the partition keys, as the extension fills it.
HOST_BATCH_ARRAYS: dict[str, str] = {
    "DeliveryCountArray": "DeliveryCount",
    "DeadLetterSourceArray": "DeadLetterSource",
    "LockTokenArray": "LockToken",
    "ExpiresAtUtcArray": "ExpiresAtUtc",
    "ExpiresAtArray": "ExpiresAtUtc",
    "EnqueuedTimeUtcArray": "EnqueuedTimeUtc",
    "EnqueuedTimeArray": "EnqueuedTimeUtc",
    "MessageIdArray": "MessageId",
    "ContentTypeArray": "ContentType",
    "ReplyToArray": "ReplyTo",
    "SequenceNumberArray": "SequenceNumber",
    "ToArray": "To",
    "SubjectArray": "Subject",
    "LabelArray": "Subject",
    "CorrelationIdArray": "CorrelationId",
    "SessionIdArray": "SessionId",
    "ReplyToSessionIdArray": "ReplyToSessionId",
    "PartitionKeyArray": "PartitionKey",
    "TransactionPartitionKeyArray": "PartitionKey",
}
_BATCH_FIELDS = frozenset(HOST_BATCH_ARRAYS.values()) | {"Label"}


def _batch_metadata(extracted: list[_Extracted], function_name: str) -> dict[str, meta.Datum]:
    metadata: dict[str, meta.Datum] = {}
    for array, key in HOST_BATCH_ARRAYS.items():
        metadata[array] = meta.Datum(json.dumps([_plain(e.fields[key]) for e in extracted]), "json")
    props = [e.props for e in extracted]
    metadata["ApplicationPropertiesArray"] = meta.Datum(json.dumps(props), "json")
    metadata["UserPropertiesArray"] = meta.Datum(json.dumps(props), "json")
    metadata["sys"] = _sys_metadata(function_name)
    return metadata


def _as_batch_member(extracted: _Extracted) -> _Extracted:
    """The fields a batch message gets in Azure: only those the host's arrays carry."""
    return _Extracted(
        {k: v if k in _BATCH_FIELDS else None for k, v in extracted.fields.items()}, extracted.props
    )


def batch_trigger_metadata(
    messages: Iterable[ServiceBusReceivedMessage], function_name: str
) -> dict[str, meta.Datum]:
    """Batch trigger metadata: one ``<Name>Array`` per field (``UserPropertiesArray`` marks a batch)."""
    return _batch_metadata([_extract(m) for m in messages], function_name)


def _build(
    message: ServiceBusReceivedMessage, extracted: _Extracted, metadata: Mapping[str, meta.Datum]
) -> func.ServiceBusMessage:
    fields = extracted.fields
    return WorkerServiceBusMessage(
        body=message_body(message),
        trigger_metadata=metadata,
        application_properties=extracted.props,
        content_type=fields["ContentType"],
        correlation_id=fields["CorrelationId"],
        dead_letter_error_description=fields["DeadLetterErrorDescription"],
        dead_letter_reason=fields["DeadLetterReason"],
        dead_letter_source=fields["DeadLetterSource"],
        delivery_count=fields["DeliveryCount"],
        enqueued_sequence_number=fields["EnqueuedSequenceNumber"],
        enqueued_time_utc=fields["EnqueuedTimeUtc"],
        expires_at_utc=fields["ExpiresAtUtc"],
        label=fields["Label"],
        locked_until=fields["LockedUntil"],
        lock_token=fields["LockToken"],
        message_id=fields["MessageId"] or "",
        partition_key=fields["PartitionKey"],
        reply_to=fields["ReplyTo"],
        reply_to_session_id=fields["ReplyToSessionId"],
        scheduled_enqueue_time_utc=fields["ScheduledEnqueueTimeUtc"],
        sequence_number=fields["SequenceNumber"],
        session_id=fields["SessionId"],
        state=fields["State"],
        subject=fields["Subject"],
        time_to_live=fields["TimeToLive"],
        to=fields["To"],
        user_properties=extracted.props,
    )


def to_function_message(
    message: ServiceBusReceivedMessage, metadata: Mapping[str, meta.Datum]
) -> func.ServiceBusMessage:
    """The ``func.ServiceBusMessage`` the worker would build for ``message`` with ``metadata``."""
    return _build(message, _extract(message), metadata)


def to_function_messages(
    messages: list[ServiceBusReceivedMessage], function_name: str
) -> list[func.ServiceBusMessage]:
    """A batch, every message sharing the batch's array metadata (as the worker does)."""
    extracted = [_as_batch_member(_extract(m)) for m in messages]
    metadata = _batch_metadata(extracted, function_name)
    return [_build(m, e, metadata) for m, e in zip(messages, extracted, strict=True)]


def to_single_function_message(
    message: ServiceBusReceivedMessage, function_name: str
) -> func.ServiceBusMessage:
    """One message with its single-message metadata."""
    extracted = _extract(message)
    return _build(message, extracted, _LazySingleMetadata(extracted, function_name))
