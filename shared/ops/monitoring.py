"""The console's monitoring API: the endpoints' numbers from the monitoring table (what every instance
recorded, :mod:`shared.monitoring`) beside their queues as the namespace shows them now.

Queue lengths are read here, when the console asks (the entities view's counts, read through the management
plane), and each read is also stored as the minute's sample, so the recent minutes the console was open on
have a queue-length series. Here rather than on the instances' flush: the flush runs only where messages are
being handled, so an endpoint that is stopped or idle, whose growing queue is the thing to see, would have no
samples; and every instance would read the same counts again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from azure.core.exceptions import AzureError

from shared.api.protocol import Misconfigured
from shared.monitoring.minute_stats import EndpointHistory, QueueSample, minute_of
from shared.monitoring.table import MonitoringTable
from shared.monitoring.view import EndpointNow, monitoring_view
from shared.storage_tables import StorageNotConfigured


def endpoints_now(entities: Mapping[str, Any]) -> list[EndpointNow]:
    """The app's endpoints from the entities view's body (:func:`shared.ops.entities_view.entities_view`):
    each input queue's active count and the dead letters of its queue and the subscriptions feeding it."""
    found = []
    for endpoint in entities["endpoints"]:
        rows = endpoint["entities"]
        queue = next((r for r in rows if r["kind"] == "queue"), None)
        found.append(
            EndpointNow(
                name=endpoint["endpoint"],
                queue=endpoint["queue"],
                active=queue["counts"]["active"] if queue else None,
                dead_letters=sum(r["counts"]["deadLetter"] for r in rows) if rows else None,
            )
        )
    return found


def monitoring(
    endpoints: Sequence[EndpointNow],
    table: Callable[[], MonitoringTable],
    now: datetime,
    minutes: int,
) -> dict[str, Any]:
    """The monitoring view of ``endpoints`` over the last ``minutes`` minutes, after storing their queue
    samples (and deleting a page of rows past the table's retention). Storage that answers with an error
    leaves the history empty and says so in ``errors``."""
    try:
        store = table()
    except StorageNotConfigured as error:
        raise Misconfigured(
            "the monitoring numbers live in Table Storage, which is not configured", [str(error)]
        ) from None
    errors: list[str] = []
    minute = minute_of(now)
    histories: dict[str, EndpointHistory] = {}
    for endpoint in endpoints:
        try:
            if endpoint.active is not None:
                sample = QueueSample(minute, endpoint.active, endpoint.dead_letters or 0)
                store.write_queue_sample(endpoint.queue, sample)
            histories[endpoint.queue] = store.history(
                endpoint.queue, minute - timedelta(minutes=minutes - 1), minute
            )
            store.prune(endpoint.queue, now)
        except AzureError as error:
            errors.append(f"{endpoint.name}: the monitoring table could not be read: {error}")
    return monitoring_view(endpoints, histories, now, minutes, errors)
