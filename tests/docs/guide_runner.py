"""Runs a guide's commands as a user would type them: one bash session per guide, in a copy of the
repository, with the machine's environment minus Busbar's, against the app the guide's ``make run`` starts.

- **Session.** One ``bash --noprofile --norc`` per guide, so what a line sets (``KEY=$(make host-key)``) is
  there for the lines after it. Each command's text is written, as the guide has it, to a scratch file the
  session sources (``.``), with its output to another file and its stdin from ``/dev/null``. The session
  defines one shell function, ``curl``, which runs the real curl with the same arguments plus
  ``--dump-header <scratch file>``: the response status is read from there (curl itself exits 0 on a
  4xx). Nothing is exported; no variable is added.
- **make run** runs in the background, as in another terminal: the walkthrough waits for devhost's ready
  line before the next command, and stops it with SIGINT (Ctrl-C) at the end of the walkthrough.
- **Outcome.** A command must exit as its guide says (0 unless a ``# exit N`` comment says otherwise) and
  every curl response must have a status below 400 (or the ``# HTTP NNN`` the guide names). Otherwise
  :class:`GuideFailure` names the guide, the line, the command and its output (and the app's last lines).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.docs.doc_commands import DocCommand

DEFAULT_PORTS = {
    7071: "HTTP (devhost)",
    5672: "AMQP (emulator)",
    5300: "management (emulator)",
    5301: "HTTPS management (emulator)",
    5671: "namespace TLS: admin API and AMQP over TLS (emulator)",
    10000: "blob (Azurite)",
    10001: "queue (Azurite)",
    10002: "table (Azurite)",
}
# Settings a developer may have exported for the app or another namespace: a user following a guide on a
# fresh clone has none of them, and the guides must not depend on them. PYTEST_: the harness's own.
BUSBAR_ENVIRONMENT = ("BUSBAR_", "ServiceBus", "AzureWebJobs", "AzureServiceBus", "FUNCTIONS_", "PYTEST_")
# What a parent make (`make test`) exports to its children: a user's terminal has none of it, and with
# MAKELEVEL set a guide's `make host-key` would print "make[1]: Entering directory ..." around the key.
PARENT_MAKE_ENVIRONMENT = frozenset({"MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMERR"})
READY_LINE = "devhost ready: "
DONE = "__guide_command_done__"
COMMAND_TIMEOUT = 300.0
READY_TIMEOUT = 120.0
OUTPUT_TAIL = 60


class GuideFailure(AssertionError):
    """A guide's command did not do what the guide says it does."""


def user_environment(environment: Mapping[str, str] | None = None) -> dict[str, str]:
    """The machine's environment (default: this process's) minus anything Busbar-specific and what a
    parent make exported."""
    source = os.environ if environment is None else environment
    return {
        k: v
        for k, v in source.items()
        if not k.startswith(BUSBAR_ENVIRONMENT) and k not in PARENT_MAKE_ENVIRONMENT
    }


def _tail(text: str, lines: int = OUTPUT_TAIL) -> str:
    kept = text.rstrip("\n").split("\n")
    cut = len(kept) - lines
    return ("\n".join([f"... ({cut} lines before)", *kept[-lines:]])) if cut > 0 else "\n".join(kept)


def _describe(command: DocCommand, problem: str, output: str, app: LocalApp | None) -> str:
    parts = [f"{command.where}: {problem}", f"$ {command.text}", "--- its output ---", _tail(output)]
    if app is not None:
        parts += ["--- make run (last lines) ---", _tail(app.output(), 25)]
    return "\n".join(parts)


_STATUS_LINE = re.compile(r"^HTTP/[\d.]+ (\d{3})", re.M)


def response_status(headers: str) -> int | None:
    """The final response's status in a ``--dump-header`` file (after any 1xx or redirect)."""
    statuses = [int(s) for s in _STATUS_LINE.findall(headers) if not s.startswith("1")]
    return statuses[-1] if statuses else None


class LocalApp:
    """``make run`` as a guide starts it: in the background, in its own process group (so SIGINT reaches
    it as a terminal's Ctrl-C does), its output collected."""

    def __init__(self, command: DocCommand, cwd: Path, environment: Mapping[str, str]) -> None:
        self.command = command
        self._lines: list[str] = []
        self._ready = threading.Event()
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-c", command.text],
            cwd=cwd,
            env=dict(environment),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.append(line.rstrip("\n"))
            if line.startswith(READY_LINE):
                self._ready.set()
        self._ready.set()

    def output(self) -> str:
        return "\n".join(self._lines)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until devhost's ready line, as a user waits for it before typing the next command."""
        self._ready.wait(timeout)
        if not any(line.startswith(READY_LINE) for line in self._lines):
            state = f"exited {self.process.poll()}" if self.process.poll() is not None else "still starting"
            problem = f"`{self.command.text}` printed no ready line within {timeout:.0f} s ({state})"
            raise GuideFailure(_describe(self.command, problem, self.output(), None))

    def stop(self) -> str:
        """Ctrl-C: devhost drains and exits 0 (make, interrupted too, dies of SIGINT). Returns the output."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            problem = f"`{self.command.text}` still ran 60 s after Ctrl-C"
            raise GuideFailure(_describe(self.command, problem, self.output(), None)) from None
        self._reader.join(timeout=10)
        output = self.output()
        self.kill()
        if self.process.returncode not in (0, -signal.SIGINT, 130) or "devhost stopped" not in output:
            problem = f"`{self.command.text}` did not stop cleanly on Ctrl-C (exit {self.process.returncode})"
            raise GuideFailure(_describe(self.command, problem, output, None))
        return output

    def kill(self) -> None:
        """SIGKILL to the whole group, if it still runs (a failed walkthrough); then release the pipe."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self._reader.join(timeout=10)  # the pipe is at its end: the group is gone
        if self.process.stdout is not None:
            self.process.stdout.close()


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_status: int
    output: str
    http_statuses: tuple[int | None, ...]


class GuideSession:
    """One bash session for one guide."""

    def __init__(self, guide: str, cwd: Path, environment: Mapping[str, str], scratch: Path) -> None:
        self.guide = guide
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        self._output = scratch / "output"
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=dict(environment),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._send(
            f"curl() {{ local headers; headers=$(mktemp '{scratch}/curl-headers.XXXXXX'); "
            'command curl --dump-header "$headers" "$@"; }\n'
        )

    def _send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text)
        self.process.stdin.flush()

    def _wait_done(self, deadline: float) -> tuple[int | None, str]:
        """The exit status the session reports after a command (``None`` on timeout or a dead session), and
        what bash itself printed meanwhile (a syntax error in the command, say)."""
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()
        pending = ""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, pending
            readable, _, _ = select.select([descriptor], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(descriptor, 4096).decode(errors="replace")
            if not chunk:
                return None, pending
            pending += chunk
            match = re.search(rf"{DONE} (\d+)\n", pending)
            if match:
                return int(match.group(1)), pending[: match.start()].strip("\n")

    def run(self, command: DocCommand, timeout: float = COMMAND_TIMEOUT) -> CommandResult:
        """The command as written, in this session; its exit status, output and curl statuses."""
        for old in self.scratch.glob("curl-headers.*"):
            old.unlink()
        # Sourced from a file: the session's own state (variables) is the command's, and a command bash
        # cannot parse fails alone (status 2, bash's message in its output) instead of derailing the session.
        script = self.scratch / "command.sh"
        script.write_text(command.text + "\n")
        self._send(f". '{script}' >'{self._output}' 2>&1 </dev/null\nprintf '\\n{DONE} %s\\n' $?\n")
        status, shell_output = self._wait_done(time.monotonic() + timeout)
        output = self._output.read_text(errors="replace") if self._output.exists() else ""
        output = f"{output}\n(bash) {shell_output}" if shell_output else output
        if status is None:
            alive = self.process.poll() is None
            self.close()
            state = f"did not finish within {timeout:.0f} s" if alive else "ended the shell session"
            raise _Unfinished(state, output)
        headers = sorted(self.scratch.glob("curl-headers.*"), key=lambda p: p.stat().st_mtime_ns)
        statuses = tuple(response_status(p.read_text(errors="replace")) for p in headers)
        return CommandResult(status, output, statuses)

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


class _Unfinished(Exception):
    def __init__(self, state: str, output: str) -> None:
        super().__init__(state)
        self.state = state
        self.output = output


def check(command: DocCommand, result: CommandResult, app: LocalApp | None = None) -> None:
    """Raise :class:`GuideFailure` unless the command did what its guide says."""
    if result.exit_status != command.expected_exit:
        problem = f"exited {result.exit_status}, the guide expects {command.expected_exit}"
        raise GuideFailure(_describe(command, problem, result.output, app))
    for status in result.http_statuses:
        if command.expected_http is not None:
            good = status == command.expected_http
            wanted = f"HTTP {command.expected_http}"
        else:
            good = status is not None and status < 400
            wanted = "a status below 400"
        if not good:
            problem = f"curl got {'no response' if status is None else f'HTTP {status}'}, expected {wanted}"
            raise GuideFailure(_describe(command, problem, result.output, app))
    if command.expected_http is not None and not result.http_statuses:
        problem = f"the guide expects HTTP {command.expected_http} but the command made no request"
        raise GuideFailure(_describe(command, problem, result.output, app))


def is_make_run(command: DocCommand) -> bool:
    return command.one_line.split()[:2] == ["make", "run"]


@dataclass(slots=True)
class Walkthrough:
    """Guides followed in order in one directory, against the app the first ``make run`` starts."""

    cwd: Path
    environment: Mapping[str, str]
    scratch: Path
    command_timeout: float = COMMAND_TIMEOUT
    app: LocalApp | None = None
    ran: int = 0

    def follow(self, guide: str, commands: list[DocCommand]) -> None:
        """Run one guide's commands (local ones; the caller leaves out Azure's and ``make test``)."""
        session = GuideSession(guide, self.cwd, self.environment, self.scratch / guide.replace("/", "_"))
        try:
            for command in commands:
                if is_make_run(command):
                    if self.app is not None:
                        raise GuideFailure(f"{command.where}: a second `make run` while the first one runs")
                    self.app = LocalApp(command, self.cwd, self.environment)
                    self.app.wait_ready()
                    self.ran += 1
                    continue
                try:
                    result = session.run(command, self.command_timeout)
                except _Unfinished as unfinished:
                    raise GuideFailure(
                        _describe(command, unfinished.state, unfinished.output, self.app)
                    ) from None
                check(command, result, self.app)
                self.ran += 1
        finally:
            session.close()

    def stop(self) -> None:
        if self.app is not None:
            self.app.stop()

    def kill(self) -> None:
        if self.app is not None:
            self.app.kill()


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def taken_default_ports() -> list[str]:
    """The default ports (the guides' ``make run``) something already listens on."""
    return [f"{port} ({what})" for port, what in DEFAULT_PORTS.items() if _port_taken(port)]


@contextlib.contextmanager
def default_ports_lock(timeout: float = 900.0) -> Iterator[None]:
    """One verbatim walkthrough at a time on this machine (other test sessions included): they all need
    the default ports."""
    path = Path(tempfile.gettempdir()) / "busbar-guides-default-ports.lock"
    with path.open("w") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise GuideFailure(f"another walkthrough held {path} for {timeout:.0f} s") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
