"""A .NET sender's described application properties (``Uri``, ``DateTimeOffset``, ``TimeSpan``, and
descriptors nobody knows) survive the re-drive and the console: re-driven twice, every copy carries each
descriptor and the described value's type; archived, the row holds them; the console shows them as a .NET
consumer reads them and its retry sends them as they came. The original is written by qpid-proton, as a .NET
sender writes it, and every copy read with qpid-proton (tests/shared/envelope/wire_types.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from emulator.testing import EmulatorHandle
from shared.amqp.connection import Namespace
from shared.api import ApiRequest
from shared.archive.reader import read_archive, row_properties
from shared.envelope.properties import Described, amqp_type
from shared.management import ManagementClient
from shared.ops.service import OpsService
from shared.redrive.job import run_redrive
from tests.devhost.typed_sender import dotnet_message, send_typed
from tests.shared.envelope.wire_types import (
    DESCRIBED,
    DESCRIBED_BY_PROTON,
    DESCRIBED_EXACT,
    stored_properties,
    types_of,
)
from tests.shared.redrive.redrive_support import (
    management_settings,
    peek_queue,
    receive_all,
    redrive_env,
)


def _dead_letter_dotnet_message(emulator: EmulatorHandle, queue: str, message_id: str) -> None:
    """A .NET sender's message with every described property, dead-lettered by a handler that failed."""
    send_typed(emulator.connection_string, queue, dotnet_message("{}", message_id, **DESCRIBED_BY_PROTON))
    _fail_again(emulator, queue)


def _fail_again(emulator: EmulatorHandle, queue: str) -> None:
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        [item] = receive_all(receiver, 1)
        receiver.dead_letter_message(item, reason="MaxDeliveryCountExceeded", error_description="again")


def _described_types(properties: dict[str, Any]) -> dict[str, str]:
    return types_of(properties, DESCRIBED)


def test_a_dotnet_message_with_described_properties_is_redriven_twice_and_archived_with_them_intact(
    emulator: EmulatorHandle, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    _dead_letter_dotnet_message(emulator, queue, "described-1")
    env = redrive_env(emulator, tmp_path, [queue], BUSBAR_REDRIVE_MAX_REDRIVES="2")

    totals = []
    for attempt in (1, 2, 3):
        totals.append(run_redrive(env, receive_wait=0.3).totals())
        if attempt < 3:
            [copy] = stored_properties(emulator, queue)
            assert _described_types(copy) == DESCRIBED_EXACT
            assert {name: copy[name].value for name in ("offset", "duration")} == {
                "offset": DESCRIBED["offset"].value,
                "duration": DESCRIBED["duration"].value,
            }
            _fail_again(emulator, queue)

    assert [t["redriven"] for t in totals] == [1, 1, 0] and totals[2]["archived"] == 1
    (row,) = read_archive(str(tmp_path)).to_pylist()
    properties = row_properties(row)
    assert {name: properties[name] for name in DESCRIBED} == DESCRIBED
    assert {
        name: (value.descriptor, amqp_type(value.value).value)
        for name, value in properties.items()
        if isinstance(value, Described)
    } == {name: (value.descriptor, amqp_type(value.value).value) for name, value in DESCRIBED.items()}
    assert '"$described"' in row["application_properties"]


def test_the_console_shows_described_properties_readably_and_its_retry_sends_them_intact(
    emulator: EmulatorHandle, provision: Any, tmp_path: Path
) -> None:
    queue = provision.queue()
    _dead_letter_dotnet_message(emulator, queue, "described-console")
    console = OpsService(
        redrive_env(emulator, tmp_path, [queue]),
        lambda: ManagementClient(management_settings(emulator)),
        lambda: Namespace.from_connection_string(emulator.connection_string),
    )
    [dead] = peek_queue(emulator.connection_string, queue, ServiceBusSubQueue.DEAD_LETTER)
    number = str(dead.sequence_number)

    shown = console.failure(ApiRequest("GET", route_params={"entity": queue, "sequenceNumber": number}))
    assert {name: shown.body["applicationProperties"][name] for name in DESCRIBED} == {
        "uri": "https://example.com/orders/A-1?tenant=acme",
        "offset": "2026-11-26T09:30:15.1234567+00:00",
        "duration": "1.02:03:04.5000001",
        "custom_symbol": "gold",
        "custom_code": "7",
    }

    body = json.dumps({"entity": queue, "sequenceNumbers": [int(number)]}).encode()
    retried = console.retry(ApiRequest("POST", body=body))
    assert retried.body["summary"]["totals"]["redriven"] == 1, retried.body
    [copy] = stored_properties(emulator, queue)
    assert _described_types(copy) == DESCRIBED_EXACT
    assert copy["uri"].value == DESCRIBED["uri"].value
