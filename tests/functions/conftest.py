"""Fixtures for the Functions app tests: a private emulator per module and the app's settings for it.

Each module gets its own in-process emulator, so the topics Busbar names after contracts
(``Shipping.OrderAccepted``...) never meet another module's; every test still uses fresh queue and topic
names.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app import runtime
from devhost.testing import running_host
from emulator.server import EmulatorOptions, EmulatorThread
from tests.functions.busbar_app import APP, HOST_JSON, app_settings, create_queues_and_router


@pytest.fixture(scope="module")
def private_emulator() -> Iterator[EmulatorThread]:
    thread = EmulatorThread(EmulatorOptions(amqp_port=0, management_port=0))
    try:
        thread.start()
        yield thread
    finally:
        runtime.reset()
        thread.stop()


@pytest.fixture(scope="module")
def settings(private_emulator: EmulatorThread) -> dict[str, str]:
    """The app's settings for this module's emulator, with fresh entity names."""
    return app_settings(private_emulator)


@pytest.fixture(scope="module")
def http(settings: dict[str, str]) -> Iterator[httpx.Client]:
    """An HTTP client with the host key for the app running under devhost (one host per module)."""
    with (
        running_host(
            APP, settings=settings, host_json=HOST_JSON, startup_hook=create_queues_and_router
        ) as host,
        httpx.Client(
            base_url=host.base_url, headers={"x-functions-key": host.host_key}, timeout=60
        ) as client,
    ):
        yield client
