"""Run ``python -m emulator`` as a real subprocess for tests that need signals, restarts or the CLI.

``EmulatorProcess`` starts the emulator with ``--amqp-port 0 --management-port 0``, waits (bounded) for the
"ready" and "Connection string" lines on stdout and exposes the ports and connection string. Output of both
streams is drained by background threads (the emulator logs every connection, so an undrained pipe would
eventually block it) and kept for assertions. ``EmulatorProcesses`` tracks every process a test starts and
kills whatever is still running when the test ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_RE = re.compile(
    r"Service Bus emulator ready: amqp=(?P<amqp_host>[^:\s]+):(?P<amqp>\d+) "
    r"management=(?P<mgmt_host>[^:\s]+):(?P<mgmt>\d+)"
)
CONNECTION_STRING_RE = re.compile(r"Connection string: (?P<cs>\S+)")
DEFAULT_START_TIMEOUT = 30.0


class EmulatorStartError(AssertionError):
    """The emulator exited or stayed silent instead of printing its ready lines."""


class EmulatorProcess:
    """One ``python -m emulator`` subprocess (see the module docstring)."""

    def __init__(
        self,
        *,
        config: Path | None = None,
        data_dir: Path | None = None,
        in_memory: bool = False,
        extra_args: Sequence[str] = (),
        amqp_port: int = 0,
        management_port: int = 0,
    ) -> None:
        args = [sys.executable, "-u", "-m", "emulator"]
        if config is not None:
            args += ["--config", str(config)]
        if data_dir is not None:
            args += ["--data-dir", str(data_dir)]
        if in_memory:
            args.append("--in-memory")
        args += ["--amqp-port", str(amqp_port), "--management-port", str(management_port)]
        args += list(extra_args)
        self.args = args
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stdout_closed = False
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.popen = subprocess.Popen(
            args,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        self._threads = [
            threading.Thread(target=self._drain, args=(self.popen.stdout, self._stdout, True), daemon=True),
            threading.Thread(target=self._drain, args=(self.popen.stderr, self._stderr, False), daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        self.amqp_port: int | None = None
        self.management_port: int | None = None
        self.connection_string: str | None = None

    # ------------------------------------------------------------------------------------------ output

    def _drain(self, stream: object, sink: list[str], is_stdout: bool) -> None:
        assert stream is not None
        for line in stream:  # type: ignore[attr-defined]
            with self._changed:
                sink.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            if is_stdout:
                self._stdout_closed = True
            self._changed.notify_all()

    @property
    def stdout(self) -> str:
        with self._lock:
            return "\n".join(self._stdout)

    @property
    def stderr(self) -> str:
        with self._lock:
            return "\n".join(self._stderr)

    def output(self) -> str:
        """Both streams, for assertion messages."""
        return f"--- stdout ---\n{self.stdout}\n--- stderr (last 4000 chars) ---\n{self.stderr[-4000:]}"

    # ------------------------------------------------------------------------------------------ lifecycle

    def wait_ready(self, timeout: float = DEFAULT_START_TIMEOUT) -> EmulatorProcess:
        """Block until the ready and connection-string lines appeared; raise if the process died first."""
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                text = "\n".join(self._stdout)
                ready = READY_RE.search(text)
                conn = CONNECTION_STRING_RE.search(text)
                if ready and conn:
                    break
                exited = self._stdout_closed or self.popen.poll() is not None
                if not exited:
                    self._changed.wait(max(0.0, min(deadline - time.monotonic(), 0.2)))
            if exited:
                self.popen.wait(10)
                self._join_output(5)
                raise EmulatorStartError(
                    f"emulator exited with {self.popen.returncode} before it was ready\n" + self.output()
                )
            if time.monotonic() >= deadline:
                self.kill()
                raise EmulatorStartError(f"emulator not ready within {timeout} s\n" + self.output())
        self.amqp_port = int(ready.group("amqp"))
        self.management_port = int(ready.group("mgmt"))
        self.connection_string = conn.group("cs")
        return self

    def _join_output(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def send_signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up (a crash)."""
        self.send_signal(signal.SIGKILL)
        self.popen.wait(10)
        self._join_output(5)

    def terminate(self) -> None:
        """SIGTERM: a clean shutdown request; use :meth:`wait` for the exit code."""
        self.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        """The exit code; raises ``subprocess.TimeoutExpired`` if the process is still running."""
        code = self.popen.wait(timeout)
        self._join_output(5)
        return code

    def cleanup(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(10)
        self._join_output(5)
        for stream in (self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()


class EmulatorProcesses:
    """Starts emulator subprocesses and kills any still running on exit (use as a context manager)."""

    def __init__(self) -> None:
        self.started: list[EmulatorProcess] = []

    def start(
        self, *, wait: bool = True, timeout: float = DEFAULT_START_TIMEOUT, **kwargs: object
    ) -> EmulatorProcess:
        process = EmulatorProcess(**kwargs)  # type: ignore[arg-type]
        self.started.append(process)
        if wait:
            process.wait_ready(timeout)
        return process

    def close(self) -> None:
        for process in self.started:
            process.cleanup()

    def __enter__(self) -> EmulatorProcesses:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def write_config(path: Path, queues: dict[str, dict[str, object]], namespace: str = "sbemulatorns") -> Path:
    """Write a Config.json in the official emulator's format with the given queues and their Properties."""
    document = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": namespace,
                    "Queues": [{"Name": name, "Properties": props} for name, props in queues.items()],
                    "Topics": [],
                }
            ],
            "Logging": {"Type": "Console"},
        }
    }
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path
