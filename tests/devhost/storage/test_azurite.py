"""``python -m devhost --with-azurite`` (what ``make run`` passes): Azurite is the app's storage account,
named ``AzureWebJobsStorage`` as Functions apps name theirs, in the worker's environment and the startup
hook's settings; its data is kept across restarts, even when devhost is killed; a port already taken is
refused by name. Which settings leave Azurite out is pinned in
tests/devhost/storage/test_storage_settings.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from azure.data.tables import TableServiceClient

from devhost.storage.azurite import AzuritePorts
from devhost.storage.azurite_service import AzuriteService
from tests.devhost.conftest import APPS
from tests.devhost.test_make_run import REPO, OutputReader

HOOK = "tests.devhost.storage_hook:record_start"


def free_ports(count: int) -> list[int]:
    """Ports free a moment ago (for the tests that need the same ports twice)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()


class Devhost:
    """``python -m devhost --with-azurite`` on the storage test app, in its own process group."""

    def __init__(
        self,
        root: Path,
        table: str,
        ports: tuple[int, int, int] = (0, 0, 0),
        values: dict[str, str] | None = None,
        hook: str = HOOK,
    ) -> None:
        settings = root / "local.settings.json"
        settings.write_text(json.dumps({"Values": {"STORAGE_TEST_TABLE": table, **(values or {})}}))
        blob, queue, table_port = ports
        environment = {k: v for k, v in os.environ.items() if not k.startswith("AzureWebJobs")}
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "devhost", "--app", str(APPS / "storage_app.py")),
                *("--settings", str(settings), "--host-json", str(root / "no-host.json"), "--port", "0"),
                *("--data-dir", str(root / "data" / "devhost"), "--startup-hook", hook, "--with-azurite"),
                *("--azurite-data-dir", str(root / "data" / "azurite")),
                *("--azurite-blob-port", str(blob), "--azurite-queue-port", str(queue)),
                *("--azurite-table-port", str(table_port)),
            ],
            cwd=REPO,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.reader = OutputReader(self.process)
        self.root = root

    def ready(self) -> tuple[str, str]:
        """Once ready: the base URL and the ``AzureWebJobsStorage`` the banner prints."""
        text = self.reader.wait_ready(timeout=90)
        lines = self.reader.lines
        (url,) = [
            line.removeprefix("devhost ready: ").split()[0] for line in lines if "devhost ready: " in line
        ]
        (storage,) = [line.split(": ", 1)[1] for line in lines if line.startswith("AzureWebJobsStorage: ")]
        assert "Traceback" not in text
        return url, storage

    def record(self) -> dict[str, object]:
        document = json.loads((self.root / "data" / "devhost" / "endpoints.json").read_text())
        assert isinstance(document, dict)
        return document

    def interrupt(self) -> str:
        os.killpg(self.process.pid, signal.SIGINT)
        assert self.process.wait(60) == 0
        return self.reader.rest(timeout=10)

    def kill_group(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.reader.rest(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def read_row(storage: str, table: str, partition: str, row: str) -> str:
    with TableServiceClient.from_connection_string(storage) as service:
        return str(service.get_table_client(table).get_entity(partition, row)["value"])


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(300)
def test_the_app_and_its_startup_hook_reach_azurite_as_azurewebjobsstorage_and_its_tables_outlive_a_restart(
    tmp_path: Path,
) -> None:
    table = f"t{uuid.uuid4().hex[:12]}"
    first = Devhost(tmp_path, table)
    try:
        url, storage = first.ready()
        # The development account on the ports Azurite listens on (0: picked by the OS, read back).
        assert "AccountName=devstoreaccount1;" in storage and "TableEndpoint=http://127.0.0.1:" in storage
        assert ":10002/" not in storage
        record = first.record()
        assert record["settings"] == {"AzureWebJobsStorage": storage}
        assert isinstance(record["storage"], dict) and sorted(record["storage"]) == ["blob", "queue", "table"]
        assert record["storage"]["table"] in storage
        # The startup hook wrote through the settings it was given, the worker through its environment.
        assert read_row(storage, table, "hook", "started") == "by the startup hook"
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.put("/api/rows/kept", content=b"written by the worker").status_code == 204
        assert read_row(storage, table, "rows", "kept") == "written by the worker"
        output = first.interrupt()
    finally:
        first.kill_group()
    assert "Azurite stopped (exit code 0)" in output  # stopped with devhost, its data saved
    assert not (tmp_path / "data" / "devhost" / "endpoints.json").exists()

    second = Devhost(tmp_path, table)
    try:
        url, storage_again = second.ready()
        assert storage_again != storage  # other OS-picked ports, the same data
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.get("/api/rows/kept").json() == {"value": "written by the worker"}
        second.interrupt()
    finally:
        second.kill_group()


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(300)
def test_after_a_kill_9_of_the_process_group_devhost_starts_again_on_the_same_ports_with_every_row_kept(
    tmp_path: Path,
) -> None:
    table = f"t{uuid.uuid4().hex[:12]}"
    ports = free_ports(3)
    first = Devhost(tmp_path, table, (ports[0], ports[1], ports[2]))
    try:
        url, storage = first.ready()
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.put("/api/rows/last", content=b"just before the kill").status_code == 204
    finally:
        first.kill_group()  # at once: Azurite saves its files only every 5 s on its own

    second = Devhost(tmp_path, table, (ports[0], ports[1], ports[2]))
    try:
        url, storage_again = second.ready()
        assert storage_again == storage  # the same ports: the killed run left none taken
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.get("/api/rows/last").json() == {"value": "just before the kill"}
        second.interrupt()
    finally:
        second.kill_group()


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(300)
def test_an_azurite_killed_while_the_app_runs_is_started_again_on_its_ports_and_the_app_reaches_it_again(
    tmp_path: Path,
) -> None:
    table = f"t{uuid.uuid4().hex[:12]}"
    run = Devhost(tmp_path, table)
    pid_file = tmp_path / "data" / "azurite" / "azurite.pid"
    try:
        url, storage = run.ready()
        killed = json.loads(pid_file.read_text())["pid"]
        os.kill(killed, signal.SIGKILL)
        with httpx.Client(base_url=url, timeout=30) as client:
            # Storage calls fail while Azurite is away (the function raises: 500), then succeed again.
            deadline = time.monotonic() + 60
            while client.put("/api/rows/after", content=b"after the restart").status_code != 204:
                assert time.monotonic() < deadline, "\n".join(run.reader.lines)
                time.sleep(0.2)
            assert client.get("/api/rows/after").json() == {"value": "after the restart"}
        assert json.loads(pid_file.read_text())["pid"] != killed
        assert read_row(storage, table, "rows", "after") == "after the restart"  # the same ports
        output = run.interrupt()
    finally:
        run.kill_group()
    assert "Azurite exited (code -9) while the app runs: starting it again" in output
    assert "Azurite started again" in output and "Azurite stopped (exit code 0)" in output


@pytest.mark.subprocess
@pytest.mark.timeout(120)
def test_an_app_whose_settings_name_another_storage_account_keeps_it_and_no_azurite_is_started(
    tmp_path: Path,
) -> None:
    identity = {"AzureWebJobsStorage__accountName": "busbarhost"}
    run = Devhost(tmp_path, "unused", values=identity, hook="tests.devhost.storage_hook:nothing")
    try:
        run.reader.wait_ready(timeout=90)
        output = run.interrupt()
    finally:
        run.kill_group()
    assert (
        "Storage: an identity-based AzureWebJobsStorage (AzureWebJobsStorage__accountName from "
        "local.settings.json); Azurite not started"
    ) in output
    assert "AzureWebJobsStorage: " not in output
    assert not (tmp_path / "data" / "azurite").exists()


@pytest.mark.subprocess
@pytest.mark.timeout(120)
def test_a_taken_azurite_port_refuses_start_up_naming_the_port_and_its_make_variable(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = int(squatter.getsockname()[1])
        run = Devhost(tmp_path, "unused", (0, 0, port))
        try:
            output = run.reader.rest(timeout=60)
            assert run.process.wait(30) == 1
        finally:
            run.kill_group()
    assert (
        f"error: cannot start Azurite: Azurite's table port {port} on 127.0.0.1 is already in use" in output
    )
    assert "AZURITE_TABLE_PORT=<port>" in output
    assert "devhost ready" not in output


@pytest.mark.subprocess
@pytest.mark.timeout(120)
def test_an_azurite_still_running_on_the_same_data_is_refused_by_pid_whatever_the_ports(
    tmp_path: Path,
) -> None:
    location = tmp_path / "data" / "azurite"
    other = AzuriteService.start(location, AzuritePorts(0, 0, 0))
    try:
        run = Devhost(tmp_path, "unused")  # OS-picked ports: only the data is shared
        try:
            output = run.reader.rest(timeout=60)
            assert run.process.wait(30) == 1
        finally:
            run.kill_group()
        assert other.process.poll() is None  # never stopped by the refused devhost
    finally:
        other.stop()
    pid = other.process.pid
    assert (
        f"error: cannot start Azurite: the Azurite pid {pid} an earlier run started on {location} still runs"
        in output
    )
    assert f"kill {pid}" in output and "devhost ready" not in output
