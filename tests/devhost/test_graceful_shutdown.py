"""Stopping the host drains in-flight invocations: their messages are completed, nothing is lost, and
nothing is processed twice when a new host picks up the rest."""

from __future__ import annotations

import asyncio
import socket
import uuid
from datetime import timedelta
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from devhost.channel.process_worker import ProcessWorker
from devhost.testing import running_host, start_host
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records, basic_app_settings, send

MESSAGES = 12


def test_stopping_drains_in_flight_messages_and_a_restart_processes_each_remaining_message_once(
    emulator: EmulatorHandle, records: Records, tmp_path: Path
) -> None:
    queue = emulator.create_queue(lock_duration=timedelta(seconds=5))
    settings = basic_app_settings(emulator, records.path, queue)
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": 4}}}
    ids = [f"m{n}-{uuid.uuid4().hex[:8]}" for n in range(MESSAGES)]
    first = start_host(APPS / "basic_app.py", settings=settings, host_json=host_json)
    send(emulator.connection_string, queue, *(ServiceBusMessage("slow:1", message_id=i) for i in ids))
    records.wait(lambda rs: len([r for r in rs if r["function"] == "work"]) >= 4)
    first.stop()

    starts = [(r["at"], 1) for r in records.of("work")] + [(r["at"], -1) for r in records.of("work_done")]
    running = peak = 0
    for _, step in sorted(starts):
        running += step
        peak = max(peak, running)
    assert peak == 4  # maxConcurrentCalls: never more at once, and the host does use them all

    started_first = {r["message_id"] for r in records.of("work")}
    done_first = {r["message_id"] for r in records.of("work_done")}
    assert started_first and started_first == done_first  # every invocation in flight ran to the end
    assert all(r.succeeded for r in first.invocations)
    with (
        ServiceBusClient.from_connection_string(emulator.connection_string) as client,
        client.get_queue_receiver(queue) as receiver,
    ):
        remaining = {m.message_id for m in receiver.peek_messages(max_message_count=50)}
    assert remaining == set(ids) - done_first  # completed ones are gone, the rest are still there

    with running_host(APPS / "basic_app.py", settings=settings, host_json=host_json):
        records.wait(
            lambda rs: {r["message_id"] for r in rs if r["function"] == "work_done"} == set(ids), timeout=60
        )
    done = [r["message_id"] for r in records.of("work_done")]
    assert sorted(done) == sorted(ids)  # each exactly once


def test_an_invocation_exceeding_function_timeout_fails_and_its_message_is_abandoned(
    emulator: EmulatorHandle, records: Records
) -> None:
    queue = emulator.create_queue(lock_duration=timedelta(seconds=30), max_delivery_count=1)
    settings = basic_app_settings(emulator, records.path, queue)
    host_json = {"version": "2.0", "functionTimeout": "00:00:01"}
    with running_host(APPS / "basic_app.py", settings=settings, host_json=host_json) as host:
        send(emulator.connection_string, queue, "slow:3")
        (failed,) = host.wait_for_invocations(1)
        assert failed.outcome == "Failed"
        # The host's text (a .NET TimeSpan), and the worker that ran it is restarted, as the host does.
        assert "Timeout value of 00:00:01 was exceeded by function: Functions.work" in (failed.error or "")
        with (
            ServiceBusClient.from_connection_string(emulator.connection_string) as client,
            client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver,
        ):
            # Abandoned at once (not left to its 30 s lock): with MaxDeliveryCount 1 it is dead-lettered.
            (dead,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
            receiver.complete_message(dead)
        # A new worker process serves what comes next; the restart was the host's, not a worker error.
        send(emulator.connection_string, queue, "after the restart")
        records.wait(lambda rs: any(r.get("body") == "after the restart" for r in rs))
        worker = host.host.worker
        assert isinstance(worker, ProcessWorker) and worker.restarts == 1
        after = host.wait_for_invocations(2)[-1]
        assert after.outcome == "Succeeded"


def test_stopping_the_host_ends_what_is_still_pending_on_its_loop_and_closes_its_connections(
    emulator: EmulatorHandle, tmp_path: Path
) -> None:
    # As asyncio.run does on exit. Left pending, a task would be destroyed by the garbage collector later,
    # in whichever test runs then, with its connection still open.
    settings = basic_app_settings(emulator, tmp_path / "records.jsonl", emulator.create_queue())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)
        port = listener.getsockname()[1]
        handle = start_host(APPS / "basic_app.py", settings=settings)
        held: list[asyncio.Task[None]] = []

        async def hold_a_connection() -> None:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                await asyncio.Event().wait()
            finally:
                writer.close()

        handle.loop.call_soon_threadsafe(lambda: held.append(asyncio.ensure_future(hold_a_connection())))
        connection, _ = listener.accept()
        with connection:
            handle.stop()
            connection.settimeout(10)
            assert connection.recv(1) == b""  # closed by the task's own clean-up, not left open
        assert held[0].cancelled()
