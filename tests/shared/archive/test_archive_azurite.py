"""The archive through ``abfs://`` (adlfs) against Azurite, a real Azure Storage endpoint.

Azurite comes from ``npm ci --prefix tools/azurite``; the fixture starts its blob service on a free port
with a temporary location and the well-known development account.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.archive.reader import read_archive, read_run_summary, row_properties
from shared.archive.writer import ArchiveWriter
from shared.redrive.settings import RedriveSettings
from tests.shared.archive.archive_support import row

ROOT = Path(__file__).resolve().parents[3]
AZURITE = ROOT / "tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def azurite_connection_string(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running Azurite blob service; yields its connection string."""
    assert AZURITE.exists(), f"{AZURITE} is missing: run 'npm ci --prefix tools/azurite'"
    assert shutil.which("node"), "Node.js is needed to run Azurite"
    port = _free_port()
    location = tmp_path_factory.mktemp("azurite")
    process = subprocess.Popen(
        [
            str(AZURITE),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(location),
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (
                f"Azurite exited: {process.stderr.read().decode() if process.stderr else ''}"
            )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "Azurite did not start listening within 60 s"
                time.sleep(0.1)
        yield (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};"
        )
    finally:
        if process.stderr is not None:
            process.stderr.close()
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.subprocess
def test_the_archive_writes_through_abfs_to_azure_storage_and_reads_back(
    azurite_connection_string: str,
) -> None:
    settings = RedriveSettings.from_env(
        {
            "BUSBAR_ARCHIVE_URL": "abfs://archive/dlq",
            "BUSBAR_ARCHIVE_CONNECTION_STRING": azurite_connection_string,
        }
    )
    writer = ArchiveWriter(settings.archive_url, settings.archive_storage_options)

    written = writer.write("run-az", [row(1), row(2), row(3, "events/Subscriptions/billing")])
    again = writer.write("run-az", [row(1), row(2)])  # a retried run rewrites, never duplicates
    summary_path = writer.write_summary("run-az", {"totals": {"archived": 3}})

    assert {f.path for f in again} <= {f.path for f in written}
    assert all(f.path.startswith("archive/dlq/date=2026-11-22/entity=") for f in written)
    assert summary_path == "archive/dlq/_runs/run-az.json"
    table = read_archive(settings.archive_url, settings.archive_storage_options)
    rows = sorted(table.to_pylist(), key=lambda r: r["sequence_number"])
    assert [r["sequence_number"] for r in rows] == [1, 2, 3]
    assert rows[2]["source_entity"] == "events/Subscriptions/billing"
    assert row_properties(rows[0]) == {"tenant": "acme", "n": 1}
    assert read_run_summary(settings.archive_url, "run-az", settings.archive_storage_options) == {
        "totals": {"archived": 3}
    }
