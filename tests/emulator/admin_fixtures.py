"""The emulator as ``ServiceBusAdministrationClient`` reaches it: HTTPS management port (the client speaks
only HTTPS), the admin connection string the emulator prints, and the CA file passed as
``connection_verify``. Imported by the admin API test modules."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdministrationClient
from azure.servicebus.management import ServiceBusAdministrationClient

from emulator.server import Emulator, EmulatorOptions, EmulatorThread


class AdminEmulator:
    """An emulator with its HTTPS management port on, and admin clients for it."""

    def __init__(self, thread: EmulatorThread) -> None:
        self.thread = thread
        assert thread.emulator is not None
        self.emulator: Emulator = thread.emulator

    @property
    def connection_string(self) -> str:
        """The AMQP connection string (data plane)."""
        return self.emulator.connection_string

    def call(self, fn: Callable[[], object]) -> object:
        """Run ``fn`` on the emulator's event loop thread."""
        return self.thread.call(fn)

    @property
    def admin_connection_string(self) -> str:
        value = self.emulator.admin_connection_string
        assert value is not None
        return value

    @property
    def ca_file(self) -> str:
        assert self.emulator.management_ca_file is not None
        return str(self.emulator.management_ca_file)

    def admin(self, **options: Any) -> ServiceBusAdministrationClient:
        options.setdefault("retry_total", 0)
        return ServiceBusAdministrationClient.from_connection_string(
            self.admin_connection_string, connection_verify=self.ca_file, **options
        )

    def async_admin(self, **options: Any) -> AsyncAdministrationClient:
        options.setdefault("retry_total", 0)
        return AsyncAdministrationClient.from_connection_string(
            self.admin_connection_string, connection_verify=self.ca_file, **options
        )


def start_admin_emulator(
    data_dir: Path | None = None, **options: Any
) -> tuple[EmulatorThread, AdminEmulator]:
    """A TLS-enabled emulator on free ports; ``options``: further EmulatorOptions fields (``sku``, ...)."""
    emulator_options = EmulatorOptions(
        amqp_port=0,
        management_port=0,
        management_tls=True,
        management_tls_port=0,
        data_dir=data_dir,
        **options,
    )
    thread = EmulatorThread(emulator_options)
    try:
        thread.start()
    except BaseException:
        thread.stop()
        raise
    return thread, AdminEmulator(thread)


@pytest.fixture(scope="module")
def admin_emulator() -> Iterator[AdminEmulator]:
    """One TLS-enabled emulator per test module; tests use fresh entity names."""
    thread, handle = start_admin_emulator()
    yield handle
    thread.stop()


@pytest.fixture
def make_admin_emulator(tmp_path: Path) -> Iterator[Callable[[Path | None], AdminEmulator]]:
    """Private TLS-enabled emulators (for restarts): ``make_admin_emulator(data_dir)``."""
    threads: list[EmulatorThread] = []

    def factory(data_dir: Path | None = None) -> AdminEmulator:
        thread, handle = start_admin_emulator(data_dir)
        threads.append(thread)
        return handle

    yield factory
    for thread in threads:
        thread.stop()


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
