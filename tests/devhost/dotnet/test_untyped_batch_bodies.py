"""An untyped Service Bus batch (``cardinality: many``, no ``dataType``) as the Functions host sends it: the
host binds ``object[]``, webjobs-sdk reads each body with ``JsonConvert.DeserializeObject(text,
typeof(object))`` and the host writes the array back with Json.NET, so the worker gets one ``json``
TypedData with each body as Json.NET rewrote it (dates re-formatted: azure-functions-python-worker#1401),
and a body that is not JSON fails the invocation before any worker sees it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from devhost.channel.invocation_rpc import invocation_message
from devhost.channel.protocol import (
    FunctionMetadata,
    InvocationRequest,
    ServiceBusInput,
    ServiceBusMessageData,
    ServiceBusShape,
)
from devhost.channel.trigger_data import HOST_BATCH_ARRAYS, TriggerBindingError, trigger_data
from devhost.dotnet.json_net import JsonNetReaderError, json_net_roundtrip


@pytest.mark.parametrize(
    ("body", "written"),
    [
        # The report of azure-functions-python-worker#1401: a trailing zero of the fraction is gone.
        ('{"value": "2024-01-19T12:50:41.250940Z"}', '{"value":"2024-01-19T12:50:41.25094Z"}'),
        ('"2024-01-19T12:50:41"', '"2024-01-19T12:50:41"'),  # no zone: kind Unspecified, none written
        # An offset: a local DateTime on a machine in UTC, as Azure's workers are.
        ('"2024-01-19T12:50:41.5+02:00"', '"2024-01-19T10:50:41.5+00:00"'),
        ('"2024-01-19"', '"2024-01-19"'),  # a date alone is not read as a DateTime
        ('"2024-01-19T12:50:41.12345678Z"', '"2024-01-19T12:50:41.12345678Z"'),  # 8 digits: a string
        ("1.0", "1.0"),
        ("2.50", "2.5"),
        ("1e3", "1000.0"),
        ("1e15", "1E+15"),
        ("0.0001", "0.0001"),
        ("0.00001", "1E-05"),
        ("-1.5e-7", "-1.5E-07"),
        ("123456789012345678901234", "123456789012345678901234"),  # a BigInteger
        ("NaN", '"NaN"'),
        ('[1, "a", null, true, {"b": []}]', '[1,"a",null,true,{"b":[]}]'),
        ('"line\\nbreak \\u2028"', '"line\\nbreak \\u2028"'),
        ("", "null"),
        ("  \n", "null"),
    ],
)
def test_a_body_is_what_json_net_writes_after_reading_it_as_an_object(body: str, written: str) -> None:
    assert json_net_roundtrip(body) == written


@pytest.mark.parametrize("body", ["plain text", "{'single': 'quotes'}", '{"a": 1} trailing', "[1, 2"])
def test_a_body_json_net_cannot_read_is_refused(body: str) -> None:
    with pytest.raises(JsonNetReaderError, match="Path ''"):
        json_net_roundtrip(body)


def _message(body: bytes, n: int) -> ServiceBusMessageData:
    enqueued = datetime(2026, 11, 27, 13, 0, n, 120000, tzinfo=UTC)
    return ServiceBusMessageData(
        body,
        {"MessageId": f"m{n}", "DeliveryCount": 1, "EnqueuedTimeUtc": enqueued, "ExpiresAtUtc": enqueued},
        {"i": n},
    )


def test_an_untyped_batch_is_one_json_array_of_the_rewritten_bodies() -> None:
    bodies = [b'{"at": "2026-11-27T13:00:00.100Z", "n": 1.0}', b"42", b""]
    data = ServiceBusInput("object", True, messages=tuple(_message(b, n) for n, b in enumerate(bodies)))

    typed, metadata = trigger_data(data, "batch")

    assert typed.WhichOneof("data") == "json"
    assert typed.json == '[{"at":"2026-11-27T13:00:00.1Z","n":1.0},42,null]'
    assert set(metadata) == {*HOST_BATCH_ARRAYS, "ApplicationPropertiesArray", "UserPropertiesArray", "sys"}


def test_a_batchs_date_arrays_are_json_net_text_of_the_extensions_types() -> None:
    data = ServiceBusInput("str", True, messages=(_message(b"a", 1), _message(b"b", 2)))

    _, metadata = trigger_data(data, "batch")

    # DateTime[] of kind Unspecified (``EnqueuedTime.DateTime``): no zone; DateTimeOffset[]: +00:00.
    assert json.loads(metadata["EnqueuedTimeUtcArray"].json) == [
        "2026-11-27T13:00:01.12",
        "2026-11-27T13:00:02.12",
    ]
    assert json.loads(metadata["EnqueuedTimeArray"].json) == [
        "2026-11-27T13:00:01.12+00:00",
        "2026-11-27T13:00:02.12+00:00",
    ]
    assert json.loads(metadata["ExpiresAtArray"].json)[0] == "2026-11-27T13:00:01.12+00:00"


def test_a_body_that_is_not_json_fails_the_untyped_batchs_binding_naming_the_parameter() -> None:
    function = FunctionMetadata(
        "batch",
        "batch-id",
        "serviceBusTrigger",
        {},
        "msgs",
        ServiceBusShape("q", "q", None, None, False, True, None, "object"),
    )
    data = ServiceBusInput("object", True, messages=(_message(b"{}", 1), _message(b"not json", 2)))

    with pytest.raises(TriggerBindingError) as refused:
        invocation_message(function, InvocationRequest("batch", "inv-1", data))

    message = str(refused.value)
    assert message.startswith("Exception binding parameter 'msgs': Binding parameters to complex objects")
    assert "Bind the parameter type as 'string'" in message
    assert "Unexpected character encountered while parsing value: n." in message
