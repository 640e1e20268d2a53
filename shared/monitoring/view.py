"""The console's monitoring view: per endpoint, throughput, retries and dead letters per minute over the
last minutes, processing and critical time (median, 95th percentile), and the queue. Pure: the table's
history and the namespace's current counts in, the JSON body out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.monitoring.histogram import Histogram
from shared.monitoring.minute_stats import EndpointHistory, MinuteStats, minutes_back

DEFAULT_MINUTES = 15
MAX_MINUTES = 180


@dataclass(frozen=True, slots=True)
class EndpointNow:
    """An endpoint as the namespace shows it now: its input queue's active messages and the dead letters
    of its queue and of the subscriptions forwarding to it. None: the queue does not exist (yet)."""

    name: str
    queue: str
    active: int | None
    dead_letters: int | None


def _times(histogram: Histogram) -> dict[str, float] | None:
    median, p95 = histogram.quantile(0.5), histogram.quantile(0.95)
    if median is None or p95 is None:
        return None
    return {"median": round(median, 1), "p95": round(p95, 1)}


def endpoint_view(
    endpoint: EndpointNow, history: EndpointHistory, minutes: Sequence[datetime]
) -> dict[str, Any]:
    """One endpoint's numbers over ``minutes`` (oldest first; the last is the current, unfinished one)."""
    total = MinuteStats()
    series = []
    for minute in minutes:
        stats = history.minutes.get(minute, MinuteStats())
        total.merge(stats)
        sample = history.queue.get(minute)
        series.append(
            {
                "minute": minute.isoformat(),
                "handled": stats.handled,
                "failed": stats.failed,
                "deadLettered": stats.dead_lettered,
                "queueLength": sample.active if sample else None,
            }
        )
    return {
        "endpoint": endpoint.name,
        "queue": endpoint.queue,
        "handled": total.handled,
        "retries": total.failed,
        "deadLettered": total.dead_lettered,
        # Messages handled per minute, on average over the window (NServiceBus's throughput is per second).
        "throughputPerMinute": round(total.handled / len(minutes), 2) if minutes else 0.0,
        "processingMs": _times(total.processing),
        "criticalMs": _times(total.critical),
        "queueLength": endpoint.active,
        "deadLetters": endpoint.dead_letters,
        "series": series,
    }


def monitoring_view(
    endpoints: Sequence[EndpointNow],
    histories: Mapping[str, EndpointHistory],
    now: datetime,
    minutes: int = DEFAULT_MINUTES,
    errors: Sequence[str] = (),
) -> dict[str, Any]:
    """The view of ``endpoints`` (in the app's order) over the ``minutes`` minutes up to ``now``'s;
    ``histories`` by input queue path (the table's partition)."""
    window = minutes_back(now, minutes)
    empty = EndpointHistory({}, {})
    return {
        "minutes": minutes,
        "from": window[0].isoformat(),
        "to": window[-1].isoformat(),
        "endpoints": [endpoint_view(e, histories.get(e.queue, empty), window) for e in endpoints],
        "errors": list(errors),
    }
