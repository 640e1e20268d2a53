"""A newcomer's path: ``make run`` starts the emulator and Azurite, provisions, runs devhost with the real
function_app.py, prints a ready line with URLs and keys, serves HTTP, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx
import pytest
from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

REPO = Path(__file__).resolve().parents[2]
SAMPLE_ENTITIES = "EMULATOR_CONFIG=emulator/sample-config.json"
"""make run's opt-in to the emulator's sample entities (``orders`` and the like, which no function reads)."""
SAMPLE_QUEUES = ("orders", "orders-errors", "wallet-transactions")
SAMPLE_TOPIC = "bundle-1"


class OutputReader:
    """Collects a process's output lines on a thread; ``wait_for`` a line prefix."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("devhost ready: "):
                self._ready.set()
        self._ready.set()

    def wait_ready(self, timeout: float) -> str:
        self._ready.wait(timeout)
        text = "\n".join(self.lines)
        assert any(line.startswith("devhost ready: ") for line in self.lines), "no ready line:\n" + text
        return text

    def rest(self, timeout: float) -> str:
        self._thread.join(timeout)
        return "\n".join(self.lines)


def test_python_m_devhost_help_documents_pointing_at_a_real_namespace() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "devhost", "--help"], cwd=REPO, capture_output=True, text=True, check=True
    )
    for flag in ("--with-emulator", "--settings", "--port", "--startup-hook", "fullyQualifiedNamespace"):
        assert flag in result.stdout


class MakeRun:
    """``make run`` in its own process group with ports picked by the OS, ``DATA_DIR`` and ``SETTINGS``.

    The settings file lives beside the data, never in the checkout: tests run in parallel, and one
    deleting the repository's ``local.settings.json`` while another's devhost reads it starts that
    devhost with no settings at all."""

    def __init__(self, data_dir: Path, *variables: str, cwd: Path = REPO) -> None:
        self.settings = data_dir.parent / "local.settings.json"
        environment = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("BUSBAR_", "ServiceBusConnection", "AzureWebJobs"))
        }
        self.process = subprocess.Popen(
            [
                *("make", "--no-print-directory", "run", "HTTP_PORT=0"),
                *(
                    "AMQP_PORT=0",
                    "MANAGEMENT_PORT=0",
                    "MANAGEMENT_TLS_PORT=0",
                    "AMQPS_PORT=0",
                    "AZURITE_BLOB_PORT=0",
                    "AZURITE_QUEUE_PORT=0",
                    "AZURITE_TABLE_PORT=0",
                    f"DATA_DIR={data_dir}",
                    f"SETTINGS={self.settings}",
                ),
                *variables,
            ],
            cwd=cwd,  # another checkout: a copy of this one (tests/docs/repo_copy.py)
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, so SIGINT reaches it like a terminal's Ctrl-C
        )
        self.reader = OutputReader(self.process)

    @property
    def base_url(self) -> str:
        """The address in the ready line: every port is 0 (picked by the OS, printed by devhost), so
        parallel runs never race for a port that was free a moment before."""
        match = re.search(r"^devhost ready: (\S+)", "\n".join(self.reader.lines), re.MULTILINE)
        assert match, "\n".join(self.reader.lines)
        return match.group(1)

    def banner(self, name: str) -> str:
        """A value printed as ``<name>: value`` (or ``<name> = value``) in the start-up banner."""
        match = re.search(
            rf"^{re.escape(name)}[:=]?\s*=?\s*(\S+)", "\n".join(self.reader.lines), re.MULTILINE
        )
        assert match, "\n".join(self.reader.lines)
        return match.group(1)

    def interrupt(self) -> str:
        """Ctrl-C; returns the whole output once everything exited."""
        os.killpg(self.process.pid, signal.SIGINT)
        self.process.wait(timeout=60)
        output = self.reader.rest(timeout=10)
        # devhost drains and exits 0; make, interrupted too (as by a terminal's Ctrl-C), re-raises SIGINT.
        assert self.process.returncode in (0, -signal.SIGINT), output
        assert "devhost stopped" in output and "Traceback" not in output
        return output

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.mark.slow
@pytest.mark.subprocess
def test_make_run_starts_everything_serves_http_stops_on_ctrl_c_and_reuses_its_data(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    marker = f"kept-{uuid.uuid4().hex}"
    runs: list[MakeRun] = []
    try:
        first = MakeRun(tmp_path / "data", SAMPLE_ENTITIES)
        runs.append(first)
        text = first.reader.wait_ready(timeout=90)
        # A fresh checkout has no settings file: the first run makes one from the sample, later runs keep it.
        assert f"created {first.settings} from local.settings.sample.json" in text
        assert json.loads(first.settings.read_text()) == json.loads(
            (REPO / "local.settings.sample.json").read_text()
        )
        master_key = first.banner("Master key")
        connection_string = first.banner("Service Bus connection string")
        # The sample's AzureWebJobsStorage (UseDevelopmentStorage=true: Azurite's default ports) is replaced
        # by Azurite's on the ports it listens on, and a table written there ...
        storage = first.banner("AzureWebJobsStorage")
        assert "AccountName=devstoreaccount1;" in storage and "TableEndpoint=http://127.0.0.1:" in storage
        table = f"t{uuid.uuid4().hex[:12]}"
        with TableServiceClient.from_connection_string(storage) as tables:
            tables.create_table(table).upsert_entity({"PartitionKey": "p", "RowKey": "r", "marker": marker})
        with httpx.Client(base_url=first.base_url, timeout=30) as client:
            status = client.get("/admin/host/status", headers={"x-functions-key": master_key})
            assert status.status_code == 200 and status.json()["state"] == "Running"
            # The console's URL as printed opens it: the master key is in it (printed below it anyway).
            console = re.search(
                rf"^\s+ops_console: \[GET\] ({re.escape(first.base_url)}/api/ops\?code=(\S+)) ", text, re.M
            )
            assert console is not None and console.group(2) == master_key, text
            opened = client.get(console.group(1))
            assert opened.status_code == 200 and "<title>Busbar console</title>" in opened.text
            # One HTTP function of the real app: the first parameterless GET route listed in the banner.
            routes = re.findall(
                rf"^\s+(\w+): \[([A-Z,]+)\] {re.escape(first.base_url)}(/\S+) \(auth: (\w+)\)",
                text,
                re.MULTILINE,
            )
            plain_gets = [
                (name, path) for name, methods, path, _ in routes if "GET" in methods and "{" not in path
            ]
            assert plain_gets, text
            name, path = plain_gets[0]
            assert client.get(path).status_code == 401
            key = first.banner(f"Function key: {name}")
            assert client.get(path, headers={"x-functions-key": key}).status_code == 200
        # A message on a queue no function consumes ('orders', of SAMPLE_ENTITIES' config) ...
        with (
            ServiceBusClient.from_connection_string(connection_string) as sb,
            sb.get_queue_sender("orders") as tx,
        ):
            tx.send_messages(ServiceBusMessage(marker))
        first.interrupt()

        # ... is still there when `make run` starts again on the same data.
        second = MakeRun(tmp_path / "data", SAMPLE_ENTITIES)
        runs.append(second)
        assert "from local.settings.sample.json" not in second.reader.wait_ready(timeout=90)
        # ... is there too: Azurite's data is kept under DATA_DIR/azurite.
        with TableServiceClient.from_connection_string(second.banner("AzureWebJobsStorage")) as tables:
            assert tables.get_table_client(table).get_entity("p", "r")["marker"] == marker
        with (
            ServiceBusClient.from_connection_string(second.banner("Service Bus connection string")) as sb,
            sb.get_queue_receiver("orders") as rx,
        ):
            assert marker in [str(m) for m in rx.peek_messages(max_message_count=100)]
        second.interrupt()
    finally:
        for run in runs:
            run.kill()


@pytest.mark.slow
@pytest.mark.subprocess
def test_make_run_creates_the_apps_topology_only_unless_emulator_config_names_more(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    run = MakeRun(tmp_path / "data")
    try:
        run.reader.wait_ready(timeout=90)
        ca_file = run.banner("Emulator management CA file")
        admin_connection_string = run.banner("Service Bus admin connection string")
        with ServiceBusAdministrationClient.from_connection_string(
            admin_connection_string, connection_verify=ca_file
        ) as admin:
            queues = {q.name for q in admin.list_queues()}
            topics = {t.name for t in admin.list_topics()}
        run.interrupt()
    finally:
        run.kill()

    # The app's endpoints (crm is ordered: its hold queue too) and its fallback topic; none of the
    # emulator's sample entities (the opt-in is SAMPLE_ENTITIES, which the restart test above uses).
    assert {"billing", "crm", "crm.held", "shipping"} <= queues, queues
    assert "busbar-fallback" in topics, topics
    assert not queues & set(SAMPLE_QUEUES), queues
    assert SAMPLE_TOPIC not in topics, topics


@pytest.mark.slow
@pytest.mark.subprocess
def test_make_run_under_a_hierarchy_namespace_provisions_and_listens_on_prefixed_queues(
    tmp_path: Path,
) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    prefix = f"team-{uuid.uuid4().hex[:6]}"
    run = MakeRun(tmp_path / "data", f"HIERARCHY_NAMESPACE={prefix}")
    try:
        text = run.reader.wait_ready(timeout=90)
        connection_string = run.banner("Service Bus connection string")
        with ServiceBusClient.from_connection_string(connection_string) as sb:
            for queue in ("billing", "shipping"):
                with sb.get_queue_receiver(f"{prefix}/{queue}") as rx:
                    rx.peek_messages(max_message_count=1)  # exists: provisioned under the prefix
            # crm is ordered: its queue and its hold queue require sessions (a receiver names one).
            for queue in ("crm", "crm.held"):
                with sb.get_queue_receiver(f"{prefix}/{queue}", session_id="probe") as rx:
                    rx.peek_messages(max_message_count=1)
        output = run.interrupt()
    finally:
        run.kill()

    for queue in ("billing", "crm", "shipping"):
        assert f"Functions.{queue}_subscriber on {prefix}/{queue}" in text + output, text
