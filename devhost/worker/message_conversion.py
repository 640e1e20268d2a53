"""The worker's side of a Service Bus message: the plain data the host sends (``ServiceBusMessageData``)
-> ``azure.functions.ServiceBusMessage``, with the trigger metadata the host passes the worker
(``metadata`` on the message: ``MessageId``, ``DeliveryCount``, ``UserProperties``, ... as ``meta.Datum``
values, like the gRPC payload decodes to).

Timestamps are ISO-8601 UTC strings and the time-to-live a TimeSpan string in the metadata, as the host
serialises them; the typed properties carry datetime/timedelta values.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func
from azure.functions import meta
from azure.functions.servicebus import ServiceBusMessage as WorkerServiceBusMessage

from devhost.dotnet_values import iso, plain, timespan
from devhost.worker_protocol import ServiceBusMessageData


def _datum(value: Any) -> meta.Datum:
    if isinstance(value, bool):
        return meta.Datum(json.dumps(value), "json")
    if isinstance(value, int):
        return meta.Datum(value, "int")
    if isinstance(value, datetime):
        return meta.Datum(iso(value), "string")
    if isinstance(value, timedelta):
        return meta.Datum(timespan(value), "string")
    if isinstance(value, str):
        return meta.Datum(value, "string")
    return meta.Datum(json.dumps(plain(value)), "json")


def _sys_metadata(function_name: str, utc_now: datetime | None = None) -> meta.Datum:
    return _datum(
        {
            "MethodName": function_name,
            "UtcNow": iso(utc_now or datetime.now(UTC)),
            "RandGuid": str(uuid.uuid4()),
        }
    )


def _single_metadata(
    message: ServiceBusMessageData,
    function_name: str,
    utc_now: datetime | None = None,
    props: meta.Datum | None = None,
) -> dict[str, meta.Datum]:
    metadata = {key: _datum(value) for key, value in message.fields.items() if value is not None}
    metadata["UserProperties"] = metadata["ApplicationProperties"] = props or _datum(message.properties)
    metadata["sys"] = _sys_metadata(function_name, utc_now)
    return metadata


class _LazySingleMetadata(Mapping[str, meta.Datum]):
    """Single-message trigger metadata, encoded on first use.

    Most functions never read ``msg.metadata``, and encoding it is a good share of the conversion cost
    on every message. What could change before first use is taken at conversion: the trigger time
    (``sys.UtcNow``) and the user properties (a function may mutate ``msg.user_properties``, this dict)."""

    __slots__ = ("_function_name", "_message", "_metadata", "_props", "_utc_now")

    def __init__(self, message: ServiceBusMessageData, function_name: str) -> None:
        self._message = message
        self._function_name = function_name
        self._utc_now = datetime.now(UTC)
        self._props = _datum(message.properties)
        self._metadata: dict[str, meta.Datum] | None = None

    def _encoded(self) -> dict[str, meta.Datum]:
        if self._metadata is None:
            self._metadata = _single_metadata(self._message, self._function_name, self._utc_now, self._props)
        return self._metadata

    def __getitem__(self, key: str) -> meta.Datum:
        return self._encoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._encoded())

    def __len__(self) -> int:
        return len(self._encoded())


def trigger_metadata(message: ServiceBusMessageData, function_name: str) -> dict[str, meta.Datum]:
    """Single-message trigger metadata (``UserProperties`` present marks cardinality one)."""
    return _single_metadata(message, function_name)


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


def _batch_metadata(messages: Sequence[ServiceBusMessageData], function_name: str) -> dict[str, meta.Datum]:
    metadata: dict[str, meta.Datum] = {}
    for array, key in HOST_BATCH_ARRAYS.items():
        metadata[array] = meta.Datum(json.dumps([plain(m.fields[key]) for m in messages]), "json")
    props = [m.properties for m in messages]
    metadata["ApplicationPropertiesArray"] = meta.Datum(json.dumps(props), "json")
    metadata["UserPropertiesArray"] = meta.Datum(json.dumps(props), "json")
    metadata["sys"] = _sys_metadata(function_name)
    return metadata


def _as_batch_member(message: ServiceBusMessageData) -> ServiceBusMessageData:
    """The fields a batch message gets in Azure: only those the host's arrays carry."""
    return ServiceBusMessageData(
        message.body,
        {k: v if k in _BATCH_FIELDS else None for k, v in message.fields.items()},
        message.properties,
    )


def batch_trigger_metadata(
    messages: Sequence[ServiceBusMessageData], function_name: str
) -> dict[str, meta.Datum]:
    """Batch trigger metadata: one ``<Name>Array`` per field (``UserPropertiesArray`` marks a batch)."""
    return _batch_metadata(messages, function_name)


def _build(message: ServiceBusMessageData, metadata: Mapping[str, meta.Datum]) -> func.ServiceBusMessage:
    fields = message.fields
    props = message.properties  # one dict behind both property views, as today's worker message
    return WorkerServiceBusMessage(
        body=message.body,
        trigger_metadata=metadata,
        application_properties=props,
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
        user_properties=props,
    )


def to_function_message(
    message: ServiceBusMessageData, metadata: Mapping[str, meta.Datum]
) -> func.ServiceBusMessage:
    """The ``func.ServiceBusMessage`` the worker would build for ``message`` with ``metadata``."""
    return _build(message, metadata)


def to_function_messages(
    messages: Sequence[ServiceBusMessageData], function_name: str
) -> list[func.ServiceBusMessage]:
    """A batch, every message sharing the batch's array metadata (as the worker does)."""
    members = [_as_batch_member(m) for m in messages]
    metadata = _batch_metadata(members, function_name)
    return [_build(m, metadata) for m in members]


def to_single_function_message(message: ServiceBusMessageData, function_name: str) -> func.ServiceBusMessage:
    """One message with its single-message metadata."""
    return _build(message, _LazySingleMetadata(message, function_name))
