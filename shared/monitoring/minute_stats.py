"""One endpoint's numbers for one minute, and the minute a moment falls in. Pure.

Each instance keeps its own :class:`MinuteStats` per endpoint and minute and writes them as they are; the
view adds the instances' rows of a minute together (:meth:`MinuteStats.merge`): counts add, histograms add
bucket by bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from shared.delivery import Outcome
from shared.monitoring.histogram import Histogram

__all__ = ["EndpointHistory", "MinuteStats", "Outcome", "QueueSample", "minute_of", "minutes_back"]


def minute_of(moment: datetime) -> datetime:
    """The UTC minute ``moment`` falls in (a naive moment is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def minutes_back(now: datetime, count: int) -> list[datetime]:
    """The ``count`` minutes up to and including ``now``'s, oldest first."""
    last = minute_of(now)
    return [last - timedelta(minutes=count - 1 - i) for i in range(count)]


@dataclass(slots=True)
class MinuteStats:
    """Counts by outcome, and the handled messages' processing and critical times (ms)."""

    handled: int = 0
    failed: int = 0
    """Retried: abandoned, or the invocation ended without settling."""
    dead_lettered: int = 0
    processing: Histogram = field(default_factory=Histogram)
    """How long the handled messages' invocations took, settlement included."""
    critical: Histogram = field(default_factory=Histogram)
    """From the broker enqueuing each handled message to its invocation settling it."""

    def add(self, outcome: Outcome, processing_ms: float, critical_ms: float | None) -> None:
        """Count one invocation. Durations are kept for handled messages only, as NServiceBus's processing
        and critical times are: a failing handler's time says how long it took to fail."""
        if outcome is Outcome.HANDLED:
            self.handled += 1
            self.processing.add(processing_ms)
            if critical_ms is not None:
                self.critical.add(critical_ms)
        elif outcome in (Outcome.RETRIED, Outcome.FAILED):  # both a retry: the console's "retries"
            self.failed += 1
        else:
            self.dead_lettered += 1

    def merge(self, other: MinuteStats) -> None:
        """Add ``other`` (another instance's same minute) to these numbers."""
        self.handled += other.handled
        self.failed += other.failed
        self.dead_lettered += other.dead_lettered
        self.processing.merge(other.processing)
        self.critical.merge(other.critical)

    def copy(self) -> MinuteStats:
        """An independent copy."""
        return MinuteStats(
            self.handled, self.failed, self.dead_lettered, self.processing.copy(), self.critical.copy()
        )


@dataclass(frozen=True, slots=True)
class QueueSample:
    """An endpoint's input queue as read in one minute."""

    minute: datetime
    active: int
    dead_letter: int


@dataclass(slots=True)
class EndpointHistory:
    """What the table holds for one endpoint over a span of minutes: the instances' numbers added up per
    minute, and the queue samples."""

    minutes: dict[datetime, MinuteStats]
    queue: dict[datetime, QueueSample]
