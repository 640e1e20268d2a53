"""The monitoring rows in Azure Table Storage (the app's account, ``AzureWebJobsStorage``: Azurite under
``make run``), table :data:`TABLE_NAME`.

* Partition: the endpoint, by its input queue's path as provisioned (:func:`shared.table_keys.table_key` of
  it): unique in the namespace, where endpoint names repeat (two apps' ``billing``, hierarchy prefixes).
* An instance's minute: row ``<yyyymmddHHMM>.i.<instance>``, its running totals for that minute (replaced
  at each flush). Each process has its own instance id, so instances, and a restarted process, never
  overwrite each other's numbers: the reader adds the rows of a minute together.
* A queue-length sample: row ``<yyyymmddHHMM>.q``, the input queue's active and dead-letter counts as the
  console's monitoring API last read them in that minute.

Row keys start with the minute, so the last N minutes are one range query per endpoint, and so are the rows
past :data:`RETENTION`, which the console's reads delete a page at a time (:meth:`MonitoringTable.prune`):
Table Storage has no expiry of its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, UpdateMode

from shared.monitoring.histogram import Histogram
from shared.monitoring.minute_stats import EndpointHistory, MinuteStats, QueueSample, minute_of
from shared.monitoring.recorder import Pending
from shared.storage_tables import LazyTable, table_client
from shared.table_keys import table_key

TABLE_NAME = "busbarmonitoring"
RETENTION = timedelta(hours=24)
"""How long rows are kept: the console shows at most the last few hours."""
PRUNE_PAGE = 100
"""At most this many old rows are deleted per endpoint and call, so a read never turns into a long purge."""
_MINUTE = "%Y%m%d%H%M"


def _stats_row(instance: str, item: Pending) -> dict[str, Any]:
    stats = item.stats
    return {
        "PartitionKey": table_key(item.endpoint),
        "RowKey": f"{item.minute:{_MINUTE}}.i.{table_key(instance)}",
        "Queue": item.endpoint,
        "Minute": item.minute,
        "Instance": instance,
        "Handled": stats.handled,
        "Failed": stats.failed,
        "DeadLettered": stats.dead_lettered,
        "ProcessingMs": stats.processing.to_json(),
        "CriticalMs": stats.critical.to_json(),
    }


def _stats(entity: Mapping[str, Any]) -> MinuteStats:
    return MinuteStats(
        handled=int(entity.get("Handled") or 0),
        failed=int(entity.get("Failed") or 0),
        dead_lettered=int(entity.get("DeadLettered") or 0),
        processing=Histogram.from_json(entity.get("ProcessingMs")),
        critical=Histogram.from_json(entity.get("CriticalMs")),
    )


def _minute(row_key: str) -> datetime | None:
    try:
        return datetime.strptime(row_key[: len("yyyymmddHHMM")], _MINUTE).replace(tzinfo=UTC)
    except ValueError:
        return None


class MonitoringTable:
    """The monitoring rows of one storage account (thread-safe: the SDK's table client is)."""

    def __init__(self, table: TableClient) -> None:
        self._table = LazyTable(table)

    def write(self, instance: str, items: Iterable[Pending]) -> None:
        """Store ``instance``'s numbers for each pending endpoint-minute (replacing what it wrote before)."""
        table = self._table.ready()
        for item in items:
            try:
                table.upsert_entity(_stats_row(instance, item), mode=UpdateMode.REPLACE)
            except HttpResponseError as error:
                self._table.forget_if_missing(error)
                raise

    def write_queue_sample(self, endpoint: str, sample: QueueSample) -> None:
        """Store ``endpoint``'s queue sample for its minute (the latest read of the minute wins)."""
        entity = {
            "PartitionKey": table_key(endpoint),
            "RowKey": f"{sample.minute:{_MINUTE}}.q",
            "Queue": endpoint,
            "Minute": sample.minute,
            "Active": sample.active,
            "DeadLetter": sample.dead_letter,
        }
        try:
            self._table.ready().upsert_entity(entity, mode=UpdateMode.REPLACE)
        except HttpResponseError as error:
            self._table.forget_if_missing(error)
            raise

    def history(self, endpoint: str, first: datetime, last: datetime) -> EndpointHistory:
        """``endpoint``'s rows from minute ``first`` to minute ``last``, both included."""
        low = f"{minute_of(first):{_MINUTE}}"
        high = f"{minute_of(last) + timedelta(minutes=1):{_MINUTE}}"
        minutes: dict[datetime, MinuteStats] = defaultdict(MinuteStats)
        queue: dict[datetime, QueueSample] = {}
        try:
            rows = self._table.ready().query_entities(
                "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
                parameters={"pk": table_key(endpoint), "low": low, "high": high},
            )
            for entity in rows:
                row_key = str(entity["RowKey"])
                minute = _minute(row_key)
                if minute is None:
                    continue
                if row_key.endswith(".q"):
                    active, dead = int(entity.get("Active") or 0), int(entity.get("DeadLetter") or 0)
                    queue[minute] = QueueSample(minute, active, dead)
                else:
                    minutes[minute].merge(_stats(entity))
        except HttpResponseError as error:
            self._table.forget_if_missing(error)
            raise
        return EndpointHistory(dict(minutes), queue)

    def prune(self, endpoint: str, now: datetime) -> int:
        """Delete up to :data:`PRUNE_PAGE` of ``endpoint``'s rows older than :data:`RETENTION`; how many."""
        cutoff = f"{minute_of(now - RETENTION):{_MINUTE}}"
        table = self._table.ready()
        old = table.query_entities(
            "PartitionKey eq @pk and RowKey lt @cutoff",
            parameters={"pk": table_key(endpoint), "cutoff": cutoff},
            select=["PartitionKey", "RowKey"],
            results_per_page=PRUNE_PAGE,
        )
        deleted = 0
        for entity in old:
            if deleted >= PRUNE_PAGE:
                break
            table.delete_entity(entity["PartitionKey"], entity["RowKey"])
            deleted += 1
        return deleted

    def close(self) -> None:
        """Close the table client."""
        self._table.close()


def monitoring_table_from_settings(values: Mapping[str, str]) -> MonitoringTable:
    """The monitoring rows of the storage account ``AzureWebJobsStorage`` names (:func:`table_client`)."""
    return MonitoringTable(table_client(values, TABLE_NAME))
