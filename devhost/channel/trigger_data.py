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

import functools
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from devhost.channel.protocol import (
    HttpInput,
    InvocationInput,
    ManualServiceBusInput,
    ServiceBusInput,
    ServiceBusMessageData,
    TimerInput,
)
from devhost.channel.protos import load as load_protos
from devhost.dotnet.json_net import JsonNetReaderError, json_net_roundtrip, poco_binding_error
from devhost.dotnet.values import iso, net_datetime, plain

# The model binding data the host's Service Bus extension sends for an SDK-type parameter (its content:
# devhost.servicebus.model_binding_data).
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


def _sys_json(function_name: str) -> str:
    """The ``sys`` binding data every trigger carries, as Json.NET writes it: ``_json`` of
    ``{"MethodName": ..., "UtcNow": ..., "RandGuid": ...}``, the name's JSON text made once per function (the
    time's ISO text and the GUID need no escaping)."""
    now = iso(datetime.now(UTC))
    return f'{_method_name_json(function_name)},"UtcNow":"{now}","RandGuid":"{uuid.uuid4()}"}}'


@functools.cache
def _method_name_json(function_name: str) -> str:
    return '{"MethodName":' + json.dumps(function_name)


def _sys(function_name: str) -> Any:
    """The ``sys`` binding data every trigger carries."""
    return load_protos().TypedData(json=_sys_json(function_name))


def _net_datetime(value: datetime, *, offset: bool) -> str:
    """Json.NET's ISO text for a ``DateTime`` (``offset`` False: the extension's ``ExpiresAt.DateTime``,
    kind Unspecified, written without a zone) or a ``DateTimeOffset`` (``+00:00``): a JSON string (the text
    is digits and separators, nothing to escape)."""
    return '"' + net_datetime(value, "+00:00" if offset else "") + '"'


def _put_single(entry: Any, net_type: str, value: Any) -> None:
    """Write one binding-data value into ``entry`` (a ``TypedData``) as ``ToRpc`` makes it. The types a
    received message's fields have (str, int, datetime) are written directly; anything else as
    :func:`to_rpc` makes it."""
    kind = type(value)
    if kind is str:
        entry.string = value
    elif kind is int:  # JSON text of an int (not a bool: its type is not int)
        entry.json = str(value)
    elif isinstance(value, datetime) and net_type in ("DateTime", "DateTimeOffset"):
        entry.json = _net_datetime(value, offset=net_type == "DateTimeOffset")
    else:
        entry.CopyFrom(to_rpc(value))


def _properties_json(properties: Mapping[str, Any]) -> str:
    return "{}" if not properties else _json(properties)


def _put_single_metadata(target: Any, message: ServiceBusMessageData, function_name: str) -> None:
    """Write one message's trigger metadata into ``target`` (``InvocationRequest.trigger_metadata``)."""
    fields = message.fields
    for key, (net_type, field) in HOST_SINGLE_KEYS.items():
        value = fields.get(field)
        if value is not None:  # the host leaves out binding data that is null
            _put_single(target[key], net_type, value)
    properties = _properties_json(message.properties)
    target["ApplicationProperties"].json = target["UserProperties"].json = properties
    target["sys"].json = _sys_json(function_name)


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


def _text(body: bytes) -> str:
    # .NET's BinaryData.ToString(): UTF-8 with U+FFFD for bytes that are not (azure-functions-host#3125).
    return body.decode("utf-8", errors="replace")


def _service_bus(data: ServiceBusInput, function_name: str) -> tuple[Any, dict[str, Any]]:
    """A batch's or SDK types' trigger data (one message's is written in place by
    :func:`write_trigger_data`)."""
    protos = load_protos()
    if data.payload == "sdk":
        # The extension's SDK types: model binding data, no trigger metadata the converter reads.
        contents = [_model_binding_data(content) for content in data.binding_data]
        if data.batch:
            collection = protos.CollectionModelBindingData(model_binding_data=contents)
            return protos.TypedData(collection_model_binding_data=collection), {"sys": _sys(function_name)}
        return protos.TypedData(model_binding_data=contents[0]), {"sys": _sys(function_name)}
    metadata = _batch_metadata(data.messages, function_name)
    if data.payload == "object":
        return _json_net_bodies(data.messages), metadata
    if data.payload == "str":
        strings = protos.CollectionString(string=[_text(m.body) for m in data.messages])
        return protos.TypedData(collection_string=strings), metadata
    return protos.TypedData(collection_bytes=protos.CollectionBytes(bytes=[m.body for m in data.messages])), (
        metadata
    )


def _manual_message(data: ManualServiceBusInput) -> ServiceBusMessageData:
    """A manual run (``POST /admin/functions/{name}``): a message made from the input, one delivery."""
    return ServiceBusMessageData(
        data.body,
        {"MessageId": data.message_id, "DeliveryCount": 1, "EnqueuedTimeUtc": data.enqueued_time_utc},
        {},
    )


def _one_message(data: InvocationInput) -> tuple[Any, ServiceBusMessageData] | None:
    """For one (not batched) message not bound to SDK types: how its body goes (a ``TypedData`` field and
    value) and the message; None for any other input."""
    if isinstance(data, ServiceBusInput) and not data.batch and data.payload != "sdk":
        # The host binds the trigger as ``string`` (no dataType, or ``string``: the body as text) or as
        # ``byte[]`` (``binary``: the body's bytes), and sends the message's binding data as trigger metadata
        # either way.
        [message] = data.messages
        body = ("string", _text(message.body)) if data.payload == "str" else ("bytes", message.body)
        return body, message
    if isinstance(data, ManualServiceBusInput) and not data.batch:
        return ("bytes", data.body), _manual_message(data)  # to_rpc of the body's bytes
    return None


def write_trigger_data(invocation: Any, data: InvocationInput, function_name: str, trigger_arg: str) -> None:
    """Write the trigger parameter's ``TypedData`` and the trigger metadata for ``data`` into ``invocation``
    (an empty ``InvocationRequest``'s ``input_data`` and ``trigger_metadata``). One message's metadata is
    written field by field, without building each ``TypedData`` apart and copying it in (the host sends one
    such request per message)."""
    one = _one_message(data)
    binding = invocation.input_data.add(name=trigger_arg)
    if one is None:
        typed, metadata = trigger_data(data, function_name)
        binding.data.CopyFrom(typed)
        for key, value in metadata.items():
            invocation.trigger_metadata[key].CopyFrom(value)
        return
    (body_field, body), message = one
    setattr(binding.data, body_field, body)
    _put_single_metadata(invocation.trigger_metadata, message, function_name)


def _written(data: InvocationInput, function_name: str) -> tuple[Any, dict[str, Any]]:
    invocation = load_protos().InvocationRequest()
    write_trigger_data(invocation, data, function_name, "trigger")
    return invocation.input_data[0].data, dict(invocation.trigger_metadata)


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
    if _one_message(data) is not None:
        return _written(data, function_name)
    if isinstance(data, ServiceBusInput):
        return _service_bus(data, function_name)
    if isinstance(data, ManualServiceBusInput):  # a batch function's manual run
        message = _manual_message(data)
        return load_protos().TypedData(collection_bytes=load_protos().CollectionBytes(bytes=[data.body])), (
            _batch_metadata([message], function_name)
        )
    if isinstance(data, HttpInput):
        return _http(data), {}
    if isinstance(data, TimerInput):
        return _timer(data), {"sys": _sys(function_name)}
    raise TypeError(f"no trigger data for {type(data).__name__}")
