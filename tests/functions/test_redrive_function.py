"""The re-drive timer function hosted by devhost: on its schedule (from the app setting) and on demand
through the admin endpoint, as the Functions host runs it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from azure.servicebus import ServiceBusSubQueue

from devhost.testing import running_host
from shared.archive.reader import read_archive
from tests.shared.redrive.redrive_support import (
    Provisioner,
    dead_letter_queue_messages,
    drain_queue,
    message,
    peek_queue,
    redrive_env,
)

APP = """
import azure.functions as func

from functions import redrive

app = func.FunctionApp()
app.register_functions(redrive.bp)
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    path = tmp_path / "app" / "function_app.py"
    path.parent.mkdir()
    path.write_text(APP)
    return path


@pytest.fixture
def provision(emulator: Any) -> Iterator[Provisioner]:
    provisioner = Provisioner(emulator)
    yield provisioner
    provisioner.close()


def test_the_timer_fires_on_the_schedule_from_its_app_setting_and_redrives(
    emulator: Any, provision: Any, app: Path, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(b"again", message_id="t-1")], "MaxDeliveryCountExceeded")
    dead_letter_queue_messages(cs, queue, [message(b"bad", message_id="t-2")], "ValidationFailed")
    settings = redrive_env(emulator, tmp_path / "archive", [queue], BUSBAR_REDRIVE_SCHEDULE="*/2 * * * * *")

    with running_host(app, settings=settings) as host:
        (record,) = host.wait_for_invocations(1, timeout=60)[:1]

    assert record.function_name == "redrive_dead_letters" and record.succeeded, record.error
    assert [m.message_id for m in drain_queue(cs, queue)] == ["t-1"]
    assert peek_queue(cs, queue, ServiceBusSubQueue.DEAD_LETTER) == []
    assert read_archive(str(tmp_path / "archive")).column("message_id").to_pylist() == ["t-2"]


def test_the_admin_endpoint_runs_the_redrive_now(
    emulator: Any, provision: Any, app: Path, tmp_path: Path
) -> None:
    queue = provision.queue()
    cs = emulator.connection_string
    dead_letter_queue_messages(cs, queue, [message(b"now", message_id="a-1")], "TTLExpiredException")
    settings = redrive_env(emulator, tmp_path / "archive", [queue], BUSBAR_REDRIVE_SCHEDULE="0 0 0 1 1 *")

    with running_host(app, settings=settings) as host:
        response = httpx.post(
            f"{host.base_url}/admin/functions/redrive_dead_letters",
            json={"input": ""},
            headers={"x-functions-key": host.master_key},
            timeout=30,
        )
        assert response.status_code == 202
        (record,) = host.wait_for_invocations(1, timeout=60)

    assert record.succeeded, record.error
    assert [m.message_id for m in drain_queue(cs, queue)] == ["a-1"]
    runs = list((tmp_path / "archive" / "_runs").glob("*.json"))
    assert len(runs) == 1
