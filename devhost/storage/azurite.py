"""Azurite, Microsoft's Azure Storage emulator, started as a child process of devhost (its supervision:
``devhost.storage.azurite_service``): the storage account ``AzureWebJobsStorage`` names locally, as Core Tools
users run Azurite beside ``func start``.

``python -m devhost --with-azurite`` (``make run``) starts ``tools/azurite/node_modules/.bin/azurite`` (the
npm package ``make`` installs) with its blob, queue and table services on 127.0.0.1 and its data under
``--azurite-data-dir`` (``make run``: ``.data/azurite``, kept across restarts), waits until all three
listen and reads back the ports they listen on (0 asks the OS for one, as for every other port of make run).

Azurite keeps its data in LokiJS files that it saves every 5 s and when it stops (SIGTERM): killed with
SIGKILL, it loses what was written in its last 5 s. So on Linux it runs in a process group of its own, out of
reach of a terminal's Ctrl-C (devhost drains in-flight invocations first, which may still write to storage,
then stops Azurite with SIGTERM) and of a ``kill -9`` of make run's group, and the kernel sends it SIGTERM
when devhost dies (``PR_SET_PDEATHSIG``), however devhost died: it saves its data and exits, and the next
``make run`` finds its ports free and its data whole. (The kernel sends that signal once per devhost thread
that dies; ``azurite_signals.cjs``, preloaded into Azurite, keeps the later ones from cutting its save
short.) Elsewhere it stays in devhost's process group.

Before Azurite starts, an Azurite still running on the same data (its pid is recorded there) is waited for
a few seconds, then refused by pid, and a port something already listens on is refused, naming the port and
its Makefile variable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

AZURITE = Path(__file__).resolve().parents[2] / "tools" / "azurite" / "node_modules" / ".bin" / "azurite"
SERVICES = ("blob", "queue", "table")
# What Azurite prints once a service listens (dist/src/azurite.js): the address it actually bound.
_LISTENING = re.compile(r"Azurite (Blob|Queue|Table) service is successfully listening at http://[^:]+:(\d+)")
SIGNALS_PRELOAD = Path(__file__).with_name("azurite_signals.cjs")
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


def launch(
    location: Path, ports: AzuritePorts, host: str = "127.0.0.1", timeout: float = 60.0
) -> tuple[subprocess.Popen[bytes], AzuritePorts]:
    """Start Azurite with its data under ``location``; once its three services listen, the process and the
    ports they listen on. Raises :class:`AzuriteError` with the reason."""
    if not AZURITE.exists():
        raise AzuriteError(f"{AZURITE} is missing: install it with `make {AZURITE.parents[1]}/.installed`")
    if shutil.which("node") is None:
        raise AzuriteError("Node.js is not on PATH; Azurite (an npm package) needs Node.js 20 or newer")
    location.mkdir(parents=True, exist_ok=True)
    check_free(host, ports, location)
    arguments = [str(AZURITE), "--location", str(location), "--silent", "--disableTelemetry"]
    for service, port in ports.named().items():
        arguments += [f"--{service}Host", host, f"--{service}Port", str(port)]
    # Its output goes to a file, not a pipe: a pipe dies with devhost, and Azurite, SIGTERMed then, would
    # fail writing "closing..." into it and exit before saving its data. Appended: read from here on.
    log_path = location / LOG_FILE
    # Every SIGTERM after the first is made harmless (see azurite_signals.cjs), so Azurite always saves.
    preload = f'--require "{SIGNALS_PRELOAD}"'
    environment = {**os.environ, "NODE_OPTIONS": f"{os.environ.get('NODE_OPTIONS', '')} {preload}".strip()}
    with log_path.open("ab") as log:
        offset = log.tell()
        process = subprocess.Popen(
            arguments,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=LINUX,
            preexec_fn=_die_with_parent if LINUX else None,
        )

    def said() -> str:
        with log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", errors="replace")

    listening: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while len(listening) < len(SERVICES) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        listening = {service.lower(): int(port) for service, port in _LISTENING.findall(said())}
    if len(listening) < len(SERVICES):
        exited = process.poll()
        terminate(process)
        last = "\n    ".join(said().splitlines()[-10:]) or "(nothing)"
        why = f"exited with code {exited}" if exited is not None else f"did not listen within {timeout:g} s"
        raise AzuriteError(f"Azurite {why}; it said ({log_path}):\n    {last}")
    (location / PID_FILE).write_text(json.dumps({"pid": process.pid}), encoding="utf-8")
    return process, AzuritePorts(**listening)


def forget_pid(location: Path, process: subprocess.Popen[bytes]) -> None:
    """Remove the pid file if it names ``process``."""
    pid_file = location / PID_FILE
    try:
        if json.loads(pid_file.read_text(encoding="utf-8")).get("pid") == process.pid:
            pid_file.unlink()
    except (OSError, ValueError):
        pass


def terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
