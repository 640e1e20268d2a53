"""host.json ``minMessageBatchSize`` / ``maxBatchWaitTime``: batch functions get at least the minimum, or what
waited the maximum time, or what a session held when it ran dry -- the extension's ServiceBusListener and
ServiceBusMessageManager (the cache is pinned in ``test_batch_cache``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from devhost.testing import HostHandle, running_host
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records, app_settings, send

MINIMUM = 3


@pytest.fixture(scope="module")
def entities(shared_emulator: EmulatorHandle) -> dict[str, str]:
    return {
        "MIN_BATCH_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(seconds=60)),
        "MIN_SESSION_QUEUE": shared_emulator.create_queue(
            requires_session=True, lock_duration=timedelta(seconds=60)
        ),
    }


@pytest.fixture(scope="module")
def host(
    shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> Iterator[HostHandle]:
    settings = app_settings(shared_emulator, module_records.path, entities)
    options = {
        "minMessageBatchSize": MINIMUM,
        "maxBatchWaitTime": "00:00:04",
        "sessionIdleTimeout": "00:00:02",
    }
    host_json = {"version": "2.0", "extensions": {"serviceBus": options}}
    with running_host(APPS / "min_batch_app.py", settings=settings, host_json=host_json) as handle:
        yield handle


def _batches(records: Records, function: str, run: str) -> list[list[str]]:
    return [r["bodies"] for r in records.of(function) if any(run in body for body in r["bodies"])]


def test_messages_arriving_one_by_one_wait_for_the_minimum_batch(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    bodies = [f"{run}-{n}" for n in range(MINIMUM)]
    for body in bodies:  # three receives' worth: without the minimum, three invocations of one
        send(shared_emulator.connection_string, entities["MIN_BATCH_QUEUE"], body)
        time.sleep(0.3)
    module_records.wait(lambda _: sum(map(len, _batches(module_records, "at_least", run))) >= MINIMUM)
    assert _batches(module_records, "at_least", run) == [bodies]


def test_fewer_than_the_minimum_go_out_together_once_they_waited_the_maximum_time(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    send(shared_emulator.connection_string, entities["MIN_BATCH_QUEUE"], f"{run}-a")
    time.sleep(0.3)
    send(shared_emulator.connection_string, entities["MIN_BATCH_QUEUE"], f"{run}-b")
    module_records.wait(lambda _: bool(_batches(module_records, "at_least", run)), timeout=30)
    assert _batches(module_records, "at_least", run) == [[f"{run}-a", f"{run}-b"]]


def test_a_sessions_messages_wait_for_the_minimum_and_go_out_together_when_the_session_ends(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    run = uuid.uuid4().hex[:6]
    session = f"s-{run}"
    # One sender for both: the gap between them is the sleep alone, not a second client's connection set-up
    # too (over a second on a loaded machine), which could outlast the session's 2 s idle timeout.
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_queue_sender(entities["MIN_SESSION_QUEUE"]) as sender,
    ):
        for body in (f"{run}-1", f"{run}-2"):
            sender.send_messages(ServiceBusMessage(body, session_id=session))
            time.sleep(1.2)  # past one receive's wait, within sessionIdleTimeout: two receives, one session
    module_records.wait(lambda _: bool(_batches(module_records, "session_at_least", run)), timeout=30)
    assert _batches(module_records, "session_at_least", run) == [[f"{run}-1", f"{run}-2"]]
