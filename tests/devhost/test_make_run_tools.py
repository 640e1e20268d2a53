"""The runbooks' command lines reach the app ``make run`` serves, whatever ports it uses: devhost records
its endpoints under DATA_DIR and the tools read them with local.settings.json, run exactly as the docs
show them. HTTP keys stay valid across restarts on the same data, unless local.settings.json fixes them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from tests.devhost.test_make_run import REPO, SAMPLE_ENTITIES, MakeRun

QUEUE = "orders"  # emulator/sample-config.json (make run's SAMPLE_ENTITIES): no function consumes it
REASON = "Unfixable"  # not a transient reason: the re-drive policy archives it


def tool_environment() -> dict[str, str]:
    """The user's shell: none of the app's settings exported (the tools must find them themselves)."""
    prefixes = ("BUSBAR_", "ServiceBusConnection", "AzureWebJobs")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def run_tool(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """A command line as the docs (or the console) show it, run in ``cwd``."""
    result = subprocess.run(
        command,
        cwd=cwd,
        env={**tool_environment(), **env},
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
    return result


def app_directory(root: Path) -> Path:
    """A directory laid out like the checkout the docs run in -- ``.venv``, ``local.settings.json``, the data
    in ``.data`` -- but the test's own: the checkout's settings and data are a developer's."""
    root.mkdir()
    (root / ".venv").symlink_to(REPO / ".venv")
    return root


def write_settings(path: Path, archive: Path, keys: dict[str, str] | None = None) -> None:
    document: dict[str, Any] = json.loads((REPO / "local.settings.sample.json").read_text())
    document["Values"].update(
        BUSBAR_ARCHIVE_URL=str(archive),
        BUSBAR_REDRIVE_ENTITIES=QUEUE,
        BUSBAR_REDRIVE_SCHEDULE="0 0 0 1 1 *",  # the app's own re-drive timer stays out of the way
    )
    if keys:
        document["Keys"] = keys
    path.write_text(json.dumps(document, indent=2))


def dead_letter_one(connection_string: str, message_id: str) -> None:
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(ServiceBusMessage(b"{}", message_id=message_id))
        with client.get_queue_receiver(QUEUE, max_wait_time=10) as receiver:
            for received in receiver.receive_messages(max_message_count=1, max_wait_time=10):
                receiver.dead_letter_message(received, reason=REASON, error_description="cannot be fixed")
                return
    pytest.fail("the message never arrived")


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(900)
def test_the_documented_command_lines_reach_the_app_make_run_serves_on_os_picked_ports(
    tmp_path: Path,
) -> None:
    if shutil.which("make") is None or shutil.which("java") is None:
        pytest.fail("GNU make and Java 17+ are required (make check-prereqs)")
    app_dir = app_directory(tmp_path / "app")
    data = app_dir / ".data"
    archive = tmp_path / "archive"
    write_settings(app_dir / "local.settings.json", archive)  # where MakeRun points SETTINGS
    make_paths = [f"SETTINGS={app_dir / 'local.settings.json'}", f"DATA_DIR={data}"]
    busbar_code = {"PYTHONPATH": str(REPO)}  # importable from the app directory, as from the checkout
    app = MakeRun(data, SAMPLE_ENTITIES)
    try:
        app.reader.wait_ready(timeout=90)
        record = json.loads((data / "devhost" / "endpoints.json").read_text())
        assert record["http"] == app.base_url
        connection_string = app.banner("Service Bus connection string")
        assert record["settings"]["ServiceBusConnection"] == connection_string
        assert ":5672" not in connection_string  # not the sample's port: the tools cannot just assume it
        dead_letter_one(connection_string, "broken-1")

        # docs/operations.md, verbatim, in the app directory
        plan = run_tool([".venv/bin/python", "-m", "shared.redrive", "plan"], app_dir, **busbar_code)
        assert json.loads(plan.stdout)["totals"]["archived"] == 1, plan.stdout
        # docs/topology-guide.md: the app's own options, and the recorded management port
        topology = [".venv/bin/python", "-m", "shared.topology", "plan", "--endpoint", "billing"]
        planned = run_tool([*topology, "--events", "Shipping.OrderAccepted"], app_dir, **busbar_code)
        assert "plan" in json.loads(planned.stdout), planned.stdout
        # the make targets, from the checkout
        done = run_tool(["make", "--no-print-directory", "-s", "redrive-run", *make_paths], REPO)
        assert json.loads(done.stdout)["totals"]["archived"] == 1, done.stdout
        run_tool(["make", "--no-print-directory", "replay-dry-run", f"ARCHIVE={archive}", *make_paths], REPO)
        # the console's printed dry run, verbatim, in the app directory
        with httpx.Client(base_url=app.base_url, timeout=30) as client:
            view = client.get("/api/ops/archive", headers={"x-functions-key": app.banner("Master key")})
        printed = view.json()["replayAll"]["dryRun"]
        assert (
            printed.startswith(".venv/bin/python -m spark.replay ") and "--namespace sbemulatorns" in printed
        )
        run_tool(shlex.split(printed), app_dir, **busbar_code)

        summaries = [json.loads(p.read_text()) for p in (data / "replay" / "reports").glob("*/summary.json")]
        assert len(summaries) == 2
        for summary in summaries:
            assert summary["dry_run"] is True and summary["outcomes"] == {"planned": 1}, summary

        app.interrupt()
        assert not (data / "devhost" / "endpoints.json").exists()  # nothing left pointing at a stopped app
    finally:
        app.kill()


@pytest.mark.slow
@pytest.mark.subprocess
def test_keys_stay_valid_across_make_run_restarts_unless_local_settings_fix_them(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    data = tmp_path / "data"
    runs: list[MakeRun] = []
    try:
        first = MakeRun(data)
        runs.append(first)
        first.reader.wait_ready(timeout=90)
        master, host = first.banner("Master key"), first.banner("Host key")
        first.interrupt()
        assert (
            json.loads((data / "devhost" / "secrets" / "host.json").read_text())["masterKey"]["value"]
            == master
        )

        document = json.loads(first.settings.read_text())
        document["Keys"] = {"host": "fixed-host-key"}
        first.settings.write_text(json.dumps(document))
        second = MakeRun(data)
        runs.append(second)
        text = second.reader.wait_ready(timeout=90)
        assert second.banner("Master key") == master and second.banner("Host key") == "fixed-host-key"
        status = "/admin/host/status"
        with httpx.Client(base_url=second.base_url, timeout=30) as client:
            assert client.get(status, headers={"x-functions-key": master}).status_code == 200
            assert (
                client.get("/api/topology", headers={"x-functions-key": "fixed-host-key"}).status_code == 200
            )
            assert client.get("/api/topology", headers={"x-functions-key": host}).status_code == 401, text
        second.interrupt()
    finally:
        for run in runs:
            run.kill()
