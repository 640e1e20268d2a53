"""Trigger data in FunctionRpc form, as the Functions host sends it to a language worker.

The host turns each binding value into ``TypedData`` with ``RpcMessageConversionExtensions.ToRpc``
(azure-functions-host, ``src/WebJobs.Script.Grpc/MessageExtensions/RpcMessageConversionExtensions.cs``):
``null`` -> empty, ``byte[]`` -> ``bytes``, ``string`` -> ``string``, an array -> a typed collection (the
Python worker asks for ``TypedDataCollection``: ``string[]`` -> ``collection_string`` without null or
empty elements, ``long[]`` -> ``collection_sint64``, ``byte[][]`` -> ``collection_bytes``, any other array
-> JSON), anything else -> JSON through Json.NET (numbers, booleans, ``DateTime``, ``TimeSpan``,
dictionaries). Never ``int`` or ``double``, which ``azure_functions_runtime`` refuses in trigger metadata.

An HTTP request becomes ``RpcHttp`` (``ToRpcHttp``): the URL as received, header names in lower case,
query values that are not empty, the route values as ``params``, and the body as bytes (the Python
worker asks for raw body bytes) when there is one. The HTTP trigger sends no trigger metadata (the Python
runtime declares ``RpcHttpTriggerMetadataRemoved``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from devhost.dotnet_json import JsonNetReaderError, json_net_roundtrip, poco_binding_error
from devhost.dotnet_values import iso, net_datetime, plain
from devhost.rpc.protos import load as load_protos
from devhost.worker_protocol import (
    HttpInput,
    InvocationInput,
    ManualServiceBusInput,
    ServiceBusInput,
    ServiceBusMessageData,
    TimerInput,
)

# The model binding data the host's Service Bus extension sends for an SDK-type parameter (its content:
# devhost.model_binding_data).
MODEL_BINDING_DATA_VERSION = "1.0"
MODEL_BINDING_DATA_SOURCE = "AzureServiceBusReceivedMessage"
MODEL_BINDING_DATA_CONTENT_TYPE = "application/octet-stream"

# The binding data the host's Service Bus extension gives one message (ServiceBusTriggerBindingStrategy
# .AddBindingData(..., ServiceBusReceivedMessage), azure-sdk-for-net sdk/servicebus/
# Microsoft.Azure.WebJobs.Extensions.ServiceBus/src/Triggers/ServiceBusTriggerBindingStrategy.cs): each key
# with its .NET type and the message field it is read from, besides ApplicationProperties/UserProperties and
# the actions objects (which no Python binding reads). Nothing else: a function's message has no
# TimeToLive, LockedUntil, State, DeadLetterReason... in Azure.
HOST_SINGLE_KEYS: dict[str, tuple[str, str]] = {
    "DeliveryCount": ("int", "DeliveryCount"),
    "DeadLetterSource": ("string", "DeadLetterSource"),
    "LockToken": ("string", "LockToken"),
    "ExpiresAtUtc": ("DateTime", "ExpiresAtUtc"),
    "ExpiresAt": ("DateTimeOffset", "ExpiresAtUtc"),
    "EnqueuedTimeUtc": ("DateTime", "EnqueuedTimeUtc"),
    "EnqueuedTime": ("DateTimeOffset", "EnqueuedTimeUtc"),
    "MessageId": ("string", "MessageId"),
    "ContentType": ("string", "ContentType"),
    "ReplyTo": ("string", "ReplyTo"),
    "SequenceNumber": ("long", "SequenceNumber"),
    "To": ("string", "To"),
    "Subject": ("string", "Subject"),
    "Label": ("string", "Subject"),
    "CorrelationId": ("string", "CorrelationId"),
    "SessionId": ("string", "SessionId"),
    "ReplyToSessionId": ("string", "ReplyToSessionId"),
    "PartitionKey": ("string", "PartitionKey"),
    "TransactionPartitionKey": ("string", "TransactionPartitionKey"),
}

# The arrays the host's Service Bus extension puts in a batch's binding data
# (ServiceBusTriggerBindingStrategy.GetBindingData for ServiceBusReceivedMessage[]): the array's .NET element
# type and the message field it is read from. Nothing else of a batch's messages reaches the worker.
HOST_BATCH_ARRAYS: dict[str, tuple[str, str]] = {
    "DeliveryCountArray": ("int", "DeliveryCount"),
    "DeadLetterSourceArray": ("string", "DeadLetterSource"),
    "LockTokenArray": ("string", "LockToken"),
    "ExpiresAtUtcArray": ("DateTime", "ExpiresAtUtc"),
    "ExpiresAtArray": ("DateTimeOffset", "ExpiresAtUtc"),
    "EnqueuedTimeUtcArray": ("DateTime", "EnqueuedTimeUtc"),
    "EnqueuedTimeArray": ("DateTimeOffset", "EnqueuedTimeUtc"),
    "MessageIdArray": ("string", "MessageId"),
    "ContentTypeArray": ("string", "ContentType"),
    "ReplyToArray": ("string", "ReplyTo"),
    "SequenceNumberArray": ("long", "SequenceNumber"),
    "ToArray": ("string", "To"),
    "SubjectArray": ("string", "Subject"),
    "LabelArray": ("string", "Subject"),
    "CorrelationIdArray": ("string", "CorrelationId"),
    "SessionIdArray": ("string", "SessionId"),
    "ReplyToSessionIdArray": ("string", "ReplyToSessionId"),
    "PartitionKeyArray": ("string", "PartitionKey"),
    "TransactionPartitionKeyArray": ("string", "PartitionKey"),
}


_DEFAULT_DATETIME = "0001-01-01T00:00:00"  # Json.NET's text for default(DateTime)


def _json(value: Any) -> str:
    """Json.NET's text for a value (compact, dates and durations in the host's text forms)."""
    return json.dumps(plain(value), separators=(",", ":"))


def to_rpc(value: Any) -> Any:
    """One binding-data value as the host's ``ToRpc`` makes it (scalars and dictionaries)."""
    protos = load_protos()
    if value is None:
        return protos.TypedData()
    if isinstance(value, bytes):
        return protos.TypedData(bytes=value)
    if isinstance(value, str):
        return protos.TypedData(string=str(value))
    return protos.TypedData(json=_json(value))


def _array(element_type: str, values: Sequence[Any]) -> Any:
    """A .NET array as ``ToRpcCollection`` makes it."""
    protos = load_protos()
    if element_type == "string":
        kept = [str(v) for v in values if v is not None and str(v) != ""]
        return protos.TypedData(collection_string=protos.CollectionString(string=kept))
    if element_type == "long":
        return protos.TypedData(
            collection_sint64=protos.CollectionSInt64(sint64=[int(v or 0) for v in values])
        )
    if element_type in ("DateTime", "DateTimeOffset"):
        # DateTime[] (the extension's ``.DateTime``, kind Unspecified: no zone) or DateTimeOffset[]
        # (``+00:00``), each in Json.NET's ISO text; a missing date is .NET's default(DateTime).
        zone = "+00:00" if element_type == "DateTimeOffset" else ""
        texts = [
            net_datetime(v, zone) if isinstance(v, datetime) else _DEFAULT_DATETIME + zone for v in values
        ]
        return protos.TypedData(json=json.dumps(texts, separators=(",", ":")))
    return protos.TypedData(json=_json(list(values)))


def _sys(function_name: str) -> Any:
    """The ``sys`` binding data every trigger carries."""
    return to_rpc(
        {"MethodName": function_name, "UtcNow": iso(datetime.now(UTC)), "RandGuid": str(uuid.uuid4())}
    )


def _net_datetime(value: datetime, *, offset: bool) -> str:
    """Json.NET's ISO text for a ``DateTime`` (``offset`` False: the extension's ``ExpiresAt.DateTime``,
    kind Unspecified, written without a zone) or a ``DateTimeOffset`` (``+00:00``)."""
    return json.dumps(net_datetime(value, "+00:00" if offset else ""))


def _single_value(net_type: str, value: Any) -> Any:
    if net_type in ("DateTime", "DateTimeOffset") and isinstance(value, datetime):
        return load_protos().TypedData(json=_net_datetime(value, offset=net_type == "DateTimeOffset"))
    return to_rpc(value)


def _single_metadata(message: ServiceBusMessageData, function_name: str) -> dict[str, Any]:
    fields = message.fields
    metadata = {
        key: _single_value(net_type, fields.get(field))
        for key, (net_type, field) in HOST_SINGLE_KEYS.items()
        if fields.get(field) is not None  # the host leaves out binding data that is null
    }
    metadata["ApplicationProperties"] = metadata["UserProperties"] = to_rpc(message.properties)
    metadata["sys"] = _sys(function_name)
    return metadata


def _batch_metadata(messages: Sequence[ServiceBusMessageData], function_name: str) -> dict[str, Any]:
    metadata = {
        array: _array(element_type, [m.fields.get(field) for m in messages])
        for array, (element_type, field) in HOST_BATCH_ARRAYS.items()
    }
    properties = [m.properties for m in messages]
    metadata["ApplicationPropertiesArray"] = metadata["UserPropertiesArray"] = to_rpc(properties)
    metadata["sys"] = _sys(function_name)
    return metadata


class TriggerBindingError(ValueError):
    """The host cannot bind the trigger's data to the parameter: the invocation fails before any worker
    sees it (in Azure: ``InvalidOperationException`` from webjobs-sdk's binding)."""


def _json_net_bodies(messages: Sequence[ServiceBusMessageData]) -> Any:
    """An untyped batch (``object[]``): each body read and written by Json.NET, sent as one JSON array."""
    texts = []
    for message in messages:
        try:
            texts.append(json_net_roundtrip(message.body.decode("utf-8", errors="replace")))
        except JsonNetReaderError as exc:
            raise TriggerBindingError(poco_binding_error(str(exc))) from None
    return load_protos().TypedData(json="[" + ",".join(texts) + "]")


def _model_binding_data(content: bytes) -> Any:
    protos = load_protos()
    return protos.ModelBindingData(
        version=MODEL_BINDING_DATA_VERSION,
        source=MODEL_BINDING_DATA_SOURCE,
        content_type=MODEL_BINDING_DATA_CONTENT_TYPE,
        content=content,
    )


def _service_bus(data: ServiceBusInput, function_name: str) -> tuple[Any, dict[str, Any]]:
    protos = load_protos()
    if data.payload == "sdk":
        # The extension's SDK types: model binding data, no trigger metadata the converter reads.
        contents = [_model_binding_data(content) for content in data.binding_data]
        if data.batch:
            collection = protos.CollectionModelBindingData(model_binding_data=contents)
            return protos.TypedData(collection_model_binding_data=collection), {"sys": _sys(function_name)}
        return protos.TypedData(model_binding_data=contents[0]), {"sys": _sys(function_name)}
    # The host binds the trigger as ``string`` (no dataType, or ``string``: the body as text, decoded as
    # .NET's BinaryData.ToString() does, UTF-8 with U+FFFD for bytes that are not: azure-functions-host#3125)
    # or as ``byte[]`` (``binary``: the body's bytes), and sends the message's binding data as trigger
    # metadata either way.
    text = data.payload == "str"
    if data.batch:
        metadata = _batch_metadata(data.messages, function_name)
        if data.payload == "object":
            return _json_net_bodies(data.messages), metadata
        if text:
            texts = [m.body.decode("utf-8", errors="replace") for m in data.messages]
            strings = protos.CollectionString(string=texts)
            return protos.TypedData(collection_string=strings), metadata
        return protos.TypedData(
            collection_bytes=protos.CollectionBytes(bytes=[m.body for m in data.messages])
        ), (metadata)
    [message] = data.messages
    body = (
        protos.TypedData(string=message.body.decode("utf-8", errors="replace"))
        if text
        else protos.TypedData(bytes=message.body)
    )
    return body, _single_metadata(message, function_name)


def _manual(data: ManualServiceBusInput, function_name: str) -> tuple[Any, dict[str, Any]]:
    """A manual run (``POST /admin/functions/{name}``): a message made from the input, one delivery."""
    message = ServiceBusMessageData(
        data.body,
        {"MessageId": data.message_id, "DeliveryCount": 1, "EnqueuedTimeUtc": data.enqueued_time_utc},
        {},
    )
    if data.batch:
        return load_protos().TypedData(collection_bytes=load_protos().CollectionBytes(bytes=[data.body])), (
            _batch_metadata([message], function_name)
        )
    return to_rpc(data.body), _single_metadata(message, function_name)


def _http(data: HttpInput) -> Any:
    protos = load_protos()
    http = protos.RpcHttp(
        method=data.method,
        url=data.url,
        headers={name.lower(): value for name, value in data.headers.items()},
        query={name: value for name, value in data.params.items() if value},
        params={name: str(value) for name, value in data.route_params.items() if value is not None},
    )
    if data.body:
        http.body.CopyFrom(protos.TypedData(bytes=data.body))
    return protos.TypedData(http=http)


def _timer(data: TimerInput) -> Any:
    """The host's ``TimerInfo``, serialised by Json.NET."""
    info: Mapping[str, Any] = {
        "Schedule": dict(data.schedule),
        "ScheduleStatus": dict(data.schedule_status) or None,
        "IsPastDue": data.past_due,
    }
    return to_rpc(info)


def trigger_data(data: InvocationInput, function_name: str) -> tuple[Any, dict[str, Any]]:
    """The trigger parameter's ``TypedData`` and the invocation's trigger metadata for ``data``."""
    if isinstance(data, ServiceBusInput):
        return _service_bus(data, function_name)
    if isinstance(data, ManualServiceBusInput):
        return _manual(data, function_name)
    if isinstance(data, HttpInput):
        return _http(data), {}
    if isinstance(data, TimerInput):
        return _timer(data), {"sys": _sys(function_name)}
    raise TypeError(f"no trigger data for {type(data).__name__}")
