"""Service Bus triggers through the real SDK against the emulator: completion, abandon -> dead-letter,
lock renewal, metadata and ``%setting%`` resolution."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus._pyamqp.types import TYPE, VALUE, AMQPTypes

from devhost.bindings import BindingError
from devhost.channel.function_indexing import AppLoadError
from devhost.servicebus import listener
from devhost.testing import HostHandle, running_host
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records, basic_app_settings, send

MAX_DELIVERY = 3


@pytest.fixture(scope="module")
def work_queue(shared_emulator: EmulatorHandle) -> str:
    # Lock shorter than the slow handler below, so only renewal keeps the message locked.
    return shared_emulator.create_queue(lock_duration=timedelta(seconds=5), max_delivery_count=MAX_DELIVERY)


@pytest.fixture(scope="module")
def host(shared_emulator: EmulatorHandle, work_queue: str, module_records: Records) -> Iterator[HostHandle]:
    settings = basic_app_settings(shared_emulator, module_records.path, work_queue)
    with running_host(APPS / "basic_app.py", settings=settings) as handle:
        yield handle


def _peek(connection_string: str, queue: str, sub_queue: Any = None) -> list[Any]:
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_receiver(queue, sub_queue=sub_queue) as receiver,
    ):
        return list(receiver.peek_messages(max_message_count=100))


def test_a_message_whose_function_succeeds_is_completed(
    host: HostHandle, shared_emulator: EmulatorHandle, work_queue: str, module_records: Records
) -> None:
    body = f"ok-{uuid.uuid4().hex}"
    send(shared_emulator.connection_string, work_queue, body)
    host.wait_for_invocations(
        lambda rs: any(r.function_name == "work" for r in rs) and bool(module_records.of("work", body=body))
    )
    records = host.wait_for_invocations(lambda rs: any(r.function_name == "work" and r.succeeded for r in rs))
    assert [r["delivery_count"] for r in module_records.of("work", body=body)] == [1]
    assert any(r.function_name == "work" and r.outcome == "Succeeded" and r.duration_ms >= 0 for r in records)
    assert [m for m in _peek(shared_emulator.connection_string, work_queue) if str(m) == body] == []


def test_the_function_receives_the_metadata_the_host_passes(
    host: HostHandle, shared_emulator: EmulatorHandle, work_queue: str, module_records: Records
) -> None:
    body = f"meta-{uuid.uuid4().hex}"
    message = ServiceBusMessage(
        body,
        message_id=f"id-{body}",
        correlation_id="corr-1",
        application_properties={"tenant": "t1", "n": 7},
    )
    send(shared_emulator.connection_string, work_queue, message)
    (seen,) = module_records.wait(
        lambda rs: any(r.get("body") == body for r in rs) and True
    ) and module_records.of("work", body=body)
    assert seen["message_id"] == f"id-{body}"
    assert seen["metadata_message_id"] == f"id-{body}"
    assert seen["correlation_id"] == "corr-1"
    assert seen["user_properties"] == {"tenant": "t1", "n": 7}
    assert seen["delivery_count"] == 1
    assert seen["sequence_number"] >= 1 and seen["lock_token"]
    for key in (
        "MessageId",
        "DeliveryCount",
        "EnqueuedTimeUtc",
        "LockToken",
        "SequenceNumber",
        "UserProperties",
    ):
        assert key in seen["metadata_keys"]


def test_typed_properties_reach_a_function_as_the_hosts_json_writes_what_its_dotnet_sdk_decoded(
    host: HostHandle, shared_emulator: EmulatorHandle, work_queue: str, module_records: Records
) -> None:
    # The host's .NET SDK reads an AMQP timestamp as a UTC DateTime and a binary as byte[]; Json.NET writes
    # them as ISO text ending in Z and as base64. azure-servicebus alone gives an int and bytes.
    body = f"typed-{uuid.uuid4().hex}"
    at = datetime(2026, 11, 26, 9, 30, 15, 123000, tzinfo=UTC)
    properties: Any = {
        "at": at,
        "on_the_second": datetime(2026, 11, 26, 9, 30, 15, tzinfo=UTC),
        "blob": {TYPE: AMQPTypes.binary, VALUE: b"\x00\xff\x10"},
        "long": {TYPE: AMQPTypes.long, VALUE: 5},
        "ubyte": {TYPE: AMQPTypes.ubyte, VALUE: 250},
        "text": "t",
    }
    send(
        shared_emulator.connection_string,
        work_queue,
        ServiceBusMessage(body, application_properties=properties),
    )
    module_records.wait(lambda rs: any(r.get("body") == body for r in rs))
    (seen,) = module_records.of("work", body=body)
    assert seen["user_properties"] == {
        "at": "2026-11-26T09:30:15.123Z",
        "on_the_second": "2026-11-26T09:30:15Z",
        "blob": "AP8Q",
        "long": 5,
        "ubyte": 250,
        "text": "t",
    }


def test_a_failing_message_is_abandoned_redelivered_and_dead_lettered_after_max_delivery_count(
    host: HostHandle, shared_emulator: EmulatorHandle, work_queue: str, module_records: Records
) -> None:
    body = f"fail-{uuid.uuid4().hex}"
    send(shared_emulator.connection_string, work_queue, body)
    module_records.wait(lambda rs: len([r for r in rs if r.get("body") == body]) >= MAX_DELIVERY)
    assert [r["delivery_count"] for r in module_records.of("work", body=body)] == list(
        range(1, MAX_DELIVERY + 1)
    )
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_queue_receiver(
            work_queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=10
        ) as receiver,
    ):
        dead = [
            m for m in receiver.receive_messages(max_message_count=50, max_wait_time=10) if str(m) == body
        ]
        for m in dead:
            receiver.complete_message(m)
    assert len(dead) == 1
    assert dead[0].dead_letter_reason == "MaxDeliveryCountExceeded"
    failed = [
        r
        for r in host.invocations
        if r.function_name == "work" and not r.succeeded and body in (r.error or "")
    ]
    assert len(failed) == MAX_DELIVERY and all("RuntimeError" in (r.error or "") for r in failed)


def test_a_handler_slower_than_the_lock_keeps_its_lock_through_renewal(
    host: HostHandle, shared_emulator: EmulatorHandle, work_queue: str, module_records: Records
) -> None:
    body = "slow:8"  # 8 s handler, 5 s lock
    marker = f"id-{uuid.uuid4().hex}"
    send(shared_emulator.connection_string, work_queue, ServiceBusMessage(body, message_id=marker))
    host.wait_for_invocations(
        lambda rs: any(r.function_name == "work" and r.succeeded and r.duration_ms > 7500 for r in rs),
        timeout=40,
    )
    seen = [r for r in module_records.of("work") if r["message_id"] == marker]
    assert [r["delivery_count"] for r in seen] == [1]
    assert [m for m in _peek(shared_emulator.connection_string, work_queue) if m.message_id == marker] == []


def test_an_unknown_setting_in_a_binding_expression_stops_the_host_from_starting(
    shared_emulator: EmulatorHandle, tmp_path: Path
) -> None:
    settings = {"ServiceBusConnection": shared_emulator.connection_string, "TICK_SCHEDULE": "* * * * * *"}
    with (
        pytest.raises(BindingError, match="'%WORK_QUEUE%' does not resolve to a value"),
        running_host(APPS / "basic_app.py", settings=settings),
    ):
        pass


def test_an_output_binding_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    app = tmp_path / "out_app.py"
    app.write_text(
        "import azure.functions as func\n"
        "app = func.FunctionApp()\n"
        "@app.route(route='x')\n"
        "@app.service_bus_queue_output(arg_name='out', queue_name='q', connection='C')\n"
        "def f(req: func.HttpRequest, out: func.Out[str]) -> func.HttpResponse:\n"
        "    return func.HttpResponse('x')\n"
    )
    with (
        pytest.raises(AppLoadError, match="binding 'out' of type 'serviceBus' is not supported"),
        running_host(app, settings={}),
    ):
        pass


def test_a_listener_whose_queue_is_missing_logs_why_and_starts_once_the_queue_exists(
    shared_emulator: EmulatorHandle, records: Records, caplog: pytest.LogCaptureFixture
) -> None:
    queue = f"late-{uuid.uuid4().hex[:10]}"
    settings = basic_app_settings(shared_emulator, records.path, queue)
    with (
        caplog.at_level(logging.ERROR, logger="devhost.ServiceBus"),
        running_host(APPS / "basic_app.py", settings=settings) as host,
    ):
        deadline = time.monotonic() + 30
        # Azure refuses the token for a queue that does not exist (404, "could not be found"): retried.
        failed = re.compile(
            rf"the listener for '{queue}' failed \(WireError: .*refused \(404\).*could not be found"
        )
        while not failed.search(caplog.text):
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.1)
        shared_emulator.create_queue(queue)
        send(shared_emulator.connection_string, queue, "ok-late")
        host.wait_for_invocations(
            lambda rs: any(r.function_name == "work" and r.succeeded for r in rs), timeout=60
        )
    assert records.of("work", body="ok-late")


def test_a_prefetch_count_devhost_does_not_apply_is_said_at_start(
    shared_emulator: EmulatorHandle, records: Records, caplog: pytest.LogCaptureFixture
) -> None:
    queue = shared_emulator.create_queue()
    settings = basic_app_settings(shared_emulator, records.path, queue)
    host_json = {"version": "2.0", "extensions": {"serviceBus": {"prefetchCount": 20}}}
    with (
        caplog.at_level(logging.WARNING, logger="devhost.ServiceBus"),
        running_host(APPS / "basic_app.py", settings=settings, host_json=host_json),
    ):
        pass
    assert "Functions.work: prefetchCount 20 is not applied by devhost" in caplog.text


@pytest.mark.timeout(120)
def test_a_listener_that_ran_a_while_before_failing_is_retried_after_the_shortest_back_off(
    shared_emulator: EmulatorHandle,
    records: Records,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The back-off doubles while the listener keeps failing at once (its queue missing) and starts again
    from its minimum once it ran longer than the longest back-off: a queue lost after a long run is retried
    after a second, not after the back-off its start-up failures left behind."""
    monkeypatch.setattr(listener, "RESTART_MAX_SECONDS", 3.0)  # Busbar's own constant: a short test
    queue = f"lost-{uuid.uuid4().hex[:10]}"
    settings = basic_app_settings(shared_emulator, records.path, queue)
    retry = re.compile(rf"the listener for '{queue}' failed \(WireError: [^\n]*\); retrying in (\d+) s")
    with (
        caplog.at_level(logging.ERROR, logger="devhost.ServiceBus"),
        running_host(APPS / "basic_app.py", settings=settings) as host,
    ):
        deadline = time.monotonic() + 30
        while len(retry.findall(caplog.text)) < 3:  # 1 s, 2 s, then the 3 s cap
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.1)
        assert retry.findall(caplog.text)[:3] == ["1", "2", "3"]
        shared_emulator.create_queue(queue)
        send(shared_emulator.connection_string, queue, "before-loss")
        host.wait_for_invocations(
            lambda rs: any(r.function_name == "work" and r.succeeded for r in rs), timeout=60
        )
        time.sleep(4)  # the listener has now run longer than the longest back-off
        failures_before = len(retry.findall(caplog.text))
        # Deleted as create_queue created it (the namespace's own call): its receivers are detached with it.
        shared_emulator.call(lambda: shared_emulator.emulator.namespace.delete_queue(queue))
        deadline = time.monotonic() + 30
        while len(retry.findall(caplog.text)) <= failures_before:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.1)
        assert retry.findall(caplog.text)[failures_before] == "1"
