"""Behaviour specs for the command line: ``python -m emulator``.

Every test runs the real CLI in a subprocess (see ``emulator_process.py``) on ports chosen by the OS.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from tests.emulator.emulator_process import REPO_ROOT, EmulatorProcess, EmulatorProcesses, write_config

pytestmark = pytest.mark.subprocess

SHUTDOWN_SECONDS = 5.0


@pytest.fixture
def processes() -> Iterator[EmulatorProcesses]:
    with EmulatorProcesses() as group:
        yield group


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion (for invocations that must exit on their own)."""
    return subprocess.run(
        [sys.executable, "-m", "emulator", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def send_and_receive(connection_string: str, queue: str, body: str) -> list[str]:
    with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver(queue) as receiver:
            received = receiver.receive_messages(max_message_count=1, max_wait_time=10)
            for message in received:
                receiver.complete_message(message)
            return [str(message) for message in received]


# ---------------------------------------------------------------------------------------------- --help


def test_help_exits_zero_and_documents_the_options() -> None:
    result = run_cli("--help")

    assert result.returncode == 0, result.stderr
    for option in ("--config", "--data-dir", "--amqp-port", "--management-port", "--in-memory"):
        assert option in result.stdout, f"{option} missing from --help:\n{result.stdout}"


# ---------------------------------------------------------------------------------------------- start-up


def test_prints_ready_line_and_a_working_connection_string(
    processes: EmulatorProcesses, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "Config.json", {"cli-queue": {"LockDuration": "PT30S"}})
    process = processes.start(config=config, in_memory=True)

    ready = re.search(
        r"^Service Bus emulator ready: amqp=127\.0\.0\.1:(\d+) management=127\.0\.0\.1:(\d+)$",
        process.stdout,
        re.MULTILINE,
    )
    assert ready, process.output()
    amqp_port, management_port = int(ready.group(1)), int(ready.group(2))
    assert amqp_port > 0 and management_port > 0 and amqp_port != management_port

    connection_string = process.connection_string
    assert connection_string is not None
    parts = dict(part.split("=", 1) for part in connection_string.rstrip(";").split(";"))
    assert parts == {
        "Endpoint": f"sb://localhost:{amqp_port}",
        "SharedAccessKeyName": "RootManageSharedAccessKey",
        "SharedAccessKey": "SAS_KEY_VALUE",
        "UseDevelopmentEmulator": "true",
    }
    # The printed connection string is usable as is, against the queue from the config file.
    assert send_and_receive(connection_string, "cli-queue", "hello from the CLI") == ["hello from the CLI"]


def test_custom_key_options_appear_in_the_connection_string(
    processes: EmulatorProcesses, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "Config.json", {"keyed": {}})
    process = processes.start(
        config=config, in_memory=True, extra_args=["--key-name", "CliPolicy", "--key", "cli-secret"]
    )

    assert process.connection_string is not None
    assert "SharedAccessKeyName=CliPolicy;" in process.connection_string
    assert "SharedAccessKey=cli-secret;" in process.connection_string
    assert send_and_receive(process.connection_string, "keyed", "keyed body") == ["keyed body"]


def test_health_endpoint_answers_200(processes: EmulatorProcesses) -> None:
    process = processes.start(in_memory=True)

    with urllib.request.urlopen(f"http://127.0.0.1:{process.management_port}/health", timeout=10) as response:
        status = response.status
        body = response.read()

    assert status == 200
    assert json.loads(body)["status"] == "healthy"


def test_unknown_management_path_is_404(processes: EmulatorProcesses) -> None:
    process = processes.start(in_memory=True)

    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"http://127.0.0.1:{process.management_port}/no-such-thing", timeout=10)

    assert caught.value.code == 404
    caught.value.close()


# ---------------------------------------------------------------------------------------------- shutdown


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_shuts_down_cleanly_with_exit_code_zero(processes: EmulatorProcesses, sig: int) -> None:
    process = processes.start(in_memory=True)
    # An idle client connection (protocol header sent, nothing else) must not hold the shutdown up.
    idle = socket.create_connection(("127.0.0.1", process.amqp_port), timeout=5)
    try:
        idle.sendall(b"AMQP\x03\x01\x00\x00")
        assert idle.recv(8) == b"AMQP\x03\x01\x00\x00"

        started = time.monotonic()
        process.send_signal(sig)
        code = process.wait(SHUTDOWN_SECONDS)
        elapsed = time.monotonic() - started
    finally:
        idle.close()

    assert code == 0, process.output()
    assert elapsed < SHUTDOWN_SECONDS
    assert "Traceback" not in process.stderr, process.output()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", process.amqp_port), timeout=2).close()


# ---------------------------------------------------------------------------------------------- bad start-up


def assert_exits_before_ready(process: EmulatorProcess) -> int:
    code = process.wait(20)
    assert code != 0, process.output()
    assert "emulator ready" not in process.stdout, process.output()
    assert "Connection string" not in process.stdout, process.output()
    assert "Traceback" not in process.stderr, process.output()
    return code


def test_invalid_config_exits_non_zero_naming_queue_property_and_range(
    processes: EmulatorProcesses, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "Config.json",
        {"ok-queue": {"LockDuration": "PT1M"}, "slow-queue": {"LockDuration": "PT10M"}},
    )
    process = processes.start(config=config, in_memory=True, wait=False)

    assert_exits_before_ready(process)
    problem_lines = [line for line in process.stderr.splitlines() if "slow-queue" in line]
    assert problem_lines, process.output()
    problem = " ".join(problem_lines)
    assert "LockDuration" in problem
    assert "PT10M" in problem
    assert "PT5S" in problem and "PT5M" in problem, f"allowed range not stated: {problem}"
    assert "ok-queue" not in process.stderr, "a valid queue must not be reported"


def test_nonexistent_config_path_exits_non_zero_with_a_clear_message(
    processes: EmulatorProcesses, tmp_path: Path
) -> None:
    missing = tmp_path / "does-not-exist" / "Config.json"
    process = processes.start(config=missing, in_memory=True, wait=False)

    assert_exits_before_ready(process)
    assert str(missing) in process.stderr, process.output()
    assert re.search(r"no such file|not found|does not exist|cannot read", process.stderr, re.IGNORECASE), (
        process.output()
    )


def test_amqp_port_in_use_exits_non_zero_with_a_message(processes: EmulatorProcesses) -> None:
    with socket.socket() as occupied:
        occupied.bind(("127.0.0.1", 0))
        occupied.listen()
        port = occupied.getsockname()[1]
        process = processes.start(in_memory=True, amqp_port=port, wait=False)

        assert_exits_before_ready(process)
    assert str(port) in process.stderr or "address already in use" in process.stderr.lower(), process.output()
