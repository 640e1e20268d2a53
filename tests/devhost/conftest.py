"""Fixtures for devhost tests: test apps, a record file the apps write to, SDK helpers."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from emulator.server import EmulatorThread
from emulator.testing import EmulatorHandle

APPS = Path(__file__).parent / "apps"


class Records:
    """The JSON lines the test apps append (one per invocation) to ``DEVHOST_TEST_RECORD``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line]

    def of(self, function: str, **match: Any) -> list[dict[str, Any]]:
        return [
            r
            for r in self.all()
            if r["function"] == function and all(r.get(k) == v for k, v in match.items())
        ]

    def wait(
        self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            records = self.all()
            if predicate(records):
                return records
            if time.monotonic() > deadline:
                raise TimeoutError(f"records never matched; have {records[-5:]}")
            time.sleep(0.05)


@pytest.fixture
def records(tmp_path: Path) -> Records:
    return Records(tmp_path / f"records-{uuid.uuid4().hex[:6]}.jsonl")


def send(connection_string: str, entity: str, *messages: ServiceBusMessage | str) -> None:
    """Send with the sync SDK."""
    batch = [m if isinstance(m, ServiceBusMessage) else ServiceBusMessage(m) for m in messages]
    with (
        ServiceBusClient.from_connection_string(connection_string) as client,
        client.get_queue_sender(entity)
        if "/" not in entity
        else client.get_topic_sender(entity.split("/")[0]) as sender,
    ):
        sender.send_messages(batch)


@pytest.fixture(scope="module")
def shared_emulator(_shared_emulator: EmulatorThread) -> EmulatorHandle:
    """The session's shared emulator, for a module's host and entities."""
    return EmulatorHandle(_shared_emulator)


@pytest.fixture(scope="module")
def module_records(tmp_path_factory: pytest.TempPathFactory) -> Records:
    """The record file of a module's host."""
    return Records(tmp_path_factory.mktemp("records") / "records.jsonl")


def app_settings(emulator: EmulatorHandle, record_file: Path, entities: dict[str, str]) -> dict[str, str]:
    """A test app's settings: the emulator's connection, its record file and its entity names."""
    return {
        "ServiceBusConnection": emulator.connection_string,
        "DEVHOST_TEST_RECORD": str(record_file),
        **entities,
    }


def basic_app_settings(emulator: EmulatorHandle, record_file: Path, queue: str) -> dict[str, str]:
    """basic_app.py's settings: its work queue, and a timer that never fires during a test."""
    return app_settings(emulator, record_file, {"WORK_QUEUE": queue, "TICK_SCHEDULE": "0 0 0 1 1 *"})
