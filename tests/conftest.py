"""Fixtures that start real local servers on port 0.

``emulator`` is one in-memory emulator shared by the whole session (fast); every test creates fresh
entities through it. ``make_emulator`` starts a private one (own data directory, own config) for tests
that restart, reconfigure or break the broker.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from emulator.broker.properties import EmulatorConfig, QueueProperties, default_config
from emulator.server import Emulator, EmulatorOptions, EmulatorThread


class EmulatorHandle:
    """A running emulator as tests use it: connection string plus entity creation."""

    def __init__(self, thread: EmulatorThread) -> None:
        self.thread = thread
        emulator = thread.emulator
        assert emulator is not None
        self.emulator: Emulator = emulator

    @property
    def connection_string(self) -> str:
        return self.emulator.connection_string

    @property
    def amqp_port(self) -> int:
        return self.emulator.amqp_port

    @property
    def management_port(self) -> int:
        return self.emulator.management_port

    def create_queue(self, name: str | None = None, **properties: Any) -> str:
        """Create a queue with a fresh name (or ``name``) and the given QueueProperties fields."""
        queue_name = name or f"q-{uuid.uuid4().hex[:12]}"
        props = replace(QueueProperties(), **properties)
        self.thread.call(lambda: self.emulator.namespace.create_queue(queue_name, props))
        return queue_name

    def call(self, fn: Callable[[], object]) -> object:
        """Run ``fn`` on the emulator's event loop thread."""
        return self.thread.call(fn)


def _start(options: EmulatorOptions) -> EmulatorThread:
    thread = EmulatorThread(options)
    try:
        thread.start()
    except BaseException:
        thread.stop()  # a failed start must not leave its loop thread behind
        raise
    return thread


@pytest.fixture(scope="session")
def _shared_emulator() -> Iterator[EmulatorThread]:
    thread = _start(EmulatorOptions(amqp_port=0, management_port=0))
    yield thread
    thread.stop()


@pytest.fixture
def emulator(_shared_emulator: EmulatorThread) -> EmulatorHandle:
    """The session's shared in-memory emulator."""
    return EmulatorHandle(_shared_emulator)


@pytest.fixture
def make_emulator(tmp_path: Path) -> Iterator[Callable[..., EmulatorHandle]]:
    """Start private emulators: ``make_emulator(config=..., data_dir=..., **options)``."""
    started: list[EmulatorThread] = []

    def factory(
        config: EmulatorConfig | None = None, data_dir: Path | None = None, **options: Any
    ) -> EmulatorHandle:
        opts = EmulatorOptions(
            config=config or default_config(), data_dir=data_dir, amqp_port=0, management_port=0, **options
        )
        thread = _start(opts)
        started.append(thread)
        return EmulatorHandle(thread)

    yield factory
    for thread in started:
        thread.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session (``local[2]``) per test process, started on first use (the JVM is slow)."""
    from pyspark.sql import SparkSession

    # Spark's Python workers must run this interpreter (the .venv one, with azure-servicebus), not python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("busbar-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.speculation", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()
