"""Behaviour specs for the management-plane options of ``python -m emulator``: the development token
(given or generated, printed at start) and HTTPS with a CA file the emulator writes and prints."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.emulator.arm_client import arm, make_client
from tests.emulator.emulator_process import EmulatorProcesses

pytestmark = pytest.mark.subprocess


@pytest.fixture
def processes() -> Iterator[EmulatorProcesses]:
    with EmulatorProcesses() as group:
        yield group


def _printed(process_stdout: str, label: str) -> str:
    found = re.search(rf"^{re.escape(label)}: (\S+)$", process_stdout, re.MULTILINE)
    assert found, f"'{label}' not printed:\n{process_stdout}"
    return found.group(1)


def test_given_token_is_printed_and_accepted(processes: EmulatorProcesses) -> None:
    process = processes.start(in_memory=True, extra_args=["--management-token", "cli-token"])
    assert process.management_port is not None

    assert _printed(process.stdout, "Management token") == "cli-token"
    client = arm(process.management_port, "cli-token")
    try:
        assert client.namespaces.get(*client.scope).name == "sbemulatorns"
    finally:
        client.close()


def test_generated_token_is_printed_and_accepted(processes: EmulatorProcesses) -> None:
    process = processes.start(in_memory=True)
    assert process.management_port is not None

    token = _printed(process.stdout, "Management token")
    client = arm(process.management_port, token)
    try:
        assert client.namespaces.get(*client.scope).name == "sbemulatorns"
    finally:
        client.close()


def test_tls_prints_the_https_endpoint_and_ca_file(processes: EmulatorProcesses, tmp_path: Path) -> None:
    process = processes.start(
        data_dir=tmp_path,
        extra_args=[
            *("--management-token", "t", "--management-tls"),
            *("--management-tls-port", "0", "--amqps-port", "0"),
        ],
    )

    endpoint = _printed(process.stdout, "ARM endpoint (TLS)")
    ca_file = Path(_printed(process.stdout, "Management CA file"))
    assert ca_file == tmp_path / "management-ca.pem"
    client = make_client(endpoint, "t", connection_verify=str(ca_file))
    try:
        assert client.namespaces.get("rg", "sbemulatorns").name == "sbemulatorns"
    finally:
        client.close()
