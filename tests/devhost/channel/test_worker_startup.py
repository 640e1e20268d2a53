"""The worker process's start-up and restarts are bounded as the Functions host bounds its language
workers: an app whose import hangs fails start-up once the host's bound has passed (and its worker is
killed), and a worker that keeps failing is restarted one at a time, spaced, until the host's error
threshold; then it is given up, invocations fail with the host's message and the host asks to stop."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from devhost.__main__ import serve
from devhost.channel.process_worker import ProcessWorker, WorkerStartTimeout
from devhost.channel.restarts import (
    EXCEEDED_MESSAGE,
    WorkerErrors,
    WorkerLimits,
    startup_timeout,
)
from devhost.host import FunctionsHost, HostOptions
from devhost.testing import HostHandle, running_host
from tests.devhost.conftest import APPS

# Start-up bounds long enough for a loaded 2-core machine; restarts spaced measurably but briefly.
SHORT = WorkerLimits(startup_timeout=timedelta(seconds=30), restart_interval=timedelta(seconds=0.5))


def test_the_default_bounds_are_the_hosts() -> None:
    host = WorkerLimits()
    assert host.restart_interval == timedelta(seconds=10)  # ProcessRestartInterval
    assert host.error_threshold == 3  # 3 * ProcessCount
    assert host.error_window == timedelta(minutes=30)  # WorkerRestartErrorIntervalThresholdInMinutes
    # The app is imported while answering the function metadata request: 1 minute.
    assert startup_timeout(host, {}, timedelta(minutes=30), restart=False) == timedelta(minutes=1)
    # ... or the init request, with PYTHON_ENABLE_INIT_INDEXING: InitializationTimeout.
    init_indexing = {"PYTHON_ENABLE_INIT_INDEXING": " True "}
    assert startup_timeout(host, init_indexing, None, restart=True) == timedelta(seconds=10)
    # A restarted worker imports it while answering the load requests: max(1 minute, functionTimeout),
    # unbounded with an unbounded functionTimeout.
    assert startup_timeout(host, {}, timedelta(minutes=30), restart=True) == timedelta(minutes=30)
    assert startup_timeout(host, {}, timedelta(seconds=5), restart=True) == timedelta(minutes=1)
    assert startup_timeout(host, {}, None, restart=True) is None
    assert startup_timeout(SHORT, init_indexing, None, restart=True) == timedelta(seconds=30)


def test_errors_count_until_a_quiet_gap_longer_than_the_window() -> None:
    errors = WorkerErrors(WorkerLimits())
    assert errors.record(0.0) == 1 and errors.may_restart()
    assert errors.record(29 * 60.0) == 2 and errors.may_restart()
    # Not a sliding window: 30 minutes since the previous error, not the first, resets the count.
    assert errors.record(58 * 60.0) == 3 and not errors.may_restart()
    assert errors.record(58 * 60.0 + 30 * 60.0 + 1) == 1 and errors.may_restart()


def test_an_app_whose_import_hangs_fails_start_up_within_the_bound(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    limits = WorkerLimits(startup_timeout=timedelta(seconds=3))
    started = time.monotonic()
    with (
        pytest.raises(WorkerStartTimeout) as refused,
        running_host(
            APPS / "hanging_app.py", settings={"DEVHOST_TEST_PID_FILE": str(pid_file)}, worker_limits=limits
        ),
    ):
        pass
    assert time.monotonic() - started < 30
    pid = int(pid_file.read_text(encoding="utf-8"))
    assert str(refused.value) == (
        f"Requesting metadata from worker failed: the operation has timed out. The worker process {pid} "
        f"did not import and index {APPS / 'hanging_app.py'} within 3 seconds and was killed. "
        "Check the app's module-level code for a call that blocks: a network call without a timeout, "
        "input(), a lock, an endless loop."
    )
    with pytest.raises(ProcessLookupError):  # killed and reaped: no worker is left running
        os.kill(pid, 0)


def _get(host: HostHandle, path: str) -> httpx.Response:
    return httpx.get(f"{host.base_url}/api/{path}", timeout=60)


def test_a_worker_that_dies_at_every_restart_is_given_up_at_the_hosts_threshold(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flag = tmp_path / "broken"
    settings = {"DEVHOST_TEST_FLAG": str(flag)}
    with (
        caplog.at_level(logging.INFO, logger="devhost.Worker"),
        running_host(APPS / "flaky_start_app.py", settings=settings, worker_limits=SHORT) as host,
    ):
        worker = host.host.worker
        assert isinstance(worker, ProcessWorker)
        first_pid = worker.pid
        flag.touch()  # from now on every new worker dies while importing the app
        assert _get(host, "exit?code=1").status_code == 500
        deadline = time.monotonic() + 60
        while not host.host.recycle_requested.is_set():
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)
        # Error 1 (the death) and error 2 (the first restart's) were restarted; error 3 was not.
        assert worker.restarts == 2 and worker.errors == 3
        assert worker.pid is None
        assert _get(host, "pid").status_code == 500  # at once: no new worker is tried
        records = host.wait_for_invocations(2)
        died, refused = records[-2:]
        assert died.error is not None and died.error.startswith("WorkerProcessExited: ")
        assert refused.error is not None
        assert refused.error.startswith(f"WorkerRestartsExhausted: {EXCEEDED_MESSAGE}: ")
    messages = [(r.created, r.getMessage()) for r in caplog.records if r.name == "devhost.Worker"]
    texts = [text for _, text in messages]
    assert any(t.startswith(f"Language Worker Process exited. Pid={first_pid}. ") for t in texts)
    failed = [t for t in texts if t.startswith("Restarting the worker process failed: ")]
    died_at_import = (
        "Restarting the worker process failed: WorkerProcessExited: "
        "the worker process exited with code 3 before it indexed the app"
    )
    assert failed == [died_at_import, died_at_import]
    assert texts.count(EXCEEDED_MESSAGE) == 1
    # The second restart waited the restart interval after the first had finished starting.
    first_failed = next(at for at, t in messages if t.startswith("Restarting the worker process failed"))
    second = next(at for at, t in messages if t.startswith("Starting a new worker process (restart 2"))
    assert second - first_failed >= 0.5 - 0.05


def test_a_worker_that_asks_for_a_restart_is_restarted_without_counting_an_error(tmp_path: Path) -> None:
    settings = {"DEVHOST_TEST_FLAG": str(tmp_path / "never")}
    with running_host(APPS / "flaky_start_app.py", settings=settings, worker_limits=SHORT) as host:
        worker = host.host.worker
        assert isinstance(worker, ProcessWorker)
        first_pid = worker.pid
        assert _get(host, "exit?code=200").status_code == 500  # IntentionalRestartExitCode
        assert _get(host, "pid").json()["pid"] not in (None, first_pid)
        assert worker.restarts == 1 and worker.errors == 0
        assert _get(host, "exit?code=1").status_code == 500
        assert _get(host, "pid").status_code == 200
        assert worker.restarts == 2 and worker.errors == 1
        assert not host.host.recycle_requested.is_set()


def test_devhost_stops_itself_when_the_worker_is_given_up(tmp_path: Path) -> None:
    # As the Functions host calls StopApplication to be recycled; devhost's main then exits with 1.
    options = HostOptions(
        app_path=APPS / "flaky_start_app.py",
        settings={"DEVHOST_TEST_FLAG": str(tmp_path / "never")},
        http_port=0,
        worker_limits=SHORT,
    )
    seen: list[FunctionsHost] = []

    def banner(host: FunctionsHost) -> None:
        seen.append(host)
        host.recycle_requested.set()  # what the worker channel does when it gives up

    assert asyncio.run(serve(options, banner)) is False
    (host,) = seen
    assert host.state == "Stopped"
