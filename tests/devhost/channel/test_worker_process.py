"""The function code runs in a worker process, as the Python worker beside the Functions host: started
with the real worker arguments, restarted when it dies (the messages it held are redelivered), and a
coroutine function's settlement is applied at once, so its failure reaches the function as in Azure."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from azure.servicebus import ServiceBusClient

from devhost.__main__ import parse_args
from devhost.channel.function_indexing import AppLoadError
from devhost.channel.process_worker import ProcessWorker
from devhost.testing import HostHandle, running_host
from emulator.testing import EmulatorHandle
from tests.devhost.conftest import APPS, Records, app_settings, send

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def entities(shared_emulator: EmulatorHandle) -> dict[str, str]:
    return {
        # Locks of the maximum length: a redelivery within the tests' wait can only come from an abandon.
        "CRASH_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(minutes=5)),
        "SETTLE_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(minutes=5)),
        "LINGER_QUEUE": shared_emulator.create_queue(lock_duration=timedelta(minutes=5)),
    }


@pytest.fixture(scope="module")
def host(
    shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> Iterator[HostHandle]:
    settings = app_settings(shared_emulator, module_records.path, entities)
    with running_host(APPS / "process_app.py", settings=settings) as handle:
        yield handle


def _whoami(host: HostHandle) -> dict[str, object]:
    response = httpx.get(f"{host.base_url}/api/whoami", timeout=30)
    assert response.status_code == 200, response.text
    seen: dict[str, object] = response.json()
    return seen


def test_the_function_code_runs_in_a_worker_process_started_with_the_worker_arguments(
    host: HostHandle,
) -> None:
    seen = _whoami(host)
    worker = host.host.worker
    assert isinstance(worker, ProcessWorker)
    assert seen["pid"] != os.getpid()
    assert seen["pid"] == worker.pid
    argv = seen["argv"]
    assert isinstance(argv, list)
    assert host.host.settlement is not None
    port = host.host.settlement.port  # this host's own Settlement service
    # What the Functions host passes the Python worker, as the binding extension reads it from sys.argv.
    assert argv[1:7] == [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--functions-grpc-max-message-length",
        "2147483647",
    ]


def test_azure_functions_runtime_runs_each_invocation_in_the_worker_process(host: HostHandle) -> None:
    plain = httpx.get(f"{host.base_url}/api/stack", timeout=30)
    coroutine = httpx.get(f"{host.base_url}/api/async-stack", timeout=30)

    assert plain.status_code == coroutine.status_code == 200, (plain.text, coroutine.text)
    # A coroutine function runs on the worker's loop, awaited by handle_event.invocation_request (the entry
    # point Azure's proxy worker calls for every invocation); a plain one on the runtime's thread pool,
    # through its run_sync_func.
    frames = [(Path(file).parts[-2:], name) for file, name in coroutine.json()]
    assert (("azure_functions_runtime", "handle_event.py"), "invocation_request") in frames, frames
    frames = [(Path(file).parts[-2:], name) for file, name in plain.json()]
    assert (("utils", "executor.py"), "run_sync_func") in frames, frames


def test_the_runtime_logs_each_invocation_as_a_system_log_kept_off_the_console(
    shared_emulator: EmulatorHandle,
    entities: dict[str, str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = app_settings(shared_emulator, tmp_path / "records.jsonl", entities)
    with caplog.at_level(logging.DEBUG), running_host(APPS / "process_app.py", settings=settings) as handle:
        assert httpx.get(f"{handle.base_url}/api/whoami", timeout=30).status_code == 200
        deadline = time.monotonic() + 10
        while "Function name: whoami, Function Type: sync" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)

    [record] = [r for r in caplog.records if r.getMessage() == "Function name: whoami, Function Type: sync"]
    # The runtime's logger, forwarded from the worker process as a system log: off the console (DEBUG here),
    # tagged with the invocation.
    assert record.name == "azure.functions" and record.levelno == logging.DEBUG
    assert getattr(record, "invocation_id", None)
    assert f"azure-functions-runtime {_pinned_runtime()} runs the app's" in caplog.text


def _pinned_runtime() -> str:
    requirements = (Path(__file__).resolve().parents[3] / "requirements.txt").read_text().splitlines()
    [pin] = [
        line.split("==")[1].strip() for line in requirements if line.startswith("azure-functions-runtime==")
    ]
    return pin


def test_a_coroutine_functions_failed_settlement_reaches_the_function(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    body = f"settle-{uuid.uuid4().hex[:6]}"
    send(shared_emulator.connection_string, entities["SETTLE_QUEUE"], body)
    module_records.wait(lambda rs: any(r.get("body") == body for r in rs))
    (seen,) = module_records.of("settles_twice", body=body)
    # The first complete was applied at once (not deferred until the coroutine returned), so the second
    # one fails, and the function sees it as from the host: UNKNOWN with ASP.NET Core's fixed detail.
    assert seen["second"] == "StatusCode.UNKNOWN|Exception was thrown by handler."
    host.wait_for_invocations(lambda rs: any(r.function_name == "settles_twice" for r in rs))
    record = next(r for r in host.invocations if r.function_name == "settles_twice")
    assert record.succeeded
    assert record.settlement_calls == ("Complete", "Complete")
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_queue_receiver(entities["SETTLE_QUEUE"]) as receiver,
    ):
        assert receiver.peek_messages(max_message_count=10) == []


def test_a_worker_that_dies_fails_its_invocation_and_a_new_worker_takes_the_redelivery(
    host: HostHandle, shared_emulator: EmulatorHandle, entities: dict[str, str], module_records: Records
) -> None:
    worker = host.host.worker
    assert isinstance(worker, ProcessWorker)
    first_pid = worker.pid
    body = f"crash-{uuid.uuid4().hex[:6]}"
    send(shared_emulator.connection_string, entities["CRASH_QUEUE"], body)
    records = module_records.wait(
        lambda rs: any(r.get("body") == body and r["delivery_count"] == 2 for r in rs), timeout=60
    )
    first, second = (r for r in records if r.get("body") == body)
    assert first["delivery_count"] == 1 and first["pid"] == first_pid
    assert second["pid"] != first_pid  # the restarted worker
    invocations = host.wait_for_invocations(
        lambda rs: sum(r.function_name == "crashes" for r in rs) >= 2, timeout=30
    )
    crashed, succeeded = (r for r in invocations if r.function_name == "crashes")
    assert not crashed.succeeded
    assert crashed.error is not None and crashed.error.startswith("WorkerProcessExited: ")
    assert "exited with code 1" in crashed.error
    assert succeeded.succeeded
    assert worker.restarts == 1
    assert _whoami(host)["pid"] == second["pid"] == worker.pid
    with (
        ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client,
        client.get_queue_receiver(entities["CRASH_QUEUE"]) as receiver,
    ):
        assert receiver.peek_messages(max_message_count=10) == []


def test_what_the_function_code_logs_in_the_worker_reaches_the_hosts_logging(
    host: HostHandle, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="Function.whoami.User"):
        pid = _whoami(host)["pid"]
        deadline = time.monotonic() + 10
        while f"whoami answered by {pid}" not in caplog.text:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
    (logged,) = [r for r in caplog.records if r.getMessage() == f"whoami answered by {pid}"]
    # The host's category for a function's own logs, with the invocation it was logged in.
    assert logged.name == "Function.whoami.User" and logged.levelno == logging.WARNING
    assert getattr(logged, "worker_logger", None) == "process_app"
    whoami = [r for r in host.invocations if r.function_name == "whoami"]
    assert getattr(logged, "invocation_id", None) in {r.invocation_id for r in whoami}


def test_an_invocation_past_the_drain_time_is_cancelled_in_the_worker(
    shared_emulator: EmulatorHandle, entities: dict[str, str], tmp_path: Path
) -> None:
    records = Records(tmp_path / "records.jsonl")
    # Queues of its own: the module's host listens on the shared ones.
    queues = {name: shared_emulator.create_queue(lock_duration=timedelta(minutes=5)) for name in entities}
    settings = app_settings(shared_emulator, records.path, queues)
    body = f"linger-{uuid.uuid4().hex[:6]}"
    with running_host(APPS / "process_app.py", settings=settings, drain_seconds=1) as host:
        send(shared_emulator.connection_string, queues["LINGER_QUEUE"], body)
        records.wait(lambda rs: any(r.get("body") == body for r in rs))
        worker = host.host.worker
        assert isinstance(worker, ProcessWorker)
    # The host gave up after the drain time and told the worker, whose coroutine was cancelled there.
    records.wait(lambda rs: any(r.get("body") == body and r["state"] == "cancelled" for r in rs), timeout=10)
    (record,) = [r for r in host.invocations if r.function_name == "lingers"]
    assert not record.succeeded and record.error == "RuntimeError: cancelled"


def test_an_app_that_fails_to_import_refuses_start_up(tmp_path: Path) -> None:
    app = tmp_path / "function_app.py"
    app.write_text(textwrap.dedent(BROKEN_APP), encoding="utf-8")
    with pytest.raises(AppLoadError) as refused, running_host(app, settings={}):
        pass
    # As the runtime's worker_init_request reports it (the import is part of indexing the app).
    assert str(refused.value) == f"indexing {app.resolve()} failed: ValueError: no such region 'mars'"


BROKEN_APP = """
import azure.functions as func

app = func.FunctionApp()
raise ValueError("no such region 'mars'")
"""


# Run in a process of its own: what a test process has imported depends on the tests it ran before.
HOST_PROCESS = """
import json, os, sys
from pathlib import Path

import httpx

from devhost.testing import running_host

app = Path(sys.argv[1])
with running_host(app, settings=json.loads(sys.argv[2])) as host:
    answer = httpx.get(f"{host.base_url}/api/whoami", timeout=30)
    loaded = sorted(
        name
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] in ("azure_functions_runtime", "app_records")
        or str(getattr(module, "__file__", None) or "").startswith(str(app.parent))
    )
print(json.dumps({"status": answer.status_code, "worker": answer.json()["pid"], "host": os.getpid(),
                  "loaded": loaded}))
"""


@pytest.mark.subprocess
def test_the_hosts_process_never_imports_the_app_nor_the_runtime(
    shared_emulator: EmulatorHandle, entities: dict[str, str], tmp_path: Path
) -> None:
    # azure_functions_runtime keeps one app per process in module globals and changes os.environ, sys.path,
    # the working directory and logging: it runs in the worker process only, and so does the app. There is
    # no in-process worker to ask for.
    assert "in_process_worker" not in vars(parse_args([]))
    # Queues of its own: the module's host listens on the shared ones.
    queues = {name: shared_emulator.create_queue() for name in entities}
    settings = app_settings(shared_emulator, tmp_path / "records.jsonl", queues)
    app = APPS / "process_app.py"
    done = subprocess.run(
        [sys.executable, "-c", HOST_PROCESS, str(app), json.dumps(settings)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == 200 and seen["worker"] != seen["host"]
    assert seen["loaded"] == []
