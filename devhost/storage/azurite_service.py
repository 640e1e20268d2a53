"""devhost's Azurite while the host runs: started once, started again on the same ports and data if it
exits on its own, stopped with devhost.

A storage account does not go away in Azure; locally its emulator can (killed, crashed). The app keeps the
connection string it was given, so Azurite comes back on the very ports it listened on: the app's storage
calls fail while it is away and succeed again once it is back, as during a transient outage of the
service. What Azurite had not saved yet when it was killed with SIGKILL (its last 5 s, see
:mod:`devhost.storage.azurite`) is lost; SIGTERM loses nothing.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from pathlib import Path

from devhost.storage.azurite import AzuriteError, AzuritePorts, forget_pid, launch, terminate
from devhost.storage.settings import DEVELOPMENT_ACCOUNT, development_connection_string

logger = logging.getLogger("devhost.Azurite")

RESTART_PAUSE_SECONDS = 1.0


class AzuriteService:
    """A running Azurite (:meth:`start` returns once its services listen) kept running until :meth:`stop`."""

    def __init__(self, process: subprocess.Popen[bytes], location: Path, host: str, ports: AzuritePorts):
        self.process = process
        self.location = location
        self.host = host
        self.ports = ports
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher = threading.Thread(target=self._keep_running, name="azurite-watch", daemon=True)

    @classmethod
    def start(cls, location: Path, ports: AzuritePorts, host: str = "127.0.0.1") -> AzuriteService:
        """Azurite with its data under ``location``; raises :class:`AzuriteError` with the reason."""
        process, listening = launch(location, ports, host)
        service = cls(process, location, host, listening)
        service._watcher.start()
        logger.info("Azurite listening: %s (data and azurite.log in %s)", service.endpoints(), location)
        return service

    @property
    def connection_string(self) -> str:
        """``AzureWebJobsStorage`` for the development account on the ports Azurite listens on."""
        return development_connection_string(self.host, self.ports.blob, self.ports.queue, self.ports.table)

    def endpoints(self) -> dict[str, str]:
        """Each service's URL (the development account's path included), for the endpoints record."""
        return {
            service: f"http://{self.host}:{port}/{DEVELOPMENT_ACCOUNT}"
            for service, port in self.ports.named().items()
        }

    def _keep_running(self) -> None:
        while not self._stopping.is_set():
            code = self.process.wait()
            if self._stopping.is_set():
                return
            logger.warning(
                "Azurite exited (code %s) while the app runs: starting it again on %s", code, self.ports
            )
            while not self._stopping.is_set():
                try:
                    process, _ = launch(self.location, self.ports, self.host)
                except AzuriteError as exc:
                    logger.warning("Azurite cannot be started again yet: %s", exc)
                    time.sleep(RESTART_PAUSE_SECONDS)
                    continue
                with self._lock:
                    if self._stopping.is_set():
                        terminate(process)
                        return
                    self.process = process
                    self.restarts += 1
                logger.warning("Azurite started again (pid %d), same ports and data", process.pid)
                break

    def stop(self) -> None:
        """SIGTERM (Azurite saves its data and closes), then kill if it has not exited within 10 s."""
        with self._lock:
            self._stopping.set()
            process = self.process
        terminate(process)
        self._watcher.join(timeout=30)
        forget_pid(self.location, process)
        logger.info("Azurite stopped (exit code %s)", process.returncode)
