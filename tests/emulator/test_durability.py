"""Behaviour specs for durability across restarts of the ``python -m emulator`` process.

The emulator promises: a send the SDK saw succeed is on disk, and survives the process being killed
(SIGKILL) as well as a clean shutdown (SIGTERM); locks do not survive, so a message that was locked when the
process died is deliverable again after the restart; ``--in-memory`` keeps nothing. Each restart listens on
new ports, so everything after a restart uses a new client built from the new connection string.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)

from tests.emulator.emulator_process import EmulatorProcess, EmulatorProcesses, write_config

pytestmark = [
    pytest.mark.subprocess,
    # An SDK client whose emulator was killed cannot close its connection (close_quietly below), and the
    # SDK then leaves the socket to the garbage collector: expected here, where the broker is killed on
    # purpose. _collect_leaked_sockets frees them before the test ends, so no later test sees them.
    pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"),
]


@pytest.fixture(autouse=True)
def _collect_leaked_sockets() -> Iterator[None]:
    yield
    gc.collect()


QUEUE = "durable-orders"
QUEUE_PROPERTIES: dict[str, object] = {"LockDuration": "PT1M", "MaxDeliveryCount": 10}


@pytest.fixture
def processes() -> Iterator[EmulatorProcesses]:
    with EmulatorProcesses() as group:
        yield group


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "Config.json", {QUEUE: QUEUE_PROPERTIES})


def client_for(process: EmulatorProcess) -> ServiceBusClient:
    assert process.connection_string is not None
    return ServiceBusClient.from_connection_string(process.connection_string, retry_total=0)


def drain(
    process: EmulatorProcess, *, sub_queue: ServiceBusSubQueue | None = None
) -> list[ServiceBusReceivedMessage]:
    """Receive and delete everything in the queue (until a receive call comes back empty)."""
    received: list[ServiceBusReceivedMessage] = []
    with (
        client_for(process) as client,
        client.get_queue_receiver(
            QUEUE, sub_queue=sub_queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver,
    ):
        for _ in range(1000):
            batch = receiver.receive_messages(max_message_count=100, max_wait_time=1)
            if not batch:
                break
            received.extend(batch)
    return received


def close_quietly(handler: Any) -> None:
    """Close an SDK handler whose emulator has been killed (its connection is already gone)."""
    with contextlib.suppress(Exception):  # the connection is dead; an error closing it is expected
        handler.close()


# ---------------------------------------------------------------------------------------------- SIGKILL


def test_every_acknowledged_send_survives_sigkill_exactly_once(
    processes: EmulatorProcesses, config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = processes.start(config=config, data_dir=data_dir)
    attempted: list[str] = []
    acknowledged: list[str] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def produce(worker: str) -> None:
        client = client_for(first)
        sender = client.get_queue_sender(QUEUE)
        try:
            for i in range(100_000):
                if stop.is_set():
                    return
                if i % 3 == 2:  # every third send is a batch of five
                    ids = [f"{worker}-{i}-{k}" for k in range(5)]
                    payload: Any = [ServiceBusMessage(f"body {mid}", message_id=mid) for mid in ids]
                else:
                    ids = [f"{worker}-{i}"]
                    payload = ServiceBusMessage(f"body {ids[0]}", message_id=ids[0])
                attempted.extend(ids)
                try:
                    sender.send_messages(payload, timeout=10)
                except Exception as exc:  # the kill makes the send fail; that is the point
                    failures.append(exc)
                    return
                acknowledged.extend(ids)
        finally:
            close_quietly(sender)
            close_quietly(client)

    # Three senders on their own connections, so several sends are in flight when the process dies.
    producers = [
        threading.Thread(target=produce, args=(f"w{n}",), name=f"producer-{n}", daemon=True) for n in range(3)
    ]
    for producer in producers:
        producer.start()
    deadline = time.monotonic() + 30
    while len(acknowledged) < 100 and all(p.is_alive() for p in producers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(acknowledged) >= 100, f"the producers did not get going: {failures}"

    first.kill()
    for producer in producers:
        producer.join(30)
    stop.set()
    assert not any(p.is_alive() for p in producers)
    assert len(failures) == len(producers), "the kill should have interrupted every stream of sends"

    second = processes.start(config=config, data_dir=data_dir)
    received_ids = [str(m.message_id) for m in drain(second)]

    counts = collections.Counter(received_ids)
    duplicates = {mid: n for mid, n in counts.items() if n > 1}
    assert not duplicates, f"messages delivered more than once after the restart: {duplicates}"
    lost = [mid for mid in acknowledged if mid not in counts]
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged messages were lost, e.g. {lost[:5]}"
    phantoms = set(counts) - set(attempted)
    assert not phantoms, f"messages nobody sent: {sorted(phantoms)[:5]}"


def test_messages_locked_at_sigkill_are_delivered_again_after_restart(
    processes: EmulatorProcesses, config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = processes.start(config=config, data_dir=data_dir)
    ids = [f"locked-{i}" for i in range(5)]
    client = client_for(first)
    with client.get_queue_sender(QUEUE) as sender:
        sender.send_messages([ServiceBusMessage(f"body {mid}", message_id=mid) for mid in ids])
    receiver = client.get_queue_receiver(QUEUE)  # peek-lock
    locked: list[ServiceBusReceivedMessage] = []
    deadline = time.monotonic() + 15
    while len(locked) < 5 and time.monotonic() < deadline:
        locked.extend(receiver.receive_messages(max_message_count=5 - len(locked), max_wait_time=5))
    assert sorted(str(m.message_id) for m in locked) == ids
    completed = {str(m.message_id) for m in locked[:2]}
    for message in locked[:2]:
        receiver.complete_message(message)

    first.kill()  # three messages are still locked (the lock lasts a minute)
    close_quietly(receiver)
    close_quietly(client)

    second = processes.start(config=config, data_dir=data_dir)
    started = time.monotonic()
    redelivered: list[ServiceBusReceivedMessage] = []
    with client_for(second) as client_after, client_after.get_queue_receiver(QUEUE) as receiver_after:
        while len(redelivered) < 3 and time.monotonic() - started < 20:
            batch = receiver_after.receive_messages(max_message_count=10, max_wait_time=3)
            for message in batch:
                receiver_after.complete_message(message)
            redelivered.extend(batch)
        # Nothing else turns up: the completed two are gone for good.
        assert receiver_after.receive_messages(max_message_count=10, max_wait_time=2) == []

    assert sorted(str(m.message_id) for m in redelivered) == sorted(set(ids) - completed)
    assert time.monotonic() - started < 20, "locked messages must not wait for their old lock to expire"
    assert all(str(m) == f"body {m.message_id}" for m in redelivered)


# ---------------------------------------------------------------------------------------------- SIGTERM


def test_queue_and_messages_survive_a_clean_sigterm_restart(
    processes: EmulatorProcesses, config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = processes.start(config=config, data_dir=data_dir)
    with client_for(first) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(
                ServiceBusMessage(
                    "rich body",
                    message_id="rich",
                    subject="order-placed",
                    content_type="application/json",
                    correlation_id="corr-1",
                    application_properties={"tenant": "contoso", "attempt": 3, "urgent": True},
                )
            )
            sender.send_messages([ServiceBusMessage(f"body {i}", message_id=f"plain-{i}") for i in range(3)])
            sender.send_messages(ServiceBusMessage("poison", message_id="poison"))
        with client.get_queue_receiver(QUEUE) as receiver:
            before: list[ServiceBusReceivedMessage] = []
            deadline = time.monotonic() + 15
            while len(before) < 5 and time.monotonic() < deadline:
                before.extend(receiver.receive_messages(max_message_count=5, max_wait_time=5))
            assert len(before) == 5
            for message in before:
                if message.message_id == "poison":
                    receiver.dead_letter_message(message, reason="Unparseable", error_description="bad json")
                else:
                    receiver.abandon_message(message)
    highest_before = max(m.sequence_number or 0 for m in before)
    sequence_before = {str(m.message_id): m.sequence_number for m in before}

    first.terminate()
    assert first.wait(10) == 0, first.output()

    second = processes.start(config=config, data_dir=data_dir)
    with client_for(second) as client, client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(ServiceBusMessage("after restart", message_id="after"))
    active = drain(second)
    dead = drain(second, sub_queue=ServiceBusSubQueue.DEAD_LETTER)

    by_id = {str(m.message_id): m for m in active}
    assert sorted(by_id) == ["after", "plain-0", "plain-1", "plain-2", "rich"]
    rich = by_id["rich"]
    assert str(rich) == "rich body"
    assert rich.subject == "order-placed"
    assert rich.content_type == "application/json"
    assert rich.correlation_id == "corr-1"
    props = {
        (k.decode() if isinstance(k, bytes) else k): v for k, v in (rich.application_properties or {}).items()
    }
    assert props["tenant"] in ("contoso", b"contoso")
    assert props["attempt"] == 3
    assert props["urgent"] is True
    assert rich.delivery_count == 1, "the abandon before the restart counts as a delivery"
    assert [str(m.message_id) for m in dead] == ["poison"]
    assert dead[0].dead_letter_reason == "Unparseable"
    assert dead[0].dead_letter_error_description == "bad json"
    # Sequence numbers carry on from where they were; they are never reused.
    assert (by_id["after"].sequence_number or 0) > highest_before
    assert {mid: m.sequence_number for mid, m in by_id.items() if mid != "after"} == {
        mid: seq for mid, seq in sequence_before.items() if mid != "poison"
    }, "restored messages keep their sequence numbers"


def test_a_second_clean_restart_keeps_what_the_first_restored(
    processes: EmulatorProcesses, config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = processes.start(config=config, data_dir=data_dir)
    with client_for(first) as client, client.get_queue_sender(QUEUE) as sender:
        sender.send_messages([ServiceBusMessage(f"body {i}", message_id=f"twice-{i}") for i in range(4)])
    first.terminate()
    assert first.wait(10) == 0, first.output()

    second = processes.start(config=config, data_dir=data_dir)  # restores, touches nothing
    second.terminate()
    assert second.wait(10) == 0, second.output()

    third = processes.start(config=config, data_dir=data_dir)
    assert sorted(str(m.message_id) for m in drain(third)) == [f"twice-{i}" for i in range(4)]


# ---------------------------------------------------------------------------------------------- --in-memory


def test_in_memory_keeps_nothing_across_restart(
    processes: EmulatorProcesses, config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = processes.start(config=config, data_dir=data_dir, in_memory=True)
    with client_for(first) as client, client.get_queue_sender(QUEUE) as sender:
        sender.send_messages([ServiceBusMessage(f"body {i}", message_id=f"gone-{i}") for i in range(3)])
    first.terminate()
    assert first.wait(10) == 0, first.output()

    second = processes.start(config=config, data_dir=data_dir, in_memory=True)

    assert drain(second) == []  # the configured queue exists again, empty
    assert not data_dir.exists() or not any(data_dir.iterdir()), "--in-memory wrote to the data directory"


def test_in_memory_run_does_not_touch_an_existing_data_directory(
    processes: EmulatorProcesses, config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    durable = processes.start(config=config, data_dir=data_dir)
    with client_for(durable) as client, client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(ServiceBusMessage("keep me", message_id="kept"))
    durable.terminate()
    assert durable.wait(10) == 0, durable.output()

    throwaway = processes.start(config=config, data_dir=data_dir, in_memory=True)
    assert drain(throwaway) == []
    throwaway.terminate()
    assert throwaway.wait(10) == 0, throwaway.output()

    again = processes.start(config=config, data_dir=data_dir)
    assert [str(m.message_id) for m in drain(again)] == ["kept"]


# ------------------------------------------------------------------------------------------ message states


def test_scheduled_and_deferred_messages_survive_sigkill(
    processes: EmulatorProcesses, config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = processes.start(config=config, data_dir=data_dir)
    client = client_for(first)
    with client.get_queue_sender(QUEUE) as sender:
        due = datetime.now(UTC) + timedelta(seconds=4)
        sender.schedule_messages(ServiceBusMessage("later", message_id="scheduled"), due)
        sender.send_messages(ServiceBusMessage("put aside", message_id="deferred"))
    with client.get_queue_receiver(QUEUE) as receiver:
        received = receiver.receive_messages(max_message_count=1, max_wait_time=5)
        assert [str(m.message_id) for m in received] == ["deferred"]
        deferred_sequence = received[0].sequence_number
        receiver.defer_message(received[0])
    first.kill()
    close_quietly(client)

    second = processes.start(config=config, data_dir=data_dir)
    with client_for(second) as client_after, client_after.get_queue_receiver(QUEUE) as receiver_after:
        # The deferred message is still set aside: only its sequence number brings it back.
        assert deferred_sequence is not None
        again = receiver_after.receive_deferred_messages([deferred_sequence])
        assert [str(m.message_id) for m in again] == ["deferred"]
        receiver_after.complete_message(again[0])
        # The scheduled message is still scheduled, and appears once it is due (not before).
        arrived: list[ServiceBusReceivedMessage] = []
        deadline = time.monotonic() + 15
        while not arrived and time.monotonic() < deadline:
            arrived = receiver_after.receive_messages(max_message_count=5, max_wait_time=2)
        assert datetime.now(UTC) >= due - timedelta(milliseconds=500)
        assert [str(m.message_id) for m in arrived] == ["scheduled"]
        receiver_after.complete_message(arrived[0])


def test_expiry_that_fell_due_while_down_is_applied_after_restart(
    processes: EmulatorProcesses, tmp_path: Path
) -> None:
    """A message whose TTL ran out while the emulator was down is not delivered after the restart; its
    queue dead-letters expired messages, so that is where it is (and it stays there: the DLQ has no TTL)."""
    config = write_config(
        tmp_path / "Config.json", {QUEUE: {**QUEUE_PROPERTIES, "DeadLetteringOnMessageExpiration": True}}
    )
    data_dir = tmp_path / "data"
    first = processes.start(config=config, data_dir=data_dir)
    with client_for(first) as client, client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(
            ServiceBusMessage("short-lived", message_id="short", time_to_live=timedelta(seconds=1))
        )
        sender.send_messages(ServiceBusMessage("long-lived", message_id="long"))
    first.kill()
    time.sleep(1.5)

    second = processes.start(config=config, data_dir=data_dir)

    assert [str(m.message_id) for m in drain(second)] == ["long"]
    dead = drain(second, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    assert [str(m.message_id) for m in dead] == ["short"]
    assert dead[0].dead_letter_reason == "TTLExpiredException"


# ---------------------------------------------------------------------------------------- runtime entities


SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000000"
MANAGEMENT_TOKEN = "durability-test-token"


def arm_request(process: EmulatorProcess, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    url = (
        f"http://127.0.0.1:{process.management_port}/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/tests"
        f"/providers/Microsoft.ServiceBus/namespaces/sbemulatorns/{path}?api-version=2021-11-01"
    )
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {MANAGEMENT_TOKEN}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def test_queue_created_at_run_time_survives_sigkill_with_its_messages(
    processes: EmulatorProcesses, config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    args = ["--management-token", MANAGEMENT_TOKEN]
    first = processes.start(config=config, data_dir=data_dir, extra_args=args)
    arm_request(
        first, "PUT", "queues/runtime-q", {"properties": {"lockDuration": "PT45S", "maxDeliveryCount": 7}}
    )
    with client_for(first) as client, client.get_queue_sender("runtime-q") as sender:
        sender.send_messages([ServiceBusMessage(f"body {i}", message_id=f"rt-{i}") for i in range(3)])
    first.kill()

    second = processes.start(config=config, data_dir=data_dir, extra_args=args)
    properties = arm_request(second, "GET", "queues/runtime-q")["properties"]
    assert properties["lockDuration"] == "PT45S"
    assert properties["maxDeliveryCount"] == 7
    received: list[str] = []
    with (
        client_for(second) as client,
        client.get_queue_receiver(
            "runtime-q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver,
    ):
        deadline = time.monotonic() + 10
        while len(received) < 3 and time.monotonic() < deadline:
            received += [
                str(m.message_id) for m in receiver.receive_messages(max_message_count=10, max_wait_time=2)
            ]
    assert sorted(received) == ["rt-0", "rt-1", "rt-2"]
