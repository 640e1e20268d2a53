"""Fixtures for the topology tests: the management client and SDK client of the shared emulator, and a
fresh hierarchy namespace per test so every test's queues and topics are new entities."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient

from emulator.testing import EmulatorHandle
from shared.management import EMULATOR_NAMESPACE, ManagementClient, ManagementSettings


@pytest.fixture
def management(emulator: EmulatorHandle) -> Iterator[ManagementClient]:
    settings = ManagementSettings(
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="busbar-tests",
        namespace=EMULATOR_NAMESPACE,
        endpoint=f"http://127.0.0.1:{emulator.management_port}",
        token=emulator.emulator.management_token,
    )
    with ManagementClient(settings, retry_total=0) as client:
        yield client


@pytest.fixture
def sb_client(emulator: EmulatorHandle) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(emulator.connection_string, retry_total=0) as client:
        yield client


@pytest.fixture
def ns() -> str:
    """A fresh hierarchy namespace: every queue and topic of the test lives under it."""
    return f"t{uuid.uuid4().hex[:10]}"
