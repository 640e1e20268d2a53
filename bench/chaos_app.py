"""The app under chaos: ``make run`` in its own process group, started, killed and restarted on one data
directory, as an operator (or the platform) would.

``make run`` is started with ports picked by the OS, ``DATA_DIR`` and ``SETTINGS`` of the run (its install
prerequisites taken as made: :data:`INSTALLED`); its output goes to ``make-run.log`` and is scanned for the
ready line and the banner (URL, keys, connection strings).
The worker process is found as the ``devhost.worker`` process in the group; Azurite (in a process group of
its own, see ``devhost.storage.azurite``) by the pid devhost records beside its data.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from devhost.storage.azurite import PID_FILE as AZURITE_PID_FILE

READY = "devhost ready: "
# make run's install prerequisites, taken as made (``-o``): ``make chaos`` installs them before the run, and
# a make run that reinstalled them itself (a checkout newer than their stamps) would do it mid-run, under
# the app's feet, and in a worktree that shares them with others (symlinks), under theirs.
INSTALLED = ("-o", ".venv/.installed", "-o", "tools/azurite/node_modules/.installed")
GAVE_UP = "failed too often to be restarted again"


@dataclass(frozen=True, slots=True)
class AppInfo:
    """What one start of ``make run`` printed: where it listens and its keys."""

    base_url: str
    master_key: str
    host_key: str
    connection_string: str
    management_endpoint: str
    storage_connection_string: str

    @property
    def amqp_port(self) -> int:
        match = re.search(r"sb://[^:;/]+:(\d+)", self.connection_string)
        assert match, self.connection_string
        return int(match.group(1))


def parse_banner(lines: list[str]) -> AppInfo:
    """The ready line and banner values (raises ``ValueError`` naming what is missing)."""
    text = "\n".join(lines)

    def value(pattern: str) -> str:
        match = re.search(pattern, text, re.MULTILINE)
        if not match:
            raise ValueError(f"make run printed no {pattern!r}")
        return match.group(1)

    return AppInfo(
        base_url=value(r"^devhost ready: (\S+)"),
        master_key=value(r"^Master key:\s+(\S+)"),
        host_key=value(r"^Host key:\s+(\S+)"),
        connection_string=value(r"^Service Bus connection string: (\S+)"),
        management_endpoint=value(r"^Emulator management \(ARM\): (\S+)"),
        storage_connection_string=value(r"^AzureWebJobsStorage: (\S+)"),
    )


class AppProcess:
    """One ``make run`` process group; :meth:`start` blocks until it is ready."""

    def __init__(self, repo: Path, data_dir: Path, settings: Path, log: IO[str]) -> None:
        self.repo = repo
        self.data_dir = data_dir
        self.settings = settings
        self._log = log
        self._log_lock = threading.Lock()
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.info: AppInfo | None = None

    def start(self, timeout: float = 240.0) -> AppInfo:
        environment = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("BUSBAR_", "ServiceBusConnection", "AzureWebJobs"))
        }
        self.lines = []
        self._ready.clear()
        self.process = subprocess.Popen(
            [
                *("make", "--no-print-directory", *INSTALLED),
                *("run", "HTTP_PORT=0", "AMQP_PORT=0", "MANAGEMENT_PORT=0"),
                "MANAGEMENT_TLS_PORT=0",
                "AMQPS_PORT=0",
                *("AZURITE_BLOB_PORT=0", "AZURITE_QUEUE_PORT=0", "AZURITE_TABLE_PORT=0"),
                f"DATA_DIR={self.data_dir}",
                f"SETTINGS={self.settings}",
            ],
            cwd=self.repo,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: kill -9 of the group kills make, host and worker
        )
        threading.Thread(target=self._read, args=(self.process,), daemon=True).start()
        self._ready.wait(timeout)
        if not any(line.startswith(READY) for line in self.lines):
            self.kill()
            tail = "\n".join(self.lines[-40:])
            raise RuntimeError(f"make run did not get ready within {timeout:g} s:\n{tail}")
        self.info = parse_banner(self.lines)
        return self.info

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            stripped = line.rstrip("\n")
            if process is self.process:
                self.lines.append(stripped)
            with self._log_lock:
                self._log.write(f"[make run {process.pid}] {stripped}\n")
            if stripped.startswith(READY):
                self._ready.set()
        self._ready.set()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def gave_up(self) -> bool:
        """Whether this run stopped itself because its worker failed too often (the host recycles)."""
        return any(GAVE_UP in line for line in self.lines)

    def worker_pids(self) -> list[int]:
        """The ``devhost.worker`` processes of this run's process group."""
        if self.process is None:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            group = int(stat.rsplit(")", 1)[1].split()[2])
            if group == self.process.pid and "devhost.worker" in cmdline:
                found.append(int(entry.name))
        return found

    def azurite_pid(self) -> int | None:
        """The Azurite devhost runs on this run's data (the pid it records beside the data), if it runs."""
        location = self.data_dir / "azurite"
        try:
            pid = int(json.loads((location / AZURITE_PID_FILE).read_text())["pid"])
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, KeyError, TypeError):
            return None
        arguments = [part.decode(errors="replace") for part in command]
        return pid if any("azurite" in a for a in arguments) and str(location) in arguments else None

    def kill(self) -> None:
        """kill -9 of the whole process group (make, devhost with its emulator, the worker)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)

    def interrupt(self, timeout: float = 90.0) -> int | None:
        """Ctrl-C: devhost drains and stops; killed if it does not within ``timeout``."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.process.poll() is None:
            self.kill()
        return self.process.returncode
