"""The ``InvocationRequest`` the host sends for one Service Bus message carries each binding-data value in
the text form the Functions host writes (``ToRpc``, Json.NET), whatever path devhost builds it by."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from devhost.channel.invocation_rpc import invocation_message
from devhost.channel.protocol import (
    FunctionMetadata,
    InvocationRequest,
    ManualServiceBusInput,
    ServiceBusInput,
    ServiceBusMessageData,
    ServiceBusShape,
)

SHAPE = ServiceBusShape("q", "q", None, None, False, False, None, "bytes")
FUNCTION = FunctionMetadata("on_order", "fn-id", "serviceBusTrigger", {}, "msg", SHAPE)
ENQUEUED = datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC)


class _Char(str):
    """A str subclass, as azure-servicebus's decoder makes an AMQP char."""


def _request(message: ServiceBusMessageData, payload: str = "bytes") -> Any:
    data = ServiceBusInput(payload, False, messages=(message,))  # type: ignore[arg-type]
    return invocation_message(FUNCTION, InvocationRequest("on_order", "inv-1", data)).invocation_request


def _forms(metadata: Any) -> dict[str, tuple[str | None, Any]]:
    return {
        key: (value.WhichOneof("data"), getattr(value, value.WhichOneof("data")))
        for key, value in metadata.items()
    }


def test_one_messages_metadata_has_each_value_in_the_hosts_text_form() -> None:
    message = ServiceBusMessageData(
        b"\x00body",
        {
            "DeliveryCount": 3,
            "SequenceNumber": 2**40,
            "MessageId": "m-1",
            "LockToken": "6efed816-ad47-4822-b339-61d7e7b142a5",
            "Subject": _Char("s"),
            "EnqueuedTimeUtc": ENQUEUED,
            "ExpiresAtUtc": datetime(2026, 3, 5, 7, 6, 7, tzinfo=timezone(timedelta(hours=2))),
            "ContentType": None,  # null: left out
            "TimeToLive": timedelta(minutes=5),  # no binding data of the host's: not sent
        },
        {"k": "v", "n": 1},
    )
    request = _request(message)
    forms = _forms(request.trigger_metadata)
    system = json.loads(forms.pop("sys")[1])
    assert forms == {
        "DeliveryCount": ("json", "3"),
        "SequenceNumber": ("json", "1099511627776"),
        "MessageId": ("string", "m-1"),
        "LockToken": ("string", "6efed816-ad47-4822-b339-61d7e7b142a5"),
        "Subject": ("string", "s"),
        "Label": ("string", "s"),
        # The extension's DateTime (kind Unspecified: no zone) and DateTimeOffset, to the 7th digit.
        "EnqueuedTimeUtc": ("json", '"2026-03-04T05:06:07.89"'),
        "EnqueuedTime": ("json", '"2026-03-04T05:06:07.89+00:00"'),
        "ExpiresAtUtc": ("json", '"2026-03-05T05:06:07"'),
        "ExpiresAt": ("json", '"2026-03-05T05:06:07+00:00"'),
        "ApplicationProperties": ("json", '{"k":"v","n":1}'),
        "UserProperties": ("json", '{"k":"v","n":1}'),
    }
    assert list(system) == ["MethodName", "UtcNow", "RandGuid"] and system["MethodName"] == "on_order"
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", system["RandGuid"]
    )
    assert datetime.fromisoformat(system["UtcNow"]).tzinfo is not None
    assert [(b.name, b.data.WhichOneof("data"), b.data.bytes) for b in request.input_data] == [
        ("msg", "bytes", b"\x00body")
    ]
    assert (request.invocation_id, request.function_id) == ("inv-1", "fn-id")


def test_a_string_bound_message_is_its_body_as_text_with_replacement_characters() -> None:
    request = _request(ServiceBusMessageData(b"caf\xc3\xa9 \xff"), payload="str")
    assert [(b.data.WhichOneof("data"), b.data.string) for b in request.input_data] == [
        ("string", "café \ufffd")
    ]
    assert _forms(request.trigger_metadata)["ApplicationProperties"] == ("json", "{}")


def test_a_manual_run_sends_its_input_as_one_message_delivered_once() -> None:
    data = ManualServiceBusInput(b"input", "m-9", ENQUEUED, batch=False)
    request = invocation_message(FUNCTION, InvocationRequest("on_order", "inv-2", data)).invocation_request
    forms = _forms(request.trigger_metadata)
    assert request.input_data[0].data.bytes == b"input"
    assert (forms["MessageId"], forms["DeliveryCount"], forms["EnqueuedTimeUtc"]) == (
        ("string", "m-9"),
        ("json", "1"),
        ("json", '"2026-03-04T05:06:07.89"'),
    )
