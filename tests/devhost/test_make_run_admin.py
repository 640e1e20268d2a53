"""``make run`` serves the namespace's admin API where ``ServiceBusAdministrationClient`` looks for it: over
HTTPS, named in the banner and the endpoints record, trusted through a CA file kept under the data dir. The
SDK's own admin sample runs unedited against it with only the environment variables docs/emulator.md
names."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.devhost.test_make_run import MakeRun

# azure-servicebus's samples/sync_samples/mgmt_queue.py, byte-identical (see sdk_samples/README.md).
SAMPLE = Path(__file__).parent / "sdk_samples" / "mgmt_queue.py"


def run_sample(connection_string: str, ca_file: str) -> str:
    """The sample as a user runs it: a fresh process whose environment holds only PATH, the sample's own
    connection-string variable and the two CA variables (requests reads one, aiohttp/OpenSSL the other)."""
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SERVICEBUS_CONNECTION_STR": connection_string,
        "REQUESTS_CA_BUNDLE": ca_file,
        "SSL_CERT_FILE": ca_file,
    }
    result = subprocess.run(
        [sys.executable, str(SAMPLE)], env=environment, capture_output=True, text=True, timeout=90
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def assert_sample_managed_a_queue(output: str) -> None:
    created = re.search(r"^Queue (sb_mgmt_queue\S+) is created\.$", output, re.MULTILINE)
    assert created, output
    queue = created.group(1)
    assert f"Queue Name: {queue}" in output  # listed and read back
    assert f"Queue {queue} is deleted." in output


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.timeout(300)
def test_the_sdks_admin_sample_runs_unedited_against_make_run_trusting_a_ca_that_outlives_restarts(
    tmp_path: Path,
) -> None:
    if shutil.which("make") is None:
        pytest.fail("GNU make is required for the newcomer path")
    data_dir = tmp_path / "data"
    runs: list[MakeRun] = []
    try:
        first = MakeRun(data_dir)
        runs.append(first)
        first.reader.wait_ready(timeout=90)
        admin_connection_string = first.banner("Service Bus admin connection string")
        ca_file = first.banner("Emulator management CA file")
        https = first.banner("Emulator management (HTTPS)")
        # The CA lives with the emulator's data; the admin connection string names the HTTPS port.
        assert Path(ca_file) == (data_dir / "emulator" / "management-ca.pem").resolve()
        port = re.fullmatch(r"https://localhost:(\d+)", https)
        assert port, https
        assert f"Endpoint=sb://localhost:{port.group(1)};" in admin_connection_string
        # Tools find the same in the endpoints record, apart from the app settings.
        record = json.loads((data_dir / "devhost" / "endpoints.json").read_text(encoding="utf-8"))
        assert record["admin"] == {
            "adminConnectionString": admin_connection_string,
            "managementTls": https,
            "managementCaFile": ca_file,
        }
        assert "adminConnectionString" not in record["settings"]

        # Without the CA trusted the sample fails on certificate verification: the trust really comes from
        # the documented variables, not from a client that verifies nothing.
        untrusted = subprocess.run(
            [sys.executable, str(SAMPLE)],
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "SERVICEBUS_CONNECTION_STR": admin_connection_string,
            },
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert untrusted.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr, untrusted.stderr
        assert_sample_managed_a_queue(run_sample(admin_connection_string, ca_file))
        ca_pem = Path(ca_file).read_bytes()
        first.interrupt()

        # Restarted on the same data: the same CA, so an exported REQUESTS_CA_BUNDLE keeps working.
        second = MakeRun(data_dir)
        runs.append(second)
        second.reader.wait_ready(timeout=90)
        assert second.banner("Emulator management CA file") == ca_file
        assert Path(ca_file).read_bytes() == ca_pem
        assert_sample_managed_a_queue(
            run_sample(second.banner("Service Bus admin connection string"), ca_file)
        )
        second.interrupt()
    finally:
        for run in runs:
            run.kill()
