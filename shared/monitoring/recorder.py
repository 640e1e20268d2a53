"""The in-process record of one instance: per endpoint and minute, the invocations it ran. Pure (a lock and
counters: no I/O), so recording costs an invocation next to nothing.

The flusher (:mod:`shared.monitoring.flusher`) takes what changed since it last wrote
(:meth:`Recorder.pending`) and reports back what it wrote (:meth:`Recorder.settle`). A minute stays in
memory until it is over and its final numbers are written; when storage is down the numbers stay and are
written by a later flush, up to :data:`KEEP_MINUTES` minutes back: older ones are dropped (and counted,
for the log) so an outage that lasts cannot grow the process without bound.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.delivery import Outcome
from shared.monitoring.minute_stats import MinuteStats, minute_of

KEEP_MINUTES = 60
"""How many minutes of unwritten numbers an instance keeps while storage is unreachable."""


@dataclass(frozen=True, slots=True)
class Pending:
    """One endpoint's minute to write: its numbers so far (a copy) and which version of them they are."""

    endpoint: str
    minute: datetime
    stats: MinuteStats
    version: int


@dataclass(slots=True)
class _Entry:
    stats: MinuteStats
    version: int = 0
    written: int = 0


class Recorder:
    """Thread-safe counters per (endpoint, minute), an endpoint named by its input queue path.
    ``on_new_minute`` is called (outside the lock) when a record opens a minute while an earlier one is still
    held, so the flusher can write the closed minute now rather than at its next interval."""

    def __init__(self, on_new_minute: Callable[[], None] | None = None) -> None:
        self._entries: dict[tuple[str, datetime], _Entry] = {}
        self._lock = threading.Lock()
        self.on_new_minute = on_new_minute
        self._latest: datetime | None = None

    def record(
        self, endpoint: str, outcome: Outcome, at: datetime, processing_ms: float, critical_ms: float | None
    ) -> None:
        """Count one invocation of ``endpoint`` that settled at ``at``."""
        minute = minute_of(at)
        rolled = False
        with self._lock:
            entry = self._entries.get((endpoint, minute))
            if entry is None:
                entry = self._entries[(endpoint, minute)] = _Entry(MinuteStats())
            entry.stats.add(outcome, processing_ms, critical_ms)
            entry.version += 1
            if self._latest is None or minute > self._latest:
                rolled = self._latest is not None
                self._latest = minute
        if rolled and self.on_new_minute is not None:
            self.on_new_minute()

    def pending(self) -> list[Pending]:
        """Every (endpoint, minute) whose numbers changed since they were last written, oldest first."""
        with self._lock:
            found = [
                Pending(endpoint, minute, entry.stats.copy(), entry.version)
                for (endpoint, minute), entry in self._entries.items()
                if entry.version != entry.written
            ]
        return sorted(found, key=lambda p: (p.minute, p.endpoint))

    def settle(self, written: list[Pending], now: datetime) -> None:
        """Note that ``written`` are stored; forget the minutes that are over and fully written."""
        current = minute_of(now)
        with self._lock:
            for item in written:
                entry = self._entries.get((item.endpoint, item.minute))
                if entry is None:
                    continue
                entry.written = max(entry.written, item.version)
                if item.minute < current and entry.written == entry.version:
                    del self._entries[(item.endpoint, item.minute)]

    def drop_older_than_kept(self, now: datetime) -> int:
        """Forget minutes more than :data:`KEEP_MINUTES` old, written or not; how many were unwritten."""
        oldest = minute_of(now) - timedelta(minutes=KEEP_MINUTES)
        with self._lock:
            stale = [key for key in self._entries if key[1] < oldest]
            lost = sum(1 for key in stale if self._entries[key].written != self._entries[key].version)
            for key in stale:
                del self._entries[key]
        return lost
