"""Azurite, Microsoft's Azure Storage emulator, as a child process of devhost: the storage account
``AzureWebJobsStorage`` names locally, as Core Tools users run Azurite beside ``func start``.

``python -m devhost --with-azurite`` (``make run``) starts ``tools/azurite/node_modules/.bin/azurite`` (the
npm package ``make`` installs) with its blob, queue and table services on 127.0.0.1 and its data under
``--azurite-data-dir`` (``make run``: ``.data/azurite``, kept across restarts), waits until all three
listen, reads back the ports they listen on (0 asks the OS for one, as for every other port of make run)
and stops it with devhost.

Azurite keeps its data in LokiJS files that it saves every 5 s and when it stops (SIGTERM): killed with
SIGKILL, it loses what was written in its last 5 s. So on Linux it runs in a process group of its own, out of
reach of a terminal's Ctrl-C (devhost drains in-flight invocations first, which may still write to storage,
then stops Azurite with SIGTERM) and of a ``kill -9`` of make run's group, and the kernel sends it SIGTERM
when devhost dies (``PR_SET_PDEATHSIG``), however devhost died: it saves its data and exits, and the next
``make run`` finds its ports free and its data whole. Elsewhere it stays in devhost's process group.

Before Azurite starts, an Azurite still running on the same data (its pid is recorded there) is waited for
a few seconds, then refused by pid, and a port something already listens on is refused, naming the port and
its Makefile variable.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from devhost.storage_settings import development_connection_string

logger = logging.getLogger("devhost.Azurite")

AZURITE = Path(__file__).resolve().parents[1] / "tools" / "azurite" / "node_modules" / ".bin" / "azurite"
SERVICES = ("blob", "queue", "table")
# What Azurite prints once a service listens (dist/src/azurite.js): the address it actually bound.
_LISTENING = re.compile(r"Azurite (Blob|Queue|Table) service is successfully listening at http://[^:]+:(\d+)")
PID_FILE = "azurite.pid"
LOG_FILE = "azurite.log"
LINUX = sys.platform == "linux"
STALE_EXIT_SECONDS = 10.0


class AzuriteError(RuntimeError):
    """Azurite cannot be started (missing, a port taken, it exited, or it did not listen in time)."""


@dataclass(frozen=True, slots=True)
class AzuritePorts:
    """The three services' ports, with the Makefile variables that set them (for error messages)."""

    blob: int = 10000
    queue: int = 10001
    table: int = 10002

    def named(self) -> dict[str, int]:
        return {"blob": self.blob, "queue": self.queue, "table": self.table}


MAKE_VARIABLES = {"blob": "AZURITE_BLOB_PORT", "queue": "AZURITE_QUEUE_PORT", "table": "AZURITE_TABLE_PORT"}


def _port_taken(host: str, port: int) -> bool:
    with socket.socket() as probe:
        # As Node binds (SO_REUSEADDR): connections of a stopped Azurite left in TIME_WAIT do not count.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _stale_azurite(location: Path) -> int | None:
    """The pid of an Azurite an earlier devhost started on ``location`` and that still runs, if any."""
    try:
        pid = int(json.loads((location / PID_FILE).read_text(encoding="utf-8"))["pid"])
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    text = [part.decode(errors="replace") for part in command]
    return pid if any("azurite" in part for part in text) and str(location) in text else None


def _exited_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def check_free(host: str, ports: AzuritePorts, location: Path) -> None:
    """Refuse, before starting, data another Azurite still serves and ports something already listens on
    (0 is always free). An Azurite an earlier devhost started on the same data gets a few seconds to exit:
    devhost killed, it was sent SIGTERM and may still be saving its files, which a second Azurite on the
    same data would read half-saved and later overwrite."""
    stale = _stale_azurite(location)
    if stale is not None and not _exited_within(stale, STALE_EXIT_SECONDS):
        raise AzuriteError(
            f"the Azurite pid {stale} an earlier run started on {location} still runs (two on one data "
            f"overwrite each other's files): stop it (kill {stale}) and start again"
        )
    for service, port in ports.named().items():
        if port and _port_taken(host, port):
            raise AzuriteError(
                f"Azurite's {service} port {port} on {host} is already in use: stop whatever listens there "
                "(an Azurite of your own? `ss -ltnp` names it), or pick another port "
                f"(--azurite-{service}-port, make run {MAKE_VARIABLES[service]}=<port>; 0: the OS picks one)"
            )


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: SIGTERM to Azurite when devhost dies without stopping it (``kill -9``)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


class AzuriteProcess:
    """A running Azurite; :meth:`start` returns once its three services listen."""

    def __init__(self, process: subprocess.Popen[bytes], location: Path, host: str, ports: AzuritePorts):
        self.process = process
        self.location = location
        self.host = host
        self.ports = ports

    @property
    def connection_string(self) -> str:
        """``AzureWebJobsStorage`` for the development account on the ports Azurite listens on."""
        return development_connection_string(self.host, self.ports.blob, self.ports.queue, self.ports.table)

    def endpoints(self) -> dict[str, str]:
        """Each service's URL (the development account's path included), for the endpoints record."""
        return {
            service: f"http://{self.host}:{port}/devstoreaccount1"
            for service, port in self.ports.named().items()
        }

    @classmethod
    def start(
        cls, location: Path, ports: AzuritePorts, host: str = "127.0.0.1", timeout: float = 60.0
    ) -> AzuriteProcess:
        """Start Azurite with its data under ``location``; raises :class:`AzuriteError` with the reason."""
        if not AZURITE.exists():
            raise AzuriteError(
                f"{AZURITE} is missing: install it with `make {AZURITE.parents[1]}/.installed`"
            )
        if shutil.which("node") is None:
            raise AzuriteError("Node.js is not on PATH; Azurite (an npm package) needs Node.js 20 or newer")
        location.mkdir(parents=True, exist_ok=True)
        check_free(host, ports, location)
        arguments = [str(AZURITE), "--location", str(location), "--silent", "--disableTelemetry"]
        for service, port in ports.named().items():
            arguments += [f"--{service}Host", host, f"--{service}Port", str(port)]
        # Its output goes to a file, not a pipe: a pipe dies with devhost, and Azurite, SIGTERMed then,
        # would fail writing "closing..." into it and exit before saving its data.
        log_path = location / LOG_FILE
        with log_path.open("w", encoding="utf-8") as log:
            process = subprocess.Popen(
                arguments,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=LINUX,
                preexec_fn=_die_with_parent if LINUX else None,
            )
        listening: dict[str, int] = {}
        deadline = time.monotonic() + timeout
        while len(listening) < len(SERVICES) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            listening = {
                service.lower(): int(port)
                for service, port in _LISTENING.findall(log_path.read_text("utf-8"))
            }
        if len(listening) < len(SERVICES):
            exited = process.poll()
            _terminate(process)
            said = "\n    ".join(log_path.read_text("utf-8").splitlines()[-10:]) or "(nothing)"
            why = (
                f"exited with code {exited}" if exited is not None else f"did not listen within {timeout:g} s"
            )
            raise AzuriteError(f"Azurite {why}; it said ({log_path}):\n    {said}")
        started = cls(process, location, host, AzuritePorts(**listening))
        (location / PID_FILE).write_text(json.dumps({"pid": process.pid}), encoding="utf-8")
        logger.info(
            "Azurite listening: %s (data in %s, its log in %s)", started.endpoints(), location, log_path
        )
        return started

    def stop(self) -> None:
        """SIGTERM (Azurite saves its data and closes), then kill if it has not exited within 10 s."""
        _terminate(self.process)
        logger.info("Azurite stopped (exit code %s)", self.process.returncode)
        pid_file = self.location / PID_FILE
        try:
            if json.loads(pid_file.read_text(encoding="utf-8")).get("pid") == self.process.pid:
                pid_file.unlink()
        except (OSError, ValueError):
            pass


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
