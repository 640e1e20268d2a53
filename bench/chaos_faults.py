"""The chaos run's faults, and the supervisor that restarts ``make run`` as an operator or the platform would.

Kinds (each injected at random times from the run's seeded generator, see :class:`FaultScheduler`):

- ``kill-worker``: kill -9 of the function worker process; the host must restart it. The host bounds that
  as the Functions host does (3 worker errors within 30 minutes and it stops itself to be recycled): a host
  that gave up exits, and the supervisor starts ``make run`` again, counted as a recycle.
- ``kill-host``: kill -9 of the whole ``make run`` process group, then ``make run`` again on the same data.
- ``garbage``: a burst of invalid HTTP requests (none may be accepted) and garbage AMQP connections.
- ``kill-azurite``: the storage account goes away while events flow: Azurite (the app's
  ``AzureWebJobsStorage``, where every endpoint records the message ids it handled and the sample's invoices
  and shipments) is stopped with SIGTERM, and devhost starts it again on the same ports and data
  (``devhost.storage.azurite_service``); the fault waits until it is back and reports how long storage was
  away. SIGTERM, not SIGKILL: Azurite keeps its tables in memory and saves them every 5 s, so a SIGKILL loses
  writes it had already acknowledged, which Azure Storage never does once it answered (its writes are durable
  before the response). Such a loss would show up here as an event handled twice for a reason Azure cannot
  produce; an outage (requests refused, then served again with everything acknowledged kept) is what an app on
  Azure can meet, and is what this fault makes.
- ``redrive``: a console retry of the first failure group (``POST /api/ops/failures/retry``, tried again
  while the timer's run holds the instance's re-drive lock) and the re-drive timer run now
  (``POST /admin/functions/redrive_dead_letters``), while the load goes on.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from bench.chaos_app import AppInfo, AppProcess

KINDS = ("kill-worker", "kill-host", "kill-azurite", "garbage", "redrive")
# One round of faults, shuffled: two worker kills per round, so that now and then three come between two
# host kills and the host gives up on its worker (3 errors in 30 minutes) and stops to be recycled.
ROUND = ("kill-worker", "kill-worker", "kill-host", "kill-azurite", "garbage", "redrive")
AZURITE_BACK_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault: its kind, when (wall clock) and what happened."""

    kind: str
    at: float
    detail: str


class Supervisor:
    """Owns the current ``make run``; restarts it when it is killed or stops by itself."""

    def __init__(self, new_process: Callable[[], AppProcess]) -> None:
        self._new_process = new_process
        self._lock = threading.RLock()
        self._app: AppProcess | None = None
        self._up = False
        self.restarts: Counter[str] = Counter()
        self.downtimes: list[float] = []
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="chaos-supervisor", daemon=True)

    def start(self) -> AppInfo:
        with self._lock:
            self._app = self._new_process()
            info = self._app.start()
            self._up = True
        self._watcher.start()
        return info

    @property
    def app(self) -> AppProcess:
        assert self._app is not None
        return self._app

    def current(self) -> AppInfo | None:
        """The running app's addresses and keys, None while it is down or restarting."""
        app = self._app
        return app.info if self._up and app is not None and app.running() else None

    def restart(self, reason: str) -> None:
        """Kill the current run (if still up) and start ``make run`` again on the same data."""
        with self._lock:
            began = time.monotonic()
            self._up = False
            self.app.kill()
            self.restarts[reason] += 1
            self._app = self._new_process()
            self._app.start()
            self._up = True
            self.downtimes.append(time.monotonic() - began)

    def _watch(self) -> None:
        while not self._stopping.wait(0.5):
            with self._lock:
                app = self._app
                if app is None or app.running() or self._stopping.is_set():
                    continue
                # The host stopped by itself: recycled after too many worker errors, or it crashed.
                self.restart("recycled after the worker failed too often" if app.gave_up() else "exited")

    def stop(self) -> None:
        """Stop watching and stop the app as Ctrl-C does (it drains)."""
        self._stopping.set()
        with self._lock:
            if self._app is not None:
                self._app.interrupt()

    def abandon(self) -> None:
        """Stop watching and kill whatever still runs (the chaos run itself was interrupted or failed)."""
        self._stopping.set()
        app = self._app
        if app is not None and app.running():
            app.kill()


def kill_worker(supervisor: Supervisor, rng: random.Random) -> str:
    pids = supervisor.app.worker_pids()
    if not pids:
        return "skipped: no worker process (it is being restarted)"
    os.kill(pids[0], signal.SIGKILL)
    return f"killed worker {pids[0]}"


def kill_host(supervisor: Supervisor, rng: random.Random) -> str:
    pid = supervisor.app.process.pid if supervisor.app.process else None
    supervisor.restart("killed (kill -9 of the process group)")
    return f"killed make run group {pid}; started again"


def kill_azurite(supervisor: Supervisor, rng: random.Random) -> str:
    app = supervisor.app
    pid = app.azurite_pid()
    if pid is None:
        return "skipped: no Azurite process (it is being started)"
    began = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    deadline = began + AZURITE_BACK_TIMEOUT
    while time.monotonic() < deadline and app.running():
        again = app.azurite_pid()
        if again is not None and again != pid:
            away = time.monotonic() - began
            return f"SIGTERM to Azurite {pid}; devhost started it again as {again} after {away:.1f} s"
        time.sleep(0.1)
    if not app.running():
        return f"SIGTERM to Azurite {pid}; make run ended before Azurite was back"
    return f"SIGTERM to Azurite {pid}; not back within {AZURITE_BACK_TIMEOUT:g} s"


INVALID_REQUESTS: tuple[tuple[str, str, str | None, bytes], ...] = (
    # (method, path, key: "host" | "none", body)
    ("POST", "/api/events/Shipping.OrderAccepted", None, b'{"order_id": "no-key"}'),
    ("POST", "/api/events/Shipping.OrderAccepted", "host", b"not json at all"),
    ("POST", "/api/events/Shipping.OrderAccepted", "host", b"{}"),
    ("POST", "/api/events/Shipping.OrderAccepted", "host", b""),
    ("POST", "/api/events/Shipping.OrderAccepted", "host", b'{"order_id": ["a"], "amount": "x"}'),
    ("POST", "/api/events/Shipping.IOrderStatusChanged", "host", b'{"order_id": "interface"}'),
    ("POST", "/api/events/No.SuchEvent", "host", b'{"order_id": "unknown"}'),
    ("POST", "/api/events/Tenant.CustomerCreated", "wrong", b'{"customer_id": "bad-key"}'),
    ("GET", "/api/events/Tenant.CustomerCreated", "host", b""),
    ("POST", "/api/ops/failures/retry", "host", b'{"groupId": "x"}'),  # admin route, host key: 401
    ("POST", "/api/ops/failures/retry", "master", b'{"nonsense": true'),
    ("PUT", "/api/endpoints/billing/subscriptions", "host", b"\xff\xfe garbage"),
    ("GET", "/no/such/route", "host", b""),
)


def garbage(supervisor: Supervisor, rng: random.Random) -> str:
    app = supervisor.current()
    if app is None:
        return "skipped: app down"
    statuses: Counter[str] = Counter()
    keys = {"host": app.host_key, "master": app.master_key, "wrong": "not-a-key"}
    with httpx.Client(base_url=app.base_url, timeout=15.0) as client:
        for _ in range(rng.randint(20, 40)):
            method, path, key, body = rng.choice(INVALID_REQUESTS)
            headers = {"x-functions-key": keys[key]} if key else {}
            try:
                status = str(client.request(method, path, content=body, headers=headers).status_code)
            except httpx.HTTPError as error:
                status = type(error).__name__
            statuses[status] += 1
    connections = rng.randint(5, 15)
    for _ in range(connections):
        _garbage_amqp(app.amqp_port, rng)
    accepted = statuses.get("202", 0)
    return (
        f"HTTP {dict(sorted(statuses.items()))} ({accepted} accepted); {connections} garbage AMQP connections"
    )


def _garbage_amqp(port: int, rng: random.Random) -> None:
    openings = (
        b"AMQP\x00\x01\x00\x00",  # a valid AMQP header, then garbage frames
        b"AMQP\x03\x01\x00\x00",  # SASL header, then garbage
        b"HTTP/1.1 GET /\r\n\r\n",
        b"",
    )
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(rng.choice(openings) + rng.randbytes(rng.randint(0, 512)))
        sock.settimeout(0.3)
        with contextlib.suppress(OSError):
            sock.recv(1024)


def redrive(supervisor: Supervisor, rng: random.Random) -> str:
    app = supervisor.current()
    if app is None:
        return "skipped: app down"
    admin = {"x-functions-key": app.master_key}
    with httpx.Client(base_url=app.base_url, timeout=120.0, headers=admin) as client:
        failures = client.get("/api/ops/failures")
        groups = failures.json().get("groups", []) if failures.status_code == 200 else []
        retry = "no failure group"
        if groups:
            # One re-drive run at a time per instance: while the timer's run works, the console gets 409
            # RunInProgress, and an operator tries again.
            for _ in range(30):
                response = client.post("/api/ops/failures/retry", json={"groupId": groups[0]["id"]})
                if response.status_code != 409:
                    break
                time.sleep(1.0)
            retry = f"HTTP {response.status_code}"
            if response.status_code == 200 and response.json().get("summary"):
                retry += f" {response.json()['summary'].get('totals')}"
        timer = client.post("/admin/functions/redrive_dead_letters", json={}).status_code
    return f"failures: HTTP {failures.status_code}, console retry: {retry}; timer run now: HTTP {timer}"


INJECTORS: dict[str, Callable[[Supervisor, random.Random], str]] = {
    "kill-worker": kill_worker,
    "kill-host": kill_host,
    "kill-azurite": kill_azurite,
    "garbage": garbage,
    "redrive": redrive,
}


class FaultScheduler(threading.Thread):
    """Injects faults at seeded random intervals (uniform around ``mean_interval``), the kinds dealt from
    shuffled :data:`ROUND` s, so every kind comes up in every round. A fault that could not be injected (no
    worker process while one is being restarted, the app down) is dealt again next time."""

    def __init__(self, supervisor: Supervisor, seed: int, mean_interval: float) -> None:
        super().__init__(name="chaos-faults", daemon=True)
        self.supervisor = supervisor
        self.seed = seed
        self.mean_interval = mean_interval
        self.faults: list[Fault] = []
        self.skipped: Counter[str] = Counter()
        self.stopping = threading.Event()

    def run(self) -> None:
        rng = random.Random(self.seed)
        bag: list[str] = []
        while not self.stopping.wait(rng.uniform(0.5, 1.5) * self.mean_interval):
            while self.supervisor.current() is None and not self.stopping.wait(0.5):
                pass  # a restart is under way: the next fault waits for it
            if self.stopping.is_set():
                break
            if not bag:
                bag = list(ROUND)
                rng.shuffle(bag)
            kind = bag.pop()
            at = time.time()
            try:
                detail = INJECTORS[kind](self.supervisor, rng)
            except Exception as error:  # a fault that failed to inject is reported, not fatal
                detail = f"error: {type(error).__name__}: {error}"
            if detail.startswith("skipped"):
                self.skipped[kind] += 1
                bag.append(kind)
                continue
            self.faults.append(Fault(kind, at, detail))
