"""A plain (``func.ServiceBusMessage``) trigger gets a .NET sender's described application properties as the
Functions host hands them over: its .NET SDK reads ``com.microsoft:uri`` as a ``Uri``,
``com.microsoft:datetime-offset`` as a ``DateTimeOffset`` and ``com.microsoft:timespan`` as a ``TimeSpan``,
leaves a property with any other descriptor out, and Json.NET writes the rest into the trigger metadata
(``UserProperties`` / ``ApplicationProperties``). An SDK-type trigger gets the bytes as they came (the
descriptors too: tests/shared/envelope/test_described_properties.py reads them at Busbar's edge)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import proton
import pytest

from devhost.servicebus.message_reading import message_data
from devhost.servicebus.model_binding_data import LOCK_TOKEN_MARKER, model_binding_content
from devhost.testing import HostHandle, running_host
from emulator.testing import EmulatorHandle
from shared.envelope.properties import datetime_offset_text, timespan_text
from tests.devhost.conftest import APPS, Records, app_settings
from tests.devhost.seam_receiving import receive_as_the_listeners_do
from tests.devhost.typed_sender import dotnet_message, send_typed
from tests.shared.envelope.wire_types import (
    DESCRIBED_BY_PROTON,
    DESCRIBED_EXACT,
    stored_properties,
    types_of,
)

AS_THE_HOST_WRITES_THEM = {
    "uri": "https://example.com/orders/A-1?tenant=acme",  # Uri: Json.NET writes its OriginalString
    "offset": "2026-11-26T09:30:15.1234567+00:00",  # DateTimeOffset(new DateTime(ticks, Utc))
    "duration": "1.02:03:04.5000001",  # TimeSpan.ToString()
    "tenant": "acme",
    # custom_symbol and custom_code: TryGetNetObjectFromAmqpObject knows no other descriptor, so the .NET
    # SDK leaves them out of ApplicationProperties.
}


@pytest.fixture(scope="module")
def queue(shared_emulator: EmulatorHandle) -> str:
    return shared_emulator.create_queue()


@pytest.fixture(scope="module")
def host(shared_emulator: EmulatorHandle, queue: str, module_records: Records) -> Iterator[HostHandle]:
    settings = app_settings(
        shared_emulator, module_records.path, {"PLAIN_QUEUE": queue, "SDK_QUEUE": f"{queue}-unused"}
    )
    shared_emulator.create_queue(f"{queue}-unused")
    with running_host(APPS / "codec_app.py", settings=settings) as handle:
        yield handle


def _send_dotnet(emulator: EmulatorHandle, queue: str, body: str) -> None:
    send_typed(
        emulator.connection_string, queue, dotnet_message(body, body, **DESCRIBED_BY_PROTON, tenant="acme")
    )


def test_a_plain_trigger_gets_dotnet_described_properties_as_the_hosts_json_writes_them(
    host: HostHandle, shared_emulator: EmulatorHandle, queue: str, module_records: Records
) -> None:
    body = f"described-{uuid.uuid4().hex[:6]}"
    _send_dotnet(shared_emulator, queue, body)
    module_records.wait(lambda rs: body in {r.get("body") for r in rs})
    (seen,) = module_records.of("plain_reads", body=body)
    assert seen["properties"] == AS_THE_HOST_WRITES_THEM


def test_the_host_side_reads_described_properties_as_the_dotnet_sdk_and_passes_sdk_types_the_bytes(
    shared_emulator: EmulatorHandle,
) -> None:
    queue = shared_emulator.create_queue()
    _send_dotnet(shared_emulator, queue, "m")
    [message] = receive_as_the_listeners_do(shared_emulator.connection_string, queue, 1)
    data = message_data(message)
    content = model_binding_content(message)
    assert data.properties == AS_THE_HOST_WRITES_THEM
    decoded = proton.Message()
    decoded.decode(content[content.index(LOCK_TOKEN_MARKER) + len(LOCK_TOKEN_MARKER) :])
    raw: dict[Any, Any] = dict(decoded.properties or {})
    sent = {str(name): value for name, value in raw.items()}
    assert types_of(sent) == {**DESCRIBED_EXACT, "tenant": "string"}


@pytest.mark.parametrize(
    ("ticks", "text"),
    [
        (0, "00:00:00"),
        (1, "00:00:00.0000001"),
        (-50_000_000, "-00:00:05"),
        (937_845_000_001, "1.02:03:04.5000001"),
        (-937_845_000_001, "-1.02:03:04.5000001"),
        (9_223_372_036_854_775_807, "10675199.02:48:05.4775807"),  # TimeSpan.MaxValue
    ],
)
def test_a_timespan_is_written_as_dotnets_constant_format(ticks: int, text: str) -> None:
    assert timespan_text(ticks) == text


@pytest.mark.parametrize(
    ("ticks", "text"),
    [
        (0, "0001-01-01T00:00:00+00:00"),  # DateTimeOffset.MinValue
        (630_822_816_000_000_000, "2000-01-01T00:00:00+00:00"),
        (630_822_816_000_001_200, "2000-01-01T00:00:00.00012+00:00"),
        (3_155_378_975_999_999_999, "9999-12-31T23:59:59.9999999+00:00"),  # DateTimeOffset.MaxValue
    ],
)
def test_a_datetime_offset_is_written_as_json_net_writes_it(ticks: int, text: str) -> None:
    assert datetime_offset_text(ticks) == text


def test_the_dotnet_sender_puts_the_described_types_on_the_wire_as_tests_expect(
    shared_emulator: EmulatorHandle,
) -> None:
    # The premise of the tests above: proton writes each property described, as Microsoft.Azure.Amqp does.
    queue = shared_emulator.create_queue()
    _send_dotnet(shared_emulator, queue, "m")
    [stored] = stored_properties(shared_emulator, queue)
    assert types_of(stored) == {**DESCRIBED_EXACT, "tenant": "string"}
