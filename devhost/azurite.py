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

A port still taken is refused before Azurite starts, naming the port, its Makefile variable and, when the
taker is an Azurite an earlier run left on the same data (its pid is recorded there), that process.
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
import threading
from dataclasses import dataclass
from pathlib import Path

from devhost.storage_settings import development_connection_string

logger = logging.getLogger("devhost.Azurite")

AZURITE = Path(__file__).resolve().parents[1] / "tools" / "azurite" / "node_modules" / ".bin" / "azurite"
SERVICES = ("blob", "queue", "table")
# What Azurite prints once a service listens (dist/src/azurite.js): the address it actually bound.
_LISTENING = re.compile(r"Azurite (Blob|Queue|Table) service is successfully listening at http://[^:]+:(\d+)")
PID_FILE = "azurite.pid"
LINUX = sys.platform == "linux"


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


def check_ports_free(host: str, ports: AzuritePorts, location: Path) -> None:
    """Refuse, before starting, ports something else already listens on (0 is always free)."""
    for service, port in ports.named().items():
        if port and _port_taken(host, port):
            stale = _stale_azurite(location)
            who = (
                f"the Azurite pid {stale} an earlier run left on {location} still holds it: stop it "
                f"(kill {stale}) and start again"
                if stale is not None
                else "stop whatever listens there (an Azurite of your own? `ss -ltnp` names it)"
            )
            raise AzuriteError(
                f"Azurite's {service} port {port} on {host} is already in use: {who}, or pick another port "
                f"(--azurite-{service}-port, make run {MAKE_VARIABLES[service]}=<port>; 0: the OS picks one)"
            )


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: SIGTERM to Azurite when devhost dies without stopping it (``kill -9``)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


class AzuriteProcess:
    """A running Azurite; :meth:`start` returns once its three services listen."""

    def __init__(self, process: subprocess.Popen[str], location: Path, host: str, ports: AzuritePorts):
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
        check_ports_free(host, ports, location)
        arguments = [str(AZURITE), "--location", str(location), "--silent", "--disableTelemetry"]
        for service, port in ports.named().items():
            arguments += [f"--{service}Host", host, f"--{service}Port", str(port)]
        process = subprocess.Popen(
            arguments,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=LINUX,
            preexec_fn=_die_with_parent if LINUX else None,
        )
        listening: dict[str, int] = {}
        output: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                output.append(line.rstrip())
                match = _LISTENING.search(line)
                if match:
                    listening[match.group(1).lower()] = int(match.group(2))
                    if len(listening) == len(SERVICES):
                        ready.set()
                elif ready.is_set():  # what Azurite says while it runs: closing, or an error
                    level = logging.WARNING if "error" in line.lower() else logging.INFO
                    logger.log(level, "%s", line.rstrip())
            ready.set()  # it exited
            process.stdout.close()

        threading.Thread(target=read, name="azurite-output", daemon=True).start()
        ready.wait(timeout)
        if len(listening) < len(SERVICES):
            exited = process.poll()
            _terminate(process)
            said = "\n    ".join(output[-10:]) or "(nothing)"
            why = (
                f"exited with code {exited}" if exited is not None else f"did not listen within {timeout:g} s"
            )
            raise AzuriteError(f"Azurite {why}; it said:\n    {said}")
        started = cls(process, location, host, AzuritePorts(**listening))
        (location / PID_FILE).write_text(json.dumps({"pid": process.pid}), encoding="utf-8")
        logger.info("Azurite listening: %s (data in %s)", started.endpoints(), location)
        return started

    def stop(self) -> None:
        """SIGTERM (Azurite saves its data and closes), then kill if it has not exited within 10 s."""
        _terminate(self.process)
        pid_file = self.location / PID_FILE
        try:
            if json.loads(pid_file.read_text(encoding="utf-8")).get("pid") == self.process.pid:
                pid_file.unlink()
        except (OSError, ValueError):
            pass


def _terminate(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
