"""Writes an instance's :class:`~shared.monitoring.recorder.Recorder` to storage in the background: every
:data:`FLUSH_SECONDS`, and at once when a minute rolls over. Never in an invocation's way.

The write runs on the flusher's own daemon thread, so a slow or unreachable storage account slows no
invocation and fails none. A failed write is logged (once per outage, and again when it recovers) and its
numbers stay in the recorder: the next flush writes them, as each row holds the minute's running totals
(a row is replaced, never incremented, so writing it again is harmless). Minutes older than
:data:`~shared.monitoring.recorder.KEEP_MINUTES` are dropped, with a warning saying how many.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from shared.monitoring.recorder import Pending, Recorder

FLUSH_SECONDS = 10.0
"""How often an instance writes its current minute: the console's numbers lag by at most this much."""

logger = logging.getLogger("busbar.monitoring")

Writer = Callable[[list[Pending]], None]


def _now() -> datetime:
    return datetime.now(UTC)


class Flusher:
    """Flushes ``recorder`` through ``write`` on a daemon thread started by :meth:`start`."""

    def __init__(
        self,
        recorder: Recorder,
        write: Writer,
        interval: float = FLUSH_SECONDS,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.recorder = recorder
        self._write = write
        self._interval = interval
        self._clock = clock
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._failing = False

    def start(self) -> None:
        """Start the background thread (once; later calls do nothing)."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="busbar-monitoring", daemon=True)
                self._thread.start()

    def wake(self) -> None:
        """Flush now rather than at the next interval (a minute has just closed)."""
        self._wake.set()

    def flush(self) -> bool:
        """Write what changed; whether everything pending was written. Never raises."""
        pending = self.recorder.pending()
        now = self._clock()
        ok = True
        if pending:
            try:
                self._write(pending)
            except Exception as error:  # storage down, throttled, misconfigured: the invocations go on
                ok = False
                if not self._failing:
                    logger.warning(
                        "monitoring: could not write %d endpoint-minute(s), kept for the next flush: %s: %s",
                        len(pending),
                        type(error).__name__,
                        error,
                    )
                self._failing = True
            else:
                self.recorder.settle(pending, now)
                if self._failing:
                    logger.info("monitoring: writing again after an outage")
                self._failing = False
        lost = self.recorder.drop_older_than_kept(now)
        if lost:
            logger.warning("monitoring: dropped %d endpoint-minute(s) never written (storage down)", lost)
        return ok

    def stop(self) -> None:
        """Stop the thread after a last flush."""
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self._interval + 5)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            self.flush()
