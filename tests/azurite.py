"""A real Azure Table Storage endpoint for the tests: Azurite's table service, one per test process.

Azurite comes from ``npm ci --prefix tools/azurite`` (``make test`` installs it).
:func:`table_connection_string` starts ``azurite-table`` on a free port the first time it is asked (data in a
temporary directory) and gives every later caller of the same process the same service; it is stopped when
the process exits. Tests keep apart by fresh table names, as they keep apart on the emulator by fresh entity
names.
"""

from __future__ import annotations

import atexit
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AZURITE_TABLE = ROOT / "tools" / "azurite" / "node_modules" / ".bin" / "azurite-table"
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

_lock = threading.Lock()
_connection_string: str | None = None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_table_service(location: Path, port: int = 0) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``azurite-table`` with its data under ``location``; the process and its connection string."""
    assert AZURITE_TABLE.exists(), f"{AZURITE_TABLE} is missing: run 'npm ci --prefix tools/azurite'"
    assert shutil.which("node"), "Node.js is needed to run Azurite"
    port = port or _free_port()
    process = subprocess.Popen(
        [
            str(AZURITE_TABLE),
            "--tableHost",
            "127.0.0.1",
            "--tablePort",
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
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            error = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"Azurite's table service exited: {error}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("Azurite's table service did not listen within 60 s") from None
            time.sleep(0.1)
    return process, connection_string(port)


def connection_string(port: int) -> str:
    """The development account's connection string for a table service on ``port``."""
    return (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
        f"TableEndpoint=http://127.0.0.1:{port}/{ACCOUNT};"
    )


def table_connection_string() -> str:
    """This process's Azurite table service (started on first use, stopped at exit)."""
    global _connection_string
    with _lock:
        if _connection_string is None:
            location = Path(tempfile.mkdtemp(prefix="busbar-azurite-"))
            process, _connection_string = start_table_service(location)
            atexit.register(_stop, process, location)
        return _connection_string


def _stop(process: subprocess.Popen[bytes], location: Path) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
    if process.stderr is not None:
        process.stderr.close()
    shutil.rmtree(location, ignore_errors=True)
